"""Fused attention inside a training step, measured from equal-token pairs.

NVIDIA's cudnn-frontend benchmark/Llama-3.2-1B-Training (commit 7606332, 2025-05-22) times one
eager HF-transformers training iteration of Llama-3.2-1B on one GPU with each PyTorch SDPA
backend (cuDNN 9.9.0, PyTorch 2.7's FlashAttention-2, the memory-efficient kernel) at six
(batch, seq) shapes (tests/data/attention/cudnn_llama1b_training.csv). Shapes with the same
tokens per iteration — (1, 16384) and (2, 8192); (3, 4096), (6, 2048) and (12, 1024) — run the
same GEMMs, norms, loss and optimizer step on the same number of tokens; only the causal
attention differs (b * s^2 work). The time difference of such a pair is therefore the
difference of the attention kernels' time alone, and dividing the attention FLOPs difference by
it gives the backend's attention rate *inside* a training step, next to the other kernels, at
the benchmark's clock.

HF transformers drops an all-ones attention mask for SDPA (`_ignore_causal_mask_sdpa`) and calls
`scaled_dot_product_attention(..., is_causal=True)`; PyTorch's FLASH_ATTENTION backend accepts
no explicit mask, so the FLASH rows having run at all confirms the causal flag was used.
FLOPs are counted as Seer counts them (`ops._attention`: 2 * tokens * keys * heads * (dq + dv)
with keys = s/2 causal; backward `ops.FLASH_BWD_FLOPS_FACTOR` x the forward).

`seer_pair_rate` puts beside each measured rate Seer's own for the same pair: the GPU's
calibrated fused-attention curve (`efficiency.flash_time`, fractions from efficiency.yaml) at
the kernel rates `seer predict` takes (`cost.attention_rates`: `cost.fa2_rate` for the FLASH
rows; for the CUDNN rows cuDNN's rate at the benchmark's release, BENCHMARK_CUDNN, through
`cudnn_release` on Hopper), the catalog peak scaled to the benchmark's clock (`PEAK_CLOCK_MHZ`).
"""

from __future__ import annotations

import csv
import itertools
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.cost import FUSED_ATTENTION_IN_TRAINING, attention_rates
from starfabric.astral.seer.efficiency import efficiency_for, flash_time
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.ops import FLASH_BWD_FLOPS_FACTOR
from starfabric.errors import ConfigError

LLAMA_3_2_1B = ModelSpec(
    name="llama-3.2-1b",
    layers=16,
    hidden=2048,
    ffn_hidden=8192,
    heads=32,
    kv_heads=8,
    head_dim=64,
    vocab=128256,
    max_seq_len=131072,
    tied_embeddings=True,
)
"""meta-llama/Llama-3.2-1B's config.json (hidden_size 2048, num_hidden_layers 16,
num_attention_heads 32, num_key_value_heads 8, head_dim 64, intermediate_size 8192,
vocab_size 128256, tie_word_embeddings true): the model the benchmark builds."""

BACKENDS = ("CUDNN_ATTENTION", "FLASH_ATTENTION", "EFFICIENT_ATTENTION")
"""PyTorch SDPA backends the benchmark times (torch.nn.attention.SDPBackend names)."""

SEER_KERNEL = {"CUDNN_ATTENTION": "cudnn", "FLASH_ATTENTION": "fa2"}
"""Seer's `ExecutionSpec.flash_kernel` for a backend (EFFICIENT_ATTENTION has none)."""

BENCHMARK_CUDNN = "9.9"
"""The cuDNN release the benchmark's CUDNN_ATTENTION rows ran: 9.9.0 (README: NGC
pytorch:25.04-py3 with cuDNN 9.9.0; the B200 log prints cudnn 90900)."""

