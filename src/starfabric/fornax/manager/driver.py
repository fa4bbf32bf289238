"""The engine driver: the one door from the manager's parts to a SessionEngine.

It holds the engine, the metrics (every call is counted and its CPU charged to the emulated
hardware), the setup budget (a token bucket shared by inserts and modifies) and the version
cache, and offers the entry operations as methods, so no part calls the engine itself
(engine/interface.py: a driver talks to a NIC only through its ops and events)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import FlowKeys, Scope, SessionEngine
from starfabric.fornax.manager.config import TokenBucket
from starfabric.fornax.manager.decide import Decision
from starfabric.fornax.manager.metrics import Metrics


def scope_versions(
    engine: SessionEngine, scope: Scope, ids: npt.NDArray[np.uint32]
) -> npt.NDArray[np.uint32]:
    """Current versions of scope ids in `engine` (one read per distinct scope)."""
    uniq, inv = np.unique(ids, return_inverse=True)
    cur = np.array([engine.scope_version(scope, int(s)) for s in uniq], np.uint32)
    return cur[np.asarray(inv).ravel()] if len(ids) else np.zeros(0, np.uint32)


class EngineDriver:
    """Counted engine calls, version reads and the setup budget (see the module docstring)."""

    def __init__(self, engine: SessionEngine, metrics: Metrics, budget: TokenBucket) -> None:
        self.engine = engine
        self.metrics = metrics
        self.budget = budget

    def call(self, op: str, fn: Callable[..., Any], *args: Any, n: int = 1, **kw: Any) -> Any:
        """Run one engine call counted as `n` ops of `op` (its CPU is the hardware's)."""
        with self.metrics.engine_call(op, n):
            return fn(*args, **kw)

    def versions(self, scope: Scope, ids: npt.NDArray[np.uint32]) -> npt.NDArray[np.uint32]:
        """Current engine versions of scope ids (one read per distinct scope)."""
        return scope_versions(self.engine, scope, ids)

    # ---- entry operations (counted) ----------------------------------------------------
    def query(self, keys: FlowKeys) -> tuple[npt.NDArray[np.uint8], np.ndarray]:
        return self.call("query", self.engine.query, keys, n=len(keys))

    def delete(self, keys: FlowKeys) -> npt.NDArray[np.uint8]:
        return self.call("delete", self.engine.delete, keys, n=len(keys))

    def modify(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        return self.call("modify", self.engine.modify, keys, n=len(keys), **kw)

    def insert(self, keys: FlowKeys, **kw: Any) -> npt.NDArray[np.uint8]:
        return self.call("insert", self.engine.insert, keys, n=len(keys), **kw)

    def dump(self, cursor: int, max_entries: int, **filters: Any) -> tuple[np.ndarray, int]:
        """One dump chunk; its entries are counted as `dump_entries`."""
        recs, nxt = self.call("dump", self.engine.dump, cursor, max_entries, **filters)
        self.metrics.ops["dump_entries"] += len(recs)
        return recs, nxt

    def modify_decided(self, keys: FlowKeys, d: Decision, sel: npt.NDArray[np.bool_]) -> Any:
        """Modify the entries `keys[sel]` to decision `d[sel]` at the current versions."""
        return self.modify(
            keys.take(sel), action_orig=d.action_orig[sel], action_reply=d.action_reply[sel],
            eni_version=self.versions(Scope.ENI, d.eni_scope[sel]),
            vpc_version=self.versions(Scope.VPC, d.vpc_scope[sel]), aux=d.aux[sel],
        )  # fmt: skip

    def insert_decided(
        self, keys: FlowKeys, d: Decision, sel: npt.NDArray[np.bool_], rec: np.ndarray
    ) -> Any:
        """Re-create the entries `keys[sel]` under decision `d[sel]`, keeping the last-seen
        time and tracker state of their old records `rec[sel]`."""
        return self.insert(
            keys.take(sel), action_orig=d.action_orig[sel], action_reply=d.action_reply[sel],
            eni_scope=d.eni_scope[sel], vpc_scope=d.vpc_scope[sel],
            eni_version=self.versions(Scope.ENI, d.eni_scope[sel]),
            vpc_version=self.versions(Scope.VPC, d.vpc_scope[sel]),
            now_ns=rec["last_seen_ns"][sel], track=rec["track"][sel], aux=d.aux[sel],
        )  # fmt: skip

    def insert_columns(
        self, keys: FlowKeys, recs: Mapping[str, np.ndarray]
    ) -> npt.NDArray[np.uint8]:
        """Insert sessions as software holds them (SoftEngine.move_columns: actions,
        scopes, last_seen_ns, track, aux)."""
        return self.insert(
            keys, action_orig=recs["action_orig"], action_reply=recs["action_reply"],
            eni_scope=recs["eni_scope"], vpc_scope=recs["vpc_scope"],
            eni_version=self.versions(Scope.ENI, recs["eni_scope"]),
            vpc_version=self.versions(Scope.VPC, recs["vpc_scope"]),
            now_ns=np.maximum(recs["last_seen_ns"], 0), track=recs["track"], aux=recs["aux"],
        )  # fmt: skip

    def modify_columns(
        self, keys: FlowKeys, recs: Mapping[str, np.ndarray]
    ) -> npt.NDArray[np.uint8]:
        """Refresh entries to what software re-decided (SoftEngine.move_columns: actions,
        versions of its scopes, aux, track)."""
        return self.modify(
            keys, action_orig=recs["action_orig"], action_reply=recs["action_reply"],
            eni_version=self.versions(Scope.ENI, recs["eni_scope"]),
            vpc_version=self.versions(Scope.VPC, recs["vpc_scope"]),
            aux=recs["aux"], track=recs["track"],
        )  # fmt: skip


__all__ = ["EngineDriver", "scope_versions"]
