"""Attention in a multi-GPU training step, measured: DeepSeek's profile-data trace (H800, DualPipe,
EP 64, DeepEP beside the compute) against Seer's isolated Hopper fused-attention curve, and the
in-training factor it implies (seer/attention_multi_gpu.py).

    python scripts/seer_attention_multi_gpu.py [--csv tests/data/attention/deepseek_profile_attention.csv]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from starfabric.astral.seer.attention_multi_gpu import (
    BACKWARD_KINDS,
    comm_sm_share,
    implied_factor,
    isolated_rate,
    measured_rate,
    peak_flops,
    read_profile,
)
from starfabric.astral.seer.cost import FUSED_ATTENTION_IN_TRAINING
from starfabric.errors import StarfabricError

DEFAULT_CSV = Path(__file__).parents[1] / "tests/data/attention/deepseek_profile_attention.csv"

SETS = {
    "forward": ("fwd",),
    "backward, kernel only": ("bwd",),
    "backward with pre/post": BACKWARD_KINDS,
    "fwd + bwd, kernels only": ("fwd", "bwd"),
    "fwd + bwd with pre/post": ("fwd", *BACKWARD_KINDS),
}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, default=DEFAULT_CSV)
    args = ap.parse_args(argv)
    try:
        rows = [k for k in read_profile(args.csv) if k.mode == "training"]
        peak = peak_flops() / 1e12
        print(f"training kernels: {len(rows)}; peak {peak:.1f} TFLOP/s (H800 = H100 SXM, "
              "catalog; clock not stated)")  # fmt: skip
        print(f"{'kind':9s} {'n':>2s} {'mean us':>8s} {'TFLOP/s':>8s} {'of peak':>7s} "
              f"{'Seer iso':>8s} {'meas/iso':>8s} {'comm ov':>7s} {'comm SMs':>8s}")  # fmt: skip
        for kind in ("fwd", "bwd", "bwd_pre", "bwd_post"):
            ks = [k for k in rows if k.kind == kind]
            if not ks:
                continue
            mean = sum(k.duration_us for k in ks) / len(ks)
            ov = sum(k.comm_overlap_fraction * k.duration_us for k in ks) / sum(
                k.duration_us for k in ks)  # fmt: skip
            share = max(comm_sm_share(k) for k in ks)
            if kind in ("fwd", "bwd"):
                r, iso = measured_rate(rows, (kind,)), isolated_rate(ks[0])
                rates = f"{r:8.0f} {r / peak:7.3f} {iso:8.0f} {r / iso:8.3f}"
            else:
                rates = f"{'-':>8s} {'-':>7s} {'-':>8s} {'-':>8s}"
            print(f"{kind:9s} {len(ks):2d} {mean:8.0f} {rates} {ov:7.3f} {share:8.3f}")
        print(f"\nimplied in-training factor on Seer's isolated curve (Seer: "
              f"{FUSED_ATTENTION_IN_TRAINING}); as measured | scaled to the whole GPU "
              "(DeepEP's SMs given back)")  # fmt: skip
        for label, kinds in SETS.items():
            a, b = implied_factor(rows, kinds), implied_factor(rows, kinds, free_gpu=True)
            ra, rb = measured_rate(rows, kinds), measured_rate(rows, kinds, free_gpu=True)
            print(f"  {label:26s} {a:5.3f} | {b:5.3f}   ({ra:4.0f} | {rb:4.0f} TFLOP/s)")
    except (StarfabricError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
