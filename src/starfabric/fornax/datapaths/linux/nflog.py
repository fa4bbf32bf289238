"""The pipeline's per-packet verdict log, read back over NFLOG (nfnetlink_log).

Each packet the nic namespace sees is logged once by the verdict chain (pipeline.py): its
prefix (the verdict letter, then the direction digit where the packet has an entry), its meta
mark (set to the entry's ct id just before) and the packet itself, whose payload ends with
the sender's 64-bit id (sender.py). Messages arrive in the order the kernel processed the
packets. (NFLOG can also carry the conntrack entry, with CONFIG_NETFILTER_NETLINK_GLUE_CT;
kernels without it are common, so the engine does not rely on it.)"""

from __future__ import annotations

import errno
import socket
import struct
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from starfabric.errors import InfeasibleError
from starfabric.fornax.datapaths.linux.nlattr import (
    NFGENMSG,
    attrs,
    be32,
    messages,
    netfilter_socket,
    nla,
)
from starfabric.fornax.datapaths.linux.sender import MAGIC

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import NsWorker

_ULOG = 4 << 8  # NFNL_SUBSYS_ULOG
_MSG_PACKET, _MSG_CONFIG = 0, 1
_CFG_CMD, _CFG_MODE, _CFG_QTHRESH = 1, 2, 5
_CMD_BIND, _CMD_PF_BIND, _CMD_PF_UNBIND = 1, 3, 4
_COPY_PACKET = 2
_A_MARK, _A_PAYLOAD, _A_PREFIX = 2, 9, 10
#: Bytes of each packet copied to us: every frame the sender builds is shorter (IPv6 40 +
#: TCP 20 + its 12-byte payload), so the id at the payload's end is always included.
COPY_RANGE = 128


@dataclass(frozen=True)
class Verdicts:
    """Per logged packet, in kernel order."""

    letter: np.ndarray  # uint8: the verdict letter (ASCII)
    reply: np.ndarray  # uint8: 0 ORIGINAL, 1 REPLY, 255 no entry (no digit)
    pid: np.ndarray  # int64: the sender's id at the end of the payload, -1 if none
    ct_id: np.ndarray  # int64: the entry's ct id (the meta mark), -1 without an entry


class NflogSocket:
    """One NFLOG group bound in the calling worker's namespace; non-blocking reads."""

    def __init__(self, worker: NsWorker, group: int, rcvbuf: int = 8 << 20) -> None:
        self._sock = netfilter_socket(worker, rcvbuf, 0)
        self._seq = 0
        for fam in (socket.AF_INET, socket.AF_INET6):  # no-ops on current kernels
            self._config(fam, 0, nla(_CFG_CMD, bytes([_CMD_PF_UNBIND])), check=False)
            self._config(fam, 0, nla(_CFG_CMD, bytes([_CMD_PF_BIND])), check=False)
        self._config(0, group, nla(_CFG_CMD, bytes([_CMD_BIND])))
        self._config(0, group, nla(_CFG_MODE, struct.pack(">IBB", COPY_RANGE, _COPY_PACKET, 0)))
        self._config(0, group, nla(_CFG_QTHRESH, struct.pack(">I", 1)))
        self._sock.setblocking(False)
        self.overflows = 0

    def _config(self, family: int, group: int, payload: bytes, check: bool = True) -> None:
        self._seq += 1
        body = NFGENMSG.pack(family, 0, socket.htons(group)) + payload
        hdr = struct.pack("=IHHII", 16 + len(body), _ULOG | _MSG_CONFIG, 0x1 | 0x4, self._seq, 0)
        self._sock.send(hdr + body)
        for typ, _f, b in messages(self._sock.recv(4096)):
            if typ == 2:  # NLMSG_ERROR
                err = -struct.unpack_from("=i", b, 0)[0]
                if err and check:
                    raise InfeasibleError(
                        f"NFLOG group {group} config refused: {errno.errorcode.get(err, err)}",
                        fix="the kernel needs CONFIG_NETFILTER_NETLINK_LOG")  # fmt: skip

    def read(self, n: int, timeout_s: float) -> Verdicts:
        """Up to n verdicts, waiting at most timeout_s after the last one arrived."""
        let: list[int] = []
        rep: list[int] = []
        pid: list[int] = []
        cid: list[int] = []
        deadline = time.monotonic() + timeout_s
        while len(let) < n and time.monotonic() < deadline:
            try:
                data = self._sock.recv(1 << 20)
            except BlockingIOError:
                time.sleep(0.0002)
                continue
            except OSError as exc:
                if exc.errno == errno.ENOBUFS:
                    self.overflows += 1
                    continue
                raise
            deadline = time.monotonic() + timeout_s
            for typ, _f, body in messages(data):
                if typ != _ULOG | _MSG_PACKET:
                    continue
                a = attrs(body, NFGENMSG.size)
                p = a.get(_A_PREFIX, b"?").rstrip(b"\0")
                ip = a.get(_A_PAYLOAD, b"")
                ok = len(ip) >= 12 and ip[-12:-8] == MAGIC
                has = len(p) >= 2
                let.append(p[0] if p else 63)
                rep.append(p[1] - 48 if has else 255)
                pid.append(int.from_bytes(ip[-8:], "big") if ok else -1)
                cid.append(be32(a[_A_MARK]) if has and _A_MARK in a else -1)
        return Verdicts(np.array(let, np.uint8), np.array(rep, np.uint8),
                        np.array(pid, np.int64), np.array(cid, np.int64))  # fmt: skip

    def close(self) -> None:
        self._sock.close()


__all__ = ["NflogSocket", "Verdicts"]
