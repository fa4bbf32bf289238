"""TorchTitan's DeepEP unpermute: the BF16 atomic scatters a MoE layer runs, what Seer charges
for them, the rate a published step would imply, and the only measurement found (not adopted).

The code path (pytorch/torchtitan @5d4bdd0, NousResearch's DeepEP branch the TTDEEPEP rows ran;
the same two calls in the upstream integration @36a4b6942 `_permute_tokens` / `_unpermute_tokens`
and at b5bcd76 `deepep.py` 416/434):

- permute (`torchtitan/distributed/deepep/utils.py` 15-40): `tokens.index_select(0,
  sorted_indices)`: a gather, streaming. Its backward is `index_add_` of the R permuted rows
  back into the D received tokens: an atomic scatter (ATen `indexFuncLargeIndex<BFloat16,...>`).
- unpermute (43-63, `@torch.compile(fullgraph=True)`): `zeros(D, hidden).scatter_add_(0,
  sorted_indices.unsqueeze(1).expand(-1, hidden), permuted)` in BF16: an atomic scatter
  (Inductor falls back to ATen for BF16 before pytorch#167380: `_scatter_gather_elementwise_
  kernel`). Its gradient with respect to the source is `gather`: streaming.
- full activation checkpointing re-runs the forward, so the scatter runs twice per step.

Per MoE layer, micro-batch and rank: R = local tokens x top-k (token, expert) rows (every
pair lands on exactly one rank; the busiest rank's share under imbalance), D = local tokens x
the distinct ranks a token reaches (round-robin forced balance: `round_robin_distinct`; else
DeepEP's random-routing expectation), R / D adds per destination row.

Seer prices the three as streaming memory traffic (`ops._moe_mlp`'s `moe.permute` /
`moe.unpermute` and their backward). This script prints, for every row whose framework cell
names TorchTitan and whose dispatcher is DeepEP's own (not the fused DistMoE backend): the
elements the atomic scatters add per step, Seer's charge for them, and the element rate that
would close the row's gap if all of it were theirs. It then applies the only measurement of
these kernels at this shape that was found (Phuc Nguyen's worklog, below), under both readings
of its unstated shape.
That measurement is a profile of the rows' own development runs, so it is reported, not used
to price anything.

    python scripts/seer_scatter_unpermute.py --csv tests/data/published_runs/development_runs_2.csv
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from starfabric.astral.seer.cost import make_context, op_costs
from starfabric.astral.seer.deepep_kernels import rank_copy_fraction
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.ops import backward_of, layer_ops, local_sizes, moe_imbalance
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import Job
from starfabric.astral.seer.round_robin_routing import round_robin_distinct
from starfabric.astral.seer.torchtitan_pp import is_torchtitan
from starfabric.astral.seer.validate import read_rows, validate_all
from starfabric.errors import StarfabricError

# Phuc Nguyen, "Building 10T tokens/month throughput infrastructure for MoE training" (worklog,
# xrsrke.github.io moe-worklogs.html, B200, PyTorch 2.9, Qwen3-30B-A3B, EP 8 in a host).
WORKLOG_INDEX_ADD_US = 4364.7
"""'November 18': `indexFuncLargeIndex<c10::BFloat16, long, unsigned int, 2, 2, -2, true>`,
GPU time 419.0 ms over 96 invocations, avg 4364.7 us (under `ScatterAddBackward0`)."""
WORKLOG_INDEX_ADD_CALLS = 96
WORKLOG_INDEX_ADD_TOTAL_MS = 419.0
WORKLOG_NSYS_SCATTER_S = {"EP4": 3.583, "EP2": 1.843}
"""'November 14' Nsight top-15: `_scatter_gather_elementwise_kernel<128, 8, ...>` total seconds."""
WORKLOG_NSYS_INDEX_ADD_S = {"EP4": 4.289, "EP2": 1.742}
"""The same tables' `indexFuncLargeIndex<c10::BFloat16, ...>` total seconds."""
WORKLOG_SHAPE_READINGS = {"LBS 8": 8, "LBS 6": 6}
"""The profile does not state its local batch: 8 (the rows' toml) or 6 (the worklog's
'unblock lbs=6' commit of 2025-11-14 that precedes it) sequences of 4,096 tokens."""
WORKLOG_SEQ_LEN = 4096
WORKLOG_HIDDEN = 2048
WORKLOG_TOPK = 8


