"""Operators of one transformer layer (and the embedding/logits ends) with FLOPs and bytes.

`layer_ops` lists, for one micro-batch on one rank, the forward operators of a dense or MoE
layer in execution order — GEMMs with their (M, N, K), fused or unfused attention, norms,
activations, dropout-adds, the router and token permutation, and the TP/CP/EP collectives
with their buffer sizes — already divided by the parallel layout. `backward_of` derives the
backward operators (two GEMMs per GEMM, AG <-> RS, ...). Tables are flat numpy columns so a
whole model costs a few vector operations.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from starfabric.astral.seer import fp8_attention, te_cp_step, torchtitan_op_sac
from starfabric.astral.seer.expert_sort import (
    PERMUTATION_BWD_BYTES_FACTOR,
    SORT_SUFFIX,
    local_sort_bytes,
)
from starfabric.astral.seer.fp8_amax_reduction import AMAX_BYTES, AMAX_OP, layout_reduces_amax
from starfabric.astral.seer.model import ModelSpec, attention_params, mlp_params, param_counts
from starfabric.astral.seer.moe_probs_a2a import PROB_BYTES
from starfabric.astral.seer.parallel import ExecutionSpec, Layout, cp_split
from starfabric.astral.seer.torchtitan_eager import (
    norm_extra_bytes,
    rope_bytes,
    swiglu_extra_bytes,
)
from starfabric.astral.seer.ulysses import out_bytes, qkv_bytes

GEMM, FLASH, BMM, MEM, COMM = 0, 1, 2, 3, 4
"""Operator kinds."""
KIND_NAMES = ("gemm", "flash", "bmm", "mem", "comm")

NORM_BWD_BYTES_FACTOR = 2.0
"""Backward of a norm moves this many times its forward bytes (assumption: reads input, grad
and statistics, writes grad, plus a weight-grad reduction)."""
ELEMENTWISE_BWD_BYTES_FACTOR = 1.5
"""Backward of an elementwise op reads grad and saved input, writes grad: 3 tensors vs 2
(assumption)."""
FLASH_BWD_FLOPS_FACTOR = 2.5
"""Flash-attention backward executes 2.5x the forward FLOPs (5 matmuls vs 2; FlashAttention-2
paper, Dao 2023, section 3)."""
CP_BWD_BYTES_FACTOR = 2.0
"""The backward ring of context parallelism moves K, V and dK, dV: twice the forward's KV bytes
(Megatron-Core `AttnFuncWithCPAndKVP2P.backward`, which sends the KV block on and the
accumulated dKV block back around the ring)."""
CROSS_ENTROPY_BYTES_PER_LOGIT = 38.0
"""HBM bytes per logit of Megatron's vocab-parallel cross entropy forward in fp32: cast
(r2 w4), max (r4), subtract (r4 w4), exp (r4 w4), sum (r4), softmax kept for backward (r4 w4)
— counted from the PyTorch ops of `vocab_parallel_cross_entropy` (assumption: no fusion)."""
CROSS_ENTROPY_BWD_BYTES_PER_LOGIT = 22.0
"""Backward: softmax - one-hot (r4 w4), scale by the loss grad (r4 w4), cast to 16 bit (r4 w2)."""
MOE_IMBALANCE = 1.1
"""Busiest expert-parallel rank's routed tokens / mean under dropless learned routing
(assumption). Outside check, not a fit (tests/data/published_runs/moe_load_imbalance.md): the
measured per-expert and per-rank loads of trained routers put a rank of 16 of 128 experts at EP 8
at 1.08-1.23 (`scripts/seer_moe_load_imbalance.py`); the model behind that check is not adopted
(docs/astral.md, "Dropless routing's rank imbalance from outside load statistics")."""
ROUTER_BYTES_PER_SCORE = 12.0
"""Router softmax/sigmoid + top-k over fp32 scores: write, re-read and write probabilities
(3 x 4 bytes per token-expert score; assumption)."""
CP_STEP_WORK = "attn.cp_step_merge"
"""The memory-bound merge work around the steps of TE's p2p CP ring (te_cp_step.step_bytes);
its `m` column holds the backward's bytes."""
FP8_DPA_CASTS = "attn.fp8_dpa_casts"
"""Transformer Engine's casts around FP8 attention (fp8_attention.quant_traffic): Q, K, V
quantized before the forward kernel, dO before the backward one (O and dQ, dK, dV dequantized
under delayed scaling); its `m` column holds the backward's bytes."""
MASK_BYTES = 1.0
"""Dropout masks are stored as one byte per element (PyTorch bool)."""


