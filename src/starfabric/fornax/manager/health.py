"""Multi-dimension fault detection: faults counted per session, port, VPC and whole engine in a
sliding window; above a scope's threshold the smallest scope containing the faults fails over
to software forwarding, and fails back after a quiet period (hysteresis).

Faults are rare, so the log is a few small numpy arrays (one row per fault, never per session
or packet). The paper states that faults are found per session, port and VPC and that traffic
moves to CPU software forwarding (Fornax, SIGCOMM'25, fault tolerance); every threshold and
time here is an assumption of ours.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt
from pydantic import Field

from starfabric.config import Spec


class FaultKind(IntEnum):
    """What a logged fault was."""

    ECC_CORRECTED = 0
    ECC_UNCORRECTABLE = 1
    PORT_HANG = 2
    KEY_INCONSISTENT = 3  # patrol: an entry not found at its own slot by its own key
    POLICY_DRIFT = 4  # patrol: an entry's actions differ from the current policy's


class ScopeKind(IntEnum):
    """Failover scopes, smallest first."""

    SESSION = 0
    PORT = 1
    VPC = 2
    ENGINE = 3


class HealthConfig(Spec):
    """Thresholds and times of detection and failover (all assumptions of ours)."""

    window_s: float = Field(10.0, gt=0, description="faults counted over this window (assumption)")
    corrected_weight: float = Field(
        0.25, ge=0, description="a corrected ECC error counts as this many faults (assumption)"
    )
    session_faults: float = Field(
        2.0, gt=0, description="faults on one session that fail it over (assumption)"
    )
    vpc_sessions: int = Field(
        4, ge=1, description="distinct faulted sessions in one VPC that fail it over (assumption)"
    )
    engine_scopes: int = Field(
        3,
        ge=1,
        description="ports + VPCs failed over at once that fail the whole engine over (assumption)",
    )
    healthy_s: float = Field(
        5.0, gt=0, description="quiet time before a table scope fails back (assumption)"
    )
    port_reset_s: float = Field(
        0.002, ge=0, description="time a port reset takes before it is probed (assumption)"
    )
    probe_backoff_s: float = Field(
        0.05,
        gt=0,
        description="wait before resetting a port again after a failed probe (assumption)",
    )
    patrol_rate: float = Field(
        200000.0,
        gt=0,
        description="hardware sessions the patrol inspects per simulated second (assumption)",
    )
    patrol_chunk: int = Field(4096, ge=1, description="entries per patrol dump (assumption)")
    suspect_max_bits: int = Field(
        6,
        ge=0,
        le=64,
        description="a MISS key within this many bits of a KEY_SUSPECT event's key is taken "
        "as that lost session (assumption: multi-bit faults flip a few bits)",
    )
    suspect_keep_s: float = Field(
        600.0, gt=0, description="how long a KEY_SUSPECT loss is remembered (assumption)"
    )


@dataclass(frozen=True)
class ScopeChange:
    """A failover or failback decided by `Health.evaluate`."""

    kind: ScopeKind
    scope_id: int  # session: index into the faulted-session table; port/VPC id; engine 0
    key_hash: int  # session scope: the session's key hash, else 0
    failover: bool


class Health:
    """The fault log and the failover state of every scope."""

    def __init__(self, config: HealthConfig, n_ports: int, n_vpcs: int) -> None:
        self.config = config
        self.t_ns = np.zeros(0, np.int64)
        self.kind = np.zeros(0, np.uint8)
        self.key = np.zeros(0, np.uint64)  # session key hash (0: not a session fault)
        self.port = np.zeros(0, np.int64)  # -1: unknown
        self.vpc = np.zeros(0, np.int64)  # -1: unknown
        self.port_failed = np.zeros(n_ports, bool)
        self.vpc_failed = np.zeros(n_vpcs, bool)
        self.vpc_since = np.zeros(n_vpcs, np.int64)
        self.engine_failed = False
        self.engine_since = 0
        self._scopes_clear_ns = 0
        self.session_failed = np.zeros(0, np.uint64)  # key hashes
        self.session_since = np.zeros(0, np.int64)

    def record(
        self,
        now_ns: int,
        kind: FaultKind,
        key: npt.ArrayLike = 0,
        port: npt.ArrayLike = -1,
        vpc: npt.ArrayLike = -1,
        n: int = 1,
    ) -> None:
        """Log n faults of one kind (arrays or scalars)."""
        if n <= 0:
            return
        self.t_ns = np.concatenate([self.t_ns, np.full(n, now_ns, np.int64)])
        self.kind = np.concatenate([self.kind, np.full(n, int(kind), np.uint8)])
        self.key = np.concatenate([self.key, np.broadcast_to(np.asarray(key, np.uint64), (n,))])
        self.port = np.concatenate([self.port, np.broadcast_to(np.asarray(port, np.int64), (n,))])
        self.vpc = np.concatenate([self.vpc, np.broadcast_to(np.asarray(vpc, np.int64), (n,))])

    def _window(self, now_ns: int) -> npt.NDArray[np.bool_]:
        keep = self.t_ns > now_ns - round(self.config.window_s * 1e9)
        if not keep.all():  # forget what left the window
            for name in ("t_ns", "kind", "key", "port", "vpc"):
                setattr(self, name, getattr(self, name)[keep])
        return np.ones(len(self.t_ns), bool)

    def weights(self) -> npt.NDArray[np.float64]:
        w = np.ones(len(self.kind))
        w[self.kind == FaultKind.ECC_CORRECTED] = self.config.corrected_weight
        return w

    def evaluate(self, now_ns: int) -> list[ScopeChange]:
        """Failovers due now (smallest scope first) and table-scope failbacks after quiet time.
        Port failover/failback follow the hang handling (reset, probe), not this."""
        cfg = self.config
        self._window(now_ns)
        out: list[ScopeChange] = []
        w = self.weights()
        quiet_ns = round(cfg.healthy_s * 1e9)
        # VPC: distinct faulted sessions in one VPC
        sess = self.key != 0
        if sess.any():
            v = self.vpc[sess]
            k = self.key[sess]
            ok = v >= 0
            pairs = np.unique(np.stack([v[ok], k[ok].view(np.int64)], 1), axis=0)
            if len(pairs):
                vids, cnt = np.unique(pairs[:, 0], return_counts=True)
                for vid in vids[cnt >= cfg.vpc_sessions]:
                    if 0 <= vid < len(self.vpc_failed) and not self.vpc_failed[vid]:
                        self.vpc_failed[vid] = True
                        self.vpc_since[vid] = now_ns
                        out.append(ScopeChange(ScopeKind.VPC, int(vid), 0, True))
            # sessions: weighted faults on one key, unless its VPC already failed over
            keys, inv = np.unique(k, return_inverse=True)
            tot = np.bincount(np.asarray(inv).ravel(), weights=w[sess], minlength=len(keys))
            vk = np.full(len(keys), -1, np.int64)
            vk[np.asarray(inv).ravel()] = v
            for j in np.flatnonzero(tot >= cfg.session_faults):
                covered = 0 <= vk[j] < len(self.vpc_failed) and self.vpc_failed[vk[j]]
                if covered or self.engine_failed or np.isin(keys[j], self.session_failed):
                    continue
                self.session_failed = np.append(self.session_failed, keys[j])
                self.session_since = np.append(self.session_since, now_ns)
                out.append(ScopeChange(ScopeKind.SESSION, 0, int(keys[j]), True))
        # engine: enough ports and VPCs failed at once
        n_failed = int(self.port_failed.sum() + self.vpc_failed.sum())
        if not self.engine_failed and n_failed >= cfg.engine_scopes:
            self.engine_failed = True
            self.engine_since = now_ns
            out.append(ScopeChange(ScopeKind.ENGINE, 0, 0, True))
        # failbacks (hysteresis: a scope must stay quiet healthy_s after its last fault, and
        # the faults it failed over for are then forgotten, so they cannot fail it over again)
        _, last_vpc, last_key = self._last_fault_ns()
        forget = np.zeros(len(self.t_ns), bool)
        for vid in np.flatnonzero(self.vpc_failed):
            if now_ns - max(int(self.vpc_since[vid]), last_vpc.get(int(vid), 0)) >= quiet_ns:
                self.vpc_failed[vid] = False
                forget |= self.vpc == vid
                out.append(ScopeChange(ScopeKind.VPC, int(vid), 0, False))
        back = np.zeros(len(self.session_failed), bool)
        for i, (kh, since) in enumerate(zip(self.session_failed, self.session_since, strict=True)):
            if now_ns - max(int(since), last_key.get(int(kh), 0)) >= quiet_ns:
                back[i] = True
                forget |= self.key == kh
                out.append(ScopeChange(ScopeKind.SESSION, 0, int(kh), False))
        self.session_failed = self.session_failed[~back]
        self.session_since = self.session_since[~back]
        n_failed = int(self.port_failed.sum() + self.vpc_failed.sum())
        if n_failed:
            self._scopes_clear_ns = now_ns
        # the engine fails back once every smaller scope has been healthy for healthy_s
        engine_quiet = now_ns - max(self.engine_since, self._scopes_clear_ns) >= quiet_ns
        if self.engine_failed and n_failed == 0 and engine_quiet:
            self.engine_failed = False
            forget[:] = True
            out.append(ScopeChange(ScopeKind.ENGINE, 0, 0, False))
        if forget.any():
            for name in ("t_ns", "kind", "key", "port", "vpc"):
                setattr(self, name, getattr(self, name)[~forget])
        return out

    def _last_fault_ns(self) -> tuple[int, dict[int, int], dict[int, int]]:
        """Latest fault time in the window: overall, per VPC and per session key."""
        hard = self.kind != FaultKind.ECC_CORRECTED
        t = self.t_ns[hard]
        vpc: dict[int, int] = {}
        key: dict[int, int] = {}
        for arr, into in ((self.vpc[hard], vpc), (self.key[hard], key)):
            if len(t):
                order = np.argsort(t)
                ids = arr[order].astype(np.int64) if arr.dtype != np.uint64 else arr[order]
                u, last = np.unique(ids[::-1], return_index=True)
                times = t[order][::-1][last]
                into.update({int(a): int(b) for a, b in zip(u, times, strict=True)})
        return (int(t.max()) if len(t) else 0), vpc, key

    def as_dict(self) -> dict[str, object]:
        """Failover state and fault counts in the window (plain data)."""
        counts = np.bincount(self.kind, minlength=len(FaultKind))
        return {
            "faults_in_window": {f.name.lower(): int(counts[f]) for f in FaultKind},
            "ports_failed_over": [int(p) for p in np.flatnonzero(self.port_failed)],
            "vpcs_failed_over": [int(v) for v in np.flatnonzero(self.vpc_failed)],
            "sessions_failed_over": len(self.session_failed),
            "engine_failed_over": self.engine_failed,
        }


__all__ = ["FaultKind", "Health", "HealthConfig", "ScopeChange", "ScopeKind"]
