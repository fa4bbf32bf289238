"""Benchmark: Seer's configuration search (vectorized vs a plain per-config loop of the same
model) and the full-timeline prediction of a 405B dense model on 16,384 GPUs.

Keys: configs_per_s (vectorized search, one core, wall clock), configs_per_cpu_s (the same per
CPU second of this process: the one-core rate when other jobs share the machine),
scalar_configs_per_s (the same analytical
model evaluated one configuration at a time), timeline_405b_16k_s (predict() of Llama-3.1-405B,
TP8 PP16 (126 layers split 7/8x14/7) DP128, 2,048 x 8K sequences, warm), search_top20_agree
(fraction of search's 20 fastest layouts whose predict() iteration time is within 1% of the
search's), search_top20_agree_stack (the same for Mixtral-8x7B on 64 H100s searched with a
non-default software stack: DeepEP, Ulysses CP, FlashAttention-2, BF16 moments;
stack_configs_per_s its search rate), and, printed last, search_speedup =
configs_per_s / scalar_configs_per_s (same run, same machine). Targets: configs_per_s >= 10,000,
timeline_405b_16k_s < 10. The search space has Calculon's axes (TP/DP overlap, ZeRO 0-3,
offload where the GPU has a second memory tier: none on H100). --quick times fewer scalar
configurations.
"""

from __future__ import annotations

import os

os.environ.setdefault("NUMBA_NUM_THREADS", "1")
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

import argparse
import json
import time
from pathlib import Path

from rich.progress import Progress

from starfabric.astral.seer import ModelSpec, load_model, make_job, predict
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec
from starfabric.astral.seer.search import SearchResult, search

JOB_405B = {
    "global_batch": 2048, "seq_len": 8192, "tp": 8, "pp": 16, "micro_batch": 1,
    "pipeline_layers": [7] + [8] * 14 + [7], "recompute": "none", "tp_comm_overlap": True,
}  # fmt: skip


STACK = {
    "moe_dispatcher": "deepep", "cp_algorithm": "ulysses", "flash_kernel": "fa2",
    "moe_probs_all_to_all": True, "optimizer_moments": "bf16",
}  # fmt: skip
"""The non-default software stack of search_top20_agree_stack."""


def top_agreement(res: SearchResult, model: ModelSpec, system: SystemSpec, n: int = 20,
                  tol: float = 0.01) -> float:  # fmt: skip
    """Fraction of the search's n fastest layouts whose predict() time is within `tol`
    (each layout run as `SearchResult.execution` gives it: overlaps, ZeRO, offload too)."""
    top = res.ranked()[:n]
    agree = 0
    for i in top:
        it = predict(make_job(model, res.execution(int(i)), system)).iteration_s
        agree += abs(it / res.iteration_s[i] - 1.0) <= tol
    return agree / max(1, len(top))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="time fewer scalar configurations")
    ap.add_argument("--json", type=Path, default=None, help="write the figures here")
    args = ap.parse_args(argv)
    model = load_model("llama-3.1-70b")
    system = SystemSpec(gpu="H100", gpus=1024)
    gb, seq = 1024, 8192
    out: dict[str, float | int] = {"quick": int(args.quick)}
    with Progress(transient=True) as prog:
        task = prog.add_task("astral seer benchmark", total=5)
        search(model, system, gb, seq)  # warm imports and the numba cache
        prog.advance(task)
        reps = 2 if args.quick else 5
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(reps):
            res = search(model, system, gb, seq)
        dt = (time.perf_counter() - t0) / reps
        cpu = (time.process_time() - c0) / reps
        out["configs"] = len(res)
        out["configs_per_s"] = len(res) / dt
        # CPU seconds of this process: the one-core rate even when other jobs share the cores.
        out["configs_per_cpu_s"] = len(res) / cpu
        prog.advance(task)
        # Scalar: the same model, one configuration at a time, on an evenly spread subset.
        n_scalar = 60 if args.quick else 300
        t0 = time.perf_counter()
        sub = search(model, system, gb, seq, mode="scalar", limit=n_scalar)
        out["scalar_configs"] = len(sub)
        out["scalar_configs_per_s"] = len(sub) / (time.perf_counter() - t0)
        prog.advance(task)
        out["search_top20_agree"] = top_agreement(res, model, system)
        # The same check with a user's stack (search_stack.py): Mixtral under DeepEP, Ulysses
        # CP, FlashAttention-2 and BF16 moments on 64 H100s.
        moe, sys64 = load_model("mixtral-8x7b-v0.1"), SystemSpec(gpu="H100", gpus=64)
        stack = ExecutionSpec(global_batch=256, seq_len=8192, **STACK)
        t0 = time.perf_counter()
        res_s = search(moe, sys64, 256, 8192, stack=stack)
        out["stack_configs_per_s"] = len(res_s) / (time.perf_counter() - t0)
        out["search_top20_agree_stack"] = top_agreement(res_s, moe, sys64)
        prog.advance(task)
        big = make_job("llama-3.1-405b", JOB_405B, {"gpu": "H100", "gpus": 16384})
        predict(big)
        t0 = time.perf_counter()
        pred = predict(big)
        out["timeline_405b_16k_s"] = time.perf_counter() - t0
        out["timeline_405b_16k_iteration_s"] = pred.iteration_s
        prog.advance(task)
    out["search_speedup"] = out["configs_per_s"] / out["scalar_configs_per_s"]
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(out, indent=2))
    for key, val in out.items():
        if key != "search_speedup":
            print(f"{key}: {val:.4g}" if isinstance(val, float) else f"{key}: {val}")
    print(f"search_speedup: {out['search_speedup']:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