@dataclass
class OpTable:
    """Flat columns of operators; each row one kernel or collective on one rank."""

    name: list[str] = field(default_factory=list)
    kind: list[int] = field(default_factory=list)
    m: list[float] = field(default_factory=list)
    n: list[float] = field(default_factory=list)
    k: list[float] = field(default_factory=list)
    batch: list[float] = field(default_factory=list)
    flops: list[float] = field(default_factory=list)
    nbytes: list[float] = field(default_factory=list)
    coll: list[str] = field(default_factory=list)
    group: list[str] = field(default_factory=list)
    selective: list[bool] = field(default_factory=list)

    def add(self, name: str, kind: int, **kw: Any) -> None:
        """Append one operator; unspecified numbers are 0."""
        self.name.append(name)
        self.kind.append(kind)
        for col in ("m", "n", "k", "batch", "flops", "nbytes"):
            getattr(self, col).append(float(kw.get(col, 0.0)))
        self.coll.append(str(kw.get("coll", "")))
        self.group.append(str(kw.get("group", "")))
        self.selective.append(bool(kw.get("selective", False)))

    def gemm(self, name: str, m: float, n: float, k: float, batch: float = 1.0) -> None:
        """A (batched) GEMM (m x k) @ (k x n)."""
        self.add(name, GEMM, m=m, n=n, k=k, batch=batch, flops=2.0 * m * n * k * batch)

    def mem(self, name: str, nbytes: float, selective: bool = False) -> None:
        """A memory-bound kernel moving `nbytes`."""
        self.add(name, MEM, nbytes=nbytes, selective=selective)

    def comm(self, name: str, coll: str, group: str, nbytes: float) -> None:
        """A collective of `coll` kind over `group` on an `nbytes` buffer."""
        self.add(name, COMM, coll=coll, group=group, nbytes=nbytes)

    def extend(self, other: OpTable, prefix: str = "") -> None:
        """Append every operator of `other`, names prefixed with `prefix`."""
        self.name.extend(prefix + n for n in other.name)
        for col in ("kind", "m", "n", "k", "batch", "flops", "nbytes", "coll", "group",
                    "selective"):  # fmt: skip
            getattr(self, col).extend(getattr(other, col))

    def __len__(self) -> int:
        return len(self.name)

    def arrays(self) -> dict[str, np.ndarray[Any, Any]]:
        """The numeric columns as numpy arrays."""
        return {
            c: np.asarray(getattr(self, c), dtype=np.float64)
            for c in ("m", "n", "k", "batch", "flops", "nbytes")
        } | {"kind": np.asarray(self.kind, dtype=np.int64)}


@dataclass(frozen=True)
class Local:
    """Per-rank sizes of one micro-batch."""

    tokens: float  # tokens in the TP region (full sequence shard of this CP rank)
    tokens_sp: float  # tokens held outside TP regions (divided by tp with SP)
    seq: float  # keys each query attends to (full sequence)
    elem: float  # bytes per activation element
    heads: float
    kv_heads: float
    tp: int


def local_sizes(model: ModelSpec, ex: ExecutionSpec, lay: Layout) -> Local:
    """Token and head counts one rank handles for one micro-batch."""
    tokens = ex.micro_batch * ex.seq_len / lay.cp
    return Local(
        tokens=tokens,
        tokens_sp=tokens / lay.tp if lay.sp else tokens,
        seq=float(ex.seq_len),
        elem=2.0,
        heads=model.heads / lay.tp,
        kv_heads=max(1.0, model.kv_heads / lay.tp),
        tp=lay.tp,
    )


def _tp_enter(t: OpTable, loc: Local, h: int, tag: str) -> None:
    if loc.tp > 1 and loc.tokens_sp < loc.tokens:
        t.comm(f"{tag}.tp_all_gather", "all_gather", "tp", loc.elem * loc.tokens * h)


def _tp_exit(t: OpTable, loc: Local, h: int, tag: str) -> None:
    if loc.tp > 1:
        coll = "reduce_scatter" if loc.tokens_sp < loc.tokens else "all_reduce"
        t.comm(f"{tag}.tp_{coll}", coll, "tp", loc.elem * loc.tokens * h)


