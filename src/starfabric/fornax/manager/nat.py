"""SNAT port allocation for NAT-gateway pools: one 65,536-bit bitmap per public IP (8 KiB),
the only per-connection state the manager keeps in software.

The allocation itself lives in the hardware entry's `aux` cookie (cookie.py: public-IP index
and port), so AGED/CLOSED events hand it back for release and a restarted manager rebuilds the
bitmaps exactly by dumping the engine (recover.py).

Reply matching (design). The engine keys a session by the packet 5-tuple of the ORIGINAL
direction (private source, before translation). Replies travel in that same session-key space
(workload.py): the NIC's gateway stage turns a wire reply to (public IP, port) back into the
private tuple before the session lookup, and the allocation makes that sound — a (public IP,
port) pair belongs to at most one live connection at a time across all sessions of all
tenants (stricter than the per-destination uniqueness NAT needs), so the reverse translation
is a function, and the reply direction's action (DNAT back to the private address) is the
session's own reply action; nothing per connection is needed in software to match it.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError
from starfabric.fornax.manager import _kernels as K
from starfabric.fornax.manager import cookie
from starfabric.fornax.vpc import CompiledPolicy

_WORDS = 65536 // 64


class NatPools:
    """Bitmaps of every public IP of every NAT gateway, addressed by a stable global index."""

    def __init__(self, policy: CompiledPolicy, port_min: int = 1024, port_max: int = 65535) -> None:
        if port_min > port_max:
            raise ConfigError(
                f"nat_port_min = {port_min} > nat_port_max = {port_max}",
                fix="give a non-empty port range",
            )
        self.port_min = port_min
        self.port_max = port_max
        self.ips: list[str] = []
        self._index: dict[str, int] = {}
        self.bitmap = np.zeros((0, _WORDS), np.uint64)
        self.used = np.zeros(0, np.int64)
        self.ip_cursor = np.zeros(0, np.int64)
        self.set_policy(policy)

    def set_policy(self, policy: CompiledPolicy) -> None:
        """Take the pools of a (re)compiled policy; IPs keep their index (allocations too)."""
        ptr = [0]
        members: list[int] = []
        for ips in policy.pool_ips:
            for ip in ips:
                if ip not in self._index:
                    self._index[ip] = len(self.ips)
                    self.ips.append(ip)
                members.append(self._index[ip])
            ptr.append(len(members))
        grow = len(self.ips) - len(self.used)
        if grow > 0:
            self.bitmap = np.vstack([self.bitmap, np.zeros((grow, _WORDS), np.uint64)])
            self.used = np.concatenate([self.used, np.zeros(grow, np.int64)])
            self.ip_cursor = np.concatenate([self.ip_cursor, np.zeros(grow, np.int64)])
        self.pool_ptr = np.array(ptr, np.int64)
        self.pool_ips = np.array(members, np.int64)
        self.pool_cursor = np.zeros(len(ptr) - 1, np.int64)

    def allocate(self, pool: npt.ArrayLike) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(public-IP index, port) per request; index -1 where the pool is exhausted."""
        p = np.ascontiguousarray(pool, np.int64)
        ip = np.empty(len(p), np.int64)
        port = np.empty(len(p), np.int64)
        if len(p):
            K.nat_alloc(p, self.pool_ptr, self.pool_ips, self.bitmap, self.ip_cursor,
                        self.pool_cursor, self.used, self.port_min, self.port_max, ip, port)  # fmt: skip
        return ip, port

    def release(self, ip: npt.ArrayLike, port: npt.ArrayLike) -> int:
        """Free allocations; returns how many were held."""
        i = np.ascontiguousarray(ip, np.int64)
        return int(K.nat_set(i, np.ascontiguousarray(port, np.int64), self.bitmap, self.used, 0))

    def mark(self, ip: npt.ArrayLike, port: npt.ArrayLike) -> int:
        """Record allocations read back from hardware (recovery); returns how many were new."""
        i = np.ascontiguousarray(ip, np.int64)
        return int(K.nat_set(i, np.ascontiguousarray(port, np.int64), self.bitmap, self.used, 1))

    def mark_cookies(self, aux: npt.NDArray[np.uint64], like: NatPools | None = None) -> None:
        """Mark the SNAT allocations of cookies `aux` (read back from hardware or software),
        growing to the IP numbering of `like` (the live pools) first when it has more IPs."""
        held = cookie.has_nat(aux)
        if not held.any():
            return
        if like is not None and len(self.used) < len(like.used):
            grow = len(like.used) - len(self.used)
            self.bitmap = np.vstack(
                [self.bitmap, np.zeros((grow, self.bitmap.shape[1]), np.uint64)]
            )
            self.used = np.concatenate([self.used, np.zeros(grow, np.int64)])
            self.ip_cursor = np.concatenate([self.ip_cursor, np.zeros(grow, np.int64)])
        self.mark(cookie.nat_ip(aux[held]), cookie.nat_port(aux[held]))

    def allocated(self) -> int:
        return int(self.used.sum())

    def address(self, ip_index: int) -> str:
        return self.ips[ip_index]

    @property
    def nbytes(self) -> int:
        """Exact bytes of the software NAT state (bitmaps, counts, cursors, pool maps)."""
        arrays = (self.bitmap, self.used, self.ip_cursor, self.pool_ptr, self.pool_ips,
                  self.pool_cursor)  # fmt: skip
        return int(sum(a.nbytes for a in arrays))


__all__ = ["NatPools"]
