"""TorchTitan's 2024-12 Llama without torch.compile: the unfused elementwise traffic counted
from its code (torchtitan 9dec370), checked against the same benchmark's compiled BF16 runs,
which are not development rows (seer/torchtitan_eager.py)."""

from pathlib import Path

import pytest

from starfabric.astral.seer import torchtitan_eager as te
from starfabric.astral.seer.ops import layer_ops
from starfabric.astral.seer.validate import read_rows, row_setup, validate_row

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"

# (bytes read, bytes written) per element of each eager kernel, BF16 activations, fp32 math.
RMSNORM_KERNELS = [(2, 4), (4, 4), (4, 0), (4, 4), (4, 2), (2, 2)]
"""x.float(), x.pow(2), .mean(-1), x * rsqrt(...), .type_as(x), * weight (norms.RMSNorm)."""
ROPE_KERNELS = [(2, 4), (4, 4), (4, 2)]
"""xq.float(), complex product with freqs_cis, .type_as(xq) (model.apply_rotary_emb)."""
SWIGLU_KERNELS = [(2, 2), (4, 2)]
"""F.silu(w1 x); its product with w3 x (model.FeedForward.forward)."""

COMPILED_OVER_EAGER = {"TT24-T13-01": 6667 / 5762, "TT24-T13-03": 6514 / 5605}
"""TorchTitan llama3_h100_202412 Tables 1 and 3: 'FSDP + torch.compile' over 'FSDP' TPS/GPU,
the same BF16 jobs (the compiled lines are not rows)."""


def test_bytes_are_the_sum_of_the_eager_kernels() -> None:
    assert sum(r + w for r, w in RMSNORM_KERNELS) == te.EAGER_NORM_BYTES
    assert sum(r + w for r, w in ROPE_KERNELS) == te.EAGER_ROPE_BYTES
    assert sum(r + w for r, w in SWIGLU_KERNELS) == te.EAGER_SWIGLU_BYTES
    assert te.EAGER_NORM_BYTES > te.FUSED_NORM_BYTES
    assert te.EAGER_SWIGLU_BYTES > te.FUSED_SWIGLU_BYTES


@pytest.mark.parametrize(
    ("framework", "eager"),
    [
        ("TorchTitan (PyTorch nightly 2024-12, FSDP2, eager: no torch.compile)", True),
        ("TorchTitan (PyTorch nightly 2024-12, FSDP2, torch.compile)", False),
        ("TorchTitan (2024-12; FSDP2, without torch.compile)", True),
        # after 3b39d7a (2025-03-19) the norm is nn.RMSNorm, not counted here
        ("TorchTitan DistMoE (2026-10; CuTe DSL dist_moe kernels; eager, no CUDA graph)", False),
        ("TorchTitan (eager)", False),  # no date: the release is unknown
        ("Megatron-Core 0.12 (eager)", False),
    ],
)
def test_which_runs_are_eager(framework: str, eager: bool) -> None:
    assert te.runs_eager(framework) is eager


def test_eager_ops_are_added_only_when_stated_and_rerun_by_selective_checkpointing() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    assert row_setup(rows["TT24-T13-01"]).execution["eager_elementwise"] is True
    assert row_setup(rows["TT24-T13-02"]).execution["eager_elementwise"] is False
    pred = validate_row(rows["TT24-T13-01"]).prediction
    job = pred.job
    assert job.execution.recompute == "selective"
    t = layer_ops(job.model, job.execution, pred.layout, moe=False)
    names = [n for n in t.name if ".eager_" in n]
    assert names == ["attn.eager_norm", "attn.eager_rope", "mlp.eager_norm", "mlp.eager_swiglu"]
    assert all(t.selective[t.name.index(n)] for n in names)
    off = job.execution.model_copy(update={"eager_elementwise": False})
    t_off = layer_ops(job.model, off, pred.layout, moe=False)
    assert not [n for n in t_off.name if ".eager_" in n]
    assert len(t_off) == len(t) - len(names)


@pytest.mark.parametrize("row_id", sorted(COMPILED_OVER_EAGER))
def test_eager_over_compiled_matches_the_benchmarks_own_compiled_runs(row_id: str) -> None:
    """The same job with and without the eager traffic: Seer's time ratio is within 4% of the
    published compiled/eager throughput ratio (1.157 on 8 GPUs, 1.162 on 128)."""
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    row = rows[row_id]
    eager = validate_row(row)
    compiled_cell = row["framework"].replace("eager: no torch.compile", "torch.compile")
    compiled = validate_row(dict(row, framework=compiled_cell))
    assert eager.prediction.job.execution.eager_elementwise
    assert not compiled.prediction.job.execution.eager_elementwise
    ratio = eager.predicted_iter_s / compiled.predicted_iter_s
    assert ratio == pytest.approx(COMPILED_OVER_EAGER[row_id], rel=0.04)