PEAK_CLOCK_MHZ = {"H200": 1830.0, "B200": 1856.0}
"""SM clock at which the catalog's dense BF16 peak (hardware_data/gpus.yaml) is the tensor
cores' rate, used to scale that peak to a locked clock. H200: 989.4 TFLOP/s = 132 SMs x 4,096
dense BF16 FLOP per clock per SM x 1,830 MHz (Hopper's per-SM rate, H100 whitepaper; exact to
0.1 TFLOP/s). B200: 2,250 TFLOP/s = 148 SMs x 8,192 x 1,856 MHz, assuming Blackwell's tensor
core does twice Hopper's dense BF16 work per clock per SM (assumption: NVIDIA publishes the
2.25 PFLOP/s figure, not its clock)."""


@dataclass(frozen=True)
class Timing:
    """One published row: mean seconds per training iteration."""

    gpu: str
    clock_mhz: float
    backend: str
    batch: int
    seq: int
    time_s: float

    @property
    def tokens(self) -> int:
        return self.batch * self.seq


def read_timings(path: Path) -> list[Timing]:
    """The benchmark's rows (`#` lines are provenance); a malformed cell is a ConfigError."""
    rows: list[Timing] = []
    with path.open() as fh:
        lines = (ln for ln in fh if not ln.startswith("#"))
        for n, row in enumerate(csv.DictReader(lines), start=2):
            try:
                t = Timing(
                    gpu=row["gpu"],
                    clock_mhz=float(row["clock_mhz_stated"]),
                    backend=row["backend"],
                    batch=int(row["batch"]),
                    seq=int(row["seq"]),
                    time_s=float(row["time_s"]),
                )
            except (KeyError, TypeError, ValueError) as exc:
                raise ConfigError(
                    f"{path}: data row {n}: {exc}",
                    fix="columns gpu,clock_mhz_stated,backend,batch,seq,time_s with numbers",
                ) from None
            if t.backend not in BACKENDS or t.time_s <= 0 or t.batch <= 0 or t.seq <= 0:
                raise ConfigError(
                    f"{path}: data row {n}: backend {t.backend!r}, time_s {t.time_s}",
                    fix=f"backend one of {', '.join(BACKENDS)}; positive batch, seq, time",
                )
            rows.append(t)
    return rows


def attention_flops(batch: int, seq: int, model: ModelSpec = LLAMA_3_2_1B) -> float:
    """Causal self-attention FLOPs of one training iteration (forward + backward, all layers),
    counted as Seer's op table does (`ops._attention`)."""
    tok = float(batch * seq)
    fwd = (
        2.0 * tok * model.attended_keys(seq) * model.heads * (model.qk_head_dim + model.vo_head_dim)
    )
    return model.layers * fwd * (1.0 + FLASH_BWD_FLOPS_FACTOR)


@dataclass(frozen=True)
class PairRate:
    """One equal-token pair of one backend on one GPU: the attention rate its time difference
    implies, TFLOP/s."""

    gpu: str
    backend: str
    long: tuple[int, int]
    short: tuple[int, int]
    dt_s: float
    dflops: float

    @property
    def tflops(self) -> float:
        return self.dflops / self.dt_s / 1e12


def equal_token_pairs(rows: Iterable[Timing]) -> Iterator[PairRate]:
    """Every pair of shapes with the same tokens per iteration, adjacent in sequence length
    (the longer sequence first), per GPU and backend."""
    groups: dict[tuple[str, str, int], list[Timing]] = {}
    for t in rows:
        groups.setdefault((t.gpu, t.backend, t.tokens), []).append(t)
    for (gpu, backend, _), grp in sorted(groups.items()):
        grp.sort(key=lambda t: -t.seq)
        for a, b in itertools.pairwise(grp):
            yield PairRate(
                gpu=gpu,
                backend=backend,
                long=(a.batch, a.seq),
                short=(b.batch, b.seq),
                dt_s=a.time_s - b.time_s,
                dflops=attention_flops(a.batch, a.seq) - attention_flops(b.batch, b.seq),
            )