def worklog_scatter_ratio(ep: str) -> float:
    """Forward scatter kernels' time over the index_add kernels' time in one worklog table
    (both forward runs of the scatter, full recompute, against the one backward index_add)."""
    return WORKLOG_NSYS_SCATTER_S[ep] / WORKLOG_NSYS_INDEX_ADD_S[ep]


def worklog_index_add_rate(local_batch: int) -> float:
    """Elements per second of the worklog's index_add if its calls were one EP-8 rank's permute
    backward at `local_batch` x 4,096 tokens (R = tokens x 8 rows of 2,048)."""
    elements = local_batch * WORKLOG_SEQ_LEN * WORKLOG_TOPK * WORKLOG_HIDDEN
    return elements / (WORKLOG_INDEX_ADD_US * 1e-6)


@dataclass(frozen=True)
class ScatterCount:
    """The atomic scatters of one MoE layer for one micro-batch on one rank."""

    rows: float
    """R: (token, expert) rows scattered (the permuted tokens)."""
    dest_rows: float
    """D: received tokens they are added into."""
    hidden: int
    forward_calls: int
    """`scatter_add_` runs: 1, 2 under full recompute."""
    backward_calls: int = 1
    """`index_add_` runs (the permute's backward)."""

    @property
    def elements(self) -> float:
        """Elements one call adds."""
        return self.rows * self.hidden

    @property
    def adds_per_row(self) -> float:
        return self.rows / self.dest_rows

    @property
    def calls(self) -> int:
        return self.forward_calls + self.backward_calls


def runs_deepep_unpermute(framework: str | None, job: Job) -> bool:
    """A TorchTitan row whose MoE layers go through DeepEP's own dispatch and the permute /
    unpermute above (not the fused DistMoE backend, which has no unpermute of its own)."""
    ex = job.execution
    return (
        is_torchtitan(framework)
        and job.model.is_moe
        and ex.moe_dispatcher == "deepep"
        and not ex.moe_fused_dispatch
    )


def count(job: Job) -> ScatterCount:
    """The atomic scatters of `job`'s MoE layer per micro-batch and rank (module docstring)."""
    model, ex = job.model, job.execution
    lay = resolve_layout(model, ex, job.system)
    loc = local_sizes(model, ex, lay)
    k, experts = model.moe_topk, model.moe_experts
    rows = loc.tokens_sp * k * moe_imbalance(ex)
    if ex.moe_round_robin_routing:
        distinct = round_robin_distinct(experts, k, lay.ep)
    else:
        distinct = rank_copy_fraction(experts, k, lay.ep) * k
    dest = loc.tokens_sp * distinct * moe_imbalance(ex)
    fwd = 2 if ex.recompute == "full" else 1
    return ScatterCount(rows=rows, dest_rows=dest, hidden=model.hidden, forward_calls=fwd)


def seer_charge_s(job: Job) -> tuple[float, float]:
    """(Seer's seconds per step for the three operators as it prices them, seconds of one
    layer-micro-batch): `moe.unpermute` forward x forward calls + `moe.permute.bwd`."""
    model, ex = job.model, job.execution
    lay = resolve_layout(model, ex, job.system)
    ctx = make_context(ex, lay, efficiency_for(lay.gpu, job.system.efficiency), job.system, model)
    fwd = layer_ops(model, ex, lay, True)
    bwd = backward_of(fwd)
    cf, cb = op_costs(fwd, ctx), op_costs(bwd, ctx, backward=True)
    unpermute = sum(float(cf.time[i]) for i, n in enumerate(fwd.name) if n == "moe.unpermute")
    index_add = sum(float(cb.time[i]) for i, n in enumerate(bwd.name) if n == "moe.permute.bwd")
    per_layer = unpermute * count(job).forward_calls + index_add
    return per_layer * model.moe_layers / lay.pp * lay.micro_batches, per_layer


def per_step(job: Job) -> float:
    """Layer-micro-batches of MoE one rank runs per step."""
    lay = resolve_layout(job.model, job.execution, job.system)
    return job.model.moe_layers / lay.pp * lay.micro_batches


