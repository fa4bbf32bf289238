"""NCCL algorithms as plans on a topology, checked against real nccl-tests logs (no fitting)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from starfabric.astral.collectives import nccl as N
from starfabric.astral.collectives.plan import Step
from starfabric.astral.collectives.protocols import PROTOCOLS, get_protocol, gpu_generation
from starfabric.astral.collectives.run import _halves, run_plan, step_paths
from starfabric.astral.nccltests import parse_nccl_tests
from starfabric.astral.topology import LINK_NIC, LINK_NVLINK, ClusterSpec, build
from starfabric.config import load_spec
from starfabric.errors import ConfigError

DATA = Path(__file__).parents[2] / "data" / "nccl_tests"
HW = DATA.parent / "nccl_hardware"
LOGS: dict[str, dict[str, object]] = yaml.safe_load((HW / "logs.yaml").read_text())["logs"]

KNOWN_MISSES = {
    "coreweave_gb200_nvl72_1rack_72gpu_all_reduce_excerpt.txt": "NVLS (the job set "
    "NCCL_NVLS_ENABLE=1, NCCL 2.25.1 with its 32 NVLS channels, logs.yaml) on one 72-GPU domain: "
    "the model runs each GPU link at NVLINK_EFF x nvlsEfficiency = 0.59 of 900 GB/s, as 8-GPU "
    "Blackwell NVLS does (8x B300: 483 GB/s algbw x 9/8 = 0.60, NVIDIA/nccl#2140); the rack "
    "moves 421 GB/s algbw x 33/32 = 434 GB/s per link direction (0.48) at 4-8 GiB: +19% there, "
    "+35-52% at 512 MiB-1 GiB (time-vs-size intercept 0.13 ms modelled, 0.57 ms in the log). "
    "The same ports carry 680 GB/s each way in Azure's 4-GPU GB200 ring (0.755; the model is "
    "+6%, test_gb200_ring_on_one_tray_matches_azures_published_busbw) and 430 in the 20-rack "
    "tree chain: rack-wide traffic, not the port, is slower, and no published source gives its "
    "rate or the extra fixed cost; NCCL's own search + tuner estimate is above the log too "
    "(+9% at 8 GiB, +54% at 512 MiB: test_search.py)",
    "coreweave_gb200_nvl72_2rack_144gpu_all_reduce_excerpt.txt": "NVLS-tree (NCCL_NVLS_ENABLE=1, "
    "NCCL 2.25.1: 32 channels, 128 KiB tree chunks at 2 nodes, logs.yaml) between 2 racks is "
    "bound by the same in-rack NVLS rate (the log's marginal 421 GB/s algbw equals 1 rack's, "
    "the model's 517): +23% at 16 GiB to +30% at 1-2 GiB, +25% at 512 MiB; 2.25.1's chunk "
    "moves the modelled intercept from 0.37 to 0.66 ms, the log's 1.06. The inter-rack hop runs "
    "without GPUDirect RDMA (2.25.1 has no NET_GDR_C2C and GB200's NIC path is PHB > PXB, "
    "paths.cc; the job sets no GDR level), yet does not bind: the rate is 1 rack's",
    "coreweave_gb200_nvl72_20rack_1440gpu_all_reduce_excerpt.txt": "NVLS off (the later job's "
    "NCCL_NVLS_ENABLE=0, NCCL 2.26.2 with NCCL_NET_GDR_C2C=1, logs.yaml): the tuner picks "
    "tree/Simple (LL128 is off over GB200's CPU-attached NICs in 2.26); the time-vs-size line "
    "(512 MiB-16 GiB) has a 4.1 ms intercept, the log's 4.9 ms (the fill of 142 NVLink hops of "
    "the 72-GPU chain), but a marginal 360 GB/s algbw, the log 215: +27% at 512 MiB to +64% at "
    "16 GiB. Bytes are counted as NCCL does: runTreeSplit (device/all_reduce.h) runs reduce-up "
    "and broadcast-down at once, so an interior chain GPU sends S/ch to its parent and S/ch to "
    "its child per channel, 2S per port direction, and NCCL's tuner halves tree busBw the same "
    "way; 360 is the port (720 GB/s) / 2, the log's 215 x 2 = 430 is the 1-rack NVLS rate per "
    "direction again. The model's 32 rails carry 3 shards per interior rack, 517 GB/s; NCCL 2.27 "
    "raised to 16 the NICs used between MNNVL domains on GB200 (release notes), so 2.26.2 used "
    "fewer, a count its search (search.cc on the fused 72-GPU topology) does not publish",
}

MEETS_FROM_64MIB = {
    "aws_p5_1node_h100_nvswitch_all_reduce_awsbatch.txt",
    "gcp_a3mega_2node_h100_tcpxo_all_gather.txt",
    "gcp_a3high_2node_h100_tcpx_all_gather.txt",
    "lambda_1cc_2node_b200_ib_all_reduce.txt",
    "nebius_2node_8gpu_ib_all_reduce.txt",
    "coreweave_h100_64gpu_ib_sharp_all_reduce_excerpt.txt",
    "superbench_1node_8xa100_40gb_nccl_allreduce.log",
}
"""Logs whose every row from 64 MiB up is within 15% (the others only from 1 GiB up). p4de's
64 MiB row (+20%) left when the tree fill stopped charging the steady per-flow share: EFA's
per-step latency above NCCL's IB hwLat is not modelled."""


