"""Synthesis: faults change the physics, counters add up, kernels match simple references."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st_

from starfabric.astral.monitor import Fault, SynthSpec, TelemetryStore, read_truth, synthesize
from starfabric.astral.monitor import _kernels as K
from starfabric.astral.monitor.cluster import build_cluster, cluster_for
from starfabric.astral.monitor.faults import parse_fault
from starfabric.astral.monitor.synth import _path_min, compile_job, network_state
from starfabric.errors import ConfigError


def _run(faults: list[Fault], seed: int = 3) -> TelemetryStore:
    st = TelemetryStore()
    synthesize(SynthSpec(gpus=1024, seed=seed, placement_seed=seed, ms_series=False), faults, st)
    return st


def test_healthy_tables_consistent(healthy: TelemetryStore) -> None:
    n_it = healthy.query("SELECT count(DISTINCT iter) AS k FROM app_iteration")["k"][0]
    assert n_it == 6
    assert healthy.count("app_iteration") == 6 * 1024
    assert healthy.count("transport_qp") == 6 * 2048
    assert healthy.count("app_nccl_error") == 0
    # Port counters add up: bytes sent on a link = bytes of the QPs whose INT route crosses it.
    hop = healthy.query("SELECT link, count(*) AS k FROM network_hop WHERE iter = 5 GROUP BY link")
    port = healthy.query("SELECT link, tx_bytes FROM phys_port WHERE iter = 5")
    per_qp = float(healthy.query("SELECT max(bytes) AS b FROM transport_qp")["b"][0])
    tx = dict(zip(port["link"].tolist(), port["tx_bytes"].tolist(), strict=True))
    for link, k in zip(hop["link"].tolist(), hop["k"].tolist(), strict=True):
        assert tx[link] == pytest.approx(k * per_qp)
    assert sum(tx.values()) == pytest.approx(float(hop["k"].sum()) * per_qp)


def test_truth_is_kept_apart(healthy_db: Path) -> None:
    assert read_truth(healthy_db) == []
    with TelemetryStore(healthy_db, read_only=True) as st:
        tables = {r for r in st.query("SELECT table_name FROM duckdb_tables()")["table_name"]}
    assert not any("truth" in t or "fault" in t for t in tables)


def test_throttle_slows_the_gpu_and_peers_wait() -> None:
    st = _run([Fault("gpu_throttle", 77, 0.8, 1)])
    a = st.query(
        "SELECT rank, median(compute_ms) AS c, median(tp_ms) AS t FROM app_iteration WHERE iter >= 2 GROUP BY rank ORDER BY rank"
    )
    assert a["c"][77] > 1.4 * np.median(a["c"])
    host = slice(72, 80)
    assert a["t"][77] == pytest.approx(np.min(a["t"][host]))  # the straggler waits least
    g = st.query(
        "SELECT sm_clock_mhz AS c, throttle_reasons AS r FROM phys_gpu WHERE gpu = 77 AND iter = 3"
    )
    assert g["c"][0] < 1700 and g["r"][0] & 0x40


def test_crc_fault_raises_counters_and_slows_qps(crc_db: tuple[Path, Fault]) -> None:
    db, f = crc_db
    with TelemetryStore(db, read_only=True) as st:
        crc = st.query(
            "SELECT link, sum(crc_errors) AS c FROM phys_port WHERE iter >= 3 GROUP BY link ORDER BY c DESC"
        )
        assert int(crc["link"][0]) // 2 == f.target
        loud = set(crc["link"][crc["c"] >= 20].tolist())
        assert loud <= {2 * f.target, 2 * f.target + 1}  # background elsewhere
        qps = st.query(
            "SELECT DISTINCT qp FROM network_hop WHERE link IN (?, ?) AND iter = 5",
            [2 * f.target, 2 * f.target + 1],
        )["qp"]
        g = st.query(
            "SELECT qp, median(gbps_mean) AS g FROM transport_qp WHERE iter >= 3 GROUP BY qp ORDER BY qp"
        )["g"]
        assert np.median(g[qps]) < 0.8 * np.median(g)


def test_xid_hangs_the_job_with_timeouts() -> None:
    st = _run([Fault("gpu_xid", 100, 0.5, 2)])
    assert st.query("SELECT max(iter) AS m FROM app_iteration")["m"][0] == 1
    err = st.query("SELECT rank, peer FROM app_nccl_error")
    assert err["rank"].size > 0 and set(err["peer"].tolist()) == {100}
    assert st.query("SELECT gpu FROM phys_xid")["gpu"].tolist() == [100]


def test_port_down_single_port_nic_is_unreachable() -> None:
    # 1K cluster: one 400G port per GPU, no second ToR to fail over to → NCCL timeout.
    st = _run([Fault("nic_port_down", 33, 0.5, 2)])
    assert st.query("SELECT max(iter) AS m FROM app_iteration")["m"][0] == 1
    assert 33 in set(st.query("SELECT rank FROM app_nccl_error")["rank"].tolist())
    down = st.query("SELECT DISTINCT link FROM phys_port WHERE NOT state_up")["link"]
    assert sorted(down.tolist()) == [66, 67]


def test_misconfig_written_to_config_and_slows_only_that_nic() -> None:
    st = _run([Fault("misconfig_mtu", 12, 0.7, 1)])
    cfg = st.query("SELECT gpu, mtu FROM config_nic WHERE mtu <> 4096")
    assert cfg["gpu"].tolist() == [12]
    g = st.query(
        "SELECT rank, median(gbps_mean) AS g FROM transport_qp WHERE iter >= 2 GROUP BY rank ORDER BY rank"
    )["g"]
    assert g[12] < 0.6 * np.median(g)


def test_bad_targets_and_fault_text() -> None:
    with pytest.raises(ConfigError, match="not a gpu of this cluster"):
        _run([Fault("gpu_throttle", 5000)])
    with pytest.raises(ConfigError, match="is an NVLink"):
        topo = build_cluster(cluster_for(1024))
        nv = topo.links_of_kind(3)[0] // 2
        _run([Fault("link_crc", nv)])
    with pytest.raises(ConfigError, match="unknown"):
        Fault("meteor", 1)
    with pytest.raises(ConfigError, match="severity"):
        Fault("gpu_xid", 1, 1.5)
    assert parse_fault("link_crc:12:0.7:3") == Fault("link_crc", 12, 0.7, 3)
    with pytest.raises(ConfigError, match="KIND:TARGET"):
        parse_fault("link_crc")
    with pytest.raises(ConfigError, match="integers"):
        parse_fault("link_crc:x")
    with pytest.raises(ConfigError, match="no monitored cluster layout"):
        cluster_for(2000)


def _balance_ref(
    off: np.ndarray, links: np.ndarray, n_qp: int, c: int, load: np.ndarray, passes: int
) -> np.ndarray:
    chosen = [-1] * n_qp
    for it in range(passes * n_qp):
        q = it % n_qp
        if chosen[q] >= 0:
            f = q * c + chosen[q]
            for e in links[off[f] : off[f + 1]]:
                load[e] -= 1
        best, key = 0, None
        for k in range(c):
            p = links[off[q * c + k] : off[q * c + k + 1]]
            if p.size == 0:
                continue
            kk = (int(load[p].max()), int(load[p].sum()))
            if key is None or kk < key:
                best, key = k, kk
        chosen[q] = best
        for e in links[off[q * c + best] : off[q * c + best + 1]]:
            load[e] += 1
    return np.array(chosen)


@settings(max_examples=40, deadline=None)
@given(
    n_qp=st_.integers(1, 12),
    c=st_.integers(1, 4),
    n_links=st_.integers(1, 10),
    passes=st_.integers(1, 3),
    seed=st_.integers(0, 2**31),
)
def test_balance_pick_matches_reference(
    n_qp: int, c: int, n_links: int, passes: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    lens = rng.integers(0, 4, n_qp * c)
    off = np.concatenate([[0], np.cumsum(lens)]).astype(np.int64)
    links = rng.integers(0, n_links, int(off[-1])).astype(np.int64)
    l1 = np.zeros(n_links, dtype=np.int64)
    l2 = np.zeros(n_links, dtype=np.int64)
    got = K.balance_pick(off, links, n_qp, c, l1, passes)
    want = _balance_ref(off, links, n_qp, c, l2, passes)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(l1, l2)
    chosen_links = np.concatenate(
        [links[off[q * c + k] : off[q * c + k + 1]] for q, k in enumerate(got)]
    )
    np.testing.assert_array_equal(l1, np.bincount(chosen_links, minlength=n_links))


@settings(max_examples=40, deadline=None)
@given(st_.lists(st_.lists(st_.floats(0, 1e3), min_size=0, max_size=5), min_size=1, max_size=8))
def test_path_min_matches_loop(paths: list[list[float]]) -> None:
    off = np.concatenate([[0], np.cumsum([len(p) for p in paths])]).astype(np.int64)
    vals = np.array([v for p in paths for v in p], dtype=np.float64)
    got = _path_min(vals, off, -1.0)
    want = [min(p) if p else -1.0 for p in paths]
    np.testing.assert_allclose(got, want)


def test_hotspot_piles_qps_onto_one_uplink() -> None:
    topo = build_cluster(cluster_for(1024))
    job = compile_job(topo, SynthSpec(gpus=1024, seed=2, placement_seed=2))
    healthy = network_state(job, [], 2)
    lo = topo.links_of_kind(1)[0]
    cable = lo // 2 + 10
    hot = network_state(job, [Fault("ecmp_hotspot", cable, 1.0, 0)], 2)
    assert hot.nq[2 * cable] >= 5 > healthy.nq.max() + 2
