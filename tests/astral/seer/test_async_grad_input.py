"""The column-parallel linears' backward grad-input collective beside the weight-gradient GEMM
(seer/async_grad_input.py): read per stack, release and condition from the row, priced per
operator by cost.op_costs, and the same in the search's evaluator as in predict."""

from dataclasses import replace

import numpy as np
import pytest

from astral.seer.outside_rows import DATA, N21_CITATION, NEMO_FW, row_by_id
from starfabric.astral.seer import async_grad_input as agi
from starfabric.astral.seer import load_model, make_job, predict
from starfabric.astral.seer.cost import DP_OVERLAP_RESIDUAL, make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.ops import backward_of, layer_ops, logits_ops
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout
from starfabric.astral.seer.search import COLUMNS, search
from starfabric.astral.seer.validate import row_model, row_setup, validate_row

BRIDGE = "Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1 (NeMo 26.04.01 image)"


@pytest.mark.parametrize(
    ("framework", "citation", "sp", "want"),
    [
        ("Megatron-LM (2021)", N21_CITATION, False, False),  # before merge 6e1bde1e0f
        ("Megatron-LM 2021-09", None, False, True),
        ("Megatron-LM (2022)", None, False, True),
        ("Megatron-LM (2021)", N21_CITATION, True, True),  # every SP release has it
        ("Megatron-LM (BigCode fork, 2023)", None, False, True),
        ("NeMo 1.4 (2021-09)", None, False, False),  # before apex 365fdc18
        (NEMO_FW, None, False, True),
        (NEMO_FW, None, True, True),
        ("NeMo 24.07 container (NeMo 1.x/Megatron-Core)", None, True, True),
        # Megatron-Core: TE-spec and local linears, every release, SP or not
        ("Megatron-Core 5D parallelism (2025)", None, True, True),
        ("Megatron-Core v0.9 (2024; TE 1.11)", None, False, True),
        ("Megatron-LM core_r0.8.0", None, False, True),
        ("mcore 0.12", None, True, True),
        (BRIDGE, None, True, True),
        # stacks whose code was not read
        ("GPT-NeoX (2022)", None, False, False),
        ("DeepSpeed PipeDream-Flush + Megatron TP (2022)", None, True, False),
        ("TorchTitan (PyTorch nightly 2024-12, FSDP2, torch.compile)", None, True, False),
        ("Meta internal (PyTorch)", None, True, False),
        ("Megatron-LM", None, False, False),  # undated: not assumed
    ],
)
def test_the_rule_per_stack_release_and_sp(
    framework: str, citation: str | None, sp: bool, want: bool
) -> None:
    assert agi.async_tp_backward(framework, citation, sp) is want


@pytest.mark.parametrize("framework", ["Megatron-Core 0.13 (2025)", BRIDGE, "Megatron-LM (2024)"])
def test_a_deferred_wgrad_gemm_hides_nothing(framework: str) -> None:
    """TE 2.3+'s delay_wgrad_compute: the wgrad GEMM is queued for later and the collective is
    waited on at the end of the same backward (one rule for rows and jobs: cost.make_context)."""
    assert agi.async_tp_backward(framework, None, True) is True
    ctx, _, _ = _tables(True, agi.async_tp_backward(framework, None, True), ep_delay_wgrad=True)
    assert ctx.tp_async_backward is False


def test_a_user_job_defaults_to_megatron_cores_async_collective() -> None:
    assert ExecutionSpec(global_batch=8, seq_len=2048).tp_async_backward is True


@pytest.mark.parametrize(
    ("framework", "notes", "sp", "want"),
    [
        ("Megatron-LM (2022)", "--no-async-tensor-model-parallel-allreduce", False, False),
        ("Megatron-LM (2022)", "async_tensor_model_parallel_allreduce: false", False, False),
        ("Megatron-LM (2022)", "async_tensor_model_parallel_allreduce: true", False, True),
        # with SP Megatron-LM's arguments.py turns the all-reduce flag off and reduce-scatters
        ("Megatron-LM (2022)", "--no-async-tensor-model-parallel-allreduce", True, True),
        # core_v0.7.0 - core_v0.15.0: 'DEPRECATED. This flag is ignored.'
        ("Megatron-LM core_r0.8.0", "--no-async-tensor-model-parallel-allreduce", False, True),
        ("Megatron-LM core_r0.5.0", "--no-async-tensor-model-parallel-allreduce", False, False),
        ("Megatron-LM (2022)", "no async TP comm overlap stated", False, True),  # another flag
    ],
)
def test_a_stated_off_switch_is_read_where_megatron_honoured_it(
    framework: str, notes: str, sp: bool, want: bool
) -> None:
    assert agi.async_tp_backward(framework, None, sp, notes=notes) is want


