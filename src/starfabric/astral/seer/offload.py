"""Offload to a second memory tier (Grace LPDDR5X over NVLink-C2C on GH200/GB200/GB300).

Calculon (Isaev et al., SC'23, section 3) searches activation, weight and optimizer offload
whenever the system has a second memory level. Seer models two switches: activations (each
layer's saved tensors written out during the forward pass and read back, prefetched, for the
backward) and weights (16-bit weights, gradients and the fp32 master + Adam states live in the
tier; each layer's weights stream in before its forward and its backward, its gradients stream
out). A transfer overlaps the neighbouring layer's compute on its own copy engine; only the
excess is exposed. HBM then keeps `RESIDENT_LAYERS` layers of what was offloaded. The
functions work on floats and numpy arrays alike, so `schedule` and `search` share them.
"""

from __future__ import annotations

from typing import Any, TypeVar

import numpy as np

from starfabric.astral.hardware import GPUSpec

LINK_FRACTION = 0.80
"""Achievable fraction of the second tier's per-direction link bandwidth for bulk copies
(assumption; NVIDIA quotes NVLink-C2C at 900 GB/s bidirectional, no measured training-copy
figure is public)."""
RESIDENT_LAYERS = 2
"""Layers of offloaded tensors kept in HBM: the one computing and the one being prefetched
(double buffering, assumption as in Calculon)."""
OPTIMIZER_OFFLOAD_BYTES_PER_PARAM = 28.0
"""Link bytes per parameter of an optimizer step whose states live in the tier: fp32 master,
m and v read in and written back (2 x 12) and the fp32 gradient read in (4) — the 16-bit
weights then stream in per layer anyway (assumption from the tensors the step touches)."""

X = TypeVar("X", float, np.ndarray[Any, Any])


def link_bytes_per_s(gpu: GPUSpec) -> float:
    """Achievable bytes/s to the GPU's second memory tier (0 when it has none)."""
    return (gpu.offload_gbps or 0.0) * 1e9 * LINK_FRACTION


def pass_bytes(act_bytes: X, weight_params: X, grad_bytes: float, activations: Any,
               weights: Any) -> tuple[X, X]:  # fmt: skip
    """Link bytes of one layer's forward and backward for one micro-batch: activations out
    (forward) and back in (backward); 16-bit weights in for each pass, gradients out after
    the backward. The switches are bools or boolean arrays (search's columns)."""
    fwd = act_bytes * activations + 2.0 * weight_params * weights
    bwd = act_bytes * activations + (2.0 + grad_bytes) * weight_params * weights
    return fwd, bwd


def exposed(transfer_bytes: X, compute_s: X, bytes_per_s: float) -> X:
    """Seconds a transfer adds beyond the compute it overlaps (0 without a tier)."""
    if bytes_per_s <= 0:
        return transfer_bytes * 0.0
    return np.maximum(0.0, transfer_bytes / bytes_per_s - compute_s)


def optimizer_s(local_params: X, bytes_per_s: float) -> X:
    """Seconds of an optimizer step whose states stream through the link."""
    return local_params * OPTIMIZER_OFFLOAD_BYTES_PER_PARAM / bytes_per_s
