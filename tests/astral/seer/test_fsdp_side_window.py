"""Megatron-FSDP (custom_fsdp at NVIDIA/Megatron-LM 1e057005): what the code moves per layer per
micro-batch, and its cross-host transfers running while the layer waits on intra-host
collectives (seer/fsdp_side_window.py)."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from astral.seer.fsdp_moe_job import EX as FSDP_EX
from astral.seer.fsdp_moe_job import MOE, SYSTEM
from starfabric.astral.seer import make_job
from starfabric.astral.seer.cost import DP_OVERLAP_RESIDUAL, make_context, op_costs
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fsdp_side_window import (
    side_groups,
    side_window_s,
    split_exposure,
    states_megatron_fsdp,
)
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.ops import COMM, backward_of, layer_ops
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.schedule import full_recompute_cost

# The Model Zoo's Megatron-FSDP job (fsdp_moe_job) with the DeepEP dispatcher that run states.
EX = {**FSDP_EX, "moe_dispatcher": "deepep"}


def _setup(system: dict[str, object] = SYSTEM, **extra: object):  # type: ignore[no-untyped-def]
    job = make_job(MOE, {**EX, **extra}, system)
    lay = resolve_layout(job.model, job.execution, job.system)
    ctx = make_context(job.execution, lay, efficiency_for(lay.gpu, {}), job.system, job.model)
    return job, lay, ctx, layer_ops(job.model, job.execution, lay, moe=True)


def _sel(t, prefix: str) -> np.ndarray:  # type: ignore[no-untyped-def]
    grp = np.asarray(t.group).astype(str)
    return np.asarray(t.kind) == COMM if prefix == "" else np.char.startswith(grp, prefix)


def test_collectives_per_layer_per_micro_batch_follow_the_code() -> None:
    """custom_fsdp: one all-gather per FSDP unit in the forward (`_pre_forward_param_unshard`),
    one for re-run forward + backward together (`_pre_backward`; the re-run's post-forward
    hook keeps the unit gathered in PRE_BACKWARD state), one reduce-scatter per backward
    (`grad_reduce_every_bprop` for optim_grads_params); expert parameters on the expert-DP
    group, the rest on DP; 16-bit model weights."""
    _, lay, ctx, t = _setup(megatron_fsdp=True)
    names = list(t.name)
    fwd = [(n, t.group[i], t.coll[i], t.nbytes[i]) for i, n in enumerate(names)
           if n.startswith("fsdp.")]  # fmt: skip
    assert sorted((g, c) for _, g, c, _ in fwd) == [
        ("fsdp_dp", "all_gather"), ("fsdp_edp", "all_gather")
    ]  # fmt: skip
    expert = next(b for _, g, _, b in fwd if g == "fsdp_edp")
    # 128 experts / EP 8 = 16 local experts of 3 x 4096 x 1536 (SwiGLU) at 2 bytes: 604 MB.
    assert expert == pytest.approx(2.0 * 16 * 3 * 4096 * 1536)
    dense = next(b for _, g, _, b in fwd if g == "fsdp_dp")
    attn = 4096 * (64 * 128 + 2 * 4 * 128) + 64 * 128 * 4096  # QKV + output projection
    assert dense >= 2.0 * attn / 2  # attention sharded over TP 2, plus router and norms
    assert dense < 2.0 * (attn / 2 + 128 * 4096 + 4 * 4096 + 2 * 128)
    bt = backward_of(t)
    bwd = [(bt.group[i], bt.coll[i]) for i, n in enumerate(bt.name) if n.startswith("fsdp.")]
    assert sorted(bwd) == sorted(
        [("fsdp_dp", "all_gather"), ("fsdp_dp", "reduce_scatter"),
         ("fsdp_edp", "all_gather"), ("fsdp_edp", "reduce_scatter")]
    )  # fmt: skip
    # Full recompute re-runs the forward without gathering again.
    fc = op_costs(t, ctx)
    rerun = full_recompute_cost(t, fc)
    with_gathers = full_recompute_cost(t, fc, regather=True)
    assert with_gathers.total > rerun.total
    assert "dp" not in rerun.comm or rerun.comm["dp"] == 0.0
    assert lay.edp == 32 and lay.dp == 128


def test_side_groups_are_the_intra_host_groups_when_fsdp_crosses_hosts() -> None:
    _, _, ctx, _ = _setup(megatron_fsdp=True)
    assert "ep" in ctx.fsdp_side_groups and "tp" in ctx.fsdp_side_groups
    assert not any(g.startswith("fsdp") for g in ctx.fsdp_side_groups)
    assert "edp" not in ctx.fsdp_side_groups and "dp" not in ctx.fsdp_side_groups


def test_other_fsdp_and_single_host_get_no_side_window() -> None:
    _, _, ctx, _ = _setup()  # ZeRO-3 not stated as Megatron-FSDP
    assert ctx.fsdp_side_groups == ()
    job, lay, ctx, _ = _setup(system={"gpu": "H100", "gpus": 8, "gpus_per_node": 8},
                              megatron_fsdp=True, global_batch=16)  # fmt: skip
    assert side_groups(job.execution, lay) == ()  # FSDP groups share NVLink with EP
    _, _, ctx, _ = _setup(megatron_fsdp=True, ep=32)  # EP across hosts shares the NICs
    assert "ep" not in ctx.fsdp_side_groups


def test_forward_exposure_drops_by_the_exposed_intra_host_time() -> None:
    _, _, ctx_off, t = _setup()
    _, _, ctx_on, _ = _setup(megatron_fsdp=True)
    off, on = op_costs(t, ctx_off), op_costs(t, ctx_on)
    fsdp = _sel(t, "fsdp")
    comm = off.kind == COMM
    total = float(off.time[fsdp].sum())
    compute = float(off.time[~comm].sum())
    side = float(on.exposed[comm & np.isin(np.asarray(t.group), ctx_on.fsdp_side_groups)].sum())
    assert total > compute  # the 604 MB gather over 32 hosts outlasts the layer's forward
    assert side > 0.0  # DeepEP's dispatch and combine over NVLink are exposed
    expect_off = total - compute + DP_OVERLAP_RESIDUAL * compute
    assert float(off.exposed[fsdp].sum()) == pytest.approx(expect_off)
    expect_on = max(0.0, total - compute - side) + DP_OVERLAP_RESIDUAL * compute
    assert float(on.exposed[fsdp].sum()) == pytest.approx(expect_on)
    # Nothing else of the layer moves.
    assert np.allclose(off.exposed[~fsdp], on.exposed[~fsdp])


@given(
    total=st.floats(0.0, 10.0),
    compute=st.floats(0.0, 10.0),
    side=st.floats(0.0, 10.0),
    more=st.floats(0.0, 10.0),
)
def test_split_exposure_properties(total: float, compute: float, side: float, more: float) -> None:
    r = DP_OVERLAP_RESIDUAL
    base = split_exposure(total, compute, 0.0, r)
    hidden = min(total, compute)
    assert base == pytest.approx(total - hidden + r * hidden)  # the window Seer had
    e = split_exposure(total, compute, side, r)
    assert r * hidden - 1e-12 <= e <= base + 1e-12
    assert split_exposure(total, compute, side + more, r) <= e + 1e-12  # monotone in side
    assert e <= total + 1e-12


def test_cells_naming_megatron_fsdp() -> None:
    assert states_megatron_fsdp("Megatron-FSDP (ZeRO-3; 'FSDP On')", None)
    assert states_megatron_fsdp(None, "Megatron-LM (--use-custom-fsdp)")
    assert not states_megatron_fsdp("FSDP2 (ZeRO-3 full shard)", "TorchTitan")
    assert not states_megatron_fsdp("ZeRO-3 (DeepSpeed)", "DeepSpeed ZeRO-3")


@pytest.mark.parametrize("flag", ["--use-custom-fsdp", "--use-megatron-fsdp"])
def test_megatron_command_line_names_megatron_fsdp(flag: str) -> None:
    cmd = (
        "torchrun --nproc_per_node 8 --nnodes 2 pretrain_gpt.py --tensor-model-parallel-size 2 "
        "--num-layers 4 --hidden-size 1024 --num-attention-heads 16 --seq-length 2048 "
        "--micro-batch-size 1 --global-batch-size 64 --bf16 --vocab-size 32000 "
        f"{flag} --use-distributed-optimizer --data-parallel-sharding-strategy optim_grads_params"
    )
    ex = parse_megatron_command(cmd)["execution"]
    assert ex["zero"] == 3 and ex["megatron_fsdp"] is True
    plain = parse_megatron_command(cmd.replace(flag, "").replace(
        "--data-parallel-sharding-strategy optim_grads_params", ""))["execution"]  # fmt: skip
    assert plain["zero"] == 1 and "megatron_fsdp" not in plain


def test_side_window_is_the_ep_wait_left_after_the_ep_overlap() -> None:
    """With Megatron's EP overlap on, the intra-host all-to-all a Megatron-FSDP transfer runs
    beside is what the overlap leaves exposed (`cost.pair_megatron_overlap`), not the whole
    all-to-all: the FSDP exposure is the split of the paired pass's own windows."""
    from starfabric.astral.seer.schedule import piece_cost

    _, _, ctx, t = _setup(megatron_fsdp=True, ep_comm_overlap=True)
    assert ctx.megatron_ep_overlap and "ep" in ctx.fsdp_side_groups
    pc = piece_cost(t, ctx, "none")
    for table, c in ((pc.fwd_table, pc.fwd_costs), (pc.bwd_table, pc.bwd_costs)):
        grp = np.asarray(table.group).astype(str)
        comm = np.asarray(table.kind) == COMM
        fsdp = comm & np.isin(grp, ("fsdp_dp", "fsdp_edp"))
        total = float(c.time[fsdp].sum())
        side = side_window_s(grp, comm, c.exposed, ctx.fsdp_side_groups)
        want = split_exposure(total, float(c.time[~comm].sum()), side, DP_OVERLAP_RESIDUAL)
        assert float(c.exposed[fsdp].sum()) == pytest.approx(want, rel=1e-9)
