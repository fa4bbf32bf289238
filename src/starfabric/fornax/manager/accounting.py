"""Packet accounting: every packet ends in exactly one final outcome, and the totals add up."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import IntEnum

import numpy as np
import numpy.typing as npt

from starfabric.errors import InvariantError


class Final(IntEnum):
    """The one final outcome of a packet."""

    HW_FORWARDED = 0  # forwarded by the NIC session engine
    SW_FORWARDED = 1  # forwarded by CPU software forwarding (softpath)
    POLICY_DROP = 2  # dropped because the policy refuses it (hardware or software)
    NAMED_DROP = 3  # dropped for a named reason (DropReason)


class DropReason(IntEnum):
    """Why a NAMED_DROP packet was lost."""

    NONE = 0
    PORT_HUNG = 1  # the ingress port's pipeline is stalled (engine PORT_HUNG)
    SOFTPATH_OVERLOAD = 2  # beyond the software datapath's packet rate
    SOFTPATH_FULL = 3  # hardware could not take the session and the software table is full
    NAT_EXHAUSTED = 4  # the NAT gateway's pool has no free (public IP, port)
    SESSION_LOST = 5  # its session was lost to a hardware fault and cannot be rebuilt safely


@dataclass(frozen=True)
class Fate:
    """Per-packet final outcome, the action handle it was forwarded with, and drop reason;
    where the manager knows them also the engine's Outcome, the TCP state after the packet
    and the connection tracker's verdict (engine/conntrack.V_*: 0 accepted, 1 ignored,
    2 INVALID, 3 reopened, 4 accepted and entry ended, 5 invalid first packet (no entry),
    6 first packet, entry created; 255 none)."""

    final: npt.NDArray[np.uint8]
    action: npt.NDArray[np.uint32]
    reason: npt.NDArray[np.uint8]
    engine: npt.NDArray[np.uint8] = None  # type: ignore[assignment]
    tcp_state: npt.NDArray[np.uint8] = None  # type: ignore[assignment]
    verdict: npt.NDArray[np.uint8] = None  # type: ignore[assignment]

    def __post_init__(self) -> None:
        n = len(self.final)
        for name, fill in (("engine", 255), ("tcp_state", 0), ("verdict", 255)):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(n, fill, np.uint8))

    def __len__(self) -> int:
        return len(self.final)

    @classmethod
    def merge(cls, n: int, parts: Iterable[tuple[npt.NDArray[np.int64], Fate]]) -> Fate:
        """One batch's fate from the fates of disjoint parts (packet indices, fate)."""
        final = np.empty(n, np.uint8)
        action = np.zeros(n, np.uint32)
        reason = np.zeros(n, np.uint8)
        engine = np.zeros(n, np.uint8)
        state = np.zeros(n, np.uint8)
        verdict = np.zeros(n, np.uint8)
        for idx, f in parts:
            final[idx], action[idx], reason[idx] = f.final, f.action, f.reason
            engine[idx], state[idx], verdict[idx] = f.engine, f.tcp_state, f.verdict
        return cls(final, action, reason, engine=engine, tcp_state=state, verdict=verdict)


class Ledger:
    """Running totals by final outcome and drop reason."""

    def __init__(self) -> None:
        self.offered = 0
        self.final = np.zeros(len(Final), np.int64)
        self.reasons = np.zeros(len(DropReason), np.int64)

    def add(self, fate: Fate) -> None:
        self.offered += len(fate)
        self.final += np.bincount(fate.final, minlength=len(Final))[: len(Final)]
        named = fate.reason[fate.final == Final.NAMED_DROP]
        self.reasons += np.bincount(named, minlength=len(DropReason))[: len(DropReason)]

    def check(self) -> None:
        """InvariantError unless every offered packet has exactly one final outcome."""
        if int(self.final.sum()) != self.offered or len(self.final) != len(Final):
            raise InvariantError(
                f"packet accounting: {int(self.final.sum())} final outcomes for "
                f"{self.offered} packets offered"
            )
        if int(self.reasons.sum()) != int(self.final[Final.NAMED_DROP]) or self.reasons[0]:
            raise InvariantError(
                f"packet accounting: named-drop reasons sum to {int(self.reasons.sum())}, "
                f"named drops are {int(self.final[Final.NAMED_DROP])}"
            )

    def as_dict(self) -> dict[str, object]:
        return {
            "offered": self.offered,
            **{f.name.lower(): int(self.final[f]) for f in Final},
            "named_drop_reasons": {
                r.name.lower(): int(self.reasons[r]) for r in DropReason if r != DropReason.NONE
            },
        }


__all__ = ["DropReason", "Fate", "Final", "Ledger"]
