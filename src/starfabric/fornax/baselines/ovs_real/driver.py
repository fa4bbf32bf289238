"""The traffic driver: AF_PACKET raw sockets opened inside the two namespaces (setns(2) on the
calling thread), sending frames pre-built by `frames.Connections` at a set connection rate.

Setup is staged so each connection's packets arrive in order across the two ports: every
`TICK_S` one batch of connections sends its SYN/request (c0), the batch of `STAGE_TICKS`
earlier its SYN-ACK/reply (s0), the one before that its ACK and data (c1), and so on (s1).
Batches are small (a tick's worth of connections) so no burst overruns the receive queue of
OVS's AF_PACKET socket on the bridge end of the veth. Keep-alives (a duplicate ACK per TCP
direction, a request and reply per UDP flow) hold the connections in conntrack and their flows
in the datapath (within max-idle); `KeepAlive` paces them evenly and is pumped between setup
batches, so earlier connections stay alive while new ones open.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import socket
import threading
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
from starfabric.fornax.mmsg import MMSG_MAX, MMSGHDR, headers, sendmmsg

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


@dataclass
class FrameBatch:
    """Frames (rows of `buf`, their first `lens` bytes) with their sendmmsg(2) headers built
    once, so sending rows [a, b) is one system call per MMSG_MAX frames and no Python per
    frame (the raw socket is bound to its interface: no address per message)."""

    buf: np.ndarray
    lens: np.ndarray
    _iov: np.ndarray = field(init=False, repr=False)
    _msg: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.buf = np.ascontiguousarray(self.buf, dtype=np.uint8)
        self._iov, self._msg = headers(self.buf.ctypes.data, WIDTH, self.lens)

    def __len__(self) -> int:
        return len(self.lens)

    @property
    def nbytes(self) -> int:
        return self.buf.nbytes + self._iov.nbytes + self._msg.nbytes

    def send(self, sock: socket.socket, a: int = 0, b: int | None = None) -> int:
        """Send rows [a, b); returns frames sent (stops at the first error, e.g. ENOBUFS)."""
        b = len(self) if b is None else b
        fd, base, pos = sock.fileno(), self._msg.ctypes.data, a
        while pos < b:
            r = sendmmsg(fd, base + pos * MMSGHDR.itemsize, min(b - pos, MMSG_MAX), 0)
            if r <= 0:
                break
            pos += r
        return pos - a


@dataclass
class PrebuiltPhases:
    """Every phase's frames for connections [first, first + n) as FrameBatches, and each
    connection's row range in each phase (a TCP id has two rows in c1)."""

    conns: Connections
    batches: dict[Phase, FrameBatch] = field(default_factory=dict)
    starts: dict[Phase, np.ndarray] = field(default_factory=dict)

    @classmethod
    def build(cls, conns: Connections, phases: tuple[Phase, ...]) -> PrebuiltPhases:
        out = cls(conns)
        ids = conns.ids
        for ph in phases:
            buf, ln = conns.frames(ph, ids)
            per = np.where(conns.is_tcp(ids), 2, 1) if ph == "c1" else np.ones(len(ids), np.int64)
            out.batches[ph] = FrameBatch(buf, ln)
            out.starts[ph] = np.concatenate([[0], np.cumsum(per)]).astype(np.int64)
        return out

    def row_range(self, ph: Phase, a: int, b: int) -> tuple[int, int]:
        """Rows of connections [a, b) (indices relative to `first`) in phase ph."""
        s = self.starts[ph]
        return int(s[a]), int(s[b])

    def send(self, sock: socket.socket, ph: Phase, a: int, b: int) -> int:
        """Send phase ph's frames of connections [a, b) on `sock`; returns frames sent."""
        r0, r1 = self.row_range(ph, a, b)
        return self.batches[ph].send(sock, r0, r1)

    @property
    def nbytes(self) -> int:
        return sum(b.nbytes for b in self.batches.values())


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


