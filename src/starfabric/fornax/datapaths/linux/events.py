"""ctnetlink events: the kernel's event ring. A raw NETLINK_NETFILTER socket in the nic
namespace joined to the conntrack DESTROY multicast group; every entry that leaves the table
(timer ran out, TCP teardown, killed by a RST, deleted by anyone) arrives as one message with
its final counters. The socket's receive buffer is the ring's bound: when it is full the
kernel drops the message and the next read fails with ENOBUFS — the RING_OVERFLOW of the
contract (the kernel does not say how many were lost)."""

from __future__ import annotations

import errno
from typing import TYPE_CHECKING

from starfabric.fornax.datapaths.linux.ctread import parse_entry
from starfabric.fornax.datapaths.linux.nlattr import messages, netfilter_socket

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import NsWorker

#: include/uapi/linux/netfilter/nfnetlink.h: NFNLGRP_CONNTRACK_NEW 1, _UPDATE 2, _DESTROY 3.
NFNLGRP_CONNTRACK_DESTROY = 3
SOL_NETLINK = 270


class EventSocket:
    """DESTROY events of the nic namespace's conntrack table (non-blocking reads)."""

    def __init__(self, worker: NsWorker, rcvbuf: int) -> None:
        self._sock = netfilter_socket(worker, rcvbuf, 1 << (NFNLGRP_CONNTRACK_DESTROY - 1))
        self._sock.setblocking(False)
        self.overflows = 0
        self.received = 0

    def read(self) -> tuple[list[dict[str, int]], int]:
        """(entries destroyed since the last read, in kernel order; ENOBUFS seen meanwhile)."""
        rows: list[dict[str, int]] = []
        overflow = 0
        while True:
            try:
                data = self._sock.recv(1 << 20)
            except BlockingIOError:
                break
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    overflow += 1
                    continue
                raise
            for _typ, _flags, body in messages(data):
                row = parse_entry(body)
                if row is not None:
                    rows.append(row)
        self.received += len(rows)
        self.overflows += overflow
        return rows, overflow

    def close(self) -> None:
        self._sock.close()


__all__ = ["EventSocket"]
