"""Seer's error on the measured runs recorded OUTSIDE the development sets, one line per file.

The development sets (`development_runs.csv`, `development_runs_2.csv`) are what Seer's mechanisms
were checked against; the files listed in OUTSIDE_FILES were gathered afterwards (issue 32,
session 21) only to test Seer on runs it was never developed on, and nothing in Seer is
fitted to them. Each is read exactly as `starfabric astral seer validate --csv F` reads it;
the table leads with the answer a user asks ("how far off is Seer on data like mine?"):

    python scripts/seer_outside_truth.py [--json out.json]

Columns: rows compared (and rows Seer could not read), mean and max |error| of the iteration
time, the median signed error (negative: Seer predicts too fast) and the row furthest off.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

from starfabric.astral.seer.validate import summary, validate_all

DATA = Path(__file__).resolve().parents[1] / "tests" / "data" / "published_runs"
OUTSIDE_FILES: dict[str, str] = {
    "a100_era_runs.csv": (
        "A100-era (2022-23): MosaicML FSDP tables (16-128 A100-40/80GB), GPT-NeoX-20B (96 A100)"
    ),
    "a100_scale_runs.csv": (
        "A100 3D parallel (2022): NeMo Megatron 22.06 GPT-3 175B TP 8 / PP 8 on 128-1,024 A100,"
        " 5B TP 2 control (8-160 A100)"
    ),
    "long_context_cp_baselines.csv": "long-context ring CP, USP's Megatron-LM tables (A800)",
    "moe_cross_host_baselines.csv": "MoE, MegaScale-MoE's Megatron-LM baseline (H800)",
    "moe_ep_cross_host_runs.csv": (
        "MoE, EP over hosts: xtuner's Megatron-Core Qwen3-235B table (256 H800, EP 32 and EP-8"
        " controls), Megatron-LM #756 Mixtral (16 H100, EP 8 over 2 hosts)"
    ),
    "mlperf_gpt3_runs.csv": (
        "dense GPT-3 175B, MLPerf Training v3.0/v4.0/v4.1 logs (256-11,616 H100, 64 B200)"
    ),
    "mlperf_gptoss_runs.csv": (
        "MoE gpt-oss-20b, MLPerf Training v6.0 logs from a fork (8-512 H100/B300/GB200/GB300)"
    ),
    "mlperf_dsv3_runs.csv": (
        "MoE DeepSeek-V3 671B, EP 32, MLPerf Training v6.0 logs (256-8,192 GB200/GB300; a fork)"
    ),
    "mlperf_llama31_runs.csv": (
        "dense Llama 3.1 405B, MLPerf Training v5.0/v5.1/v6.0 logs"
        " (256-8,192 H100/H200/B200/GB200/GB300; v6.0 from a fork, incl. 4,096 GB300, 8,192 GB200)"
    ),
    "mlperf_llama31_8b_runs.csv": (
        "dense Llama 3.1 8B, MLPerf Training v5.1/v6.0 logs (8-1,024 H100/B200/B300/GB200/GB300)"
    ),
    "smp_p4d_runs.csv": "sharded DP, AWS test-case logs (p4d / p5)",
}
"""Outside files holding measured runs in the published-runs layout, with what each is. The
session-21 records without runs (grace_host_overhead, moe_load_imbalance, the two search
records) are statistics or searches, not rows `seer validate` reads."""


def file_summary(path: Path) -> dict[str, Any]:
    """One file's rows compared, rows not read, mean/max |error|, median signed error and the
    row furthest off (row_id, signed error)."""
    results, failed = validate_all(path)
    doc = summary(results, failed)
    errors = [r["error"] for r in doc["rows"]]
    worst = max(doc["rows"], key=lambda r: abs(r["error"]), default=None)
    return {
        "rows": len(errors),
        "not_read": len(doc["not_predicted"]),
        "mean_abs_error": doc["mean_abs_error"],
        "max_abs_error": doc["max_abs_error"],
        "median_error": statistics.median(errors) if errors else 0.0,
        "worst": (worst["row_id"], worst["error"]) if worst else None,
    }


def table(sums: dict[str, dict[str, Any]]) -> str:
    """Markdown table, one line per outside file."""
    lines = [
        "| file | what | rows (not read) | mean / max abs error | median signed | furthest |",
        "|---|---|---|---|---|---|",
    ]
    for name, s in sums.items():
        worst = f"{s['worst'][0]} {100 * s['worst'][1]:+.1f}%" if s["worst"] else "—"
        lines.append(
            f"| {name} | {OUTSIDE_FILES[name]} | {s['rows']} ({s['not_read']}) | "
            f"{100 * s['mean_abs_error']:.1f}% / {100 * s['max_abs_error']:.1f}% | "
            f"{100 * s['median_error']:+.1f}% | {worst} |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", type=Path, help="also write the per-file figures as JSON here")
    args = ap.parse_args(argv)
    if args.json is not None and not args.json.parent.is_dir():
        print(f"error: --json {args.json}: folder does not exist; give a path in an existing folder",
              file=sys.stderr)  # fmt: skip
        return 2
    sums = {name: file_summary(DATA / name) for name in OUTSIDE_FILES}
    print(table(sums))
    if args.json is not None:
        tmp = args.json.with_suffix(args.json.suffix + ".tmp")
        tmp.write_text(json.dumps(sums, indent=2) + "\n")
        tmp.replace(args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
