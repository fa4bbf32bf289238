"""Attention inside a training step, measured: each SDPA backend's attention rate from the
equal-token pairs of cudnn-frontend's Llama-3.2-1B training benchmark (commit 7606332), beside
Seer's rate for the same pairs, and Seer's whole iteration beside the measured one.

    python scripts/seer_attention_in_training.py [--csv tests/data/attention/cudnn_llama1b_training.csv]

Seer's attention rate is its calibrated curve (efficiency.yaml) at the catalog peak scaled to the
README's locked clock (attention_in_training.PEAK_CLOCK_MHZ). The whole-iteration comparison runs
`seer predict` on the same model (BF16, 1 GPU, eager elementwise kernels, flash_kernel cudnn/fa2)
at the catalog clock: Seer has no clock-lock input, and its optimizer is Adam, not the
benchmark's plain SGD (see docs/astral.md, "Attention inside a training step, measured").
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from starfabric.astral.seer.attention_in_training import (
    BENCHMARK_CUDNN,
    LLAMA_3_2_1B,
    SEER_KERNEL,
    equal_token_pairs,
    fa2_cudnn_ratio,
    implied_in_training_factor,
    read_timings,
    seer_pair_rate,
    summed_rate,
)
from starfabric.astral.seer.predict import make_job, predict
from starfabric.errors import StarfabricError

DEFAULT_CSV = Path(__file__).parents[1] / "tests/data/attention/cudnn_llama1b_training.csv"


def seer_iteration_s(gpu: str, kernel: str, batch: int, seq: int) -> float:
    """Seer's predicted iteration of the benchmark's job (one GPU, catalog clock, the
    benchmark's cuDNN release)."""
    ex = {"global_batch": batch, "micro_batch": batch, "seq_len": seq, "precision": "bf16",
          "attention": "flash", "flash_kernel": kernel, "eager_elementwise": True,
          "cudnn_release": BENCHMARK_CUDNN}  # fmt: skip
    return predict(make_job(LLAMA_3_2_1B, ex, {"gpu": gpu, "gpus": 1})).iteration_s


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    args = ap.parse_args(argv)
    try:
        rows = read_timings(args.csv)
    except (StarfabricError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    clocks = {r.gpu: r.clock_mhz for r in rows}
    pairs = list(equal_token_pairs(rows))
    print("equal-token pairs: attention rate, TFLOP/s (fwd + 2.5x bwd, causal, Seer's count)")
    print(f"{'gpu':5s} {'backend':20s} {'pair':22s} {'dt ms':>7s} {'meas':>6s} {'Seer':>6s} "
          f"{'meas/Seer':>9s}")  # fmt: skip
    for p in pairs:
        seer = seer_pair_rate(p, clocks[p.gpu]) if p.backend in SEER_KERNEL else float("nan")
        pair = f"{p.long}-{p.short}".replace(" ", "")
        print(f"{p.gpu:5s} {p.backend:20s} {pair:22s} {p.dt_s * 1e3:7.1f} {p.tflops:6.0f} "
              f"{seer:6.0f} {p.tflops / seer:9.2f}")  # fmt: skip
    print("\nsummed over the pairs (clock as the README states it)")
    for gpu in sorted(clocks):
        rates = {b: summed_rate(pairs, gpu, b) for b in ("CUDNN_ATTENTION", "FLASH_ATTENTION")}
        print(f"{gpu} @ {clocks[gpu]:.0f} MHz: cuDNN {rates['CUDNN_ATTENTION']:.0f}, "
              f"FA2 {rates['FLASH_ATTENTION']:.0f} TFLOP/s; FA2/cuDNN "
              f"{fa2_cudnn_ratio(pairs, gpu):.3f}; implied in-training factor "
              f"{implied_in_training_factor(pairs, gpu, clocks[gpu]):.2f} (Seer: 0.65)")  # fmt: skip
    for b in ("CUDNN_ATTENTION", "FLASH_ATTENTION"):
        ratio = summed_rate(pairs, "B200", b) / summed_rate(pairs, "H200", b)
        print(f"B200 / H200 {b}: {ratio:.2f}")
    print("\nwhole iteration, s: measured (locked clock) vs Seer predict (catalog clock)")
    for r in rows:
        if r.backend not in SEER_KERNEL:
            continue
        s = seer_iteration_s(r.gpu, SEER_KERNEL[r.backend], r.batch, r.seq)
        print(f"{r.gpu:5s} {r.backend:16s} b={r.batch:2d} s={r.seq:5d}  {r.time_s:.3f}  "
              f"{s:.3f}  Seer/meas {s / r.time_s:.2f}")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
