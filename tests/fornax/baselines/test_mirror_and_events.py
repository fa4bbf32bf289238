"""The flow mirror against a plain dict, and per-direction entries under hardware aging."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.fornax.baselines import FlowMirror, ablation
from starfabric.fornax.engine import FlowKeys
from starfabric.fornax.manager import Final

from .helpers import ACK, APP, controller, web_packets


def _keys(ids: list[int]) -> FlowKeys:
    a = np.asarray(ids, np.int64)
    return FlowKeys.from_columns(vni=7 + (a % 3), proto=6, src_lo=1000 + a, dst_lo=5, sport=a % 5,
                                 dport=443)  # fmt: skip


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.lists(st.integers(0, 60), max_size=25)), max_size=30))
def test_mirror_matches_a_dict(ops: list[tuple[bool, list[int]]]) -> None:
    m = FlowMirror(initial_rows=4)
    ref: dict[int, int] = {}
    for step, (add, ids) in enumerate(ops):
        if not ids:
            continue
        k = _keys(ids)
        if add:
            m.add(k, action_orig=step, action_reply=0, eni_scope=0, vpc_scope=0, aux=0,
                  now_ns=step, reval_seq=0)  # fmt: skip
            for i in ids:
                ref[i] = step
        else:
            m.remove(k)
            for i in ids:
                ref.pop(i, None)
        assert m.count == len(ref) == int(m.live.sum())
        probe = list(range(61))
        rows = m.lookup(_keys(probe))
        for i, r in zip(probe, rows, strict=True):
            assert (r >= 0) == (i in ref)
            if r >= 0:
                assert int(m.rows["action_orig"][r]) == ref[i]
                assert int(m.rows["src_lo"][r]) == 1000 + i


def test_per_direction_hardware_aging_ends_the_connection_and_frees_snat_once() -> None:
    m = controller(ablation("per_direction"), engine_kw={"tcp_syn_sent_s": 1.0})
    f = m.process(web_packets(np.arange(40), 1_000_000, hosts=APP))
    assert (f.final == Final.SW_FORWARDED).all()
    assert m.nat.allocated() == 40 and m.hw.occupancy() == 80
    m.tick(500_000_000)
    m.tick(1_500_000_000)
    assert m.hw.occupancy() == 0 and m.sessions() == 0  # both entries age in one scrub
    assert m.nat.allocated() == 0 and m.metrics.counts.get("nat_released") == 40
    # one ORIGINAL entry ages alone: its REPLY entry goes with it, its port is freed
    m.process(web_packets(np.arange(40, 42), 2_000_000_000, hosts=APP))
    m.tick(2_600_000_000)
    m.process(web_packets(np.array([40]), 2_700_000_000, hosts=APP, reply=True, flags=ACK))
    m.tick(3_100_000_000)  # connection 40's ORIGINAL entry idle 1.1 s, its REPLY one 0.4 s
    assert m.hw.occupancy() == 0 and m.nat.allocated() == 0
    assert m.metrics.counts["nat_released"] == 42


def test_restart_recovers_snat_and_rebuilds_the_mirror_from_hardware() -> None:
    from starfabric.fornax.baselines import SoftwareCentric, ovs_like

    cfg = ovs_like().model_copy(update={"idle_timeout_s": 1.0})
    old = controller(cfg)
    old.process(web_packets(np.arange(30), 1_000_000, hosts=APP))
    old.tick(2_000_000)
    assert old.mirror is not None and old.mirror.count == 60
    new = SoftwareCentric.recover(old.hw, old.policy, softpath=old.softpath, baseline=cfg)
    assert new.mirror is not None and new.mirror.count == 60
    assert new.nat.allocated() == 30 and new.metrics.counts["ukeys_adopted"] == 60
    assert new.metrics.cpu_s["recovery"] > 0
    # the rebuilt ukeys carry the entries' data: traffic keeps flowing, nothing ages early
    for t in (300_000_000, 700_000_000):
        f = new.process(web_packets(np.arange(30), t, hosts=APP, flags=ACK))
        assert (f.final == Final.HW_FORWARDED).all()
        new.tick(t)
    assert new.metrics.counts.get("revalidate_aged", 0) == 0
    new.tick(2_900_000_000)  # idle 2.2 s > 1 s with counters synced at 2 s: aged, freed
    assert new.sessions() == 0 and new.nat.allocated() == 0 and new.mirror.count == 0


def test_a_spilled_mirror_keeps_its_blobs_in_a_file_and_answers_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from starfabric.fornax.baselines import mirror as mm

    monkeypatch.setattr(mm, "SPILL_ABOVE_BYTES", 64 * mm.BLOB_DTYPE.itemsize)
    small, big = FlowMirror(initial_rows=8), FlowMirror(initial_rows=1000)
    assert not small.spilled and big.spilled
    ids = np.arange(300)
    for m in (small, big):
        m.add(_keys(list(ids)), action_orig=ids, action_reply=0, eni_scope=0, vpc_scope=0,
              aux=0, now_ns=1, reval_seq=0)  # fmt: skip
        m.remove(_keys(list(range(0, 300, 3))))
    assert small.spilled  # it grew past the threshold and moved its rows to the file
    for m in (small, big):
        rows = m.lookup(_keys(list(ids)))
        assert ((rows >= 0) == (ids % 3 != 0)).all()
        kept = rows[rows >= 0]
        assert (m.rows["action_orig"][kept] == ids[ids % 3 != 0]).all()
        assert (m.blobs["mask_nl"][kept, :41] == 0xFF).all()
        assert m.live_nbytes == m.count * mm.UKEY_DTYPE.itemsize + sum(
            a.nbytes for a in (m.index.used, m.index.key, m.index.proto, m.i_row)
        )
    assert (
        small.blobs["ufid"][small.lookup(_keys([1]))[0], 0]
        == big.blobs["ufid"][big.lookup(_keys([1]))[0], 0]
    )


def test_a_large_add_is_built_in_chunks_with_the_same_records(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from starfabric.fornax.baselines import mirror as mm

    ids = np.arange(50)
    whole = FlowMirror()
    whole.add(_keys(list(ids)), action_orig=ids, action_reply=7, eni_scope=ids % 4,
              vpc_scope=1, aux=0, now_ns=ids * 10, reval_seq=3)  # fmt: skip
    monkeypatch.setattr(mm, "_ADD_CHUNK", 8)
    chunked = FlowMirror()
    chunked.add(_keys(list(ids)), action_orig=ids, action_reply=7, eni_scope=ids % 4,
                vpc_scope=1, aux=0, now_ns=ids * 10, reval_seq=3)  # fmt: skip
    a, b = whole.lookup(_keys(list(ids))), chunked.lookup(_keys(list(ids)))
    assert (a >= 0).all() and (b >= 0).all() and chunked.count == 50
    assert (whole.rows[a] == chunked.rows[b]).all()
    assert (whole.blobs[a] == chunked.blobs[b]).all()
    chunked.free()
    assert chunked.count == 0 and chunked.live_nbytes < 1024
    assert (chunked.lookup(_keys([1])) == -1).all()
