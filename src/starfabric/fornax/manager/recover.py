"""Restart recovery: a new manager rebuilds its only per-session state (SNAT bitmaps) by
dumping the engine in chunks while the engine keeps forwarding every installed session.

A dump may miss or repeat an entry that an insert displaces between chunks (interface.py);
marking is idempotent, and a pass during which the engine reported displacements is run
again, so no allocation is lost."""

from __future__ import annotations

from collections.abc import Callable

from starfabric.fornax.manager.protocols import ManagerState

#: Passes tried before giving up on a displacement-free dump (assumption: inserts are rare
#: while the manager — the only inserter — is restarting, so one pass is the normal case).
MAX_RECOVERY_PASSES = 4


def recover_nat(
    m: ManagerState, between_chunks: Callable[[], None] | None = None
) -> dict[str, int]:
    """Dump the whole engine in `recover_chunk` chunks, marking every held SNAT port, then the
    software datapath's sessions; `between_chunks` runs between chunks (traffic)."""
    cap = m.engine.config.capacity
    entries = 0
    passes = 0
    for passes in range(1, MAX_RECOVERY_PASSES + 1):  # noqa: B007
        disp0 = m.engine.counters().get("displacements", 0)
        cursor, entries = 0, 0
        while cursor < cap:
            recs, cursor = m.driver.dump(cursor, m.config.recover_chunk)
            entries += len(recs)
            m.nat.mark_cookies(recs["aux"])
            if between_chunks is not None and cursor < cap:
                between_chunks()
        if m.engine.counters().get("displacements", 0) == disp0:
            break
    m.nat.mark_cookies(m.soft.dump(0, m.soft.config.capacity)[0]["aux"])
    m.metrics.count("recovered_entries", entries)
    m.metrics.count("recovery_passes", passes)
    return {"entries": entries, "passes": passes}


__all__ = ["MAX_RECOVERY_PASSES", "recover_nat"]