class KeepAlive:
    """Keep-alives of every connection of `pres`, one round each `period_s`, paced evenly
    over `spread` of the period (frames/s = 2 frames per connection / (spread x period),
    at most `max_pps`), so no burst overruns OVS's receive queue; `pump()` sends what is due
    and is called between setup batches and while waiting (one sender thread)."""

    def __init__(self, socks: Sockets, pres: list[PrebuiltPhases], period_s: float,
                 max_pps: float, spread: float = 0.8) -> None:  # fmt: skip
        self.socks, self.pres = socks, pres
        self.period_s, self.max_pps, self.spread = period_s, max_pps, spread
        self.stats = SendStats()
        self._round_t0: float | None = None
        self._pos = 0  # connections of this round already sent (over all of pres)
        self._sent_round = 0
        self.rounds = 0

    @property
    def connections(self) -> int:
        return sum(p.conns.n for p in self.pres)

    def pps(self) -> float:
        return min(self.max_pps, 2 * self.connections / (self.spread * self.period_s))

    def pump(self, now: float | None = None) -> None:
        """Send this round's frames due by `now`; start the next round once a period passed."""
        now = time.perf_counter() if now is None else now
        n = self.connections
        if n == 0:
            return
        if self._round_t0 is None or (self._pos >= n and now - self._round_t0 >= self.period_s):
            self._round_t0, self._pos, self._sent_round = now, 0, 0
            self.rounds += 1
        # at most CATCHUP_S of the rate a call: after a stall the round slips instead of
        # bursting (a burst overruns OVS's receive queue; the spread leaves the slip room)
        rate = self.pps() / 2
        most = max(CHUNK, int(rate * CATCHUP_S))
        due = min(n, int((now - self._round_t0) * rate) + 1, self._pos + most)
        if self._pos < due:
            self._send(self._pos, due)
            self._pos = due

    def _send(self, a: int, b: int) -> None:
        off = 0
        for pre in self.pres:  # connections [a, b) of the concatenation of pres
            lo, hi = max(a - off, 0), min(b - off, pre.conns.n)
            if lo < hi:
                for ph in KEEPALIVE:
                    self.stats.add(ph, pre.send(self.socks.of(ph), ph, lo, hi))
            off += pre.conns.n

    def run_for(self, seconds: float, every: Callable[[], None] | None = None,
                every_s: float = 0.5) -> None:  # fmt: skip
        """Keep pumping for `seconds`; `every` (a sample, e.g. an ovs-appctl call) about every
        `every_s` on another thread, so the pacing never waits for it."""
        stop = threading.Event()

        def sampler(sample: Callable[[], None]) -> None:
            while not stop.is_set():
                sample()
                stop.wait(every_s)

        th = None if every is None else threading.Thread(target=sampler, args=(every,), daemon=True)
        if th is not None:
            th.start()
        try:
            t_end = time.perf_counter() + seconds
            while (now := time.perf_counter()) < t_end:
                self.pump(now)
                time.sleep(PUMP_S)
        finally:
            stop.set()
            if th is not None:
                th.join()


#: Connections per keep-alive pump at least (2 frames each) ...
CHUNK = 8
#: ... and at most this many seconds' worth of the round's rate (catching up after a stall).
CATCHUP_S = 0.004
#: Seconds between two keep-alive pumps while waiting.
PUMP_S = 0.0005


def open_connections(socks: Sockets, pre: PrebuiltPhases, cps: float,
                     progress: Callable[[int], None] | None = None,
                     keep: KeepAlive | None = None) -> SendStats:  # fmt: skip
    """Open every connection of `pre` at `cps` connections/s (staged, module docstring),
    pumping the keep-alives of the connections opened before (`keep`) between batches."""
    n = pre.conns.n
    batch = max(1, round(cps * TICK_S))
    n_batches = -(-n // batch)
    st = SendStats()
    t0 = time.perf_counter()
    for k in range(n_batches + (len(SETUP) - 1) * STAGE_TICKS):
        due = t0 + k * batch / cps
        while (now := time.perf_counter()) < due:
            if keep is not None:
                keep.pump(now)
            time.sleep(min(PUMP_S, max(due - time.perf_counter(), 0.0)))
        st.behind_s = max(st.behind_s, now - due)
        for stage, ph in enumerate(SETUP):
            j = k - stage * STAGE_TICKS
            if 0 <= j < n_batches:
                a, b = j * batch, min((j + 1) * batch, n)
                st.add(ph, pre.send(socks.of(ph), ph, a, b))
        if keep is not None:
            keep.pump()
        if progress is not None and k < n_batches:
            progress(min((k + 1) * batch, n))
    st.wall_s = time.perf_counter() - t0
    return st


__all__ = ["MMSG_MAX", "TICK_S", "FrameBatch", "KeepAlive", "PrebuiltPhases", "SendStats", "Sockets", "open_connections",
           "raw_socket"]  # fmt: skip