def _attention(
    t: OpTable, model: ModelSpec, ex: ExecutionSpec, lay: Layout, loc: Local, moe: bool = False
) -> None:
    h, e, tok = model.hidden, loc.elem, loc.tokens
    mods = set(ex.recompute_modules)
    if layout_reduces_amax(ex, lay):
        # TE current scaling / NVFP4 with SP: the QKV input's amax over TP (fp8_amax_reduction).
        t.comm(f"attn.{AMAX_OP}", "all_reduce", "tp", AMAX_BYTES)
    t.mem("attn.norm", 2 * e * loc.tokens_sp * h, selective="layernorm" in mods)
    _tp_enter(t, loc, h, "attn")
    dq, dv = model.qk_head_dim, model.vo_head_dim
    if model.is_mla:
        if model.q_lora_rank:
            t.gemm("attn.q_down", tok, model.q_lora_rank, h)
            t.mem("attn.q_norm", 2 * e * tok * model.q_lora_rank)
            t.gemm("attn.q_up", tok, loc.heads * dq, model.q_lora_rank)
            t.selective[-1] = "mla_up_proj" in mods
        else:
            t.gemm("attn.q", tok, loc.heads * dq, h)
        t.gemm("attn.kv_down", tok, model.kv_lora_rank + model.qk_rope_head_dim, h)
        t.mem("attn.kv_norm", 2 * e * tok * model.kv_lora_rank)
        t.gemm("attn.kv_up", tok, loc.heads * (model.head_dim + dv), model.kv_lora_rank)
        t.selective[-1] = "mla_up_proj" in mods
    elif op_sac(model, ex, moe):
        # TorchTitan's Llama: three nn.Linear calls, wq, wk, wv (torchtitan_op_sac).
        t.gemm("attn.wq", tok, loc.heads * model.head_dim, h)
        t.gemm("attn.wk", tok, loc.kv_heads * model.head_dim, h)
        t.gemm("attn.wv", tok, loc.kv_heads * model.head_dim, h)
    else:
        t.gemm("attn.qkv", tok, (loc.heads + 2 * loc.kv_heads) * model.head_dim, h)
    # TransformerEngine's CP implementations (cp_comm.py): heads split over `a2a` ranks by
    # all-to-alls (Ulysses / TE a2a; the first level of a2a+p2p), KV blocks around a ring of
    # `ring` ranks (TE p2p; the second level), or K and V all-gathered (TE all_gather).
    a2a, ring = cp_split(ex, lay)
    a2a_grp = "cp" if ring == 1 else "cp_a2a"
    if a2a > 1:
        # Q, K, V re-partitioned from local tokens to heads per rank (ulysses.py).
        nbytes = qkv_bytes(tok, loc.heads, loc.kv_heads, dq, dv, e, ex.ulysses_repeat_kv)
        t.comm("attn.ulysses_qkv_all_to_all", "all_to_all", a2a_grp, nbytes)
    # After the all-to-all a rank holds a2a x its tokens on heads / a2a: the same KV bytes.
    kv_bytes = e * tok * loc.kv_heads * (dq + dv)
    if ring > 1:
        # Ring attention passes K and V around the CP ring once per step (ring-1 steps).
        t.comm("attn.cp_kv_ring", "p2p", "cp" if a2a == 1 else "cp_p2p", kv_bytes * (ring - 1))
    elif lay.cp > 1 and ex.cp_algorithm == "all_gather":
        # TE all_gather: every rank's K and V gathered before the kernels (output buffer).
        t.comm("attn.cp_kv_all_gather", "all_gather", "cp", kv_bytes * lay.cp)
    b = ex.micro_batch
    core = "core_attn" in mods
    if ex.attention == "flash":
        # Causal: each query sees loc.seq/2 keys on average; a sliding window fewer (flash
        # kernels skip the masked-out key blocks; the unfused path below computes them all).
        keys = model.attended_keys(int(loc.seq))
        flops = 2.0 * tok * keys * loc.heads * (dq + dv)
        # k: keys one query meets in one kernel call (with CP, one ring step covers 1/ring of
        # them), which sets how well the kernel amortizes its per-query-block work.
        # Ulysses / all_gather: calls over the whole sequence (heads / cp of the heads; or
        # the two local query chunks against every earlier key: s/2 keys on average).
        k_call = keys / ring
        t.add("attn.core_flash", FLASH, flops=flops, k=k_call, selective=core)
        if ex.fp8_attention is not None:
            # FP8 attention (fp8_attention.py): TE quantizes this rank's Q, K, V once per
            # layer (before any CP ring) and dO once; a rank holds tok x heads values of each
            # (after Ulysses' all-to-all: a2a x tok on heads / a2a, the same count).
            qkv = tok * (loc.heads * dq + loc.kv_heads * (dq + dv))
            fwd_c, bwd_c = fp8_attention.quant_traffic(ex.fp8_attention, qkv, tok * loc.heads * dv)
            t.add(FP8_DPA_CASTS, MEM, nbytes=fwd_c, m=bwd_c, selective=core)
        if ring > 1 and ex.flash_kernel == "cudnn" and ex.te_cp_merge:
            # TE's p2p ring merges each step's partial output, LSE, dQ and dK/dV with
            # memory-bound ops on the compute stream (te_cp_step); after the all-to-all of
            # a2a+p2p a rank holds a2a x its tokens on heads / a2a.
            fwd_b, bwd_b = te_cp_step.step_bytes(
                tok * a2a, loc.heads / a2a, loc.kv_heads / a2a, dq, dv, ring,
                te_cp_step.parse_release(ex.te_release) if ex.te_release else None, e,
            )  # fmt: skip
            # m carries the backward's bytes (backward_of), which differ from the forward's.
            t.add(CP_STEP_WORK, MEM, nbytes=fwd_b, m=bwd_b, selective=core)
    else:
        s_loc = tok / b
        bh = b * loc.heads
        t.add(
            "attn.core_qk", BMM, m=s_loc, n=loc.seq, k=dq, batch=bh,
            flops=2.0 * s_loc * loc.seq * dq * bh, selective=core,
        )  # fmt: skip
        scores = bh * s_loc * loc.seq
        t.mem("attn.core_softmax", 2 * e * scores, selective=core)
        if model.attention_dropout:
            t.mem("attn.core_dropout", (2 * e + MASK_BYTES) * scores, selective=core)
        t.add(
            "attn.core_av", BMM, m=s_loc, n=dv, k=loc.seq, batch=bh,
            flops=2.0 * s_loc * loc.seq * dv * bh, selective=core,
        )  # fmt: skip
    if a2a > 1:
        t.comm("attn.ulysses_out_all_to_all", "all_to_all", a2a_grp,
               out_bytes(tok, loc.heads, dv, e))  # fmt: skip
    t.gemm("attn.proj", tok, h, loc.heads * dv)
    if model.parallel_block:
        return  # the MLP reads the same normed input; one reduction closes both branches
    _tp_exit(t, loc, h, "attn")
    t.mem("attn.dropout_add", (3 * e + MASK_BYTES) * loc.tokens_sp * h)


