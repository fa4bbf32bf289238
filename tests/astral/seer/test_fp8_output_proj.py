"""Megatron-Core's `fp8_output_proj` (the LM head under the run's MXFP8 recipe;
`ExecutionSpec.logits_precision` "fp8", `cost.fp8_logits`), read from a precision cell
(`validate.states_fp8_output_proj`), and the TP-overlap statement of the NVIDIA GB200 rows of
mlperf_dsv3_runs.csv (Megatron-Bridge's DeepSeek-V3 recipe leaves `tp_comm_overlap` False)."""

from pathlib import Path

import pytest

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.cost import BF16_GEMMS, LOGITS_GEMMS, make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for, gemm_time, mem_time
from starfabric.astral.seer.ops import backward_of, logits_ops
from starfabric.errors import ConfigError, DataError

DSV3_CSV = Path(__file__).parents[2] / "data/published_runs/mlperf_dsv3_runs.csv"
GLOBAL_BATCH, GPUS = 16, 8
JOB: dict[str, object] = {"global_batch": GLOBAL_BATCH, "seq_len": 4096, "tp": 1, "pp": 1, "micro_batch": 1,
       "precision": "fp8", "fp8_recipe": "mxfp8"}  # fmt: skip
SYSTEM = {"gpu": "GB300", "gpus": GPUS, "gpus_per_node": 4}


def _head_times(prec: str) -> tuple[float, dict[str, float]]:
    """Seconds of the output layer's GEMMs (forward + backward) under `prec`, and each one's
    time as the FP8 path would give it (GEMM at the MXFP8 rate plus its operand cast)."""
    p = predict(make_job("llama-3.1-8b", {**JOB, "logits_precision": prec}, SYSTEM))
    ex, lay = p.job.execution, p.layout
    ctx = make_context(ex, lay, efficiency_for(lay.gpu, {}))
    fwd = logits_ops(load_model("llama-3.1-8b"), ex, lay)
    total, fp8_path = 0.0, {}
    for i, t in enumerate((fwd, backward_of(fwd))):
        c = op_costs(t, ctx, backward=i == 1)
        a = t.arrays()
        for j, name in enumerate(t.name):
            if name.endswith(LOGITS_GEMMS):
                total += float(c.time[j])
                m, n, k, b = a["m"][j : j + 1], a["n"][j : j + 1], a["k"][j : j + 1], a["batch"][j : j + 1]  # fmt: skip
                fp8_path[name] = float(
                    gemm_time(m, n, k, b, ctx.gemm_peak_flops, ctx.hbm_bytes_per_s, ctx.eff,
                              peak_fraction=ctx.gemm_fraction)[0]
                    + mem_time(ctx.fp8_cast_bytes * m * k * b, ctx.hbm_bytes_per_s, ctx.eff)[0]
                )  # fmt: skip
                if prec == "fp8":
                    assert float(c.time[j]) == pytest.approx(fp8_path[name], rel=1e-9)
    return total, fp8_path


def test_fp8_output_layer_takes_the_mxfp8_path_and_the_bf16_one_does_not() -> None:
    """Under "fp8" each head GEMM costs exactly the FP8 path (the MXFP8 rate and its cast);
    under "auto" an FP8 run keeps the head in BF16 (cost.BF16_GEMMS), which on GB300 (BF16
    2.5, MXFP8 5 dense PFLOP/s) takes longer than the FP8 path by less than the 2x peak ratio
    (the cast costs HBM time the BF16 GEMM does not pay)."""
    fp8, path = _head_times("fp8")
    auto, _ = _head_times("auto")
    assert fp8 == pytest.approx(sum(path.values()), rel=1e-9)
    assert 1.2 < auto / fp8 < 2.0


def test_fp8_output_layer_leaves_the_router_in_bf16() -> None:
    """`fp8_output_proj` names the LM head only: the router stays in BF16."""
    assert not set(LOGITS_GEMMS) & {n for n in BF16_GEMMS if n.startswith("moe.router")}
    assert {"moe.router", "moe.router.dgrad", "moe.router.wgrad"} <= set(BF16_GEMMS)


