"""seer/mxfp8_attention.py: cuDNN's MXFP8/BF16 fused-attention rate by GPU generation and
attention shape (cudnn-frontend's cuDNN 9.22.0 sweep, tests/data/attention/
cudnn_mxfp8_training.csv), the casts TE v2.15 adds, and MXFP8 runs that state FP8 attention
(MLPerf DeepSeek-V3) timed with it."""

import csv
from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import fp8_attention as fa
from starfabric.astral.seer import mxfp8_attention as mx
from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.ops import FLASH, FP8_DPA_CASTS, backward_of, layer_ops
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout
from starfabric.astral.seer.validate import row_setup, validate_row
from starfabric.errors import ConfigError

DATA = Path(__file__).parents[2] / "data"
SWEEP = DATA / "attention" / "cudnn_mxfp8_training.csv"
DSV3_RUNS = DATA / "published_runs" / "mlperf_dsv3_runs.csv"


def _sweep() -> dict[tuple[str, str, int, str], tuple[float, float, float]]:
    """(gpu, shape, seq, pass) -> (bf16, fp8, mxfp8) TFLOP/s of the transcribed sweep."""
    with open(SWEEP) as f:
        rows = csv.DictReader(line for line in f if not line.startswith("#"))
        return {
            (r["gpu"], r["model"], int(r["seq"]), r["pass"]): (
                float(r["bf16_tflops"]),
                float(r["fp8_tflops"]),
                float(r["mxfp8_tflops"]),
            )
            for r in rows
        }


CURVES = {
    ("GB200", "dsv3"): (mx.MLA_BLACKWELL_FWD, mx.MLA_BLACKWELL_BWD),
    ("GB300", "dsv3"): (mx.MLA_ULTRA_FWD, mx.MLA_ULTRA_BWD),
    ("GB200", "llama3.1"): (mx.GQA_BLACKWELL_FWD, mx.GQA_BLACKWELL_BWD),
    ("GB300", "llama3.1"): (mx.GQA_ULTRA_FWD, mx.GQA_ULTRA_BWD),
}


@pytest.mark.parametrize(("gpu", "shape"), sorted(CURVES))
def test_rate_constants_are_the_sweeps_ratios(gpu: str, shape: str) -> None:
    t = _sweep()
    fwd, bwd = CURVES[(gpu, shape)]
    for i, seq in enumerate(mx.SEQ_POINTS):
        for p, ys in (("fwd", fwd), ("bwd", bwd)):
            bf16, _, mxfp8 = t[(gpu, shape, seq, p)]
            assert ys[i] == pytest.approx(mxfp8 / bf16, abs=6e-4), (gpu, shape, seq, p)


def test_sweep_is_one_release_with_the_shapes_the_module_names() -> None:
    with open(SWEEP) as f:
        rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
    assert {r["cudnn"] for r in rows} == {"9.22.0"}
    shapes = {(r["model"], r["q_heads"], r["kv_heads"], r["head_dim_qk"], r["head_dim_v"])
              for r in rows}  # fmt: skip
    assert shapes == {("dsv3", "128", "128", "192", "128"), ("llama3.1", "64", "8", "128", "128")}


def test_shape_matters_more_than_for_tensor_scaled_fp8() -> None:
    """Why the curve is chosen by shape: at 4K the MLA backward gains, the GQA one loses."""
    t = _sweep()
    for gpu in ("GB200", "GB300"):
        mla = t[(gpu, "dsv3", 4096, "bwd")]
        gqa = t[(gpu, "llama3.1", 4096, "bwd")]
        assert mla[2] / mla[0] > 1.25
        assert gqa[2] / gqa[0] < 0.95
        # and MXFP8 trails tensor-scaled FP8 at both shapes
        assert mla[2] < mla[1] and gqa[2] < gqa[1]


def test_curve_follows_generation_and_shape() -> None:
    gb300, gb200, b300, b200 = (get_gpu(g) for g in ("GB300", "GB200", "B300", "B200"))
    assert fa.curve(gb300, "mxfp8", mla=True).forward == mx.MLA_ULTRA_FWD
    assert fa.curve(b300, "mxfp8", mla=True).backward == mx.MLA_ULTRA_BWD
    assert fa.curve(gb200, "mxfp8", mla=True).forward == mx.MLA_BLACKWELL_FWD
    assert fa.curve(b200, "mxfp8", mla=False).backward == mx.GQA_BLACKWELL_BWD
    assert fa.curve(gb300, "mxfp8").forward == mx.GQA_ULTRA_FWD
    # the tensor-scaled curves are unchanged by the recipe argument's default
    assert fa.curve(gb300).forward == fa.BLACKWELL_ULTRA_FWD


def test_mxfp8_attention_needs_blackwell() -> None:
    with pytest.raises(ConfigError, match="mxfp8"):
        fa.curve(get_gpu("H100"), "mxfp8")
    fa.check_supported(get_gpu("H100"), "tensorwise")  # tensor-scaled FP8 runs on Hopper


def test_cast_bytes_follow_te_v2_15() -> None:
    """One read of the 16-bit value, rowwise and columnwise MXFP8 copies with E8M0 scales; O and
    dQ, dK, dV stay BF16 (nothing dequantized)."""
    assert mx.QUANT_BYTES == 2.0 + 2.0 * (1.0 + 1.0 / 32)  # exact in binary
    assert fa.quant_bytes("mxfp8") == (mx.QUANT_BYTES, 0.0)
    assert fa.quant_traffic("mxfp8", 10.0, 4.0) == (mx.QUANT_BYTES * 10, mx.QUANT_BYTES * 4)


