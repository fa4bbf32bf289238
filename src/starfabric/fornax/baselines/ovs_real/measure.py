"""What is read from a running ovs-vswitchd: per-thread CPU time (/proc/PID/task/*/schedstat,
nanoseconds on CPU: robust to other processes competing for the cores, unlike wall-clock
shares), resident memory (/proc/PID/status VmRSS), `upcall/show` (datapath flows, dynamic
flow limit, dump duration, ukeys per revalidator), `dpctl/ct-get-nconns`, `memory/show`."""

from __future__ import annotations

import ctypes
import os
import re
import socket
import struct
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: Thread name prefixes (ovs-vswitchd names its threads: "revalidator5", "handler4",
#: "urcu2", "ct_clean3", "pmd-c01/id:7"; the main thread carries the program name; in the
#: netdev datapath the main thread also polls non-PMD ports and runs their upcalls).
THREAD_KINDS = ("revalidator", "handler", "ct_clean", "urcu", "pmd", "ovs-vswitchd")


def thread_kind(name: str) -> str:
    for k in THREAD_KINDS:
        if name.startswith(k):
            return "main" if k == "ovs-vswitchd" else k
    return "other"


def thread_cpu_ns(pid: int) -> dict[str, int]:
    """CPU nanoseconds so far, summed by thread kind (THREAD_KINDS), of process `pid`."""
    out: dict[str, int] = defaultdict(int)
    for t in Path(f"/proc/{pid}/task").iterdir():
        try:
            name = (t / "comm").read_text().strip()
            ns = int((t / "schedstat").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            continue  # a thread that exited meanwhile
        out[thread_kind(name)] += ns
    return dict(out)


_SYS_PIDFD_GETFD = 438  # pidfd_getfd(2), Linux >= 5.6, same number on x86-64 and aarch64
_SOL_PACKET, _PACKET_STATISTICS = 263, 6


def packet_socket_stats(pid: int) -> tuple[int, int] | None:
    """(frames received, frames dropped) summed over the AF_PACKET sockets of process `pid`
    since the last call (PACKET_STATISTICS, packet(7); reading resets them): the drops are
    frames the kernel could not queue because the socket's receive buffer was full, i.e. what
    ovs-vswitchd's port polling did not keep up with. The sockets are borrowed through
    pidfd_getfd(2) (root); None where that is not possible."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        pfd = os.pidfd_open(pid)
    except (OSError, AttributeError):
        return None
    got = drops = 0
    seen = False
    try:
        for fd in os.listdir(f"/proc/{pid}/fd"):
            try:
                if not os.readlink(f"/proc/{pid}/fd/{fd}").startswith("socket:"):
                    continue
            except OSError:
                continue
            nfd = libc.syscall(_SYS_PIDFD_GETFD, pfd, int(fd), 0)
            if nfd < 0:
                continue
            s = socket.socket(fileno=nfd)
            try:
                if s.family == socket.AF_PACKET:
                    p, d = struct.unpack("II", s.getsockopt(_SOL_PACKET, _PACKET_STATISTICS, 8))
                    got, drops, seen = got + p, drops + d, True
            except OSError:
                pass
            finally:
                s.close()
    finally:
        os.close(pfd)
    return (got, drops) if seen else None


def rss_bytes(pid: int) -> int:
    """Resident set of `pid` (VmRSS) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise ValueError(f"/proc/{pid}/status has no VmRSS")


_FLOWS = re.compile(
    r"flows\s*:\s*\(current (\d+)\)\s*\(avg (\d+)\)\s*\(max (\d+)\)\s*\(limit (\d+)\)"
)
_DUMP = re.compile(r"dump duration\s*:\s*(\d+)ms")
_KEYS = re.compile(r"^\s*\d+:\s*\(keys (\d+)\)", re.M)


@dataclass(frozen=True)
class UpcallShow:
    """`ovs-appctl upcall/show` of one datapath."""

    flows: int
    flows_avg: int
    flows_max: int
    limit: int
    dump_ms: int
    ukeys: int

    @classmethod
    def parse(cls, text: str) -> UpcallShow:
        m, d = _FLOWS.search(text), _DUMP.search(text)
        if m is None or d is None:
            raise ValueError(f"upcall/show output not understood: {text[:200]!r}")
        keys = sum(int(k) for k in _KEYS.findall(text))
        return cls(int(m[1]), int(m[2]), int(m[3]), int(m[4]), int(d[1]), keys)


def parse_nconns(text: str) -> int:
    """`dpctl/ct-get-nconns` -> the number."""
    return int(text.strip().split()[-1])


def parse_ct_stats(text: str) -> dict[str, Any]:
    """`dpctl/ct-stats-show`: total and per protocol ('TCP': n, ...), TCP states if listed."""
    out: dict[str, Any] = {}
    for line in text.splitlines():
        m = re.match(r"\s*(Total|TCP|UDP|ICMP\w*|[A-Z_]+)\s*:\s*(\d+)", line)
        if m:
            out[m[1]] = int(m[2])
    return out


def parse_memory_show(text: str) -> dict[str, int]:
    """`memory/show`: 'handlers:1 ... udpif keys:11' -> {'handlers': 1, ..., 'udpif keys': 11}."""
    return {k.strip(): int(v) for k, v in re.findall(r"([A-Za-z][\w\- ]*?):(\d+)", text)}


def count_flows(dump: str) -> int:
    """Datapath flows in a `dpctl/dump-flows` text (one flow a line, header excluded)."""
    return sum(1 for ln in dump.splitlines() if ln and not ln.startswith("flow-dump"))


__all__ = ["THREAD_KINDS", "UpcallShow", "count_flows", "packet_socket_stats", "parse_ct_stats",
           "parse_memory_show", "parse_nconns", "rss_bytes", "thread_cpu_ns", "thread_kind"]  # fmt: skip