def _dense_mlp(
    t: OpTable, model: ModelSpec, loc: Local, ffn: int, tag: str, split_gate: bool = False
) -> None:
    h, e, tok = model.hidden, loc.elem, loc.tokens
    gated = model.activation == "swiglu"
    if gated and split_gate:
        # TorchTitan's FeedForward: w2(silu(w1(x)) * w3(x)), two nn.Linear calls.
        t.gemm(f"{tag}.w1", tok, ffn / loc.tp, h)
        t.gemm(f"{tag}.w3", tok, ffn / loc.tp, h)
    else:
        t.gemm(f"{tag}.fc1", tok, (2 if gated else 1) * ffn / loc.tp, h)
    t.mem(f"{tag}.act", e * tok * ffn / loc.tp * (3 if gated else 2))
    t.gemm(f"{tag}.fc2", tok, h, ffn / loc.tp)


def _moe_mlp(
    t: OpTable,
    model: ModelSpec,
    lay: Layout,
    loc: Local,
    act_rec: bool,
    imb: float,
    dispatcher: str = "alltoall",
    fused_dispatch: bool = False,
    probs_all_to_all: bool = False,
    shared_amax: bool = False,
    fused_grouped_mlp: bool = False,
) -> None:
    h, e = model.hidden, loc.elem
    # A fused dispatch-compute-combine backend (TorchTitan DistMoE: `DistMoeRoutedExperts.
    # forward` hands the unpermuted local tokens and the top-k expert IDs to one
    # `dist_moe.routed_experts` call that "owns dispatch, SwiGLU, expert GEMMs, and combine",
    # torchtitan models/common/dist_moe.py @2e4b4a4) reads each token where it lies and
    # writes the combined output in token order: no permute / local sort / unpermute
    # kernels of their own (their traffic is the dispatch's and the combine's).
    permutes = not fused_dispatch
    probs_a2a = probs_all_to_all and dispatcher == "alltoall" and permutes and lay.ep > 1
    tok = loc.tokens_sp  # the token dispatcher works on the local sequence shard
    k, experts = model.moe_topk, model.moe_experts
    # `imb`: the busiest rank receives imb x the mean tokens and everyone waits for it at the
    # combine (moe_imbalance).
    t.gemm("moe.router", tok, experts, h)
    t.mem("moe.topk", ROUTER_BYTES_PER_SCORE * tok * experts)
    if permutes:
        # m, n: the rows and their width (scatter_unpermute prices the atomic ones by element)
        t.add("moe.permute", MEM, nbytes=2 * e * tok * k * h, m=tok * k, n=h)
    t.comm("moe.ep_dispatch", "all_to_all", "ep", e * tok * k * h * imb)
    if probs_a2a:
        # Megatron-Core >= 0.13: the probabilities' own all-to-all (moe_probs_a2a).
        t.comm("moe.ep_dispatch_probs", "all_to_all", "ep", PROB_BYTES * tok * k * imb)
    if lay.etp > 1:
        t.comm("moe.etp_all_gather", "all_gather", "etp", e * tok * k * h * lay.etp)
        if probs_a2a:
            t.comm("moe.etp_all_gather_probs", "all_gather", "etp", PROB_BYTES * tok * k * lay.etp)
    local_experts = experts / lay.ep
    per_expert = tok * k * lay.ep * lay.etp / experts * imb
    sort = (
        local_sort_bytes(dispatcher, local_experts, per_expert * local_experts, h, e)
        if permutes
        else 0.0
    )
    if sort:
        t.mem(f"moe.{SORT_SUFFIX}", sort)
    gated = model.activation == "swiglu"
    f = model.moe_ffn_hidden / lay.etp
    t.gemm("moe.expert_fc1", per_expert, (2 if gated else 1) * f, h, batch=local_experts)
    if not (fused_grouped_mlp and gated):
        # TE's fused grouped MLP runs SwiGLU in the GEMMs' epilogues (fused_grouped_mlp.py).
        t.mem("moe.expert_act", e * per_expert * local_experts * f * (3 if gated else 2),
              selective=act_rec)  # fmt: skip
    t.gemm("moe.expert_fc2", per_expert, h, f, batch=local_experts)
    if sort:
        t.mem(f"moe.un{SORT_SUFFIX}", sort)
    if lay.etp > 1:
        t.comm("moe.etp_reduce_scatter", "reduce_scatter", "etp", e * tok * k * h * lay.etp)
    t.comm("moe.ep_combine", "all_to_all", "ep", e * tok * k * h * imb)
    if permutes:
        t.add("moe.unpermute", MEM, nbytes=2 * e * tok * k * h, m=tok * k, n=h)
    if model.moe_shared_experts:
        if shared_amax:
            # The shared experts' FC1 input (TEColumnParallelLinear with SP, not GroupedLinear):
            # its amax over TP as a dense MLP's (fp8_amax_reduction).
            t.comm(f"moe.shared.{AMAX_OP}", "all_reduce", "tp", AMAX_BYTES)
        _tp_enter(t, loc, h, "moe.shared")
        _dense_mlp(t, model, loc, model.moe_ffn_hidden * model.moe_shared_experts, "moe.shared")
        _tp_exit(t, loc, h, "moe.shared")


