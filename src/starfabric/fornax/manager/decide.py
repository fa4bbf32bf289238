"""From first packets to session parameters: policy decision in batch, hardware action
handles, SNAT allocation and the aux cookie; and the inverse, original packets rebuilt from
session records so a stale session can be decided again."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import FlowKeys
from starfabric.fornax.manager import cookie
from starfabric.fornax.manager.nat import NatPools
from starfabric.fornax.packets import PROTO_ICMP, PROTO_ICMPV6, PacketBatch
from starfabric.fornax.vpc import NO_SCOPE, ActionKind, CompiledPolicy, NatKind, evaluate


@dataclass(frozen=True)
class Decision:
    """Per first packet: whether a session is created, its parameters, and why not."""

    session: npt.NDArray[np.bool_]  # create (or keep) a session
    allowed: npt.NDArray[np.bool_]  # forward direction allowed by policy
    nat_exhausted: npt.NDArray[np.bool_]
    action_orig: npt.NDArray[np.uint32]  # hardware handles (drop rows -> drop action)
    action_reply: npt.NDArray[np.uint32]
    eni_scope: npt.NDArray[np.uint32]
    vpc_scope: npt.NDArray[np.uint32]
    aux: npt.NDArray[np.uint64]


def is_icmp(proto: npt.NDArray[np.uint8]) -> npt.NDArray[np.bool_]:
    return (proto == PROTO_ICMP) | (proto == PROTO_ICMPV6)


def hw_actions(
    policy: CompiledPolicy, handles: npt.NDArray[np.uint32], drop_action: int
) -> npt.NDArray[np.uint32]:
    """Policy handles as the hardware needs them: DROP rows become the engine's drop handle."""
    out = handles.astype(np.uint32).copy()
    real = out < len(policy.actions)
    drop_rows = np.zeros(len(out), bool)
    drop_rows[real] = policy.actions["kind"][out[real]] == ActionKind.DROP
    out[drop_rows | ~real] = drop_action
    return out


def decide(
    policy: CompiledPolicy,
    first: PacketBatch,
    nat: NatPools,
    *,
    drop_action: int,
    drop_sessions: bool,
    old_aux: npt.NDArray[np.uint64] | None = None,
) -> Decision:
    """Decide first packets (or rebuilt ORIGINAL packets of stale sessions, with their old
    cookies: an SNAT allocation is kept while the connection still needs one, freed when it
    no longer does, made when it newly does)."""
    res = evaluate(policy, first)
    n = len(first)
    allowed = res.reason == 0
    has_eni = res.eni_scope != NO_SCOPE
    session = allowed | (drop_sessions & has_eni)
    want_nat = allowed & (res.nat_kind == NatKind.POOL)
    old = np.zeros(n, np.uint64) if old_aux is None else old_aux
    held = cookie.has_nat(old)
    ip = np.where(held, cookie.nat_ip(old), -1)
    port = np.where(held, cookie.nat_port(old), 0)
    free = held & ~want_nat
    if free.any():
        nat.release(ip[free], port[free])
        ip[free] = -1
    need = want_nat & ~held
    exhausted = np.zeros(n, bool)
    if need.any():
        a_ip, a_port = nat.allocate(res.nat_pool[need])
        ip[need] = a_ip
        port[need] = a_port
        exhausted[np.flatnonzero(need)[a_ip < 0]] = True
    session &= ~exhausted
    icmp = is_icmp(first.proto)
    aux = cookie.pack(want_nat & ~exhausted, ip, port, icmp, first.dport)
    fwd = np.where(allowed, res.fwd_action, np.uint32(drop_action)).astype(np.uint32)
    return Decision(
        session=session,
        allowed=allowed,
        nat_exhausted=exhausted,
        action_orig=hw_actions(policy, fwd, drop_action),
        action_reply=hw_actions(policy, res.rev_action, drop_action),
        eni_scope=res.eni_scope,
        vpc_scope=res.vpc_scope,
        aux=aux,
    )


def _keys(*cols: np.ndarray) -> FlowKeys:
    """FlowKeys from columns in field order, cast to the interface's dtypes."""
    dtypes = (np.uint32, np.uint8, np.uint64, np.uint64, np.uint64, np.uint64, np.uint16,
              np.uint16)  # fmt: skip
    return FlowKeys(*(np.ascontiguousarray(c, dtype=t) for c, t in zip(cols, dtypes, strict=True)))


def original_from_entries(entries: np.ndarray) -> FlowKeys:
    """ORIGINAL-direction keys of engine records (ENTRY_DTYPE/EVENT_DTYPE), ICMP type from aux."""
    dport = entries["dport"].copy()
    icmp = is_icmp(entries["proto"])
    dport[icmp] = cookie.icmp_word(entries["aux"][icmp])
    return _keys(entries["vni"], entries["proto"], entries["src_hi"], entries["src_lo"],
                 entries["dst_hi"], entries["dst_lo"], entries["sport"], dport)  # fmt: skip


def original_from_sessions(s: np.ndarray | Mapping[str, np.ndarray]) -> FlowKeys:
    """ORIGINAL-direction keys of softpath records or columns (canonical key + orig_dir)."""
    sw = s["orig_dir"] == 1
    dport = np.where(sw, s["a_port"], s["b_port"])
    icmp = is_icmp(s["proto"])
    dport[icmp] = cookie.icmp_word(s["aux"][icmp])
    return _keys(
        s["vni"], s["proto"], np.where(sw, s["b_hi"], s["a_hi"]),
        np.where(sw, s["b_lo"], s["a_lo"]), np.where(sw, s["a_hi"], s["b_hi"]),
        np.where(sw, s["a_lo"], s["b_lo"]), np.where(sw, s["b_port"], s["a_port"]), dport,
    )  # fmt: skip


def policy_fields(
    policy: CompiledPolicy, keys: FlowKeys, now_ns: int, drop_action: int
) -> tuple[np.ndarray, ...]:
    """(action_orig, action_reply, eni_scope, vpc_scope) the current policy gives these
    ORIGINAL keys, as hardware handles, without allocating anything (no SNAT port)."""
    r = evaluate(policy, packets_of(keys, now_ns))
    fwd = np.where(r.reason == 0, r.fwd_action, np.uint32(drop_action)).astype(np.uint32)
    return (
        hw_actions(policy, fwd, drop_action),
        hw_actions(policy, r.rev_action, drop_action),
        r.eni_scope.astype(np.uint32),
        r.vpc_scope.astype(np.uint32),
    )


def swapped(k: FlowKeys) -> FlowKeys:
    """The same connection seen from its other end (non-ICMP)."""
    return FlowKeys(k.vni, k.proto, k.dst_hi, k.dst_lo, k.src_hi, k.src_lo, k.dport, k.sport)


def packets_of(keys: FlowKeys, now_ns: int) -> PacketBatch:
    """First packets carrying these keys (for a policy decision)."""
    return PacketBatch.from_columns(
        time_ns=now_ns, vni=keys.vni, proto=keys.proto, src_hi=keys.src_hi, src_lo=keys.src_lo,
        dst_hi=keys.dst_hi, dst_lo=keys.dst_lo, sport=keys.sport, dport=keys.dport,
    )  # fmt: skip


__all__ = [
    "Decision",
    "decide",
    "hw_actions",
    "is_icmp",
    "original_from_entries",
    "original_from_sessions",
    "packets_of",
    "policy_fields",
    "swapped",
]
