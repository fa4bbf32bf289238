"""TorchTitan's per-op selective activation checkpointing: what it re-runs, read from its
policy (torchtitan 9dec370 `parallelize_llama.py` l.214-276, the same at e7c0cae) and its
Llama block (`models/llama/model.py` l.189, l.253), not from any row's error
(seer/torchtitan_op_sac.py)."""

from pathlib import Path

import pytest

from starfabric.astral.seer import torchtitan_op_sac as sac
from starfabric.astral.seer.ops import FLASH, GEMM, MEM, layer_ops
from starfabric.astral.seer.validate import read_rows, row_setup, validate_row

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"

SOURCE_MM_CALLS = ("wq", "wk", "wv", "wo", "w1", "w3", "w2")
"""`self.wq(x), self.wk(x), self.wv(x)`, then `self.wo(...)`; `self.w2(F.silu(self.w1(x)) *
self.w3(x))`: Python evaluates w1 before w3, and w2 last."""

LLAMA31_8B_MM_OUT = {"wq": 4096, "wk": 1024, "wv": 1024, "wo": 4096, "w1": 14336, "w3": 14336,
                     "w2": 4096}  # fmt: skip
"""Output features of each nn.Linear of a Llama 3.1 8B block (hidden 4096, 8 KV heads of 128,
FFN 14336); wo, w2 take 4096 and 14336 inputs, the others 4096."""


def _policy_reruns(calls: tuple[str, ...]) -> tuple[str, ...]:
    """`_custom_policy`: count aten.mm calls from 1; an even count is not saved (re-run)."""
    return tuple(c for i, c in enumerate(calls, start=1) if i % 2 == 0)


def test_the_rerun_mms_are_the_policys_even_calls() -> None:
    assert _policy_reruns(SOURCE_MM_CALLS) == ("wk", "wo", "w3")
    names = dict(zip(SOURCE_MM_CALLS, sac.MM_ORDER, strict=True))
    assert sac.rerun_mms() == tuple(names[c] for c in ("wk", "wo", "w3"))


def _in_features(c: str) -> int:
    return 14336 if c == "w2" else 4096


def test_rerun_gemm_flops_share_for_llama31_8b() -> None:
    """wk + wo + w3 are 19,456 / 53,248 = 36.5% of an 8B block's linear FLOPs (per token)."""
    flops = {c: 2 * LLAMA31_8B_MM_OUT[c] * _in_features(c) for c in SOURCE_MM_CALLS}
    share = sum(flops[c] for c in _policy_reruns(SOURCE_MM_CALLS)) / sum(flops.values())
    assert share == pytest.approx(19456 / 53248)
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    pred = validate_row(rows["TT24-T13-02"]).prediction
    t = layer_ops(pred.job.model, pred.job.execution, pred.layout, moe=False)
    gemm = [i for i, k in enumerate(t.kind) if k == GEMM]
    seer = sum(t.flops[i] for i in gemm if t.selective[i]) / sum(t.flops[i] for i in gemm)
    assert seer == pytest.approx(share)


@pytest.mark.parametrize(
    ("kind", "name", "group", "coll", "rerun"),
    [
        ("flash", "attn.core_flash", "", "", False),  # SDPA is in _save_list
        ("gemm", "attn.wq", "", "", False),
        ("gemm", "mlp.w3", "", "", True),
        ("mem", "attn.norm", "", "", True),  # elementwise: PREFER_RECOMPUTE (eager)
        ("comm", "attn.tp_all_gather", "tp", "all_gather", True),
        ("comm", "attn.tp_reduce_scatter", "tp", "reduce_scatter", False),
        ("comm", "fsdp.param_all_gather", "fsdp_dp", "all_gather", False),
    ],
)
def test_reruns_per_kind(kind: str, name: str, group: str, coll: str, rerun: bool) -> None:
    assert sac.reruns(name, kind, group, coll) is rerun


def test_compiled_elementwise_is_not_a_pass_of_its_own() -> None:
    assert sac.reruns("attn.norm", "mem", eager=True)
    assert sac.reruns("attn.norm", "mem", eager=False) is not sac.COMPILED_ELEMENTWISE_FUSED
    assert sac.reruns("mlp.w3", "gemm", eager=False)


def test_layer_table_follows_the_source_only_under_op_sac() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    pred = validate_row(rows["TT24-T13-02"]).prediction
    model, ex, lay = pred.job.model, pred.job.execution, pred.layout
    assert ex.torchtitan_op_sac and ex.recompute == "selective"
    t = layer_ops(model, ex, lay, moe=False)
    gemms = [n for n, k in zip(t.name, t.kind, strict=True) if k == GEMM]
    assert tuple(gemms) == sac.MM_ORDER
    assert not any(s for s, k in zip(t.selective, t.kind, strict=True) if k == FLASH)
    # compiled (torch.compile): the re-run elementwise ops fuse into the backward's kernels
    assert not ex.eager_elementwise
    assert not any(s for s, k in zip(t.selective, t.kind, strict=True) if k == MEM)
    eager = validate_row(rows["TT24-T13-01"]).prediction  # the same job run eagerly
    te = layer_ops(eager.job.model, eager.job.execution, eager.layout, moe=False)
    assert eager.job.execution.eager_elementwise
    assert all(s for s, k in zip(te.selective, te.kind, strict=True) if k == MEM)
    # Megatron-style selective recompute of the same job: fused GEMMs, the attention core re-run.
    plain = ex.model_copy(update={"torchtitan_op_sac": False, "recompute_modules": ("core_attn",)})
    p = layer_ops(model, plain, lay, moe=False)
    assert "attn.qkv" in p.name and "mlp.fc1" in p.name
    assert p.selective[p.name.index("attn.core_flash")]
    gemm_flops = [sum(f for f, k in zip(x.flops, x.kind, strict=True) if k == GEMM) for x in (t, p)]
    assert gemm_flops[0] == pytest.approx(gemm_flops[1])


def test_h200_rows_read_the_configs_op_sac() -> None:
    """TTH200's command takes llama3_8b.toml at e7c0cae (mode selective, option op) and does
    not override it: the transcribed cell is read as TorchTitan's per-op SAC."""
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    for rid in ("TTH200-01", "TTH200-02"):
        assert row_setup(rows[rid]).execution["torchtitan_op_sac"] is True
        assert validate_row(rows[rid]).prediction.job.execution.recompute == "selective"