@pytest.mark.parametrize(
    "stack",
    [
        {"torchtitan_memory": True},  # the run is TorchTitan's
        {"torchtitan_op_sac": True, "recompute": "selective"},
        {"eager_elementwise": True},
        {"deepspeed_bf16_pipe": True},  # DeepSpeed's pipeline engine
        {"fsdp_collectives": "parameter"},  # DeepSpeed ZeRO-3 before v0.6.0
    ],
)
def test_a_user_job_on_a_stack_not_read_blocks_on_it(stack: dict[str, object]) -> None:
    """A job whose execution names a TorchTitan or DeepSpeed mechanism is priced as a row of
    that stack is (`async_tp_backward` credits neither), unless it states the field."""
    job = {"global_batch": 8, "seq_len": 2048, "tp": 8, **stack}
    assert ExecutionSpec(**job).tp_async_backward is False
    assert ExecutionSpec(**job, tp_async_backward=True).tp_async_backward is True


def test_rows_read_as_their_stacks_code_does() -> None:
    dev1, dev2 = DATA / "development_runs.csv", DATA / "development_runs_2.csv"
    for path, row_id, want in [
        (dev2, "MPF-T3-01", True),  # Megatron-Core
        (dev2, "AWSQ30-EP16-MB4", True),  # Megatron-Bridge / Megatron-Core 0.17.1
        (dev2, "STARCODER-01", True),  # Megatron-LM fork, 2023
        (dev1, "NEMO2407-02", True),  # NeMo 24.07 (Megatron-Core)
        (dev1, "MS-T2-01", True),  # MegaScale's Megatron-LM baseline
        (dev2, "TT24-T6-01", False),  # TorchTitan
        (dev1, "L3-T4-1", False),  # Meta's stack
        (dev2, "FALCON180B-01", False),  # Gigatron
        (dev2, "GLM130B-01", False),  # DeepSpeed + Megatron TP
    ]:
        ex = row_setup(row_by_id(path, row_id)).execution
        assert ex["tp_async_backward"] is want, row_id


def _tables(sp: bool, flag: bool, **extra: object):  # type: ignore[no-untyped-def]
    model = row_model(row_by_id(DATA / "a100_scale_runs.csv", "NEMO2206-175B-016"))
    ex = ExecutionSpec(
        global_batch=64, seq_len=2048, tp=8, pp=1, sp=sp, micro_batch=2, precision="bf16",
        attention="unfused", overlap_grad_reduce=False, tp_async_backward=flag, **extra,
    )  # fmt: skip
    lay = resolve_layout(model, ex, SystemSpec(gpu="A100", gpus=64))
    ctx = make_context(ex, lay, efficiency_for(lay.gpu), model=model)
    return ctx, layer_ops(model, ex, lay, moe=False), logits_ops(model, ex, lay)


@pytest.mark.parametrize("sp", [False, True])
def test_only_the_grad_input_collective_hides_behind_its_wgrad(sp: bool) -> None:
    """Hidden up to its wgrad GEMM's time (DP_OVERLAP_RESIDUAL of the hidden part kept), the
    excess exposed; every other operator and the forward pass untouched."""
    ctx, fwd, head = _tables(sp, True)
    ctx0, _, _ = _tables(sp, False)
    hidden = 0
    for table in (fwd, head):
        assert np.array_equal(op_costs(table, ctx).exposed, op_costs(table, ctx0).exposed)
        bwd = backward_of(table)
        on, off = op_costs(bwd, ctx, backward=True), op_costs(bwd, ctx0, backward=True)
        assert np.array_equal(on.time, off.time)
        for i, name in enumerate(bwd.name):
            if name not in agi.ASYNC_GRAD_INPUT:
                assert on.exposed[i] == off.exposed[i], name
                continue
            hidden += 1
            gemm = on.time[bwd.name.index(agi.ASYNC_GRAD_INPUT[name])]
            dur = off.exposed[i]
            want = max(0.0, dur - gemm) + DP_OVERLAP_RESIDUAL * min(dur, gemm)
            assert on.exposed[i] == pytest.approx(want), name
            assert on.exposed[i] < dur
    # QKV and FC1 always; the output layer's all-gather only exists with SP
    assert hidden == (3 if sp else 2)


