"""The same scenario through the same Manager over the emulated NIC (FastEngine) and over the
Linux kernel (LinuxEngine, real packets): the same verdict for every packet and the same
session state for every connection at the end; and a VPC policy change while traffic flows
on real packets: after the change is acknowledged no packet of a session the new policy
refuses leaves the nic (capture), and the manager's engine work follows the sessions touched,
not the table. Differences that remain are the kernel's (LinuxEngine.differences):
per-packet TCP state inside a batch is read after the batch."""

from __future__ import annotations

import numpy as np

from fornax.datapaths.linux.linux_fixtures import (
    lab,
    manager_over,
    needs_kernel,
    replay,
    small_engine_config,
    workload,
)
from starfabric.fornax.datapaths.linux import Lab, LinuxEngine
from starfabric.fornax.engine import FastEngine, FlowKeys, SessionEngine, Status
from starfabric.fornax.manager.accounting import Final

__all__ = ["lab"]  # the module-scoped fixture
pytestmark = needs_kernel


def _final_states(e: SessionEngine, keys: FlowKeys) -> tuple[np.ndarray, np.ndarray]:
    status, rec = e.query(keys)
    return status, np.where(status == Status.OK, rec["tcp_state"], 255)


def _first_keys(runs: list) -> FlowKeys:
    """The key of each connection's first packet, in connection order."""
    conn = np.concatenate([wb.conn for wb, _f, _w in runs])
    batch_keys = [FlowKeys.from_batch(wb.packets) for wb, _f, _w in runs]
    cols = {f: np.concatenate([getattr(k, f) for k in batch_keys]) for f in
            ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport")}  # fmt: skip
    _, first = np.unique(conn, return_index=True)
    return FlowKeys.from_columns(**{k: v[first] for k, v in cols.items()})


def _concat(runs: list, what: str) -> np.ndarray:
    return np.concatenate([getattr(f, what) for _wb, f, _w in runs])


def test_same_verdicts_and_session_states(lab: Lab) -> None:
    cfg = small_engine_config()
    wl = workload()
    fe = FastEngine(cfg)
    fast = replay(manager_over(fe), wl)
    e = LinuxEngine(cfg, lab)
    try:
        linux = replay(manager_over(e), wl)
        f_final, l_final = _concat(fast, "final"), _concat(linux, "final")
        assert len(f_final) > 500
        # every packet: the same final verdict and the same engine outcome
        np.testing.assert_array_equal(l_final, f_final)
        np.testing.assert_array_equal(_concat(linux, "engine"), _concat(fast, "engine"))
        # every connection: the same session at the end (present or not, its TCP state)
        keys = _first_keys(fast)
        st_f, ts_f = _final_states(fe, keys)
        st_l, ts_l = _final_states(e, keys)
        np.testing.assert_array_equal(st_l, st_f)
        np.testing.assert_array_equal(ts_l, ts_f)
        # the wire agrees: every hardware-forwarded frame came out of the nic, no other did
        # (but INVALID ones: dropped on the wire, see LinuxEngine's differences)
        wire = np.concatenate([w for _wb, _f, w in linux])
        invalid = _concat(linux, "verdict") == 2
        np.testing.assert_array_equal(wire, (l_final == Final.HW_FORWARDED) & ~invalid)
    finally:
        e.close()


def test_policy_change_on_real_packets(lab: Lab) -> None:
    """examples/scenario-policy-v2.yaml (app stops admitting web on 8080) applied while
    traffic flows: after apply_policy returned, no packet the new policy refuses leaves the
    nic, verdicts equal the emulated NIC's, and the engine ops the change cost follow the
    sessions packets touched afterwards, not the table."""
    cfg = small_engine_config()
    wl = workload(duration="0.4s", cps=400, seed=11)
    at = 200_000_000
    fe = FastEngine(cfg)
    fast = replay(manager_over(fe), wl, change_at_ns=at)
    e = LinuxEngine(cfg, lab)
    try:
        m = manager_over(e)
        ops_before: dict[str, int] = {}

        def count_ops() -> int:
            c = e.counters()
            return c["insert_ok"] + c["modify_ok"] + c["delete_ok"]

        linux = []
        for item in replay_with_hook(m, wl, at, lambda: ops_before.update(
                ops=count_ops(), table=e.occupancy())):  # fmt: skip
            linux.append(item)
        after = np.concatenate([np.full(len(f.final), wb.t_start_ns >= at)
                                for wb, f, _w in linux])  # fmt: skip
        l_final, f_final = _concat(linux, "final"), _concat(fast, "final")
        np.testing.assert_array_equal(l_final, f_final)
        wire = np.concatenate([w for _wb, _f, w in linux])
        refused_after = after & (l_final == Final.POLICY_DROP)
        assert refused_after.sum() > 0  # the change refuses traffic that flows on
        assert not (wire & refused_after).any()  # none of it left the nic
        assert not (wire & (l_final != Final.HW_FORWARDED)).any()
        # engine work after the change: bounded by the sessions packets touched afterwards
        conn_after = np.unique(np.concatenate([wb.conn for wb, _f, _w in linux
                                               if wb.t_start_ns >= at]))  # fmt: skip
        work = count_ops() - ops_before["ops"]
        assert work <= 2 * len(conn_after)
        assert ops_before["table"] > 0
    finally:
        e.close()


def replay_with_hook(m: object, wl: object, at: int, hook: object) -> list:
    """replay() with `hook()` called right after the policy change is acknowledged."""
    from fornax.datapaths.linux import linux_fixtures as lf

    orig = m.apply_policy  # type: ignore[attr-defined]

    def apply(spec: object) -> object:
        out = orig(spec)
        hook()  # type: ignore[operator]
        return out

    m.apply_policy = apply  # type: ignore[attr-defined]
    return lf.replay(m, wl, change_at_ns=at)  # type: ignore[arg-type]
