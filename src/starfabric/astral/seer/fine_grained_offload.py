"""Megatron-Core's fine-grained activation offloading of the MoE experts' inputs.

`--fine-grained-activation-offloading --offload-modules expert_fc1 moe_act` (NVIDIA/Megatron-LM
b97184db56, 2026-01-16, #1913, `megatron/core/pipeline_parallel/fine_grained_activation_offload.py`
and `TransformerConfig.offload_modules`): during a layer's forward pass the *input* of each named
module is copied to host memory on a side stream and the device copy is released; before the
layer's backward it is reloaded (prefetched one layer ahead). The feature's guide
(docs/.../fine_grained_activation_offloading.md at that commit) states the intent: "offloading
could utilize the host-device bandwidth to achieve nearly zero-overhead ... Make sure the
offloading/reloading could be overlapped with computing". Of its choices Seer models the two
expert modules, whose inputs are the largest tensors a MoE layer saves:

- `expert_fc1`: the grouped FC1 GEMM's input, the k dispatched token copies of the rank's tokens
  (hidden wide; its FP8 cast under an FP8 recipe, as `activations.activation_bytes_per_layer`
  counts it);
- `moe_act`: the expert activation's input, the FC1 output (2 x moe_ffn wide for SwiGLU, 16-bit).

With `moe_act` also recomputed (`--recompute-modules moe_act`) the activation's *output* is not
saved and its input is what the recompute re-runs from: the offloaded tensor is the same input.
A layer whose whole MoE block is recomputed (`moe`) saves neither, so nothing is offloaded.

Time: each MoE layer's forward writes those bytes out and its backward reads them back over the
GPU's host link (NVLink-C2C to Grace on GB200/GB300, PCIe on x86 hosts), on the copy engine beside
the layer's own compute, so only what a pass's transfer exceeds that pass's compute is exposed
(`offload.exposed`, the model Seer's whole-layer activation offload uses). Memory: HBM keeps
`offload.RESIDENT_LAYERS` layers' worth of the offloaded tensors (the layer computing and the one
in flight), the rest lives in host memory.
"""

from __future__ import annotations

import re

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer import offload
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.parallel import ExecutionSpec, Layout
from starfabric.astral.seer.statements import stated

EXPERT_MODULES = ("expert_fc1", "moe_act")
"""`--offload-modules` choices Seer models (Megatron-LM b97184db56 `TransformerConfig.offload_modules`:
"expert_fc1": offload the input of the expert fc1 part; "moe_act": the input of the moe act part)."""
OTHER_MODULES = ("attn_norm", "qkv_linear", "core_attn", "attn_proj", "mlp_norm")
"""The other choices at b97184db56, not modelled: a row stating one is read without it (noted)."""


_FEATURE = re.compile(r"fine[-_ ]grained[-_ ]activation[-_ ]offload(?:ing)?", re.I)
"""The feature as a cell states it ("--fine-grained-activation-offloading", "fine-grained
activation offloading"); negated mentions ("no fine-grained activation offloading") are not."""
_MODULES = re.compile(r"offload[-_ ]modules\s*=?\s*((?:[a-z][a-z0-9_]*[\s,]*)+)", re.I)
"""`--offload-modules a b` (or "offload_modules=a,b"): the names that follow the flag."""


def stated_offload_modules(*cells: str | None) -> tuple[tuple[str, ...], tuple[str, ...]] | None:
    """(modelled, not modelled) `--offload-modules` a row's cells state with the feature on,
    in `EXPERT_MODULES` / `OTHER_MODULES` order; None when no cell states the feature (or every
    mention is negated). The feature named without modules offloads nothing Seer can price:
    Megatron-Core rejects an empty module list (transformer_config.py at b97184db56)."""
    if not stated(_FEATURE, *cells):
        return None
    names: set[str] = set()
    for cell in cells:
        for m in _MODULES.finditer(cell or ""):
            names |= {n.lower() for n in re.split(r"[\s,]+", m.group(1)) if n}
    return (
        tuple(n for n in EXPERT_MODULES if n in names),
        tuple(n for n in OTHER_MODULES if n in names),
    )


def offloaded_bytes_per_layer(model: ModelSpec, ex: ExecutionSpec, lay: Layout) -> float:
    """Bytes one MoE layer moves to host memory per micro-batch on one rank (0 when the job
    offloads no expert module, the model has no experts, or the whole MoE layer is recomputed)."""
    mods = set(ex.offload_modules)
    if not mods or not model.is_moe:
        return 0.0
    if ex.recompute == "full" or (ex.recompute == "selective" and "moe" in ex.recompute_modules):
        return 0.0
    g = 1.0 if ex.precision == "fp8" else 2.0  # a GEMM input: its FP8 cast under FP8
    tok = ex.micro_batch * ex.seq_len / lay.cp
    share = lay.etp / (lay.tp if lay.sp else 1)  # token copies a rank holds, per token
    copies = share * model.moe_topk * tok
    f = model.moe_ffn_hidden / lay.etp
    per_copy = 0.0
    if "expert_fc1" in mods:
        per_copy += g * model.hidden
    if "moe_act" in mods:
        per_copy += 2.0 * f * (2 if model.activation == "swiglu" else 1)
    return per_copy * copies


def link_bytes_per_s(gpu: GPUSpec) -> float:
    """Achievable bytes/s per direction to host memory: the Grace tier's link where the GPU has
    one, else the host link (PCIe); the fraction of `offload.LINK_FRACTION` either way."""
    gbps = gpu.offload_gbps or gpu.host_link_gbps or 0.0
    return gbps * 1e9 * offload.LINK_FRACTION


def resident_bytes(per_layer: float) -> float:
    """Offloaded bytes that stay in HBM at once: `offload.RESIDENT_LAYERS` layers' worth."""
    return offload.RESIDENT_LAYERS * per_layer


__all__ = [
    "EXPERT_MODULES",
    "OTHER_MODULES",
    "link_bytes_per_s",
    "offloaded_bytes_per_layer",
    "resident_bytes",
    "stated_offload_modules",
]