def _slow_comm(ctx, factor: float):  # type: ignore[no-untyped-def]
    """`ctx` whose collectives all take `factor` times as long."""

    class Slow:
        def __init__(self, comm) -> None:  # type: ignore[no-untyped-def]
            self.comm = comm

        def time(self, *args, **kwargs) -> float:  # type: ignore[no-untyped-def]
            return factor * self.comm.time(*args, **kwargs)

    return replace(ctx, comm=Slow(ctx.comm))


def test_the_excess_over_the_wgrad_gemm_stays_exposed() -> None:
    """A collective longer than its GEMM: exposed by what it exceeds plus the residue."""
    ctx, fwd, _ = _tables(True, True)
    bwd = backward_of(fwd)
    c = op_costs(bwd, ctx, backward=True)
    i = bwd.name.index("attn.tp_all_gather.bwd")
    gemm = float(c.time[bwd.name.index("attn.qkv.wgrad")])
    slow = _slow_comm(ctx, 4.0 * gemm / float(c.time[i]))
    s = op_costs(bwd, slow, backward=True)
    dur = float(s.time[i])
    assert dur > gemm
    assert s.exposed[i] == pytest.approx(dur - gemm + DP_OVERLAP_RESIDUAL * gemm)


def test_the_delayed_wgrad_flag_turns_the_pairing_off() -> None:
    ctx, _, _ = _tables(True, True, ep_delay_wgrad=True)
    assert ctx.tp_async_backward is False


@pytest.mark.parametrize("row_id", ["MZQ3-GBX2", "STARCODER-01"])
def test_a_current_row_gets_faster_by_at_most_its_exposed_tp(
    row_id: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    row = row_by_id(DATA / "development_runs_2.csv", row_id)
    new = validate_row(row)
    monkeypatch.setattr(agi, "async_tp_backward", lambda *_, **__: False)
    old = validate_row(row)
    saved = old.predicted_iter_s - new.predicted_iter_s
    assert 0 < saved <= old.prediction.breakdown["tp"]


def test_search_and_predict_price_it_the_same() -> None:
    """TP > 1 layouts without userbuffers: the search prices each as predict does (within 1%),
    with the collective async (the default) or blocking, and async is the cheaper."""
    model = load_model("llama-3.1-8b")
    system = SystemSpec(gpu="H100", gpus=64)
    runs = {}
    for flag in (True, False):
        stack = ExecutionSpec(global_batch=256, seq_len=4096, tp_async_backward=flag)
        res = search(model, system, 256, 4096, stack=stack)
        ranked = res.ranked()
        plain = ranked[(res.configs["tp"][ranked] > 1) & (res.configs["tpo"][ranked] == 0)][:8]
        assert len(plain) == 8
        for i in plain:
            ex = res.execution(int(i))
            assert ExecutionSpec(**ex).tp_async_backward is flag
            it = predict(make_job(model, ex, system)).iteration_s
            assert it == pytest.approx(res.iteration_s[i], rel=0.01), res.row(int(i))
        runs[flag] = (res, plain)
    (on, plain), (off, _) = runs[True], runs[False]
    for c in COLUMNS:
        assert np.array_equal(on.configs[c], off.configs[c])
    assert (on.iteration_s[plain] < off.iteration_s[plain]).all()


@pytest.mark.parametrize("flag", [True, False])
def test_a_searched_layout_keeps_the_stacks_stated_setting(flag: bool) -> None:
    """A DeepSpeed stack that states the field: the layout search hands predict (execution)
    carries it, so predict does not fall back to the stack's default and price another job."""
    model = load_model("llama-3.1-8b")
    system = SystemSpec(gpu="H100", gpus=64)
    stack = ExecutionSpec(
        global_batch=256, seq_len=4096, deepspeed_bf16_pipe=True, tp_async_backward=flag
    )
    res = search(model, system, 256, 4096, stack=stack)
    ranked = res.ranked()
    plain = ranked[(res.configs["tp"][ranked] > 1) & (res.configs["tpo"][ranked] == 0)][:4]
    assert len(plain) == 4
    for i in plain:
        ex = res.execution(int(i))
        assert ExecutionSpec(**ex).tp_async_backward is flag
        it = predict(make_job(model, ex, system)).iteration_s
        assert it == pytest.approx(res.iteration_s[i], rel=0.01), res.row(int(i))
