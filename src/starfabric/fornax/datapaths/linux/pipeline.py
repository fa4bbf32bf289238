"""The engine's packet pipeline in the nic namespace: nftables table `inet fornax_engine`,
loaded atomically through libnftables (nft.Nft, one transaction per call).

    prerouting raw-10:  ct zone := the zone of the packet's VNI (map `zones`, keyed by the
                        source MAC 02:VV:VV:VV:00:01 the sender writes), so two tenants'
                        overlapping 5-tuples never share an entry; runs before conntrack.
    (nf_conntrack_in at -200: lookup, TCP state machine, counters, timer)
    prerouting -150:    one verdict per packet, logged to NFLOG group `NFLOG_GROUP` with a
                        prefix: a letter, then the direction digit (0 ORIGINAL, 1 REPLY)
                        where the packet has an entry; the packet's meta mark is set to the
                        entry's ct id before, so the log names the entry (nflog.py reads them
                        back, in order; this kernel's NFLOG may lack conntrack attributes):
        U  untracked (ICMPv6 ND/MLD)                          -> forwarded
        I  conntrack calls the packet invalid                 -> dropped, whatever
           EngineConfig.invalid_policy: an INVALID packet carries no entry here, so nft
           cannot tell TCP_INVALID on a session from conntrack's "invalid new" (a lone
           FIN/RST to anyone), which must not leave; the engine still reports the contract's
           outcome (HIT TCP_INVALID under "forward")
        M  ct mark 0: no entry the manager admitted (MISS)     -> dropped: software's
        V  combo id (marks.py) not in set `fresh` (STALE), first -> dropped, punted; the
           time for this entry: the rule sets the mark's          VERSION_MISMATCH event
           MISMATCH_BIT
        S  STALE again                                         -> dropped, punted
        D  the direction's drop bit (DROP_HW)                  -> dropped
        H  otherwise (HIT)                                     -> forwarded
A MISS packet's unconfirmed entry is freed with the packet, so the kernel never holds an entry
the manager did not insert."""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from starfabric.fornax.datapaths.linux.marks import (
    COMBO_MASK,
    DROP_ORIG_BIT,
    DROP_REPLY_BIT,
    MISMATCH_BIT,
)

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import Lab

TABLE = "fornax_engine"
#: NFLOG group of the verdict log (any free group number; ours alone in the nic namespace).
NFLOG_GROUP = 30
PREFIXES = "UIMVSDH"


def mac_of_vni(vni: int, end: int) -> str:
    """The source MAC the sender writes for a VNI from the client (end 1) or server (end 2)."""
    return f"02:{(vni >> 16) & 0xFF:02x}:{(vni >> 8) & 0xFF:02x}:{vni & 0xFF:02x}:00:0{end}"


def _direction(name: str, d: int, drop_bit: int, log: str) -> str:
    stale = f"ct mark and {COMBO_MASK:#x} != @fresh"
    return f"""  chain {name} {{
    {stale} ct mark and {MISMATCH_BIT:#x} == 0 ct mark set ct mark or {MISMATCH_BIT:#x} {log} "V{d}" drop
    {stale} {log} "S{d}" drop
    ct mark and {drop_bit:#x} != 0 {log} "D{d}" drop
    {log} "H{d}" accept
  }}
"""


def ruleset() -> str:
    log = f"log group {NFLOG_GROUP} queue-threshold 1 prefix"
    return f"""
table inet {TABLE} {{
  map zones {{ typeof ether saddr : ct zone ; }}
  set fresh {{ typeof ct mark ; }}
  chain zone {{
    type filter hook prerouting priority raw - 10; policy accept;
    ct zone set ether saddr map @zones
  }}
  chain verdict {{
    type filter hook prerouting priority mangle + 1; policy accept;
    ct state untracked {log} "U" accept
    ct state invalid {log} "I" drop
    ct mark 0 {log} "M" drop
    ct mark {COMBO_MASK:#x} ct label set 127
    meta mark set ct id
    ct direction original jump orig
    jump reply
  }}
{_direction("orig", 0, DROP_ORIG_BIT, log)}{_direction("reply", 1, DROP_REPLY_BIT, log)}}}
"""


class Pipeline:
    """The loaded table; every change is one libnftables transaction on the nic thread."""

    def __init__(self, lab: Lab) -> None:
        from starfabric.fornax.datapaths.linux.nft import Nft

        self._worker = lab.worker
        self._nft = self._worker.call(Nft)
        self.transactions = 0
        self._run(f"table inet {TABLE}\ndelete table inet {TABLE}\n" + ruleset())

    def _run(self, text: str) -> None:
        self.transactions += 1
        self._worker.call(self._nft.run, text)

    def add_zones(self, zones: dict[int, int]) -> None:
        """VNI -> zone entries of map `zones`."""
        if zones:
            elems = ", ".join(f"{mac_of_vni(v, e)} : {z}" for v, z in zones.items() for e in (1, 2))
            self._run(f"add element inet {TABLE} zones {{ {elems} }}")

    def update_fresh(self, add: list[int], remove: list[int]) -> None:
        """Swap combos in and out of `fresh` in one transaction (a version bump)."""
        cmds = []
        if remove:
            cmds.append(f"delete element inet {TABLE} fresh {{ {', '.join(map(str, remove))} }}")
        if add:
            cmds.append(f"add element inet {TABLE} fresh {{ {', '.join(map(str, add))} }}")
        if cmds:
            self._run("\n".join(cmds))

    def close(self) -> None:
        with contextlib.suppress(Exception):  # the namespace may already be gone
            self._worker.call(self._nft.run, f"delete table inet {TABLE}")
        self._worker.call(self._nft.close)


__all__ = ["NFLOG_GROUP", "TABLE", "Pipeline", "mac_of_vni", "ruleset"]