def seer_attention_seconds(
    gpu_name: str, kernel: str, batch: int, seq: int, clock_mhz: float,
    model: ModelSpec = LLAMA_3_2_1B,
) -> float:  # fmt: skip
    """Seer's fused-attention seconds (forward + backward, all layers) of one iteration: the
    GPU's calibrated curve at the catalog peak scaled to `clock_mhz`, at the rates `seer
    predict` gives `kernel` at cuDNN BENCHMARK_CUDNN (`cost.attention_rates`), one kernel call
    per layer and pass over the whole batch (keys = s/2)."""
    if gpu_name not in PEAK_CLOCK_MHZ:
        raise ConfigError(
            f"no peak-clock reference for GPU {gpu_name!r}",
            fix=f"use one of {', '.join(PEAK_CLOCK_MHZ)} (attention_in_training.PEAK_CLOCK_MHZ)",
        )
    gpu = get_gpu(gpu_name)
    eff = efficiency_for(gpu)
    peak = gpu.tflops("bf16") * 1e12 * clock_mhz / PEAK_CLOCK_MHZ[gpu_name]
    rate_f, rate_b = attention_rates(gpu, kernel, BENCHMARK_CUDNN)
    keys = model.attended_keys(seq)
    fwd = attention_flops(batch, seq, model) / (1.0 + FLASH_BWD_FLOPS_FACTOR) / model.layers
    t_f = flash_time(np.array(fwd), np.array(keys), peak * rate_f, eff, backward=False)
    t_b = flash_time(
        np.array(FLASH_BWD_FLOPS_FACTOR * fwd), np.array(keys), peak * rate_b, eff, backward=True
    )
    return float(model.layers * (t_f + t_b))


def seer_pair_rate(pair: PairRate, clock_mhz: float) -> float:
    """Seer's attention rate (TFLOP/s) over the same pair: the FLOPs difference over Seer's
    attention-time difference."""
    kernel = SEER_KERNEL[pair.backend]
    dt = seer_attention_seconds(pair.gpu, kernel, *pair.long, clock_mhz) - seer_attention_seconds(
        pair.gpu, kernel, *pair.short, clock_mhz
    )
    return pair.dflops / dt / 1e12


def summed_rate(pairs: Iterable[PairRate], gpu: str, backend: str) -> float:
    """One backend's attention rate over all its equal-token pairs on `gpu` (TFLOP/s): summed
    FLOPs differences over summed time differences (the long pairs weigh most)."""
    sel = [p for p in pairs if p.gpu == gpu and p.backend == backend]
    if not sel:
        raise ConfigError(f"no {backend} pairs on {gpu}", fix="give rows of equal tokens")
    return sum(p.dflops for p in sel) / sum(p.dt_s for p in sel) / 1e12


def fa2_cudnn_ratio(pairs: Iterable[PairRate], gpu: str) -> float:
    """FlashAttention-2's in-training attention rate over cuDNN's on `gpu` (summed pairs)."""
    ps = list(pairs)
    return summed_rate(ps, gpu, "FLASH_ATTENTION") / summed_rate(ps, gpu, "CUDNN_ATTENTION")


def implied_in_training_factor(pairs: Iterable[PairRate], gpu: str, clock_mhz: float) -> float:
    """The in-training factor on the isolated curve that would make Seer's cuDNN rate (at the
    benchmark's cuDNN release) equal the measured one on `gpu` at `clock_mhz`
    (FUSED_ATTENTION_IN_TRAINING, which efficiency.yaml's curves carry, x measured / Seer;
    Seer's rate over an equal-token pair is its curve's saturated rate, the same for every
    pair, because flash_time's per-query-block term scales with tokens)."""
    ps = [p for p in pairs if p.gpu == gpu and p.backend == "CUDNN_ATTENTION"]
    measured = summed_rate(ps, gpu, "CUDNN_ATTENTION")
    return FUSED_ATTENTION_IN_TRAINING * measured / seer_pair_rate(ps[0], clock_mhz)