def _log_shape(topo: object, entry: dict[str, object]) -> N.NcclShape:
    """The communicator the log's job saw: its ranks on the cluster, with the NCCL environment
    its published job set (logs.yaml `nccl_env`)."""
    shape = N.shape_of(topo, int(entry["gpus"]))  # type: ignore[arg-type, call-overload]
    env = entry.get("nccl_env") or {}
    return N.with_nccl_env(shape, env, "logs.yaml nccl_env")  # type: ignore[arg-type]


def _errors(log: str, min_bytes: int) -> list[tuple[int, float]]:
    entry = LOGS[log]
    run = parse_nccl_tests(DATA / log).at_least(min_bytes)
    spec = load_spec(ClusterSpec, HW / str(entry["cluster"]))
    topo = build(spec)
    shape = _log_shape(topo, entry)
    out = []
    algo = str(entry.get("algo", "auto"))  # NCCL_ALGO where the run forced it
    for size, meas in zip(run.size_bytes, run.busbw_mean_gbps, strict=True):
        plan = N.nccl_collective(run.collective, shape, float(size), algo)
        res = run_plan(topo, plan, transport=spec.transport, rel_tol=0.02)
        out.append((int(size), res.busbw_gbps / float(meas) - 1.0))
    return out


@pytest.mark.parametrize(
    "log",
    [
        pytest.param(
            name,
            marks=pytest.mark.xfail(reason=KNOWN_MISSES[name], strict=True)
            if name in KNOWN_MISSES
            else (),
        )
        for name in LOGS
    ],
)
def test_nccl_tests_busbw_within_15pct_from_1gib(log: str) -> None:
    errs = _errors(log, 2**30)
    assert errs, f"{log} has no rows >= 1 GiB"
    worst = max(abs(e) for _, e in errs)
    assert worst <= 0.15, f"{log}: {[(s >> 20, round(e, 3)) for s, e in errs]}"


@pytest.mark.parametrize("log", sorted(MEETS_FROM_64MIB))
def test_nccl_tests_busbw_within_15pct_from_64mib(log: str) -> None:
    errs = _errors(log, 64 * 2**20)
    worst = max(abs(e) for _, e in errs)
    assert worst <= 0.15, f"{log}: {[(s >> 20, round(e, 3)) for s, e in errs]}"


def _shape(ranks: int, local: int = 8, gen: str = "hopper", **kw: object) -> N.NcclShape:
    return N.NcclShape(ranks=ranks, local=local, generation=gen, **kw)  # type: ignore[arg-type]


def test_double_binary_tree_each_node_interior_in_at_most_one_tree() -> None:
    for m in (2, 3, 5, 8, 13, 64, 127, 128):
        (c1, p1), (c2, p2) = N._dbt(m)
        for c, p in ((c1, p1), (c2, p2)):
            assert len(c) == m - 1  # a spanning tree: m-1 edges
            assert (np.bincount(p, minlength=m) <= 2).all()  # binary
        interior1 = np.bincount(p1, minlength=m) > 0
        interior2 = np.bincount(p2, minlength=m) > 0
        # mirrored (even m): no node is interior twice; shifted (odd m): at most one
        assert (interior1 & interior2).sum() <= (m % 2)


