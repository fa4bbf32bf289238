"""Megatron-Core's optimizer CPU offload (`--optimizer-cpu-offload`, HybridDeviceOptimizer).

What moves where, read from Megatron-LM @d98e8a64 (megatron/core/optimizer/cpu_offloading/
hybrid_optimizer.py, megatron/core/optimizer/__init__.py; first released in Megatron Core
0.12.0, commit 60007c93 "Optimizer CPU offload support"):

- The distributed optimizer's shard of a rank's parameters is split greedily, in parameter
  order, at `--optimizer-offload-fraction` f of its elements (CLI default 1.0). The offloaded
  part lives in pinned host memory as an fp32 copy of the parameter, an fp32 gradient buffer
  and torch's AdamW moments (fp32, like the parameter): 16 bytes per parameter on the host;
  its fp32 master and moments leave HBM. The rest keeps Megatron's GPU Adam (TE FusedAdam).
- Each step: gradients D2H into the fp32 buffers (`copy_(grad, non_blocking=True)`; PyTorch
  casts on the GPU for non-blocking copies, aten/native/cuda/Copy.cu, so 4 bytes cross the
  link), the CPU runs `torch.optim.AdamW(fused=True)` (aten/native/cpu/FusedAdamKernel.cpp:
  one vectorized pass that reads param, grad, exp_avg, exp_avg_sq and writes param, exp_avg,
  exp_avg_sq: 28 bytes of host DRAM traffic per fp32 parameter), and a post-step hook copies
  the fp32 parameter H2D (4 bytes; cast to 16 bits on the GPU). The GPU optimizer runs
  meanwhile on the device.
- `--overlap-cpu-optimizer-d2h-h2d`: one CPU optimizer per parameter, D2H and H2D on their own
  streams, so copy-in, CPU Adam and copy-out pipeline parameter by parameter; the H2D stream
  first waits for the GPU's current stream (the GPU optimizer's kernels). Without it: all
  D2H first, then the CPU step (beside the GPU step), then all H2D on the compute stream.
- The offload path builds both Adams without `--exp-avg-dtype`/`--exp-avg-sq-dtype`: BF16
  moments (optimizer_state.py) do not apply under it; Seer refuses the combination.
- `--use-torch-optimizer-for-cpu-offload` changes nothing for Adam (the code sets Adam's
  classes after reading it), so Seer reads and ignores it.

Cost per step (each term per GPU; the node's host links and DRAM are shared by its GPUs):
  d2h = f·N·4 / link, h2d = f·N·4 / link, cpu = f·N / (CPU-Adam parameters/s),
  overlapped: max(d2h, cpu, h2d, gpu + h2d); serial: d2h + max(gpu, cpu) + h2d,
where gpu is the GPU Adam on the other (1 − f)·N. CPU-Adam parameters/s = host DRAM bytes/s
available to the GPU's process / (28 + 8) bytes (the kernel's streams plus the DMA copies'
DRAM traffic), capped by the threads' own streaming rate (`CORE_STREAM_GBPS` per core).
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

import numpy as np

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer import offload
from starfabric.astral.seer.releases import megatron_core_at_least

D2H_BYTES_PER_PARAM = 4.0
"""Link bytes per offloaded parameter, device to host: the fp32 gradient (hybrid_optimizer.py
`_set_sub_optimizer_grads`; the CPU buffer takes the fp32 parameter's dtype)."""
H2D_BYTES_PER_PARAM = 4.0
"""Link bytes per offloaded parameter, host to device: the updated fp32 parameter (the post-step
hook copies it into the 16-bit GPU parameter; a non-blocking cross-dtype copy moves the source
dtype and converts on the GPU, Copy.cu `copy_requires_temporaries`)."""
CPU_ADAM_DRAM_BYTES_PER_PARAM = 28.0
"""Host DRAM bytes torch's fused CPU AdamW streams per fp32 parameter: 4 tensors read, 3 written
(FusedAdamKernel.cpp `adam_fused_step_impl`)."""
HOST_BYTES_PER_PARAM = 16.0
"""Pinned host memory per offloaded parameter: fp32 parameter, fp32 gradient buffer, exp_avg,
exp_avg_sq (torch AdamW keeps its moments in the parameter's dtype)."""
DRAM_FRACTION = 0.80
"""Achievable fraction of the host's peak DRAM bandwidth for streaming kernels (assumption, as
`offload.LINK_FRACTION`; STREAM-type kernels reach 70-90% of peak on server CPUs). The one
absolute CPU-Adam figure found, DeepSpeed's 2021 CPU-Adam (8.2 s for 11.6 B parameters on a
whole Xeon node, deepspeedai/DeepSpeed#735), is about a quarter of this roofline (docs/astral.md
gives the sensitivity)."""
CORE_STREAM_GBPS = 10.0
"""Streaming bandwidth one CPU thread sustains (assumption from Little's law: 16 outstanding L1
misses x 64 B at ~100 ns loaded DRAM latency); binds only when few threads serve a GPU."""
MIN_MCORE = (0, 12)
"""First Megatron Core release with HybridDeviceOptimizer (core_v0.12.0 contains commit
60007c93; core_v0.11.0 does not)."""
FRACTION_CANDIDATES = (0.0, 0.5, 1.0)
"""Offload fractions `seer validate` tries where a row leaves recompute or micro-batch open
(0 = off, first: the fastest that fits is kept, and offload only adds time)."""

X = TypeVar("X", float, np.ndarray[Any, Any])

_STATED = re.compile(r"optimizer[- _]cpu[- _]offload|cpu[- ]offload(?:ed|ing)? (?:of )?(?:the )?"
                     r"optimizer|optimizer (?:states? )?offload(?:ed|ing)? to (?:the )?cpu",
                     re.I)  # fmt: skip


def available(gpu: GPUSpec) -> bool:
    """True when the catalog knows the GPU's host side (link, cores, DRAM)."""
    return bool(gpu.host_link_gbps and gpu.host_cores and gpu.host_mem_gbps)


def link_bytes_per_s(gpu: GPUSpec) -> float:
    """Achievable bytes/s per direction between the GPU and host memory."""
    # pinned copies reach the same fraction of a GPU-host link as the second tier's copies
    return (gpu.host_link_gbps or 0.0) * 1e9 * offload.LINK_FRACTION


def cpu_adam_params_per_s(gpu: GPUSpec, threads: int | None = None) -> float:
    """Parameters/s torch's fused CPU AdamW updates for one GPU's process: the GPU's share of
    host DRAM bandwidth over the bytes each parameter streams (kernel + the two copies), or
    the threads' own streaming rate when that is lower. `threads` defaults to the host's
    cores per GPU (the user sets OMP_NUM_THREADS; torchrun's default is 1)."""
    cores = threads if threads is not None else (gpu.host_cores or 0)
    dram = (gpu.host_mem_gbps or 0.0) * 1e9 * DRAM_FRACTION
    bw = min(dram, cores * CORE_STREAM_GBPS * 1e9)
    return bw / (CPU_ADAM_DRAM_BYTES_PER_PARAM + D2H_BYTES_PER_PARAM + H2D_BYTES_PER_PARAM)


def step_s(local_params: X, fraction: float, gpu_step_s: X, gpu: GPUSpec, overlap: bool,
           threads: int | None = None) -> X:  # fmt: skip
    """Seconds of one optimizer step with `fraction` of the rank's `local_params` updated on
    the CPU; `gpu_step_s` is the GPU Adam's time on all of them (scaled here to 1 − f)."""
    gpu_s = gpu_step_s * (1.0 - fraction)
    if fraction <= 0.0:
        return gpu_s
    n = local_params * fraction
    link = link_bytes_per_s(gpu)
    d2h = n * D2H_BYTES_PER_PARAM / link
    h2d = n * H2D_BYTES_PER_PARAM / link
    cpu = n / cpu_adam_params_per_s(gpu, threads)
    if overlap:
        return np.maximum(np.maximum(d2h, cpu), np.maximum(h2d, gpu_s + h2d))
    return d2h + np.maximum(gpu_s, cpu) + h2d


def hbm_kept(optimizer_bytes: float, fraction: float) -> float:
    """Bytes of optimizer state per parameter left in HBM (the offloaded share leaves)."""
    return optimizer_bytes * (1.0 - fraction)


def host_bytes(local_params: float, fraction: float) -> float:
    """Pinned host bytes the offloaded share takes."""
    return local_params * fraction * HOST_BYTES_PER_PARAM


def offered(framework: str) -> bool:
    """True when the framework release a row names ships the optimizer CPU offload: Megatron
    Core >= 0.12 named by version, Megatron-Bridge (Core 0.14 and later), or a NeMo container
    of 25.07 or later (the first built on Core 0.13; earlier containers are not assumed)."""
    return megatron_core_at_least(framework, MIN_MCORE)


def stated(text: str) -> bool:
    """True when a row's cells say the run offloaded the optimizer to the CPU."""
    return bool(_STATED.search(text))
