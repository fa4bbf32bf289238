"""Differential harness: `seer search`'s vectorized DP term (evaluate.evaluate) against
`seer predict`'s (schedule.build_timeline) on a grid of MoE layouts.

For every layout of the grid (models x TP x CP x PP x EP x ETP x ZeRO x DP overlap x stack) it
prices the layout both ways and prints, per term, the search's seconds over the predictor's:
  dense_rs / exp_rs   the gradient reduction of the dense (DP x CP group) and expert (expert-DP
                      group) parameters of the heaviest stage, no overlap (raw collective time)
  dense_ag / exp_ag   the distributed optimizer's parameter all-gather, the same split
  dp                  the DP term as it lands in the iteration (exposed reduce + gather)
  total               the iteration
The predictor's raw terms are its own calls (`ctx.comm.time` on `stage_params`' heaviest stage,
the groups `comm.layout_groups` places); the search's come from evaluate(..., terms=...).

  PYTHONPATH=src python scripts/seer_search_predict_dp.py [--quick] [--json F]
"""

from __future__ import annotations

import argparse
import itertools
import json
from importlib import resources
from typing import Any

import numpy as np

from starfabric.astral.seer.cost import make_context
from starfabric.astral.seer.dist_opt_gather import gather_bytes_per_param
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.evaluate import evaluate_vectorized
from starfabric.astral.seer.model import ModelSpec, from_hf_config, load_model
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout, zero_shard
from starfabric.astral.seer.predict import make_job
from starfabric.astral.seer.schedule import build_timeline, grad_bytes, stage_params
from starfabric.astral.seer.search import COLUMNS, RECOMPUTE
from starfabric.astral.seer.search_stack import search_base
from starfabric.errors import StarfabricError


def _hf(name: str) -> dict[str, Any]:
    path = resources.files("starfabric.astral.seer") / "hf_configs" / f"{name}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def models() -> dict[str, ModelSpec]:
    """The grid's MoE models: two bundled, two from their published Hugging Face configs
    (mistralai/Mixtral-8x22B-v0.1 and Qwen/Qwen3-30B-A3B config.json) as overrides of the
    bundled config of the same architecture."""
    m22 = _hf("mixtral-8x7b-v0.1") | {
        "hidden_size": 6144, "intermediate_size": 16384, "num_attention_heads": 48,
        "num_hidden_layers": 56, "num_key_value_heads": 8, "vocab_size": 32768,
        "max_position_embeddings": 65536,
    }  # fmt: skip
    q30 = _hf("qwen3-235b-a22b") | {
        "hidden_size": 2048, "intermediate_size": 6144, "moe_intermediate_size": 768,
        "num_attention_heads": 32, "num_hidden_layers": 48, "num_key_value_heads": 4,
        "max_window_layers": 48,
    }  # fmt: skip
    return {
        "mixtral-8x7b": load_model("mixtral-8x7b-v0.1"),
        "mixtral-8x22b": from_hf_config(m22, "mixtral-8x22b"),
        "deepseek-v3": load_model("deepseek-v3"),
        "qwen3-30b-a3b": from_hf_config(q30, "qwen3-30b-a3b"),
    }


STACKS: dict[str, dict[str, Any]] = {
    "plain": {},
    "fp32_gather": {"param_gather_dtype": "grad"},
    "ds_bf16_pipe": {"deepspeed_bf16_pipe": True},
}


def predictor_terms(model: ModelSpec, job: Any) -> dict[str, float]:
    """The predictor's raw DP collectives on its heaviest stage (schedule.build_timeline's
    calls, no overlap) and its DP term and iteration."""
    ex, system = job.execution, job.system
    lay = resolve_layout(model, ex, system)
    ctx = make_context(ex, lay, efficiency_for(lay.gpu, system.efficiency), system, model)
    tl = build_timeline(model, ex, lay, ctx)
    params = stage_params(model, lay, ex.pipeline_schedule != "dualpipe")
    heavy = max(params, key=lambda sp: sp.dense + sp.expert)
    gb = grad_bytes(ex)
    ag_b = gather_bytes_per_param(ex.param_gather_dtype, gb)
    hybrid = zero_shard(ex, lay) < lay.dp
    grp = "dp_shard" if hybrid else ("dp_cp" if lay.cp > 1 else "dp")
    full = ex.zero == 0 or (ex.deepspeed_bf16_pipe and lay.pp > 1)
    coll = "all_reduce" if full else "reduce_scatter"
    fsdp = ex.zero == 3 and lay.pp == 1
    gathers = ex.zero >= 1 and not fsdp
    t = ctx.comm.time
    return {
        "dense_rs": 0.0 if fsdp else t(coll, heavy.dense * gb, grp),
        "exp_rs": 0.0 if fsdp else t(coll, heavy.expert * gb, "edp"),
        "dense_ag": t("all_gather", heavy.dense * ag_b, grp) if gathers else 0.0,
        "exp_ag": t("all_gather", heavy.expert * ag_b, "edp") if gathers else 0.0,
        "dp": tl.breakdown["dp"],
        "total": tl.iteration_s,
        "edp": float(lay.edp),
    }


def grid(quick: bool) -> list[dict[str, int]]:
    """Layouts of the grid as search configuration rows (mb 1, vpp 1, selective recompute)."""
    tps, cps, pps = (1, 2, 4), (1, 2), (1, 2, 4)
    eps, etps = (1, 4, 8), (1, 2)
    zeros, dpos = ((0, 1, 3), (0, 1)) if quick else ((0, 1, 2, 3), (0, 1))
    out = []
    for tp, cp, pp, ep, etp, zero, dpo in itertools.product(tps, cps, pps, eps, etps, zeros, dpos):
        if ep == 1 and etp != 1:
            continue
        out.append({"tp": tp, "cp": cp, "pp": pp, "vpp": 1, "ep": ep, "etp": etp, "mb": 1,
                    "rec": RECOMPUTE.index("selective"), "tpo": 0, "dpo": dpo, "zero": zero,
                    "off": 0})  # fmt: skip
    return out


