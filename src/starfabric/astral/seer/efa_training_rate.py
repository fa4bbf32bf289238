"""All-to-all over p5/p6 EFA inside a Megatron training step: the rate AWS's own dispatcher
A/B implies, against the rate nccl-tests shows.

Seer prices a cross-host all-to-all at 0.88 of each GPU's NIC line rate plus a fixed 0.25 ms per
call (`efa_alltoall`); that reproduces AWS's `alltoall_perf` tables on p5 and p6-b300 (0.84-0.90
of line rate at 2-8 nodes, asymptotically) and an independent p5 sweep. Inside a training step the
same transfers are slower, and by far more than any nccl-tests figure allows.

Source (not a development row): awslabs/awsome-distributed-ai @95b939c,
`3.test_cases/megatron/megatron-bridge/kimi-k2/benchmarks/RESULTS.md` — literal Kimi-K2 (61
layers, 384 experts, top-8, MLA, no MTP) on p6-b300, TP8/EP32 (4 hosts per EP group), GBS 256,
seq 4096, forced balance, full recompute with the overlap off (`bench_kimi_k2_pretrain.py`),
Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1; the only toggle between arms is the dispatcher:
NCCL `alltoall` or DeepEP (UCCL over EFA) through `flex`, same campaign. At micro-batch 4 the
NCCL arm is slower by 3.262 s (32 hosts, PP8: 9.303 vs 6.041 s) and 5.529 s (16 hosts, PP4:
15.381 vs 9.852 s) — the same 18.6 / 19.1 ms per layer and pipeline slot at both scales, so the
number of hosts running at once (16 or 32) does not matter. Everything but the dispatch and
combine is the same work in both arms (the source checks the loss curves), so the difference is
all-to-all time: Seer with nccl-tests rates gives 1.03 / 1.72 s (the NCCL arm's whole exposed
all-to-all is 1.2 / 2.4 s). One in-training fraction f of the NIC line rate, applied to both
arms' cross-host traffic, reproduces both differences at f = 0.372 (32 hosts) / 0.366 (16 hosts)
(`KIMI_K2_AB`, refit by tests/astral/seer/test_efa_training_rate.py); `EFA_A2A_TRAINING_FRACTION`
= 0.37. The Kimi-K2 NCCL arms then come out -10/-9% (micro-batch 4), the DeepSeek-V3 DeepEP arm
of the same campaign -12% (not fitted; -3% before `bridge_layout` gave the DeepSeek-V3 rows the
recipe's own pipeline split, which leaves the MTP stage one decoder layer instead of seven).

What it is not (checked): the payload (Megatron-Core core_v0.17.1 `MoEAlltoAllTokenDispatcher`:
no TP all-gather before the dispatch with ETP 1, the rank's sequence-parallel shard of s*b/TP
tokens x top-k x hidden, as `ops._moe_mlp` sends, plus the probabilities' all-to-all,
`moe_probs_a2a`); the node span or peer count (nccl-tests' per-GPU cross-host rate on p6-b300 is
90-96 GB/s at 2-8 hosts, AWS RESULTS.md); hosts busy at once (16 vs 32 above). No public
measurement names the cause (the CPU proxy that posts every EFA send, PCIe sharing with the
GPU's other traffic, and the NCCL/aws-ofi-nccl releases of the NeMo 26.04 image — NCCL 2.29.3 —
against the benchmark image's are candidates; none is sourced). The fraction is therefore an
empirical in-training efficiency, like the attention kernels' in-training factor, not a derived
rate; it is applied where it was measured — NCCL and DeepEP all-to-alls across p5/p6 EFA hosts
in a training step (`validate`, as `efficiency.collective_bus_fractions.all_to_all.nic`) — and
p5 (EFAv2, 4 x 100 Gb/s per GPU) takes it as an assumption (same NCCL network path and plugin;
no p5 A/B bounds it: DeepEP is slower than NCCL there).
"""

from __future__ import annotations

from starfabric.astral.seer.efa_alltoall import efa_alltoall_alpha

KIMI_K2_AB: tuple[tuple[int, int, int, bool, float, float], ...] = (
    # (hosts, pp, micro-batch, EP overlap on, NCCL alltoall s/iter, DeepEP+UCCL s/iter)
    (32, 8, 4, True, 5.793, 3.834),
    (32, 8, 4, False, 9.303, 6.041),
    (32, 8, 1, False, 12.88, 14.98),
    (16, 4, 4, True, 8.090, 6.420),
    (16, 4, 4, False, 15.381, 9.852),
    (16, 4, 1, False, 23.76, 26.59),
)
"""AWS's Kimi-K2 dispatcher A/B on p6-b300 (RESULTS.md headline and 16-node appendix). The fit
uses the micro-batch-4, overlap-off cells: at micro-batch 1 DeepEP's per-dispatch overhead
(unmodelled) makes it the slower arm, and the overlap-on cells depend on Seer's EP overlap."""

EFA_A2A_TRAINING_FRACTION = 0.37
"""Fraction of each GPU's EFA line rate an all-to-all moves inside a training step on p5/p6
(fit to `KIMI_K2_AB` on p6-b300; nccl-tests alone give 0.88, `efficiency.nic_bus_fraction`).
On p5 it is an assumption: no p5 A/B bounds it (DeepEP is the slower arm there)."""


def efa_a2a_training_fraction(interconnect: str | None, gpu_family: str) -> float | None:
    """`EFA_A2A_TRAINING_FRACTION` for a row whose interconnect names EFA on a GPU other than an
    A100 (p5/p5e/p5en/p6): exactly the rows `efa_alltoall.efa_alltoall_alpha` gives a fixed
    per-call time, else None."""
    if efa_alltoall_alpha(interconnect, gpu_family) is None:
        return None
    return EFA_A2A_TRAINING_FRACTION


__all__ = ["EFA_A2A_TRAINING_FRACTION", "KIMI_K2_AB", "efa_a2a_training_fraction"]