def moe_imbalance(ex: ExecutionSpec) -> float:
    """Busiest expert rank's tokens / mean: MOE_IMBALANCE when dropless, 1 under forced
    balancing (a benchmark setting), at most the capacity factor when tokens are dropped."""
    if ex.moe_load_balance == "forced":
        return 1.0
    if ex.moe_capacity_factor is not None:
        return min(MOE_IMBALANCE, max(1.0, ex.moe_capacity_factor))
    return MOE_IMBALANCE


def layer_ops(model: ModelSpec, ex: ExecutionSpec, lay: Layout, moe: bool) -> OpTable:
    """Forward operators of one layer for one micro-batch on one rank."""
    loc = local_sizes(model, ex, lay)
    t = OpTable()
    _attention(t, model, ex, lay, loc, moe)
    h, e = model.hidden, loc.elem
    if model.parallel_block and not moe:
        # Parallel transformer block (GPT-J/PaLM, MegaScale section 3.1): y = x + attn(n(x)) +
        # mlp(n(x)): one norm, one SP all-gather and one reduce-scatter per layer.
        _dense_mlp(t, model, loc, model.ffn_hidden, "mlp")
        _tp_exit(t, loc, h, "mlp")
        t.mem("mlp.dropout_add", (4 * e + MASK_BYTES) * loc.tokens_sp * h)
        if ex.zero == 3 and lay.dp * lay.cp > 1 and lay.pp == 1:
            _fsdp(t, model, lay, moe)
        return t
    if not moe and layout_reduces_amax(ex, lay):
        # The FC1 input's amax over TP (fp8_amax_reduction; TE's GroupedLinear experts have none).
        t.comm(f"mlp.{AMAX_OP}", "all_reduce", "tp", AMAX_BYTES)
    t.mem("mlp.norm", 2 * e * loc.tokens_sp * h, selective="layernorm" in ex.recompute_modules)
    first = len(t)
    if moe:
        _moe_mlp(
            t,
            model,
            lay,
            loc,
            "moe_act" in ex.recompute_modules,
            moe_imbalance(ex),
            ex.moe_dispatcher,
            ex.moe_fused_dispatch,
            ex.moe_probs_all_to_all,
            layout_reduces_amax(ex, lay),
            ex.moe_fused_grouped_mlp,
        )
    else:
        _tp_enter(t, loc, h, "mlp")
        _dense_mlp(t, model, loc, model.ffn_hidden, "mlp", op_sac(model, ex, moe))
        _tp_exit(t, loc, h, "mlp")
    if ("moe" if moe else "mlp") in ex.recompute_modules:
        # Megatron-Core --recompute-modules moe / mlp: the whole (MoE) MLP is re-run in the
        # backward, its token dispatch and combine included; only its input is kept.
        for i in range(first, len(t)):
            t.selective[i] = True
    t.mem("mlp.dropout_add", (3 * e + MASK_BYTES) * loc.tokens_sp * h)
    if ex.eager_elementwise and not moe and not model.is_mla:
        _eager_elementwise(t, model, ex, loc)
    if op_sac(model, ex, moe):
        # TorchTitan's per-op SAC re-runs its own set, not Megatron's modules.
        for i in range(len(t)):
            t.selective[i] = torchtitan_op_sac.reruns(
                t.name[i], _KIND_NAMES[t.kind[i]], t.group[i], t.coll[i], ex.eager_elementwise
            )
    if ex.zero == 3 and lay.dp * lay.cp > 1 and lay.pp == 1:
        _fsdp(t, model, lay, moe)
    return t