def run(
    quick: bool, gpus: int = 64, global_batch: int = 256, seq_len: int = 4096
) -> list[dict[str, Any]]:
    system = SystemSpec(gpu="H100", gpus=gpus)
    rows: list[dict[str, Any]] = []
    mods = models()
    names = ("mixtral-8x7b", "qwen3-30b-a3b") if quick else tuple(mods)
    for name, (sname, stack) in itertools.product(names, STACKS.items()):
        model = mods[name]
        base = search_base(
            ExecutionSpec(global_batch=global_batch, seq_len=seq_len, **stack),
            global_batch, seq_len, "bf16",
        )  # fmt: skip
        keep, jobs = [], []
        for r in grid(quick):
            r = dict(r, dp=gpus // (r["tp"] * r["cp"] * r["pp"]))
            if r["etp"] == 1 and r["ep"] == 1:
                r["etp"] = r["tp"]  # the search's convention without EP
            ex = {
                "global_batch": global_batch, "seq_len": seq_len, "precision": "bf16",
                "tp": r["tp"], "pp": r["pp"], "vpp": 1, "dp": r["dp"], "cp": r["cp"],
                "ep": r["ep"], "etp": r["etp"], "micro_batch": 1, "recompute": "selective",
                "overlap_grad_reduce": bool(r["dpo"]), "overlap_param_gather": bool(r["dpo"]),
                "zero": r["zero"], **stack,
            }  # fmt: skip
            if model.layers % r["pp"]:
                continue
            try:
                job = make_job(model, ex, system)
                resolve_layout(model, job.execution, system)
            except StarfabricError:
                continue
            keep.append(r)
            jobs.append(job)
        if not keep:
            continue
        cfg = {c: np.array([r[c] for r in keep], dtype=np.int64) for c in COLUMNS}
        terms: dict[str, np.ndarray[Any, Any]] = {}
        it, _, _ = evaluate_vectorized(
            model, system, cfg, global_batch, seq_len, "bf16", base, terms
        )
        for i, (r, job) in enumerate(zip(keep, jobs, strict=True)):
            try:
                p = predictor_terms(model, job)
            except StarfabricError:
                continue
            s = {k: float(terms[k][i]) for k in ("dense_rs", "exp_rs", "dense_ag", "exp_ag")}
            s["dp"] = float(terms["dp_exposed"][i] + terms["ag_exposed"][i])
            s["total"] = float(it[i])
            rows.append({"model": name, "stack": sname, **r, "search": s, "predict": p})
    return rows


def _ratio(a: float, b: float) -> float:
    return a / b if b > 1e-12 else (1.0 if a <= 1e-12 else float("inf"))


TERMS = ("dense_rs", "exp_rs", "dense_ag", "exp_ag", "dp_no_overlap", "dp_overlap", "total")
"""dp_no_overlap: the DP term without overlap, |search/predict - 1|; dp_overlap: with overlap,
|search - predict| / predict's iteration (the exposed remainder is small against its own
size). ZeRO-3 without PP is left out of both: its collectives sit in the layers (the search's
layer costs, the predictor's per-layer "dp" breakdown), not in the DP term."""


def _err(r: dict[str, Any], term: str) -> float:
    s, p = r["search"], r["predict"]
    if term.startswith("dp_"):
        return abs(s["dp"] - p["dp"]) / (p["total"] if r["dpo"] else max(p["dp"], 1e-12))
    return abs(_ratio(s[term], p[term]) - 1)


def _applies(r: dict[str, Any], term: str) -> bool:
    if not term.startswith("dp_"):
        return True
    return not (r["zero"] == 3 and r["pp"] == 1) and bool(r["dpo"]) == (term == "dp_overlap")


def report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per term: the largest difference (see TERMS) and the layout that shows it."""
    out: dict[str, Any] = {"layouts": len(rows)}
    for term in TERMS:
        sel = [r for r in rows if _applies(r, term)]
        errs = [_err(r, term) for r in sel]
        worst = int(np.argmax(errs))
        w = sel[worst]
        out[term] = {
            "max_rel": errs[worst], "mean_rel": float(np.mean(errs)),
            "over_1pct": int(sum(e > 0.01 for e in errs)),
            "worst": {k: w[k] for k in ("model", "stack", "tp", "cp", "pp", "dp", "ep", "etp",
                                        "zero", "dpo")},
            "worst_s": (w["search"][term.split("_")[0]] if term.startswith("dp_") else
                        w["search"][term], w["predict"][term.split("_")[0]] if
                        term.startswith("dp_") else w["predict"][term]),
        }  # fmt: skip
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two models, fewer ZeRO stages")
    ap.add_argument("--json", help="write every layout's terms here")
    args = ap.parse_args()
    rows = run(args.quick)
    rep = report(rows)
    print(f"{rep['layouts']} MoE layouts on 64 H100 (search / predict - 1, per term):")
    for term in TERMS:
        t = rep[term]
        print(f"  {term:13s} max {t['max_rel']:7.2%}  mean {t['mean_rel']:7.2%}  "
              f">1%: {t['over_1pct']:4d}  worst {t['worst']} {t['worst_s'][0]:.4f}s vs "
              f"{t['worst_s'][1]:.4f}s")  # fmt: skip
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"report": rep, "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