def test_ring_channels_are_rail_matched_and_conserve_bytes() -> None:
    shape = _shape(32)
    size = 2.0**30
    plan = N.nccl_ring("all_reduce", shape, size)
    (step,) = plan.steps
    cross = step.src // 8 != step.dst // 8
    # network crossings stay on one rail: same local index on both hosts (even host count)
    assert (step.src[cross] % 8 == step.dst[cross] % 8).all()
    # every rank sends 2(n-1)/n of the buffer in all, as a ring all-reduce must
    sent = plan.bytes_sent_per_rank()
    assert np.allclose(sent, 2 * 31 / 32 * size)
    # every NIC carries the same number of crossings
    per_nic = np.bincount(step.src[cross], minlength=32)
    assert per_nic.min() == per_nic.max()


def test_tuner_choices_follow_nccls_rules() -> None:
    assert N.choose("all_reduce", _shape(8, gen="ampere"), 2**30)[0] == "ring"
    assert N.choose("all_reduce", _shape(8), 2**30) == ("nvls", "Simple")
    assert N.choose("all_reduce", _shape(16), 2**30)[0] == "nvls_tree"
    p4de = _shape(16, gen="ampere", nvlink_gbs=300.0, nic_gbs=6.25)
    assert N.choose("all_reduce", p4de, 2**30)[0] == "tree"
    assert N.choose("all_gather", _shape(16), 2**30)[0] == "ring"
    # small messages go to a low-latency protocol
    assert N.choose("all_reduce", _shape(16, gen="ampere"), 4096)[1] in ("LL", "LL128")
    assert N.choose("alltoall", _shape(16), 2**30) == ("pxn", "Simple")
    with pytest.raises(ConfigError):
        N.nccl_collective("all_reduce", _shape(16), 2**20, "collnet_direct")


def test_protocol_constants_are_ncclss() -> None:
    simple = get_protocol("simple")
    assert simple.step_bytes == 512 * 1024  # 4 MiB / NCCL_STEPS
    assert simple.chunk_bytes("ring") == 2 * 2**20
    assert PROTOCOLS["LL"].bw_fraction == 0.5
    assert PROTOCOLS["LL128"].bw_fraction == 120 / 128
    assert simple.hw_us("net", "ring") == 14.0 and simple.base_us("ring") == 8.4
    assert gpu_generation("GB200") == "blackwell" and gpu_generation("A100") == "ampere"


def _small_topo(**kw: object) -> object:
    base = dict(
        name="t",
        topology="fat-tree",
        gpu="H100",
        switch="25.6T",
        port_speed="400G",
        nic="CX7-400G",
        dual_tor=False,
        gpus=1024,
    )
    base.update(kw)
    return build(ClusterSpec(**base))  # type: ignore[arg-type]


def test_half_paths_keep_only_the_switch_link() -> None:
    ptr = np.array([0, 3, 5, 5])
    links = np.array([10, 11, 12, 20, 21])
    p, lk = _halves(ptr, links, np.array([1, 2, 0]))
    assert p.tolist() == [0, 1, 2, 2] and lk.tolist() == [10, 21]
    topo = _small_topo(gpus=1024)
    step = Step(
        np.array([0, 1]),
        np.array([1, 0]),
        np.array([1.0, 1.0]),
        np.zeros(2, np.int64),
        "x",
        half=np.array([1, 2]),
    )
    ptr2, links2 = step_paths(topo, step, np.arange(8))  # type: ignore[arg-type]
    lo, hi = topo.links_of_kind(LINK_NVLINK)  # type: ignore[attr-defined]
    assert np.diff(ptr2).tolist() == [1, 1] and ((links2 >= lo) & (links2 < hi)).all()


def test_nvls_beats_ring_inside_a_hopper_host_and_is_nvlink_bound() -> None:
    topo = _small_topo(gpus=1024)
    shape = N.shape_of(topo, 8)  # type: ignore[arg-type]
    nv = run_plan(topo, N.nvls("all_reduce", shape, 2.0**32))  # type: ignore[arg-type]
    rg = run_plan(topo, N.nccl_ring("all_reduce", shape, 2.0**32))  # type: ignore[arg-type]
    assert nv.busbw_gbps > rg.busbw_gbps
    # NVLS moves ~S(1+1/n) per GPU link: algbw <= NVLink x efficiencies
    bound = 450 * N.NVLINK_EFF * 0.85
    assert nv.algbw_gbps <= bound * 8 / 9 * 1.001


