"""The traffic driver: AF_PACKET raw sockets opened inside the two namespaces (setns(2) on the
calling thread), sending frames pre-built by `frames.Connections` at a set connection rate.

Setup is staged so each connection's packets arrive in order across the two ports: every
`TICK_S` one batch of connections sends its SYN/request (c0), the batch of `STAGE_TICKS`
earlier its SYN-ACK/reply (s0), the one before that its ACK and data (c1), and so on (s1).
Batches are small (a tick's worth of connections) so no burst overruns the receive queue of
OVS's AF_PACKET socket on the bridge end of the veth. Keep-alives (a duplicate ACK per TCP direction, a request and reply per UDP flow) hold
the connections in conntrack and their flows in the datapath (OVS max-idle 10 s).
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np

from starfabric.errors import InfeasibleError
from starfabric.fornax.baselines.ovs_real.frames import (
    KEEPALIVE,
    SETUP,
    SIDE,
    WIDTH,
    Connections,
    Phase,
)

_CLONE_NEWNET = 0x40000000
_ETH_P_ALL = 0x0003
#: Seconds between two setup batches.
TICK_S = 0.002
#: Ticks between two packets of one connection (20 ms: each arrives after the previous one
#: was switched).
STAGE_TICKS = 10


@contextlib.contextmanager
def _in_netns(ns: str) -> Iterator[None]:
    """Run the block in network namespace `ns` (this thread only), then return."""
    libc = ctypes.CDLL(None, use_errno=True)
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    target = os.open(f"/var/run/netns/{ns}", os.O_RDONLY)
    try:
        if libc.setns(target, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise InfeasibleError(f"setns({ns}) failed: {os.strerror(err)}", fix="run as root")
        try:
            yield
        finally:
            libc.setns(own, _CLONE_NEWNET)
    finally:
        os.close(own)
        os.close(target)


def raw_socket(ns: str, ifname: str) -> socket.socket:
    """An AF_PACKET raw socket on `ifname` inside namespace `ns`."""
    with _in_netns(ns):
        s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(_ETH_P_ALL))
        s.bind((ifname, 0))
        s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
        # never read here: keep the receive queue from holding memory
        s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    return s


def send(sock: socket.socket, buf: np.ndarray, lens: np.ndarray) -> int:
    """Send rows of `buf` (their first `lens` bytes); returns frames sent (ENOBUFS: stop)."""
    mv = memoryview(np.ascontiguousarray(buf).data).cast("B")
    sent = 0
    for i, ln in enumerate(lens.tolist()):
        off = i * WIDTH
        try:
            sock.send(mv[off : off + ln])
        except (BlockingIOError, OSError):
            break
        sent += 1
    return sent


@dataclass
class PrebuiltPhases:
    """Every phase's frames for connections [first, first + n), and each connection's row
    range in each phase (a TCP id has two rows in c1)."""

    conns: Connections
    bufs: dict[Phase, np.ndarray] = field(default_factory=dict)
    lens: dict[Phase, np.ndarray] = field(default_factory=dict)
    starts: dict[Phase, np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, conns: Connections, phases: tuple[Phase, ...]) -> PrebuiltPhases:
        out = cls(conns)
        ids = conns.ids
        for ph in phases:
            buf, ln = conns.frames(ph, ids)
            per = np.where(conns.is_tcp(ids), 2, 1) if ph == "c1" else np.ones(len(ids), np.int64)
            out.bufs[ph], out.lens[ph] = buf, ln
            out.starts[ph] = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)
        return out

    def rows(self, ph: Phase, a: int, b: int) -> tuple[np.ndarray, np.ndarray]:
        """Frames of connections [a, b) (indices relative to `first`) in phase ph."""
        s = self.starts[ph]
        r0, r1 = int(s[a]), int(s[b])
        return self.bufs[ph][r0:r1], self.lens[ph][r0:r1]

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.bufs.values())


@dataclass
class Sockets:
    client: socket.socket
    server: socket.socket

    def of(self, ph: Phase) -> socket.socket:
        return self.client if SIDE[ph] == "client" else self.server

    def close(self) -> None:
        self.client.close()
        self.server.close()


@dataclass
class SendStats:
    """Frames sent per side and how long it took."""

    client: int = 0
    server: int = 0
    wall_s: float = 0.0
    behind_s: float = 0.0  # how far the sender fell behind its schedule (sender-limited)

    def add(self, ph: Phase, n: int) -> None:
        if SIDE[ph] == "client":
            self.client += n
        else:
            self.server += n


def open_connections(socks: Sockets, pre: PrebuiltPhases, cps: float,
                     progress: Callable[[int], None] | None = None) -> SendStats:  # fmt: skip
    """Open every connection of `pre` at `cps` connections/s (staged, module docstring)."""
    n = pre.conns.n
    batch = max(1, round(cps * TICK_S))
    n_batches = -(-n // batch)
    st = SendStats()
    t0 = time.perf_counter()
    for k in range(n_batches + (len(SETUP) - 1) * STAGE_TICKS):
        due = t0 + k * batch / cps
        now = time.perf_counter()
        if now < due:
            time.sleep(due - now)
        else:
            st.behind_s = max(st.behind_s, now - due)
        for stage, ph in enumerate(SETUP):
            j = k - stage * STAGE_TICKS
            if 0 <= j < n_batches:
                a, b = j * batch, min((j + 1) * batch, n)
                buf, ln = pre.rows(ph, a, b)
                st.add(ph, send(socks.of(ph), buf, ln))
        if progress is not None and k < n_batches:
            progress(min((k + 1) * batch, n))
    st.wall_s = time.perf_counter() - t0
    return st


def keep_alive(socks: Sockets, pres: list[PrebuiltPhases], pps: float) -> SendStats:
    """One keep-alive round over every connection of `pres` at `pps` frames/s."""
    st = SendStats()
    t0 = time.perf_counter()
    sent = 0
    chunk = 64
    for pre in pres:
        n = pre.conns.n
        for a in range(0, n, chunk):
            b = min(a + chunk, n)
            for ph in KEEPALIVE:
                buf, ln = pre.rows(ph, a, b)
                due = t0 + sent / pps
                now = time.perf_counter()
                if now < due:
                    time.sleep(due - now)
                k = send(socks.of(ph), buf, ln)
                st.add(ph, k)
                sent += k
    st.wall_s = time.perf_counter() - t0
    return st


__all__ = ["TICK_S", "PrebuiltPhases", "SendStats", "Sockets", "keep_alive",
           "open_connections", "raw_socket", "send"]  # fmt: skip
