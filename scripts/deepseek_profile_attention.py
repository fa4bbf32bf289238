"""Regenerate tests/data/attention/deepseek_profile_attention.csv: every FlashAttention-3 kernel
of DeepSeek's published PyTorch-profiler traces (deepseek-ai/profile-data), its shape from the
launch grid and template, and what ran beside it (seer/flash_trace.py).

    python scripts/deepseek_profile_attention.py [--train train.json] [--prefill prefill.json]
                                                 [--out CSV]

Without --train the trace is read from the local mirror of the repository at COMMIT
(`git -C MIRROR show COMMIT:train.json`); prefill.json likewise when the mirror holds it (its
rows are inference: mode=inference). The traces are not committed. A missing or corrupt trace is
a one-line error and exit status 2.
"""

from __future__ import annotations

import argparse
import csv
import hashlib
import subprocess
import sys
import tempfile
from pathlib import Path

from starfabric.astral.kineto import read_kineto
from starfabric.astral.seer.flash_trace import FlashKernel, flash_kernels
from starfabric.errors import DataError, StarfabricError

REPO = "deepseek-ai/profile-data"
COMMIT = "449602428a1b023acb8a505d4f34fef536535db6"
"""The repository's HEAD when read (2025-03-21, "Update README.md"); train.json dates from the
initial commit de0b460 (2025-02-27) and is unchanged since."""
MIRROR = Path("/work/.mirror/deepseek-ai+profile-data/repo")
DEFAULT_OUT = Path(__file__).parents[1] / "tests/data/attention/deepseek_profile_attention.csv"
MODES = {"train.json": "training", "prefill.json": "inference"}
COLUMNS = (
    "trace", "mode", "call", "kind", "ts_us", "duration_us", "grid", "block", "regs_per_thread",
    "smem_bytes", "tile_m", "tile_n", "seq", "heads", "batch", "d_qk", "d_v", "causal", "varlen",
    "dtype", "comm_overlap_fraction", "comm_blocks_max", "comm_regs_per_block_min",
    "other_overlap_fraction", "concurrent",
)  # fmt: skip

HEADER = f"""\
# FlashAttention-3 kernels of DeepSeek's published PyTorch-profiler traces, one row per kernel event.
# Source: github.com/{REPO} commit {COMMIT} (README.md: "Profiling Data in DeepSeek
#   Infra"). train.json: "a pair of individual forward and backward chunks in DualPipe. Each chunk
#   contains 4 MoE layers ... DeepSeek-V3 pretraining settings: EP64, TP1 with 4K sequence length. And
#   the PP communication is not included"; "we simulate an absolutely balanced MoE routing strategy".
#   The trace: rank 0 of world_size 64 (distributedInfo), 8x "NVIDIA H800" (132 SMs, compute 9.0),
#   traceName prof_ep64_tp1_varsm_hidden7168_seqlen4096. prefill.json (inference: EP32, 4K prompts,
#   16K tokens per GPU) has mode=inference; it is absent from the mirror read here (no rows).
#   Clocks are not stated in the README or the trace.
# Regenerate: python scripts/deepseek_profile_attention.py (reads `git show {COMMIT[:7]}:train.json`
#   from the local mirror, or --train PATH). Kernel names, grids and times are the trace's; shapes are
#   derived (seer/flash_trace.py).
# Columns: trace, mode (training / inference); call (k-th kernel of its kind: bwd_pre/bwd/bwd_post of
#   one call share it); kind (fwd = flash::compute_attn_ws, bwd = flash::FlashAttnBwd, bwd_pre =
#   FlashAttnBwdPreprocess, bwd_post = FlashAttnBwdPostprocessConvertdQ); ts_us (start, us after the
#   trace's first GPU event); duration_us (Kineto dur, us); grid, block (launch, x*y*z);
#   regs_per_thread, smem_bytes (the trace's args); tile_m, tile_n (template kBlockM, kBlockN);
#   seq = grid.x * tile (tile_m; tile_n for bwd: its grid runs over key blocks); heads = grid.y;
#   batch = grid.z (sequences); d_qk, d_v (template head dims; d_v: the fork's value-tile argument);
#   causal, varlen (template flags; pre/post processing take the call's bwd flag); dtype (template);
#   comm_overlap_fraction (share of the kernel's duration covered by the union of DeepEP/NCCL kernels
#   on other streams of the device); comm_blocks_max (largest grid of those: DeepEP runs one block per
#   SM); comm_regs_per_block_min (fewest registers one of their blocks holds); other_overlap_fraction
#   (the same for non-communication kernels); concurrent (each kernel met on another stream, short
#   name, with the fraction of this kernel's duration it covers).
"""


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _from_mirror(name: str, tmp: Path) -> Path | None:
    """`name` at COMMIT from the mirror into `tmp`, or None when the mirror lacks the object."""
    if not MIRROR.is_dir():
        raise DataError(f"{MIRROR}: no mirror of {REPO}", fix="give the trace with --train PATH")
    spec = f"{COMMIT}:{name}"
    if subprocess.run(["git", "-C", str(MIRROR), "cat-file", "-e", spec],
                      capture_output=True).returncode != 0:  # fmt: skip
        return None
    out = tmp / name
    with out.open("wb") as fh:
        r = subprocess.run(["git", "-C", str(MIRROR), "show", spec], stdout=fh)
    if r.returncode != 0:
        raise DataError(f"{MIRROR}: git show {spec} failed", fix="give the trace with --train")
    return out