@dataclass(frozen=True)
class RowScatter:
    """One row: the scatters, Seer's charge, the gap and the rates."""

    row_id: str
    published_s: float
    predicted_s: float
    count: ScatterCount
    charge_s: float
    implied_rate: float
    """Elements per second at which the atomic scatters would take Seer's charge plus the
    whole gap (published - predicted); <= 0 when Seer is already slower."""
    streaming_rate: float
    """Elements per second Seer's streaming price amounts to for the same elements."""
    worklog_s: dict[str, float]
    """Seer's step with the three operators at the worklog's rate, by shape reading and table."""


def atomic_step_seconds(job: Job, rate: float, scatter_ratio: float) -> float:
    """Seconds per step of the three atomic scatters if the index_add adds `rate` elements
    per second and the forward scatters take `scatter_ratio` of its time (both calls)."""
    c = count(job)
    t_index_add = c.elements / rate
    per_layer = t_index_add * (1.0 + scatter_ratio * c.forward_calls / 2.0)
    return per_layer * per_step(job)


def rows_scatter(csv: Path) -> list[RowScatter]:
    """Every predicted row of `csv` that runs TorchTitan's DeepEP unpermute."""
    framework = {r["row_id"]: r.get("framework", "") for r in read_rows(csv)}
    results, _failed = validate_all(csv)
    out: list[RowScatter] = []
    for res in results:
        job = res.prediction.job
        if not runs_deepep_unpermute(framework.get(res.row_id), job):
            continue
        c = count(job)
        charge, _ = seer_charge_s(job)
        elements = c.elements * c.calls * per_step(job)
        gap = res.published_iter_s - res.predicted_iter_s
        implied = elements / (charge + gap) if charge + gap > 0 else 0.0
        worklog: dict[str, float] = {}
        for reading, lbs in WORKLOG_SHAPE_READINGS.items():
            for ep in WORKLOG_NSYS_SCATTER_S:
                atomic = atomic_step_seconds(
                    job, worklog_index_add_rate(lbs), worklog_scatter_ratio(ep)
                )
                worklog[f"{reading}, {ep}"] = res.predicted_iter_s - charge + atomic
        out.append(RowScatter(
            row_id=res.row_id, published_s=res.published_iter_s,
            predicted_s=res.predicted_iter_s, count=c, charge_s=charge,
            implied_rate=implied, streaming_rate=elements / charge, worklog_s=worklog,
        ))  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, required=True, help="published-runs CSV")
    args = ap.parse_args(argv)
    try:
        found = rows_scatter(args.csv)
    except StarfabricError as exc:  # a missing or malformed CSV: one line, as the CLI says it
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 2
    if not found:
        print("no row runs TorchTitan's DeepEP unpermute")
        return 0
    print("row            published  Seer    gap s  R/call  adds/row  calls  Seer charge s  "
          "implied Gelem/s  (x streaming)")  # fmt: skip
    for r in found:
        c = r.count
        ratio = r.implied_rate / r.streaming_rate if r.implied_rate > 0 else 0.0
        print(f"{r.row_id:14s} {r.published_s:9.3f} {r.predicted_s:6.3f} "
              f"{r.published_s - r.predicted_s:7.3f} {c.rows:7.0f} {c.adds_per_row:8.2f} "
              f"{c.calls:6d} {r.charge_s:14.3f} {r.implied_rate / 1e9:16.1f}  {ratio:.3f}")  # fmt: skip
    print()
    print(f"worklog index_add: {WORKLOG_INDEX_ADD_US} us a call "
          f"({WORKLOG_INDEX_ADD_CALLS} calls, {WORKLOG_INDEX_ADD_TOTAL_MS} ms); forward-scatter / "
          "index_add time " + ", ".join(
              f"{ep} {worklog_scatter_ratio(ep):.3f}" for ep in WORKLOG_NSYS_SCATTER_S))  # fmt: skip
    for reading, lbs in WORKLOG_SHAPE_READINGS.items():
        print(f"  read as {reading}: {worklog_index_add_rate(lbs) / 1e9:.1f} Gelem/s")
    keys = list(found[0].worklog_s)
    print("row            " + "  ".join(f"{k:>14s}" for k in keys) + "   (error vs published)")
    for r in found:
        errs = [(r.worklog_s[k] - r.published_s) / r.published_s * 100 for k in keys]
        print(f"{r.row_id:14s} " + "  ".join(f"{e:+13.1f}%" for e in errs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