_KIND_NAMES = {GEMM: "gemm", FLASH: "flash", BMM: "bmm", MEM: "mem", COMM: "comm"}


def op_sac(model: ModelSpec, ex: ExecutionSpec, moe: bool) -> bool:
    """Whether a layer's selective recompute is TorchTitan's per-op SAC on a dense, non-MLA
    Llama block (torchtitan_op_sac; the same condition as its memory, activations.py)."""
    return ex.torchtitan_op_sac and ex.recompute == "selective" and not moe and not model.is_mla


def _eager_elementwise(t: OpTable, model: ModelSpec, ex: ExecutionSpec, loc: Local) -> None:
    """What TorchTitan's eager Llama moves beyond the fused kernels above (torchtitan_eager):
    two norms, RoPE on queries and keys, the unfused SwiGLU. Its op-level selective
    checkpointing re-runs every elementwise operator, so they are recompute when it is on."""
    h = model.hidden
    rec = ex.recompute == "selective"
    t.mem("attn.eager_norm", norm_extra_bytes(loc.tokens_sp, h), selective=rec)
    qk = (loc.heads + loc.kv_heads) * model.head_dim
    t.mem("attn.eager_rope", rope_bytes(loc.tokens, qk), selective=rec)
    t.mem("mlp.eager_norm", norm_extra_bytes(loc.tokens_sp, h), selective=rec)
    if model.activation == "swiglu":
        t.mem("mlp.eager_swiglu", swiglu_extra_bytes(loc.tokens, model.ffn_hidden / loc.tp),
              selective=rec)  # fmt: skip


def _fsdp(t: OpTable, model: ModelSpec, lay: Layout, moe: bool) -> None:
    """ZeRO-3 / FSDP: gather this layer's 16-bit parameters before its forward (prefetched,
    so it overlaps the layer's compute); the backward re-gathers them and reduce-scatters the
    gradients (`backward_of` adds both). How fast the gathers run (per-parameter vs flat
    buffers) is the cost model's business (`cost.PER_PARAMETER_RAILS`)."""
    dense = attention_params(model) / lay.tp
    if moe:
        shared = model.moe_shared_experts * mlp_params(model, model.moe_ffn_hidden) / lay.tp
        dense += shared + model.moe_experts * model.hidden
        experts = model.moe_experts / lay.ep * mlp_params(model, model.moe_ffn_hidden) / lay.etp
        t.comm("fsdp.expert_param_all_gather", "all_gather", "fsdp_edp", 2.0 * experts)
    else:
        dense += mlp_params(model, model.ffn_hidden) / lay.tp
    t.comm("fsdp.param_all_gather", "all_gather", "fsdp_dp", 2.0 * dense)


def mtp_ops(model: ModelSpec, ex: ExecutionSpec, lay: Layout) -> OpTable:
    """Forward operators of the multi-token-prediction modules (DeepSeek-V3 section 2.2), run
    on the last pipeline stage beside the output head: per module two norms, the embedding of
    the shifted tokens, the 2h -> h projection, one transformer block (MoE when the model is),
    and the shared output head with its loss."""
    t = OpTable()
    loc = local_sizes(model, ex, lay)
    h, e = model.hidden, loc.elem
    for i in range(model.mtp_layers):
        tag = f"mtp{i}"
        t.mem(f"{tag}.embed", 2 * e * loc.tokens_sp * h)
        t.mem(f"{tag}.norm_hidden", 2 * e * loc.tokens_sp * h)
        t.mem(f"{tag}.norm_embed", 2 * e * loc.tokens_sp * h)
        t.gemm(f"{tag}.proj", loc.tokens_sp, h, 2 * h)
        t.extend(layer_ops(model, ex, lay, moe=model.is_moe), f"{tag}.")
        t.extend(logits_ops(model, ex, lay), f"{tag}.")
    return t


def embedding_ops(model: ModelSpec, ex: ExecutionSpec, lay: Layout) -> OpTable:
    """Forward operators of the input embedding (first pipeline stage)."""
    loc = local_sizes(model, ex, lay)
    t = OpTable()
    t.mem("embed.lookup", 2 * loc.elem * loc.tokens * model.hidden)
    _tp_exit(t, loc, model.hidden, "embed")
    return t


