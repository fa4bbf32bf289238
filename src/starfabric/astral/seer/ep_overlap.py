"""Megatron-Core's EP all-to-all overlap (`--overlap-moe-expert-parallel-comm`), as its
source schedules it (NVIDIA/Megatron-LM core_v0.14.0-core_v0.17.0).

Per layer (`TransformerLayerSchedulePlan.run`, models/common/model_chunk_schedule_plan.py) the
forward of one micro-batch and the backward of another run on two CUDA streams:

    comm stream: combine_bwd | dispatch_fwd -> dispatch_bwd          | combine_fwd
    comp stream: attn_fwd    | mlp_bwd -> mlp_bwd_dw -> mlp_fwd      | attn_bwd -> attn_bwd_dw

with the data dependencies of the layer: the expert backward waits for the combine's
backward, the dispatch waits for the attention forward (its "attn" node holds attention, norm,
router, shared experts and the dispatch preprocessing), the dispatch's backward waits for the
expert dgrad (and, unless `--delay-wgrad-compute`, for the expert wgrad too), the expert
forward for the dispatch, the attention backward for the dispatch's backward and the combine
for the expert forward. So each all-to-all hides behind one named piece of the other
micro-batch's compute, not behind the layer as a whole: `pair_exposed_fraction` replays this
order with the operators' times and returns the share of the pair's all-to-all time that stays
on the critical path. The compute that runs beside a transfer runs on the SMs the
communication kernels leave (`cost.CostContext.ep_comm_sms`); the combine nodes' own unpermute
and residual add, on the communication stream, share the SMs with the compute beside them
and gain nothing by running beside it.

Which passes have a partner (schedules.py / combined_1f1b.py): only the steady 1F1B phase
pairs a forward with a backward. The warm-up forwards (Megatron schedules one more of them
when the overlap is on) and the cool-down backwards of every stage run alone, and without
pipelining the first forward and the last backward do. `solo_ops` marks them; they keep their
whole all-to-all. Megatron has no combined schedule for non-interleaved pipelining, so with
PP > 1 the overlap needs virtual stages (`runs_megatron_overlap`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from starfabric.astral.seer.ops import OpTable

DISPATCH = "moe.ep_dispatch"
COMBINE = "moe.ep_combine"
SHARED = ("moe.shared", ".head.")
"""Megatron computes the shared experts in the "attn" node, after the router
(transformer_config.py: with the overlap on, 'the shared experts execute after the router,
before the routed experts'). An MTP module's output head and loss (`mtp_post_process`) also
run on the compute stream; they are counted with that node (an approximation: Megatron runs
them after the combine)."""


def runs_megatron_overlap(pp: int, vpp: int) -> bool:
    """Whether Megatron-Core runs its combined 1F1B schedule: without pipelining
    (`combined_1f1b_schedule_for_no_pipelining`) or with interleaving
    (`combined_1f1b_schedule_for_interleaved_pipelining`); the plain 1F1B schedule has none."""
    return pp == 1 or vpp > 1


def _ep_comm(t: OpTable, kind: np.ndarray[Any, Any], comm_kind: int) -> np.ndarray[Any, Any]:
    grp = np.asarray(t.group)
    return (kind == comm_kind) & ((grp == "ep") | (grp == "etp"))


def _run_end(ep: np.ndarray[Any, Any], i: int) -> int:
    """Index after the run of consecutive all-to-all/ETP collectives starting at `i`."""
    while i < len(ep) and ep[i]:
        i += 1
    return i


def _run_start(ep: np.ndarray[Any, Any], i: int) -> int:
    """First index of the run of consecutive collectives ending at `i`."""
    while i > 0 and ep[i - 1]:
        i -= 1
    return i


def _index(t: OpTable, prefix: str) -> int:
    return next(i for i, n in enumerate(t.name) if prefix in n)


def _segments_fwd(t: OpTable, ep: np.ndarray[Any, Any], dur: np.ndarray[Any, Any]) -> list[float]:
    """[attn, dispatch, mlp, combine transfer, combine compute] seconds of a forward MoE layer.
    The dispatch node is the dispatch and the ETP gather right after it; the combine node the
    ETP reduce-scatter and the combine, then the unpermute and the residual add, all on the
    communication stream."""
    d = _index(t, DISPATCH)
    d_end = _run_end(ep, d)
    c0 = _run_start(ep, _index(t, COMBINE))
    seg = [0.0, 0.0, 0.0, 0.0, 0.0]
    for i, n in enumerate(t.name):
        if any(k in n for k in SHARED) or i < d:
            j = 0
        else:
            j = 1 if i < d_end else 2 if i < c0 else 3 if ep[i] else 4
        seg[j] += dur[i]
    return seg


def _segments_bwd(t: OpTable, ep: np.ndarray[Any, Any], dur: np.ndarray[Any, Any]) -> list[float]:
    """[combine compute, combine transfer, mlp dgrad, mlp wgrad, dispatch, attn] seconds of a
    backward MoE layer (the attention's wgrad runs right after its dgrad on the same
    stream)."""
    c_end = _run_end(ep, _index(t, COMBINE))
    d = _index(t, DISPATCH)
    d0 = _run_start(ep, d)
    seg = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
    for i, n in enumerate(t.name):
        if any(k in n for k in SHARED) or i > d:
            j = 5
        elif i < c_end:
            j = 1 if ep[i] else 0
        elif i >= d0:
            j = 4
        else:
            j = 3 if n.endswith(".wgrad") else 2
        seg[j] += dur[i]
    return seg


def _overlap(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    return sum(max(0.0, min(a1, b1) - max(a0, b0)) for a0, a1 in a for b0, b1 in b)


def pair_step(fwd: list[float], bwd: list[float], delay_wgrad: bool) -> tuple[float, float, float]:
    """One layer's combined step in Megatron's stream order and dependencies (module
    docstring): (seconds, seconds of compute-stream work beside a transfer, seconds of it
    beside the combine nodes' own compute). `fwd` = [attn, dispatch, mlp, combine transfer,
    combine compute], `bwd` = [combine compute, combine transfer, mlp dgrad, mlp wgrad,
    dispatch, attn]."""
    a_f, d_f, m_f, cf_x, cf_c = fwd
    cb_c, cb_x, m_bd, m_bw, d_b, a_b = bwd
    cb_end, af_end = cb_c + cb_x, a_f
    mb0 = max(af_end, cb_end)
    mb_end = mb0 + m_bd
    mbw_end = mb_end + m_bw
    df_end = mb0 + d_f
    db0 = max(df_end, mb_end if delay_wgrad else mbw_end)
    db_end = db0 + d_b
    mf0 = max(mbw_end, df_end)
    mf_end = mf0 + m_f
    cf0 = max(db_end, mf_end)
    ab0 = max(mf_end, db_end)
    step = max(ab0 + a_b, cf0 + cf_x + cf_c)
    comp = [(0.0, af_end), (mb0, mbw_end), (mf0, mf_end), (ab0, ab0 + a_b)]
    transfers = [(cb_c, cb_end), (mb0, df_end), (db0, db_end), (cf0, cf0 + cf_x)]
    own = [(0.0, cb_c), (cf0 + cf_x, cf0 + cf_x + cf_c)]
    return step, _overlap(transfers, comp), _overlap(own, comp)


def pair_exposed_fraction(
    ft: OpTable,
    f_time: np.ndarray[Any, Any],
    f_busy: np.ndarray[Any, Any],
    f_kind: np.ndarray[Any, Any],
    bt: OpTable,
    b_time: np.ndarray[Any, Any],
    b_busy: np.ndarray[Any, Any],
    b_kind: np.ndarray[Any, Any],
    comm_kind: int,
    sm_share: float,
    delay_wgrad: bool,
) -> float:
    """Share of a forward + backward MoE layer pair's expert all-to-all time left on the
    critical path by Megatron's combined step. `*_time`: each operator's raw seconds (used for
    the all-to-alls); `*_busy`: its critical-path seconds outside this overlap (other
    collectives already net of their own overlap). The compute beside a transfer is slowed by
    sm_share / (1 - sm_share) (it runs on the SMs the communication kernels leave)."""
    f_ep, b_ep = _ep_comm(ft, f_kind, comm_kind), _ep_comm(bt, b_kind, comm_kind)
    total = float(f_time[f_ep].sum() + b_time[b_ep].sum())
    if total <= 0:
        return 0.0
    f_dur = np.where(f_ep, f_time, f_busy)
    b_dur = np.where(b_ep, b_time, b_busy)
    step, beside, shared = pair_step(
        _segments_fwd(ft, f_ep, f_dur), _segments_bwd(bt, b_ep, b_dur), delay_wgrad
    )
    rest = float(f_busy[~f_ep].sum() + b_busy[~b_ep].sum())
    # two compute kernels side by side share the SMs: no time is gained by running them
    # together (`shared` is added back)
    slowdown = beside * sm_share / (1.0 - sm_share) + shared
    return float(min(1.0, max(0.0, (step + slowdown - rest) / total)))


def solo_ops(is_fwd: np.ndarray[Any, Any], pp: int) -> np.ndarray[Any, Any]:
    """(p, n) int8: 1 where a stage's operation has no partner in the combined schedule —
    the warm-up forwards before the first backward and the cool-down backwards after the
    last forward (`schedule.schedule_order` counts Megatron's extra warm-up forward), or the
    first forward and the last backward without pipelining."""
    p, n = is_fwd.shape
    solo = np.zeros((p, n), np.int8)
    for s in range(p):
        f = is_fwd[s]
        first_b = int(np.argmax(f == 0))
        last_f = n - 1 - int(np.argmax(f[::-1] == 1))
        if first_b > last_f:  # every forward is a warm-up one: nothing is paired
            solo[s] = 1
            continue
        # the steady phase lists each pair as (forward, backward): the forward just before the
        # first backward and the backward just after the last forward are a pair
        warm, cool = first_b - 1, n - 2 - last_f
        if pp == 1:
            warm, cool = max(warm, 1), max(cool, 1)
        solo[s, :warm] = 1
        if cool:
            solo[s, n - cool :] = 1
    return solo