def _dsv3(gpu: str, dpa: str | None):  # type: ignore[no-untyped-def]
    model = load_model("deepseek-v3")
    ex = ExecutionSpec(
        global_batch=64, seq_len=4096, precision="fp8", fp8_recipe="mxfp8", ep=8,
        fp8_attention=dpa,
    )  # fmt: skip
    lay = resolve_layout(model, ex, SystemSpec(gpu=gpu, gpus=64))
    ctx = make_context(ex, lay, efficiency_for(lay.gpu), model=model)
    return model, ctx, layer_ops(model, ex, lay, moe=True)


@pytest.mark.parametrize("gpu", ["GB200", "GB300"])
def test_flash_kernels_run_at_the_mla_rate(gpu: str) -> None:
    _, ctx8, fwd = _dsv3(gpu, "mxfp8")
    _, ctx16, _ = _dsv3(gpu, None)
    over = ctx8.eff.kernel_overhead_s
    for table, backward in ((fwd, False), (backward_of(fwd), True)):
        f = np.array(table.kind) == FLASH
        keys = table.arrays()["k"][f]
        t8 = op_costs(table, ctx8, backward=backward).time[f]
        t16 = op_costs(table, ctx16, backward=backward).time[f]
        want = fa.curve(get_gpu(gpu), "mxfp8", mla=True).rate(keys, backward)
        assert (t16 - over) / (t8 - over) == pytest.approx(want, rel=1e-9)


def test_cast_op_carries_mxfp8_bytes() -> None:
    model, _, fwd = _dsv3("GB300", "mxfp8")
    i = fwd.name.index(FP8_DPA_CASTS)
    tok, heads = 4096.0, 128.0  # micro-batch 1, TP 1
    dq, dv = model.qk_head_dim, model.vo_head_dim
    assert fwd.arrays()["nbytes"][i] == pytest.approx(mx.QUANT_BYTES * tok * heads * (dq + dq + dv))
    assert fwd.arrays()["m"][i] == pytest.approx(mx.QUANT_BYTES * tok * heads * dv)


def _rows() -> list[dict[str, str]]:
    with open(DSV3_RUNS) as f:
        return list(csv.DictReader(f))


def test_mlperf_dsv3_rows_read_mxfp8_attention() -> None:
    """Every row's config sources config_common_mxfp8.sh (FP8_DPA=True) with MXFP8 GEMMs: TE
    v2.15 (the rows' Dockerfile) runs cuDNN's MXFP8 attention."""
    for row in _rows():
        assert row_setup(row).execution.get("fp8_attention") == "mxfp8", row["row_id"]


@pytest.mark.parametrize("row_id", ["MLP60-NV-GB300-0256", "MLP60-NV-GB200-0512"])
def test_a_dsv3_row_with_fp8_dpa_is_faster_than_the_same_row_without(row_id: str) -> None:
    row = next(r for r in _rows() if r["row_id"] == row_id)
    without = dict(row)
    without["precision"] = row["precision"].replace(
        "FP8_DPA=True (FP8 dot-product attention)", "FP8_DPA=0"
    )
    assert fa.stated_fp8_attention(without["precision"], row["framework"]) is False
    fast, slow = validate_row(row), validate_row(without)
    assert fast.predicted_iter_s < slow.predicted_iter_s * 0.995


@pytest.mark.parametrize(
    ("framework", "applied"),
    [
        ("Megatron-Core 0.17 (MXFP8 recipe)", False),  # MXFP8BlockScaling built without fp8_dpa
        ("Megatron-Core 0.18 (MXFP8 recipe)", True),  # 22e0bb5fd1 passes fp8_dpa
        ("NeMo on Megatron-Core, release not stated", True),  # unknown: the current behaviour
    ],
)
def test_a_megatron_core_before_0_18_runs_bf16_attention_under_mxfp8(
    framework: str, applied: bool
) -> None:
    with open(DSV3_RUNS) as f:
        row = dict(next(csv.DictReader(f)))
    row["framework"] = framework + "; " + row["framework"]
    setup = row_setup(row)
    assert (setup.execution.get("fp8_attention") == "mxfp8") is applied
    if not applied:
        assert (
            "0.18" in setup.read["fp8_attention"] and "not applied" in setup.read["fp8_attention"]
        )


def test_a_job_file_with_the_rows_settings_predicts_the_rows_time(tmp_path: Path) -> None:
    """One meaning per setting: `seer predict` on a JSON job that states fp8_attention mxfp8
    and moe_fused_grouped_mlp as the MLPerf DeepSeek-V3 row's reading does gives the row's time,
    and each setting moves it there as it does on the row."""
    import json

    from starfabric.astral.seer import load_job, predict

    with open(DSV3_RUNS) as f:
        row = next(csv.DictReader(f))
    res = validate_row(row)
    ex = res.prediction.job.execution
    assert ex.fp8_attention == "mxfp8" and ex.moe_fused_grouped_mlp
    spec = {
        "model": res.prediction.job.model.model_dump(mode="json"),
        "execution": ex.model_dump(mode="json", exclude_defaults=True),
        "system": res.prediction.job.system.model_dump(mode="json", exclude_defaults=True),
    }
    times = {}
    for name, change in (("row", {}), ("bf16 attention", {"fp8_attention": None}),
                         ("unfused", {"moe_fused_grouped_mlp": False})):  # fmt: skip
        path = tmp_path / f"{name.replace(' ', '_')}.json"
        path.write_text(json.dumps({**spec, "execution": {**spec["execution"], **change}}))
        times[name] = predict(load_job(str(path))).iteration_s
    assert times["row"] == pytest.approx(res.predicted_iter_s, rel=1e-12)
    assert times["bf16 attention"] != times["row"] and times["unfused"] > times["row"]
