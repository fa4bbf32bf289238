"""NCCL all-to-all over AWS EFA on p5 / p6 hosts: a fixed time per call.

Seer prices a cross-host all-to-all as a bandwidth term ((n-g)/n of the buffer over each GPU's
NIC at the bus fraction) plus an InfiniBand-style latency of 10 us + 5 us per log2 step
(`comm.collective_time`). That bandwidth term reproduces NCCL's asymptotic rate on EFA (p5,
2 nodes: 88 GB/s modelled vs 84.5 GB/s algbw measured at 2 GB), but at the 16-64 MiB buffers
of an expert dispatch the measured time is larger by a near-constant amount per call: NCCL's
peer-to-peer path over aws-ofi-nccl (libfabric, SRD; each send posted by the CPU proxy with
a receiver-side rendezvous) fills its pipeline more slowly than IB verbs.

Source and calibration (not the training rows this is applied to): AWS's own `alltoall_perf`
runs in awslabs/awsome-distributed-ai @95b939c,
`micro-benchmarks/expert-parallelism/ep-backend-comparison/RESULTS-p5.md` (p5.48xlarge, 32 EFA
per node, 2026-06-22) and `RESULTS.md` (p6-b300.48xlarge, 16 EFA per node, 2026-06-21 primary
and 2026-07-14 scale run), which print for each node count the bus bandwidth at the EP payload
("matched-size", ~64 MiB) and the asymptotic peak. With nccl-tests' definitions (algbw = S / t,
busbw = algbw (n-1)/n) a linear time t(S) = t0 + S / B through the two points gives

    t0 = S (n-1)/n (1 / busbw_matched - 1 / busbw_peak),

one value per measured (platform, node count) pair (`EFA_ALLTOALL_PAIRS`, S = 64 MiB). The
nine pairs give 0.11-0.34 ms; `EFA_ALLTOALL_FIXED_S` is their median, 0.25 ms. Checked against
an independent p5 sweep (github.com/crazyguitar/aws-gpu-communication-benchmark @a77f70d,
`data/nccl_alltoall.csv`, SageMaker HyperPod p5.48xlarge): 32 MiB against 2 GiB there gives
t0 = 0.31 ms at 2 nodes and 0.34 ms at 4 (`CRAZYGUITAR_P5_SWEEP`, tested); the same sweep grows
to 0.49 / 0.60 / 0.88 ms at 8 / 16 / 32 nodes, which the AWS pairs (0.27-0.34 ms at 8-32 nodes)
do not show, so no node-count dependence is modelled. aws-ofi-nccl's platform table
(`src/platform-aws.cpp`: internode latency 75 us on p5/p5e, 35 us on p5en/p6) is the plugin's
latency hint to NCCL's tuner, not a per-call time, and is not used.

Applied (`validate`) to a row whose interconnect cell names EFA and whose GPU is not an A100:
p5/p5e/p5en (H100/H200) and p6 (B200/B300) are the EFA generations these runs measured; the
p4d A100 generation is `efa.py`'s. Every all-to-all that crosses hosts then costs t0 in place
of the IB latency term (35 us at 32 ranks) + the bandwidth term (`efficiency.
collective_bus_fractions.all_to_all.nic_alpha_s`); all-to-alls inside a host do not change.
"""

from __future__ import annotations

import statistics

from starfabric.astral.seer.statements import names_efa

MIB = 1 << 20

EFA_ALLTOALL_PAYLOAD_BYTES = 64 * MIB
"""The "EP payload (~64 MiB)" buffer at which AWS's tables quote the matched-size busbw."""

EFA_ALLTOALL_PAIRS: tuple[tuple[str, int, int, float, float], ...] = (
    # (platform, nodes, ranks, busbw at the EP payload GB/s, asymptotic peak busbw GB/s)
    ("p5.48xlarge", 4, 32, 45.1, 53.9),  # RESULTS-p5.md, 4 nodes
    ("p5.48xlarge", 8, 64, 40.4, 51.1),  # RESULTS-p5.md, 8 nodes
    ("p6-b300.48xlarge", 4, 32, 93.9, 116.9),  # RESULTS.md primary, 4 nodes
    ("p6-b300.48xlarge", 8, 64, 72.5, 103.1),  # RESULTS.md primary, 8 nodes
    ("p6-b300.48xlarge", 2, 16, 104.9, 179.6),  # RESULTS.md scale run (2026-07-14)
    ("p6-b300.48xlarge", 4, 32, 94.0, 116.9),
    ("p6-b300.48xlarge", 8, 64, 74.0, 103.2),
    ("p6-b300.48xlarge", 16, 128, 73.8, 84.0),
    ("p6-b300.48xlarge", 32, 256, 54.7, 74.4),
)
"""nccl-tests `alltoall_perf` bus bandwidths AWS published for its EP-backend comparison
(awslabs/awsome-distributed-ai @95b939c, ep-backend-comparison RESULTS-p5.md / RESULTS.md)."""

CRAZYGUITAR_P5_SWEEP: tuple[tuple[int, int, float, float, float], ...] = (
    # (nodes, ranks, size MiB, out-of-place algbw GB/s at that size, algbw at 2 GiB)
    (2, 16, 32, 47.78, 84.53),
    (4, 32, 32, 35.56, 55.82),
    (4, 32, 64, 44.53, 55.82),
)
"""Independent p5 check: crazyguitar/aws-gpu-communication-benchmark `data/nccl_alltoall.csv`."""


def fixed_time_s(size_bytes: float, ranks: int, busbw: float, peak_busbw: float) -> float:
    """Seconds of one all-to-all not explained by its asymptotic rate: the intercept of the line
    through (S, t(S)) with slope 1 / peak, from nccl-tests bus bandwidths in GB/s."""
    share = size_bytes * (ranks - 1) / ranks
    return share * (1.0 / busbw - 1.0 / peak_busbw) / 1e9


def algbw_fixed_time_s(size_bytes: float, algbw: float, peak_algbw: float) -> float:
    """The same intercept from algorithm bandwidths (GB/s), as the crazyguitar sweep prints."""
    return size_bytes * (1.0 / algbw - 1.0 / peak_algbw) / 1e9


def pair_fixed_times_s() -> tuple[float, ...]:
    """`fixed_time_s` of every AWS pair, in table order."""
    return tuple(
        fixed_time_s(EFA_ALLTOALL_PAYLOAD_BYTES, ranks, bw, peak)
        for _, _, ranks, bw, peak in EFA_ALLTOALL_PAIRS
    )


EFA_ALLTOALL_FIXED_S = round(statistics.median(pair_fixed_times_s()), 5)
"""Fixed seconds per cross-host NCCL all-to-all on p5/p6 EFA: median of the AWS pairs (0.25 ms)."""


def efa_alltoall_alpha(interconnect: str | None, gpu_family: str) -> float | None:
    """`EFA_ALLTOALL_FIXED_S` when an interconnect cell names AWS EFA on a GPU other than an
    A100 (p5/p5e/p5en/p6), else None (the step-latency model stands)."""
    if gpu_family == "A100" or not names_efa(interconnect):
        return None
    return EFA_ALLTOALL_FIXED_S


__all__ = [
    "CRAZYGUITAR_P5_SWEEP",
    "EFA_ALLTOALL_FIXED_S",
    "EFA_ALLTOALL_PAIRS",
    "EFA_ALLTOALL_PAYLOAD_BYTES",
    "algbw_fixed_time_s",
    "efa_alltoall_alpha",
    "fixed_time_s",
    "pair_fixed_times_s",
]