def logits_ops(model: ModelSpec, ex: ExecutionSpec, lay: Layout) -> OpTable:
    """Forward operators of the final norm, output projection and loss (last stage)."""
    loc = local_sizes(model, ex, lay)
    t = OpTable()
    t.mem("head.norm", 2 * loc.elem * loc.tokens_sp * model.hidden)
    _tp_enter(t, loc, model.hidden, "head")
    t.gemm("head.logits", loc.tokens, model.vocab / lay.tp, model.hidden)
    t.mem("head.cross_entropy", CROSS_ENTROPY_BYTES_PER_LOGIT * loc.tokens * model.vocab / lay.tp)
    if lay.tp > 1:
        t.comm("head.loss_all_reduce", "all_reduce", "tp", 3 * 4 * loc.tokens)
    return t


_BWD_COLL = {"all_gather": "reduce_scatter", "reduce_scatter": "all_gather"}


def backward_of(fwd: OpTable) -> OpTable:
    """Backward operators of a forward table, in backward execution order."""
    t = OpTable()
    a = fwd.arrays()
    for i in range(len(fwd) - 1, -1, -1):
        name, kind = fwd.name[i], fwd.kind[i]
        m, n, k, bt = a["m"][i], a["n"][i], a["k"][i], a["batch"][i]
        sel = fwd.selective[i]
        if kind == GEMM:
            t.gemm(f"{name}.dgrad", m, k, n, bt)
            t.gemm(f"{name}.wgrad", k, n, m, bt)
        elif kind == BMM:
            t.add(f"{name}.bwd_a", BMM, m=m, n=k, k=n, batch=bt, flops=a["flops"][i], selective=sel)
            t.add(f"{name}.bwd_b", BMM, m=k, n=n, k=m, batch=bt, flops=a["flops"][i], selective=sel)
        elif kind == FLASH:
            t.add(f"{name}.bwd", FLASH, flops=FLASH_BWD_FLOPS_FACTOR * a["flops"][i], k=k)
        elif kind == MEM and name in (CP_STEP_WORK, FP8_DPA_CASTS):
            t.mem(f"{name}.bwd", a["m"][i])
        elif kind == MEM:
            if name.endswith("cross_entropy"):
                factor = CROSS_ENTROPY_BWD_BYTES_PER_LOGIT / CROSS_ENTROPY_BYTES_PER_LOGIT
            elif "norm" in name:
                factor = NORM_BWD_BYTES_FACTOR
            elif name.endswith(SORT_SUFFIX):
                factor = PERMUTATION_BWD_BYTES_FACTOR
            else:
                factor = ELEMENTWISE_BWD_BYTES_FACTOR
            t.add(f"{name}.bwd", MEM, nbytes=factor * a["nbytes"][i], m=m, n=n)
        elif fwd.group[i] in ("cp", "cp_p2p") and fwd.coll[i] == "p2p":
            # The ring's backward passes K and V again and returns their gradients (dK, dV)
            # to the owner: twice the forward bytes (Megatron-Core AttnFuncWithCPAndKVP2P).
            t.comm(f"{name}.bwd", "p2p", fwd.group[i], CP_BWD_BYTES_FACTOR * a["nbytes"][i])
        elif fwd.group[i] == "cp" and fwd.coll[i] == "all_gather":
            # TE all_gather's backward gathers K and V again and reduce-scatters dK, dV
            # (BF16, the same buffer size: cp_comm.py).
            t.comm(f"{name}.bwd", "all_gather", "cp", a["nbytes"][i])
            t.comm(f"{name}.dkv_reduce_scatter", "reduce_scatter", "cp", a["nbytes"][i])
        elif name.startswith("fsdp."):
            t.comm(f"{name}.bwd", "all_gather", fwd.group[i], a["nbytes"][i])
            t.comm(f"{name}.grad_reduce_scatter", "reduce_scatter", fwd.group[i], a["nbytes"][i])
        else:
            coll = _BWD_COLL.get(fwd.coll[i], fwd.coll[i])
            t.comm(f"{name}.bwd", coll, fwd.group[i], a["nbytes"][i])
    return t


def flops_per_token_6nd(model: ModelSpec, seq_len: int) -> float:
    """Model FLOPs per token (forward + backward) by the 6N rule plus causal attention:
    6 * active non-embedding params + 6 * seq * layers * heads * (dq + dv) / 2, with the
    keys a query sees reduced by a sliding window (MegaScale counts the reduced FLOPs)."""
    pc = param_counts(model)
    non_emb = pc.active - pc.embedding + model.vocab * model.hidden  # logits GEMM counts
    attn = (
        6.0 * model.attended_keys(seq_len) * model.layers * model.heads
        * (model.qk_head_dim + model.vo_head_dim)
    )  # fmt: skip
    return 6.0 * non_emb + attn