def _row(name: str, k: FlashKernel) -> list[object]:
    return [
        name, MODES.get(name, "training"), k.call, k.kind, f"{k.ts_us:.0f}", f"{k.duration_us:g}",
        "x".join(map(str, k.grid)), "x".join(map(str, k.block)), k.regs_per_thread, k.smem_bytes,
        k.tile_m, k.tile_n, k.seq, k.heads, k.batch, k.d_qk, k.d_v, str(k.causal).lower(),
        str(k.varlen).lower(), k.dtype, f"{k.comm_overlap_fraction:.4f}", k.comm_blocks_max,
        k.comm_regs_per_block_min, f"{k.other_overlap_fraction:.4f}", k.concurrent,
    ]  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--train", type=Path, help="train.json (default: the mirror at COMMIT)")
    ap.add_argument("--prefill", type=Path, help="prefill.json (default: the mirror, if held)")
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args(argv)
    try:
        with tempfile.TemporaryDirectory() as td:
            tmp = Path(td)
            train = args.train or _from_mirror("train.json", tmp)
            if train is None:
                raise DataError(f"{MIRROR}: no train.json at {COMMIT[:7]}", fix="give --train")
            prefill = args.prefill if args.prefill or args.train else None
            if prefill is None and args.train is None:
                prefill = _from_mirror("prefill.json", tmp)
            traces = [("train.json", train)] + ([("prefill.json", prefill)] if prefill else [])
            rows: list[list[object]] = []
            shas: list[str] = []
            for name, path in traces:
                kernels = flash_kernels(read_kineto(path).events, str(path))
                if name == "train.json" and not kernels:
                    raise DataError(f"{path}: no FlashAttention-3 kernel", fix="give train.json")
                shas.append(f"#   sha256 {name}: {_sha(path)} ({len(kernels)} attention kernels)")
                rows += [_row(name, k) for k in kernels]
    except (StarfabricError, OSError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    with args.out.open("w", newline="") as fh:
        fh.write(HEADER + "\n".join(shas) + "\n")
        w = csv.writer(fh, lineterminator="\n")
        w.writerow(COLUMNS)
        w.writerows(rows)
    print(f"{args.out}: {len(rows)} rows")
    return 0


if __name__ == "__main__":
    sys.exit(main())
