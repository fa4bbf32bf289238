"""Compare the non-timing fields of two starfabric result JSON files (before/after a change).

Keys that are wall/CPU time, rates derived from time, or JIT-related are dropped (matched by
name: see TIMING_PATTERNS); everything else must be equal, floats to 1e-12 relative. Prints
the differing paths and exits 1 when there are any, 0 when the files agree.

    python scripts/compare_results.py before.json after.json
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

#: Key names whose values are measured machine time (wall or CPU) or JIT state; values
#: derived from measured time are listed by name in DERIVED (each checked in its source).
TIMING_PATTERNS = (r"cpu", r"wall", r"jit", r"compile", r"elapsed", r"thread_time")
_TIMING = re.compile("|".join(TIMING_PATTERNS), re.IGNORECASE)
#: JSON paths of values derived from measured CPU time, or naming an output file:
#: E2's ratios are management-CPU ratios (experiments/e2_cpu.py: ratio(fornax_cpu, cpu),
#: harness.common_ratio over them); `plot` is the PNG path of the run's --out folder.
DERIVED = re.compile(r"\.E2\.rows\[\d+\]\.fornax_ratio$|\.E2\.summary\.ratio_vs\.|\.plot$")


def is_timing(key: str) -> bool:
    """Whether a key names a time, a time-derived rate or JIT state."""
    return bool(_TIMING.search(key))


def strip(obj: Any, path: str = "$") -> Any:
    """`obj` without its timing keys and DERIVED paths (recursively)."""
    if isinstance(obj, dict):
        return {k: strip(v, f"{path}.{k}") for k, v in obj.items()
                if not is_timing(str(k)) and not DERIVED.search(f"{path}.{k}")}  # fmt: skip
    if isinstance(obj, list):
        return [strip(v, f"{path}[{i}]") for i, v in enumerate(obj)]
    return obj


def diff(a: Any, b: Any, path: str = "$") -> list[str]:
    """Paths where `a` and `b` differ (after `strip`)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}.{k}: only in {'before' if k in a else 'after'}" for k in
               sorted(set(a) ^ set(b))]  # fmt: skip
        for k in sorted(set(a) & set(b)):
            out += diff(a[k], b[k], f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: length {len(a)} != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in
                diff(x, y, f"{path}[{i}]")]  # fmt: skip
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return []
        return [] if math.isclose(a, b, rel_tol=1e-12, abs_tol=0.0) else [f"{path}: {a} != {b}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def count_leaves(obj: Any) -> int:
    if isinstance(obj, dict):
        return sum(count_leaves(v) for v in obj.values())
    if isinstance(obj, list):
        return sum(count_leaves(v) for v in obj)
    return 1


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("before", type=Path)
    p.add_argument("after", type=Path)
    args = p.parse_args(argv)
    a = strip(json.loads(args.before.read_text()))
    b = strip(json.loads(args.after.read_text()))
    d = diff(a, b)
    for line in d[:50]:
        print(line)
    print(f"{count_leaves(a)} non-timing values compared, {len(d)} differ")
    return 1 if d else 0


if __name__ == "__main__":
    sys.exit(main())