def test_fp8_output_layer_only_shortens_the_step() -> None:
    """Nothing but the head changes: the step shortens by the head's time saved (within the
    pipeline-free single-stage job, to 5%)."""
    a = predict(make_job("llama-3.1-8b", JOB, SYSTEM))
    b = predict(make_job("llama-3.1-8b", {**JOB, "logits_precision": "fp8"}, SYSTEM))
    saved = _head_times("auto")[0] - _head_times("fp8")[0]
    per_step = GLOBAL_BATCH // GPUS  # micro-batches per data-parallel rank (TP 1, PP 1)
    assert a.iteration_s - b.iteration_s == pytest.approx(saved * per_step, rel=0.05)


@pytest.mark.parametrize(
    ("precision", "extra"),
    [("bf16", {}), ("fp8", {"fp4_recipe": "nvfp4"})],
)
def test_fp8_output_layer_needs_an_mxfp8_run(precision: str, extra: dict[str, str]) -> None:
    job = {**JOB, "precision": precision, "logits_precision": "fp8", **extra}
    job.pop("fp8_recipe")  # an FP4 run takes no FP8 recipe; a BF16 run none either
    with pytest.raises(ConfigError, match="fp8_output_proj"):
        make_job("llama-3.1-8b", job, SYSTEM)


@pytest.mark.parametrize(
    ("cell", "want"),
    [
        ("MXFP8 (FP8=True; FP8_OUTPUT_PROJ=True (the LM-head output projection in MXFP8))", True),
        ("MXFP8; --fp8-output-proj", True),
        ("MXFP8; fp8_output_proj", True),
        ("MXFP8; FP8_OUTPUT_PROJ=False", False),
        ("MXFP8; fp8_output_proj: off", False),
        ("MXFP8; no fp8_output_proj", False),
        ("MXFP8; FP8_OUTPUT_PROJ=0", False),
        ("MXFP8; fp8_output_proj disabled", False),
        ("MXFP8; not fp8 output projection", False),
        ("MXFP8; FP8_DPA=True (FP8 dot-product attention)", False),
        ("MXFP8 output of the projection", False),
    ],
)
def test_fp8_output_proj_is_read_only_where_a_cell_states_it_on(cell: str, want: bool) -> None:
    from starfabric.astral.seer.validate import states_fp8_output_proj

    assert states_fp8_output_proj(cell) is want


def _dsv3_rows() -> dict[str, dict[str, str]]:
    from starfabric.astral.seer.validate import read_rows

    return {r["row_id"]: r for r in read_rows(DSV3_CSV)}


def test_dsv3_rows_read_the_fp8_head_where_their_configs_set_it() -> None:
    """The GB300 configs (NVIDIA theia, CoreWeave) export FP8_OUTPUT_PROJ=True; the GB200
    configs do not: the reader follows the precision cells, not the GPU."""
    from starfabric.astral.seer.validate import row_setup

    for rid, row in _dsv3_rows().items():
        want = "fp8" if "FP8_OUTPUT_PROJ=True" in row["precision"] else "auto"
        assert row_setup(row).execution.get("logits_precision", "auto") == want, rid
        assert (want == "fp8") == ("GB300" in row["gpu"]), rid


def test_fp8_head_stated_beside_fp4_gemms_is_refused() -> None:
    """Megatron-Core runs fp8_output_proj under an MXFP8 recipe only: an NVFP4 cell that also
    names it is a contradiction, reported as one line."""
    from starfabric.astral.seer.validate import row_setup

    cell = "NVFP4 (Transformer Engine NVFP4 GEMMs); FP8_OUTPUT_PROJ=True"
    row = dict(_dsv3_rows()["MLP60-NV-GB300-0256"], precision=cell)
    with pytest.raises(DataError, match="fp8_output_proj"):
        row_setup(row)


def test_nvidia_gb200_rows_run_without_tp_comm_overlap() -> None:
    """Megatron-Bridge's deepseek_v3_pretrain_config() sets CommOverlapConfig(tp_comm_overlap=
    False) in every 2026 revision read, and the MLPerf pretrain.py does not set it (the .md):
    the four NVIDIA GB200 rows state it and the reader holds it off instead of trying both.
    Google's row (its pretrain.py is not in the index) keeps it open."""
    from starfabric.astral.seer.validate import row_setup

    for rid, row in _dsv3_rows().items():
        if row["tp"] == "1":
            continue
        st = row_setup(row)
        opened = any("tp_comm_overlap" in o for _, o in st.options)
        if rid.startswith("MLP60-NV-GB200-"):
            assert st.execution["tp_comm_overlap"] is False and not opened, rid
        else:
            assert opened, rid
