"""TorchTitan's DeepEP unpermute: the BF16 atomic scatters a MoE layer runs, what Seer charges
for them at the adopted rate (`seer/scatter_unpermute.py`), the alternative readings of the
worklog, and an experiment (not adopted) on Megatron-Core's unfused permute.

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

For every row that runs the path (`scatter_unpermute.runs_deepep_unpermute`) the script prints
Seer's step at the adopted rate and at the streaming price it replaced, and the step under the
other readings of the worklog (local batch 6; either Nsight table's forward ratio).
`--megatron` adds the experiment: Megatron-Core's unfused `moe_utils.permute` / `unpermute`
(no `--moe-permute-fusion`; core_v0.11 .. core_v0.17: `index_select` and `scatter_add_`, or
`index_add_` when deterministic) run the same BF16 atomic kernels; the set's figures if every
Megatron MoE row on Blackwell that does not state the fusion took the rate (and, with
`--hopper-rate`, Hopper rows a given rate).

    python scripts/seer_scatter_unpermute.py --csv tests/data/published_runs/development_runs_2.csv
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from starfabric.astral.seer import predict
from starfabric.astral.seer import scatter_unpermute as su
from starfabric.astral.seer.cost import is_hopper, make_context, op_costs
from starfabric.astral.seer.deepep_kernels import rank_copy_fraction
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fp8_recipe import native_mx
from starfabric.astral.seer.ops import backward_of, layer_ops, local_sizes, moe_imbalance
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import Job
from starfabric.astral.seer.round_robin_routing import round_robin_distinct
from starfabric.astral.seer.torchtitan_pp import is_torchtitan
from starfabric.astral.seer.validate import bundled_csv, read_rows, validate_all
from starfabric.errors import StarfabricError

WORKLOG_SHAPE_READINGS = {"LBS 8": 8, "LBS 6": 6}
"""The profile does not state its local batch: 8 (the README's configuration, adopted) or 6."""
FOUNDATIONTS_H100_RATE = 128 * 4096 * 2 * 512 / 10e-3
"""sms1097/FoundationTS `docs/proflie_training.md`: H100 SXM `indexFuncLargeIndex<BFloat16>`
"~10 ms" over 128 x 4,096 x top-2 rows of 512 (about 54 G elements/s; approximate, another
shape, capacity-dropped routes into slot 0): for the experiment's sensitivity only."""
PERMUTE_FUSION = ("moe-permute-fusion", "megatron-bridge")
"""A Megatron row that states `--moe-permute-fusion` runs TE's fused permute kernels; so does a
Megatron-Bridge run (v0.4.2: every MoE recipe and model bridge sets `moe_permute_fusion = True`,
e.g. `recipes/qwen/qwen3_moe.py` 77, `models/qwen/qwen3_moe_bridge.py` 60,
`models/deepseek/deepseek_v3_bridge.py` 68)."""


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
    """A TorchTitan MoE row whose layers go through DeepEP's own dispatch and the permute /
    unpermute above (`scatter_unpermute.runs_deepep_unpermute`)."""
    ex = job.execution
    return job.model.is_moe and su.runs_deepep_unpermute(
        framework, ex.moe_dispatcher, ex.moe_fused_dispatch
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
    """(Seer's seconds per step for the three operators as it prices `job`, seconds of one
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
    return per_layer * per_step(job), per_layer


def per_step(job: Job) -> float:
    """Layer-micro-batches of MoE one rank runs per step."""
    lay = resolve_layout(job.model, job.execution, job.system)
    return job.model.moe_layers / lay.pp * lay.micro_batches


def atomic_step_seconds(job: Job, rate: float, scatter_ratio: float) -> float:
    """Seconds per step of the three atomic scatters if the index_add adds `rate` elements
    per second and the forward scatters take `scatter_ratio` of its time in a worklog table
    (both forward runs: `scatter_unpermute.scatter_to_index_add` per call)."""
    c = count(job)
    t_index_add = c.elements / rate
    per_layer = t_index_add * (1.0 + su.scatter_to_index_add(scatter_ratio) * c.forward_calls)
    return per_layer * per_step(job)


def with_atomic(job: Job, on: bool) -> Job:
    """`job` with its permute / unpermute priced as atomic scatters or as streaming."""
    return Job(job.model, job.execution.model_copy(update={"moe_atomic_unpermute": on}), job.system)


def readings() -> dict[str, tuple[float, float]]:
    """(index_add rate, table ratio) of each reading of the worklog: the adopted one first."""
    mean = su.SCATTER_TO_INDEX_ADD * su.WORKLOG_FORWARD_CALLS
    out = {"adopted (LBS 8, mean)": (su.INDEX_ADD_ELEMENTS_PER_S, mean)}
    out["LBS 6, mean"] = (su.worklog_index_add_rate(6), mean)
    for ep in su.WORKLOG_NSYS_SCATTER_S:
        out[f"LBS 8, {ep}"] = (su.INDEX_ADD_ELEMENTS_PER_S, su.worklog_scatter_ratio(ep))
    return out


@dataclass(frozen=True)
class RowScatter:
    """One row: the scatters, Seer's charge and step at the adopted rate and at streaming."""

    row_id: str
    published_s: float
    predicted_s: float
    streaming_s: float
    """Seer's step with the three operators at the streaming price (the mechanism off)."""
    count: ScatterCount
    charge_s: float
    streaming_charge_s: float
    reading_s: dict[str, float]
    """Seer's step with the three operators at each reading of the worklog."""


def rows_scatter(csv: Path) -> list[RowScatter]:
    """Every predicted row of `csv` that runs TorchTitan's DeepEP unpermute."""
    framework = {r["row_id"]: r.get("framework", "") for r in read_rows(csv)}
    results, _failed = validate_all(csv)
    out: list[RowScatter] = []
    for res in results:
        job = res.prediction.job
        if not runs_deepep_unpermute(framework.get(res.row_id), job):
            continue
        off = with_atomic(job, False)
        charge, _ = seer_charge_s(job)
        streaming, _ = seer_charge_s(off)
        ratio = res.predicted_iter_s / predict(job).iteration_s
        reading = {
            name: res.predicted_iter_s - charge + atomic_step_seconds(job, rate, r)
            for name, (rate, r) in readings().items()
        }
        out.append(RowScatter(
            row_id=res.row_id, published_s=res.published_iter_s,
            predicted_s=res.predicted_iter_s, streaming_s=predict(off).iteration_s * ratio,
            count=count(job), charge_s=charge, streaming_charge_s=streaming, reading_s=reading,
        ))  # fmt: skip
    return out


def runs_megatron_unfused(row: dict[str, str], job: Job) -> bool:
    """A Megatron-Core MoE row (host launches counted, not TorchTitan) that does not state
    `--moe-permute-fusion` and is no Megatron-Bridge run (PERMUTE_FUSION): the experiment's
    reading of who could run the unfused permute (an upper bound: the others may be fused)."""
    text = " ".join(row.get(k) or "" for k in ("framework", "notes")).lower()
    ex = job.execution
    return (
        job.model.is_moe
        and ex.host_launches
        and not is_torchtitan(row.get("framework"))
        and not ex.moe_fused_dispatch
        and not any(p in text for p in PERMUTE_FUSION)
    )


def megatron_experiment(csv: Path, hopper_rate: float = 0.0) -> tuple[list[float], list[float], list[str]]:  # fmt: skip
    """(errors %, errors % with the experiment, rows moved) over `csv`'s compared rows:
    Megatron unfused rows on Blackwell at the adopted rate; on Hopper at `hopper_rate` (forward
    at the adopted per-call ratio) when > 0. Each row's chosen layout is kept."""
    rows = {r["row_id"]: r for r in read_rows(csv)}
    results, _failed = validate_all(csv)
    before: list[float] = []
    after: list[float] = []
    moved: list[str] = []
    for res in results:
        err = (res.predicted_iter_s - res.published_iter_s) / res.published_iter_s * 100
        before.append(err)
        job = res.prediction.job
        gpu = resolve_layout(job.model, job.execution, job.system).gpu
        new = res.predicted_iter_s
        if runs_megatron_unfused(rows[res.row_id], job):
            base = predict(job).iteration_s
            if native_mx(gpu):
                new = res.predicted_iter_s * predict(with_atomic(job, True)).iteration_s / base
            elif is_hopper(gpu) and hopper_rate > 0:
                c = count(job)
                # streaming charge out, the given rate in (forward at the adopted ratio)
                atomic = c.elements / hopper_rate * (1 + su.SCATTER_TO_INDEX_ADD * c.forward_calls)
                new = (
                    res.predicted_iter_s
                    * (base - seer_charge_s(job)[0] + atomic * per_step(job))
                    / base
                )
        if new != res.predicted_iter_s:
            moved.append(f"{res.row_id} {err:+.1f}% -> "
                         f"{(new - res.published_iter_s) / res.published_iter_s * 100:+.1f}%")  # fmt: skip
        after.append((new - res.published_iter_s) / res.published_iter_s * 100)
    return before, after, moved


def _figures(errs: list[float]) -> str:
    a = [abs(e) for e in errs]
    return f"{sum(a) / len(a):.2f}% / {max(a):.2f}%" if a else "no rows"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, help="published-runs CSV (default: the visible set)")
    ap.add_argument("--megatron", action="store_true",
                    help="the experiment on Megatron-Core's unfused permute (not adopted)")  # fmt: skip
    ap.add_argument("--hopper-rate", type=float, default=0.0,
                    help="with --megatron: a Hopper index_add rate, elements/s "
                    f"(FoundationTS's approximate figure: {FOUNDATIONTS_H100_RATE:.3g})")  # fmt: skip
    args = ap.parse_args(argv)
    csv = args.csv or bundled_csv()
    try:
        found = rows_scatter(csv)
        exp = megatron_experiment(csv, args.hopper_rate) if args.megatron else None
    except StarfabricError as exc:  # a missing or malformed CSV: one line, as the CLI says it
        print(f"error: {exc.one_line()}", file=sys.stderr)
        return 2
    print(f"adopted: index_add {su.INDEX_ADD_ELEMENTS_PER_S / 1e9:.1f} G elements/s "
          f"({su.WORKLOG_INDEX_ADD_US} us a call, read at LBS {su.WORKLOG_LOCAL_BATCH}); forward "
          f"scatter {su.SCATTER_TO_INDEX_ADD:.3f} of an index_add call "
          f"({su.SCATTER_ELEMENTS_PER_S / 1e9:.1f} G elements/s)")  # fmt: skip
    if not found:
        print("no row runs TorchTitan's DeepEP unpermute")
    else:
        print("row            published  streaming      adopted   R/call  adds/row  calls  "
              "charge s (streaming)")  # fmt: skip
    for r in found:
        c = r.count
        e0 = (r.streaming_s - r.published_s) / r.published_s * 100
        e1 = (r.predicted_s - r.published_s) / r.published_s * 100
        print(f"{r.row_id:14s} {r.published_s:9.3f} {r.streaming_s:6.3f} {e0:+5.1f}% "
              f"{r.predicted_s:6.3f} {e1:+5.1f}% {c.rows:7.0f} {c.adds_per_row:8.2f} "
              f"{c.calls:6d} {r.charge_s:8.3f} ({r.streaming_charge_s:.3f})")  # fmt: skip
    if found:
        keys = list(found[0].reading_s)
        print(
            "\nrow            " + "  ".join(f"{k:>22s}" for k in keys) + "   (error vs published)"
        )
        for r in found:
            errs = [(r.reading_s[k] - r.published_s) / r.published_s * 100 for k in keys]
            print(f"{r.row_id:14s} " + "  ".join(f"{e:+21.1f}%" for e in errs))
    if exp is not None:
        before, after, moved = exp
        print(f"\nexperiment (not adopted): Megatron unfused permute at the rate; {len(before)} rows "
              f"compared: {_figures(before)} -> {_figures(after)} (mean / max |error|)")  # fmt: skip
        for m in moved:
            print(f"  {m}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