def test_adaptive_routing_balances_what_ecmp_collides() -> None:
    topo = _small_topo(gpus=1024)
    shape = N.shape_of(topo, 256)  # type: ignore[arg-type]
    plan = N.nvls_tree(shape, 2.0**30)
    ecmp = run_plan(topo, plan, transport="roce")  # type: ignore[arg-type]
    ar = run_plan(topo, plan, transport="ib")  # type: ignore[arg-type]
    assert ar.time_s < ecmp.time_s
    nic_lo, nic_hi = topo.links_of_kind(LINK_NIC)  # type: ignore[attr-defined]
    # bytes are the same either way; only where they go changes
    assert np.isclose(ar.link_bytes[nic_lo:nic_hi].sum(), ecmp.link_bytes[nic_lo:nic_hi].sum())


def test_nccl_plans_pay_tunings_latency_once() -> None:
    """tuning.cc's latency covers every step of a NCCL plan: run_plan's generic per-step
    latency (for step-by-step plans) must not be added on top."""
    topo = _small_topo(gpus=1024)
    plan = N.nccl_ring("all_gather", _shape(16), 2.0**24)
    fast = run_plan(topo, plan, step_latency_s=0.0)  # type: ignore[arg-type]
    slow = run_plan(topo, plan, step_latency_s=1e-3)  # type: ignore[arg-type]
    assert fast.time_s == slow.time_s
    assert fast.time_s == pytest.approx(
        plan.notes["latency_s"] + fast.steps[0].time_s
    )  # ring: no fill


def test_run_plan_rejects_unknown_transport() -> None:
    topo = _small_topo(gpus=1024)
    with pytest.raises(ConfigError):
        run_plan(topo, N.nccl_ring("all_gather", _shape(16), 2.0**20), transport="x")  # type: ignore[arg-type]


def _fit_line(log: str) -> tuple[tuple[float, float], tuple[float, float]]:
    """(intercept s, slope s/B) of time against size, the log's and the model's, >= 512 MiB."""
    entry = LOGS[log]
    run = parse_nccl_tests(DATA / log).at_least(2**29)
    spec = load_spec(ClusterSpec, HW / str(entry["cluster"]))
    topo = build(spec)
    ranks = int(entry["gpus"])  # type: ignore[call-overload]
    shape = _log_shape(topo, entry)
    sizes = np.asarray(run.size_bytes, float)
    measured = sizes * 2 * (ranks - 1) / ranks / np.asarray(run.busbw_mean_gbps) / 1e9
    algo = str(entry.get("algo", "auto"))
    model = [
        run_plan(
            topo, N.nccl_collective("all_reduce", shape, s, algo), transport=spec.transport
        ).time_s
        for s in sizes
    ]
    slope_m, icpt_m = np.polyfit(sizes, measured, 1)
    slope_s, icpt_s = np.polyfit(sizes, model, 1)
    return (float(icpt_m), float(slope_m)), (float(icpt_s), float(slope_s))


def test_nvls_tree_fixed_cost_matches_the_two_node_h100_log() -> None:
    """The H100 IB log that ran NCCL's tuner choice between nodes (Nebius, 2 nodes, NVLS-tree of
    depth 1): what the model adds to the bandwidth part (NCCL's latency + the NVLink and
    network pipeline fill) is the log's intercept of time against size. No log here has an
    NVLS tree deeper than one level (CoreWeave's 8-node H100 run forced CollNet chain over
    SHARP); the B200 2-node logs' intercepts are ~30% above the model's (Blackwell's NVLS fill
    is not checked by them: they are NIC-bound)."""
    (icpt_m, _), (icpt_s, _) = _fit_line("nebius_2node_8gpu_ib_all_reduce.txt")
    assert abs(icpt_s / icpt_m - 1) < 0.15, (icpt_s * 1e6, icpt_m * 1e6)


def test_sharp_collnet_chain_log_is_nvlink_chain_bound() -> None:
    """CoreWeave's 8-node H100 SHARP log ran NCCL_ALGO=COLLNETCHAIN: the chain through each
    node's 8 GPUs moves ~2 x 7/8 of the buffer per GPU over NVLink, the switches reduce, so the
    marginal rate (slope of time against size) is NVLink's, not the NICs'. Its intercept
    (317 us) is well above the model's (NCCL's CollNet-chain latency + fill, ~180 us): SHARP's
    per-operation cost is not modelled, and the slope is what this checks."""
    (_, slope_m), (_, slope_s) = _fit_line("coreweave_h100_64gpu_ib_sharp_all_reduce_excerpt.txt")
    assert abs(slope_s / slope_m - 1) < 0.06, (1 / slope_s / 1e9, 1 / slope_m / 1e9)
    plan = N.nccl_collective("all_reduce", _shape(64, sharp=True), 2.0**30, "collnet_chain")
    (step,) = plan.steps
    assert plan.algorithm == "collnet_chain" and plan.notes["chunk_bytes"] == 128 * 1024
    assert step.half is not None  # each host's heads send S into the switches, get S back
    assert np.isclose(step.size_bytes[step.half == 1].sum(), 8 * 2.0**30)
    assert np.isclose(step.size_bytes[step.half == 2].sum(), 8 * 2.0**30)
    with pytest.raises(ConfigError, match="in-network"):
        N.nccl_collective("all_reduce", _shape(64), 2.0**30, "collnet_chain")


