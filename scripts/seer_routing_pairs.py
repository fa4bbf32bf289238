"""What dropless routing costs: rows that differ only in forced versus learned (dropless) routing.

Megatron-Core's `--moe-router-force-load-balancing` hands every expert the same number of tokens;
without it the busiest expert-parallel rank sets the pace of each MoE layer (its expert GEMMs and
the all-to-all that waits for it). A published pair of otherwise identical runs measures that
cost directly:

    dropless cost per token = (t_dropless - t_forced) / tokens per iteration

printed in microseconds per token with the ratio t_dropless / t_forced. With `--json` (the output
of `starfabric astral seer validate --json` of the same CSV, which also carries the iteration
time a TFLOP/s-only row converts to) Seer's cost for the same pair is printed beside it.

    python scripts/seer_routing_pairs.py --csv tests/data/published_runs/development_runs_2.csv \
        --json /tmp/dev2.json
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from starfabric.astral.seer.validate import stated_iteration_times, states_forced_balance

KEY_FIELDS = (
    "model", "gpu", "num_gpus", "tp", "pp", "vpp", "dp", "cp", "ep", "etp", "micro_batch",
    "global_batch_seqs", "seq_len", "recompute", "precision", "framework", "interconnect",
)  # fmt: skip
"""A pair's rows agree on all of these and differ in routing."""


@dataclass(frozen=True)
class RoutingPair:
    """One forced / dropless pair and what dropless routing costs in it."""

    row_forced: str
    row_dropless: str
    tokens: int
    forced_s: float
    dropless_s: float

    @property
    def cost_us_per_token(self) -> float:
        """Extra seconds of the dropless run per token of the iteration, in microseconds."""
        return (self.dropless_s - self.forced_s) / self.tokens * 1e6

    @property
    def ratio(self) -> float:
        """Dropless iteration time over forced."""
        return self.dropless_s / self.forced_s


def is_forced(row: Mapping[str, str]) -> bool:
    """Whether the row states forced load balancing, read from the cells `seer validate` reads
    it from (model, model notes, unverified fields, notes)."""
    cells = ("model", "model_notes", "unverified_fields", "notes")
    return states_forced_balance(" ".join(row.get(k) or "" for k in cells))


def pairs(rows: Iterable[Mapping[str, str]], times: Mapping[str, float]) -> list[RoutingPair]:
    """Every forced / dropless pair of MoE rows equal in `KEY_FIELDS`, timed with `times` (row id
    -> seconds; rows without one are skipped). A group with several rows of one routing pairs
    none (which of them is the partner is ambiguous)."""
    groups: dict[tuple[str, ...], list[Mapping[str, str]]] = {}
    for r in rows:
        if r["row_id"] in times and (r.get("arch") or "").strip().lower() == "moe":
            groups.setdefault(tuple((r.get(f) or "").strip() for f in KEY_FIELDS), []).append(r)
    out = []
    for members in groups.values():
        forced = [r for r in members if is_forced(r)]
        dropless = [r for r in members if not is_forced(r)]
        if len(forced) != 1 or len(dropless) != 1:
            continue
        f, d = forced[0], dropless[0]
        tokens = int(f["global_batch_seqs"]) * int(f["seq_len"])
        out.append(RoutingPair(f["row_id"], d["row_id"], tokens, times[f["row_id"]],
                               times[d["row_id"]]))  # fmt: skip
    return sorted(out, key=lambda p: (p.tokens, p.row_forced))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, required=True, help="published-runs CSV")
    ap.add_argument("--json", type=Path, help="`seer validate --json` output of the same CSV")
    a = ap.parse_args(argv)
    with a.csv.open(newline="") as fh:
        rows = list(csv.DictReader(fh))
    pub_times = stated_iteration_times(rows)
    pred: dict[tuple[str, str], RoutingPair] = {}
    if a.json is not None:
        doc = json.loads(a.json.read_text())
        pub_times.update({x["row_id"]: float(x["published_iter_s"]) for x in doc["rows"]})
        seer = {x["row_id"]: float(x["predicted_iter_s"]) for x in doc["rows"]}
        pred = {(p.row_forced, p.row_dropless): p for p in pairs(rows, seer)}
    print("pair (forced / dropless)       tokens/iter   forced s  dropless s   us/token  ratio"
          "   (Seer: us/token, ratio)")  # fmt: skip
    for p in pairs(rows, pub_times):
        line = (
            f"{p.row_forced} / {p.row_dropless}".ljust(31)
            + f"{p.tokens:11d}{p.forced_s:11.2f}{p.dropless_s:12.2f}"
            + f"{p.cost_us_per_token:11.3f}{p.ratio:7.3f}"
        )
        s = pred.get((p.row_forced, p.row_dropless))
        if s is not None:
            line += f"   ({s.cost_us_per_token:.3f}, {s.ratio:.3f})"
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
