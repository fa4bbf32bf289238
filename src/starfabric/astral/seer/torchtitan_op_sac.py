"""What TorchTitan's per-op selective activation checkpointing re-runs in the backward.

Read from pytorch/torchtitan 9dec370 (2024-12-26, the release of the 2024-12 H100 tables;
`torchtitan/parallelisms/parallelize_llama.py` l.214-276) and e7c0cae (2025-06, the H200
benchmark; `torchtitan/models/llama3/parallelize_llama.py` l.218-262, the same policy):

- `_save_list` holds `aten.mm`, SDPA's flash and efficient kernels, the functional
  reduce-scatter and `aten.max` (9dec370 also `aten.abs`). `_custom_policy` counts the
  `aten.mm` calls of one checkpointed block (`meta` is created per checkpoint call by
  `selective_checkpointing_context_fn`) and returns MUST_SAVE for an op of the list unless it
  is an even-numbered mm; everything else is PREFER_RECOMPUTE.
- The dense Llama block calls its seven mms in this order (`models/llama/model.py`:
  `self.wq(x), self.wk(x), self.wv(x)`, then `self.wo`; `FeedForward.forward`:
  `self.w2(F.silu(self.w1(x)) * self.w3(x))`): wq, wk, wv, wo, w1, w3, w2. Mm 2, 4 and 6 —
  wk, wo and w3 — are re-run; SDPA is saved (not re-run); every elementwise kernel (norms,
  RoPE, SiLU and the gate product, residual adds, casts) is re-run.
- torchao's Float8Linear (eab345c; `matmul_with_hp_or_float8_args.forward`) multiplies with
  `torch.mm` on its Float8 tensor subclass; the checkpoint's dispatch mode sees that `aten.mm`
  before the subclass turns it into `_scaled_mm`, so Float8 rows count the same seven mms
  (and re-run the re-run GEMMs' input casts with them: Seer's FP8 GEMM time carries its cast).
- With TP, the sequence-parallel all-gather (`_c10d_functional.all_gather_into_tensor`, not in
  the list) runs again; FSDP2's parameter all-gathers are module hooks outside the
  checkpointed function and are not re-run.

Seer's Megatron-style selective recompute re-runs the attention core (`core_attn`) instead: the
opposite choice (TorchTitan saves SDPA and re-runs GEMMs). This module says which operators of a
dense layer's table the policy re-runs (`reruns`, applied by `ops.layer_ops`); the layer table splits the fused QKV and gate/up
GEMMs into TorchTitan's separate `nn.Linear` calls (`ops._attention`, `ops._dense_mlp`) so the
count follows the source. Memory under the policy: `torchtitan_memory.op_sac_bytes_per_token`.
"""

from __future__ import annotations

MM_ORDER = ("attn.wq", "attn.wk", "attn.wv", "attn.proj", "mlp.w1", "mlp.w3", "mlp.fc2")
"""The seven `aten.mm` calls of one dense Llama block in forward order (Seer's operator names;
`attn.proj` is `wo`, `mlp.fc2` is `w2`), torchtitan 9dec370 `models/llama/model.py`."""
SAVED_EVERY = 2
"""`_custom_policy` re-runs every `SAVED_EVERY`-th mm (`meta[mm_count_key] % 2 == 0`)."""
RERUN_COLLECTIVES = ("all_gather",)
"""Collectives of the block outside `_save_list` (TP's sequence-parallel all-gather); the
reduce-scatter is in it (saved)."""

COMPILED_ELEMENTWISE_FUSED = True
"""Under `torch.compile` the re-run elementwise operators cost no pass of their own: TorchTitan
compiles each checkpointed block after applying AC (9dec370 `parallelize_llama.py`:
`apply_ac` then `apply_compile`, `torch.compile(transformer_block, fullgraph=True)`), so
AOTAutograd traces forward and backward of the block together and its partitioner places the
PREFER_RECOMPUTE nodes in the backward graph, where Inductor fuses pointwise nodes into the
kernels that consume them (reading the saved input instead of the output: the same bytes for a
norm, RoPE or SiLU-gate of equal size); the GEMMs and SDPA are extern kernels and are not fused.
Under compile the re-run elementwise ops add no HBM pass (assumption on Inductor's fusion, not
measured here)."""


def rerun_mms() -> tuple[str, ...]:
    """The mms the policy re-runs: the even-numbered ones of MM_ORDER (wk, wo, w3)."""
    return tuple(n for i, n in enumerate(MM_ORDER, start=1) if i % SAVED_EVERY == 0)


def reruns(name: str, kind: str, group: str = "", coll: str = "", eager: bool = True) -> bool:
    """Whether TorchTitan's per-op SAC re-runs one operator of a dense block as a kernel of
    its own (`kind`: "gemm", "mem", "flash", "bmm" or "comm", ops' kinds): the re-run mms,
    unfused attention's batched GEMMs, the TP all-gathers and — run eagerly — every
    memory-bound (elementwise) kernel; not SDPA, not the saved mms, not the reduce-scatters or
    FSDP's gathers. Compiled (`eager` False), the re-run elementwise ops land in the block's
    backward graph beside their consumers (COMPILED_ELEMENTWISE_FUSED)."""
    if kind == "gemm":
        return name in rerun_mms()
    if kind == "bmm":
        return True
    if kind == "mem":
        return eager or not COMPILED_ELEMENTWISE_FUSED
    if kind == "comm":
        return group == "tp" and coll in RERUN_COLLECTIVES
    return False  # "flash": SDPA's output is saved


__all__ = [
    "COMPILED_ELEMENTWISE_FUSED",
    "MM_ORDER",
    "RERUN_COLLECTIVES",
    "SAVED_EVERY",
    "rerun_mms",
    "reruns",
]