def test_nvl72_domains_have_32_nvls_heads() -> None:
    """NCCL's NVLS graph keeps min(32, GPUs) heads (NCCL_MAX_NVLS_ARITY): in a 72-GPU domain
    only 32 GPUs own a shard, store it and, across domains, send it over their NICs."""
    one = _shape(72, local=72, gen="blackwell", nvlink_gbs=900.0)
    size = 2.0**30
    (step,) = N.nvls("all_reduce", one, size).steps
    up = np.bincount(step.src[step.half == 1], weights=step.size_bytes[step.half == 1])
    heads = np.arange(72) < 32
    assert np.allclose(up[heads], size * 33 / 32) and np.allclose(up[~heads], size)
    two = _shape(144, local=72, gen="blackwell", nvlink_gbs=900.0)
    (tstep,) = N.nvls_tree(two, size).steps
    net = tstep.half is not None and tstep.half == 0
    senders = np.unique(tstep.src[net] % 72)
    assert senders.tolist() == list(range(32))
    # per domain and direction the heads move the whole buffer once between the two domains
    assert np.isclose(tstep.size_bytes[net].sum(), 2 * size)
    # all_gather / reduce_scatter need every GPU a head: no NVLS beyond 32 GPUs
    assert ("nvls", "Simple") not in N.enabled("all_gather", one)
    assert ("nvls", "Simple") in N.enabled("all_gather", _shape(8))
    with pytest.raises(ConfigError, match="every GPU a head"):
        N.nvls("reduce_scatter", one, size)


def test_nccl_env_disables_nvls_and_collnet_in_the_tuner() -> None:
    """NCCL_NVLS_ENABLE=0 / NCCL_COLLNET_ENABLE=0 take those algorithms out of `enabled` (and so
    out of `choose`); an unknown variable or value is a ConfigError naming where it came from."""
    sharp = _shape(64, sharp=True)
    assert ("nvls_tree", "Simple") in N.enabled("all_reduce", sharp)
    assert ("collnet_direct", "Simple") in N.enabled("all_reduce", sharp)
    off = N.with_nccl_env(sharp, {"NCCL_NVLS_ENABLE": 0, "NCCL_COLLNET_ENABLE": "0"})
    algos = {a for a, _ in N.enabled("all_reduce", off)}
    assert algos == {"ring", "tree"}
    assert N.choose("all_reduce", off, 2**30)[0] in ("ring", "tree")
    one = N.with_nccl_env(_shape(8), {"nccl_nvls_enable": "0"})
    assert N.choose("all_reduce", one, 2**30)[0] == "ring"
    assert N.with_nccl_env(one, {"NCCL_NVLS_ENABLE": 1}).nvls_enable
    with pytest.raises(ConfigError, match=r"logs\.yaml"):
        N.with_nccl_env(one, {"NCCL_ALGO": "ring"}, "logs.yaml")
    with pytest.raises(ConfigError, match="=0 or"):
        N.with_nccl_env(one, {"NCCL_NVLS_ENABLE": "yes"})


def test_nccl_env_sets_nvls_channels_and_tree_chunk_as_225_did() -> None:
    """NCCL 2.25/2.26 ran 32 NVLS channels on every Blackwell communicator (nvls.cc
    NVLS_NCHANNELS_SM100) and NVLS-tree chunks of 128 KiB below 4 nodes (enqueue.cc); 2.27+
    runs 24 in one NVLink domain and 64 KiB at 2 nodes of >= 16 GPUs. The logs.yaml env
    (NCCL_NVLS_NCHANNELS, NCCL_NVLSTREE_MAX_CHUNKSIZE) gives the older values back."""
    rack = _shape(72, local=72, gen="blackwell", nvlink_gbs=900.0)
    two = _shape(144, local=72, gen="blackwell", nvlink_gbs=900.0)
    assert rack.channels("nvls") == 24 and two.chunk_bytes("nvls_tree", "Simple", 2**34) == 65536
    old = N.with_nccl_env(rack, {"NCCL_NVLS_NCHANNELS": "32"})
    assert old.channels("nvls") == 32 and old.channels("ring") == rack.channels("ring")
    env = {"NCCL_NVLS_NCHANNELS": 32, "NCCL_NVLSTREE_MAX_CHUNKSIZE": 131072}
    old2 = N.with_nccl_env(two, env)
    assert old2.channels("nvls_tree") == 32
    assert old2.chunk_bytes("nvls_tree", "Simple", 2**34) == 131072
    assert N.with_nccl_env(rack, {"NCCL_NVLS_NCHANNELS": 64}).channels("nvls") == 32  # maxCTAs
    for bad in ("0", "-1", "many"):
        with pytest.raises(ConfigError, match="positive integer"):
            N.with_nccl_env(rack, {"NCCL_NVLS_NCHANNELS": bad})