def megatron_model_flops(
    model: ModelSpec, tokens: float, seq_len: int, causal: bool = False
) -> float:
    """FLOPs per iteration by Megatron-LM's `num_floating_point_operations` (training.py):
    attention, gated MLP x1.5, top-k routed plus shared experts on MoE layers and the dense MLP
    on the others (later Megatron-Core; r0.8 is the same for dense models), logits; no
    recompute. `causal=False`: the full s x s score matrix (12 s/h), as Megatron-LM printed up
    to core_v0.11 and NeMo's flops_formulas.py up to 2.4; `causal=True`: half of it (6 s/h),
    as Megatron-LM from commit 8873b55 (2025-03-06, "only half of the attention matrix is
    non-zero", first released in core_v0.12.0) and NeMo from commit 6251117 (2025-08-09,
    `causal_self_attn`, first released in 2.5.0) count it (`MEGATRON_CAUSAL_SINCE`)."""
    if causal and (model.is_mla or model.mtp_layers):
        return megatron_core_transformer_flops(model, tokens, seq_len)
    h, L = model.hidden, model.layers
    qproj = model.heads * model.head_dim / h
    gated = 1.5 if model.activation == "swiglu" else 1.0
    mlp = model.dense_layers * model.ffn_hidden
    if model.is_moe:
        mlp += model.moe_layers * model.moe_ffn_hidden * (model.moe_topk + model.moe_shared_experts)
    return (
        12.0 * tokens * L * h * h
        * (
            (1 + model.kv_heads / model.heads + seq_len / h * (0.5 if causal else 1.0)) * qproj
            + mlp / (L * h) * gated
            + model.vocab / (2 * L * h)
        )
    )  # fmt: skip


def megatron_core_transformer_flops(model: ModelSpec, tokens: float, seq_len: int) -> float:
    """FLOPs per iteration as Megatron-Core's `num_floating_point_operations` counts a
    transformer from core_v0.12.0 on (`transformer_flops` in megatron/training/training.py, the
    same terms at core_v0.13.0 and at effebd81, 2025-11-02): causal attention; for MLA its own
    projections (commit d4f9a6f, 2025-04-03: q down/up with `q_lora_rank` + 1 for the norm, kv
    down/up with `kv_lora_rank` + 1, the decoupled RoPE key h x rope, the output projection,
    and the core attention s x heads x (qk + rope) / 2 plus s x heads x v / 2); and
    `mtp_num_layers` MTP modules counted as extra layers of the last layer's kind, their two
    norms and h x 2h projection, and one more logits GEMM each. Without MLA or MTP it equals
    `megatron_model_flops(causal=True)`."""
    h = model.hidden
    mtp = model.mtp_layers
    layers = model.layers + mtp
    last_moe = model.is_moe and model.moe_layers > 0  # Megatron's pattern: dense layers first
    moe_layers = model.moe_layers + (mtp if last_moe else 0)
    dense_layers = model.dense_layers + (0 if last_moe else mtp)
    gated = 1.5 if model.activation == "swiglu" else 1.0
    mlp = dense_layers * model.ffn_hidden * gated
    if model.is_moe:
        shared = model.moe_shared_experts * model.moe_ffn_hidden
        mlp += moe_layers * (model.moe_ffn_hidden * model.moe_topk + shared) * gated
    heads, s = model.heads, float(seq_len)
    if model.is_mla:
        qk, rope, v = model.head_dim, model.qk_rope_head_dim, model.v_head_dim
        if model.q_lora_rank:
            q_term = model.q_lora_rank * (h + heads * (qk + rope) + 1)
        else:
            q_term = h * heads * (qk + rope)
        attn = 6.0 * (
            q_term
            + model.kv_lora_rank * (h + heads * (qk + v) + 1)
            + h * rope
            + heads * v * h
            + s * heads * (qk + rope) / 2
            + s * heads * v / 2
        )
    else:
        q = model.head_dim * heads
        kv = model.head_dim * model.kv_heads
        attn = 6.0 * (h * (q + 2 * kv) + q * s / 2 * 2 + q * h)
    per_token = (
        12.0 * h * mlp
        + attn * layers
        + 6.0 * mtp * (3 * h + 2 * h * h)
        + 6.0 * h * model.vocab * (mtp + 1)
    )
    return tokens * per_token


def narayanan_hardware_flops(model: ModelSpec, tokens: float, seq_len: int) -> float:
    """FLOPs per iteration by Narayanan et al. SC'21 Eq. 3 (GPT, full recompute counted):
    96 B s l h^2 (1 + s/6h + V/(16 l h))."""
    h, L = model.hidden, model.layers
    return 96.0 * tokens * L * h * h * (1 + seq_len / (6 * h) + model.vocab / (16 * L * h))