def test_ll128_stays_off_between_racks_over_gb200s_cpu_attached_nics() -> None:
    """GB200's NICs hang off Grace (catalog nic_attach: cpu): NCCL 2.26 keeps LL128 only where
    the GPU-NIC path is <= PXN, and this one is PHB, so between racks the tuner has Simple and LL
    (NCCL_LL128_C2C=0 in logs.yaml); inside one NVLink domain, and on HGX hosts, LL128 stays."""
    topo = build(load_spec(ClusterSpec, HW / "coreweave-gb200-nvl72-2rack.yaml"))
    two = N.shape_of(topo, 144)
    assert two.nic_via_c2c and ("tree", "LL128") in N.enabled("all_reduce", two)
    old = N.with_nccl_env(two, {"NCCL_LL128_C2C": 0})
    assert not any(p == "LL128" for _, p in N.enabled("all_reduce", old))
    one = N.with_nccl_env(N.shape_of(topo, 72), {"NCCL_LL128_C2C": 0})
    assert ("ring", "LL128") in N.enabled("all_reduce", one)
    hgx = N.with_nccl_env(_shape(16), {"NCCL_LL128_C2C": 0})
    assert not hgx.nic_via_c2c and ("tree", "LL128") in N.enabled("all_reduce", hgx)
    # the 20-rack log's job (NVLS off): NCCL's tree with Simple at every size it printed
    log = "coreweave_gb200_nvl72_20rack_1440gpu_all_reduce_excerpt.txt"
    topo20 = build(load_spec(ClusterSpec, HW / str(LOGS[log]["cluster"])))
    twenty = _log_shape(topo20, LOGS[log])
    sizes = parse_nccl_tests(DATA / log).size_bytes
    assert {N.choose("all_reduce", twenty, float(s)) for s in sizes} == {("tree", "Simple")}


AZURE_GB200 = DATA.parent / "published_runs" / "azure_nd_gb200_v6_4gpu_all_reduce_ring_busbw.csv"


def test_gb200_ring_on_one_tray_matches_azures_published_busbw() -> None:
    """Held out from the CoreWeave logs: Azure's ND GB200 v6 (4 GPUs of an NVL72 rack, NCCL
    2.25.1, NCCL_ALGO=Ring) publishes in-place busbw 551-680 GB/s from 64 MiB to 8 GiB. The
    ring runs each GPU's NVLink to the rack's switch trays both ways at once, as the 72-GPU
    NVLS and tree logs do, and the model's NVLink rate (NVLINK_EFF of 900 GB/s) reproduces it
    within 15%: what the 72-GPU logs lose is not the port's rate (issue 21)."""
    rows = np.genfromtxt(AZURE_GB200, delimiter=",", comments="#", skip_header=7)
    topo = build(load_spec(ClusterSpec, HW / "azure-nd-gb200-v6-1vm.yaml"))
    shape = N.shape_of(topo, 4)
    assert (shape.local, shape.generation, shape.nvlink_gbs) == (4, "blackwell", 900.0)
    errs = []
    for size, meas in rows:
        proto = min(
            ("LL", "LL128", "Simple"),
            key=lambda p: N.tuner_time_s("all_reduce", "ring", p, float(size), shape),
        )
        plan = N.nccl_collective("all_reduce", shape, float(size), "ring", proto)
        res = run_plan(topo, plan, transport="ib", rel_tol=0.02)
        errs.append((int(size) >> 20, proto, round(res.busbw_gbps / meas - 1.0, 3)))
    assert len(errs) == 8 and all(abs(e) <= 0.15 for *_, e in errs), errs
