"""Validate Seer against published, measured training runs (CSV with the published_runs columns).

Each row becomes a job; fields the source does not state (marked UNVERIFIED: micro-batch,
interleaving, recompute) are chosen as Megatron's authors would — the fastest setting that fits
in memory — and the choice is reported. The published iteration time is the row's derived one,
or the published TFLOP/s converted back with the source's own FLOP formula.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.ops import (
    flops_per_token_6nd,
    megatron_model_flops,
    narayanan_hardware_flops,
)
from starfabric.astral.seer.parallel import uneven_pipeline_layers
from starfabric.astral.seer.predict import Prediction, make_job, predict
from starfabric.config import parse_spec
from starfabric.errors import ConfigError, DataError, StarfabricError

DEFAULT_NIC_PER_GPU = {
    "A100": "200G",
    "H100": "400G",
    "H800": "400G",
    "H200": "400G",
    "B200": "400G",
}
"""Scale-out bandwidth per GPU when a row does not state it: the DGX SuperPOD reference designs
(A100: HDR 200 Gb/s per GPU; Hopper/Blackwell: NDR 400 Gb/s per GPU) — assumption."""
MICRO_BATCH_CANDIDATES = (1, 2, 4, 8)
"""Micro-batch sizes Megatron users try when tuning (assumption)."""
REQUIRED = (
    "row_id", "model", "layers", "hidden", "heads", "vocab", "seq_len", "gpu", "num_gpus",
    "tp", "pp",
)  # fmt: skip
"""Columns every row must fill; the published figure comes from iter_time_s,
derived_iter_time_s, tokens_per_sec_per_gpu, or tflops_per_gpu with tflops_flop_convention;
the batch from global_batch_seqs or tokens_per_batch."""


def bundled_csv() -> Path:
    """The published-runs CSV shipped with Seer (Megatron-LM weak scaling, 19 rows)."""
    with resources.as_file(
        resources.files("starfabric.astral.seer") / "published_runs" / "megatron_weak_scaling.csv"
    ) as p:
        return Path(p)


def _int(row: dict[str, str], key: str, default: int | None = None) -> int:
    raw = (row.get(key) or "").strip()
    m = re.match(r"\d+", raw)
    if not m:
        if default is not None:
            return default
        raise DataError(
            f"row {row.get('row_id', '?')}: column {key!r} = {raw!r} is not a number",
            fix="give an integer",
        )
    return int(m.group(0))


def global_batch_seqs(row: dict[str, str]) -> int:
    """Sequences per iteration: the column, or tokens_per_batch / seq_len."""
    if (row.get("global_batch_seqs") or "").strip():
        return _int(row, "global_batch_seqs")
    tokens, seq = _int(row, "tokens_per_batch", 0), _int(row, "seq_len")
    if tokens <= 0 or tokens % seq:
        raise DataError(
            f"row {row.get('row_id', '?')}: no global_batch_seqs and tokens_per_batch "
            f"{tokens} is not a multiple of seq_len {seq}",
            fix="fill global_batch_seqs",
        )
    return tokens // seq


def _unverified(val: str) -> bool:
    return not val.strip() or val.strip().upper().startswith("UNVERIFIED")


def row_model(row: dict[str, str]) -> ModelSpec:
    """The model of one CSV row (GPT rows: LayerNorm, biases, learned positions, tied heads)."""
    arch = (row.get("arch") or "dense").strip().lower()
    h = _int(row, "hidden")
    heads = _int(row, "heads")
    act_raw = (row.get("activation") or "").lower()
    gated = ("silu", "swiglu", "geglu", "glu")
    act = "swiglu" if any(g in act_raw for g in gated) else "gelu"  # same FLOPs for any GLU
    gpt = "gpt" in row["model"].lower()
    spec: dict[str, Any] = {
        "name": row["model"],
        "layers": _int(row, "layers"),
        "hidden": h,
        "ffn_hidden": _int(row, "ffn_hidden", 4 * h),
        "heads": heads,
        "kv_heads": _int(row, "kv_heads", heads),
        "head_dim": _int(row, "head_dim", h // heads),
        "vocab": _int(row, "vocab"),
        "max_seq_len": _int(row, "seq_len"),
        "activation": act,
        "norm": "layernorm" if gpt else "rmsnorm",
        "linear_bias": gpt,
        "learned_pos_emb": gpt,
        "tied_embeddings": gpt,
        "attention_dropout": gpt,
    }
    if arch == "moe" or (row.get("moe_experts") or "").strip():
        spec.update(
            moe_experts=_int(row, "moe_experts"),
            moe_topk=_int(row, "moe_topk"),
            moe_shared_experts=_int(row, "moe_shared_experts", 0),
            moe_ffn_hidden=_int(row, "moe_ffn_hidden"),
            moe_dense_layers=_int(row, "moe_dense_layers", 0),
        )
    return parse_spec(ModelSpec, spec, source=f"row {row['row_id']}")


def _gpu(row: dict[str, str]) -> tuple[str, float | None]:
    """Catalog name for the row's GPU and an HBM override when the row names another size
    (e.g. 'A100-SXM4-40GB' → A100 with 40 GiB)."""
    raw = row["gpu"].split("(")[0].split()[0].strip()
    parts = raw.split("-")
    name = raw
    for n in range(len(parts), 0, -1):
        cand = "-".join(parts[:n])
        try:
            name = get_gpu(cand).name
        except ConfigError:
            continue
        break
    mem = re.search(r"(\d+)\s*GB", row["gpu"])
    hbm = float(mem.group(1)) if mem else None
    if hbm is not None and abs(get_gpu(name).hbm_gib - hbm) < 1e-9:
        hbm = None
    return name, hbm


_SPEED = r"(\d+(?:\.\d+)?)\s*(G|T)(?:b/?s|bps|bit/s|b\b)"


def _nic(row: dict[str, str], gpu: str) -> str:
    """Scale-out bandwidth per GPU from the interconnect text ('8x HDR 200Gb/s', '3.2 Tbps per
    node', '400 Gb/s per GPU'), else the reference-design default for the GPU."""
    text = row.get("interconnect") or ""
    per_node = _int(row, "gpus_per_node", 8)
    if not _unverified(text):
        m = re.search(r"(\d+)\s*[x×]\s*(?:[A-Za-z-]+\s+)*?" + _SPEED, text)
        if m:
            gbps = int(m.group(1)) * float(m.group(2)) * (1000 if m.group(3) == "T" else 1)
            return f"{gbps / per_node:g}G"
        m = re.search(_SPEED + r"\s*(?:per|/)\s*(GPU|node)", text, re.IGNORECASE)
        if m:
            gbps = float(m.group(1)) * (1000 if m.group(2) == "T" else 1)
            return f"{gbps / (per_node if m.group(3).lower() == 'node' else 1):g}G"
    for key, val in DEFAULT_NIC_PER_GPU.items():
        if key in gpu.upper():
            return val
    return "400G"


def _legacy(row: dict[str, str]) -> bool:
    fw = (row.get("framework") or "").lower()
    year = re.search(r"(20\d\d)", fw)
    # FlashAttention (2022) reached Megatron in 2023; so did the distributed optimizer's
    # overlapped reduce-scatter. Earlier Megatron-LM runs use the unfused path.
    return "megatron-lm" in fw and year is not None and int(year.group(1)) < 2023


def _framework(row: dict[str, str]) -> dict[str, Any]:
    fw = (row.get("framework") or "").lower()
    if _legacy(row):
        # Megatron-LM 2021: unfused softmax attention (pre-FlashAttention), DP all-reduce after
        # the backward pass (no overlap), no distributed optimizer, blocking PP send/recv.
        return {"attention": "unfused", "overlap_grad_reduce": False,
                "overlap_param_gather": False, "tp_comm_overlap": False,
                "overlap_p2p": False}  # fmt: skip
    # Current stacks (Megatron-Core, NeMo, TorchTitan, DeepSpeed) overlap DP communication by
    # default; TP overlap is opt-in and taken only when the row says so.
    no_overlap = "no overlap" in fw or "without overlap" in fw
    sp_text = (row.get("sp") or "").lower()
    tp_overlap = "tp-comm-overlap" in sp_text or ("overlap" in fw and "tp" in fw)
    ep_overlap = "dualpipe" in fw or ("overlap" in fw and ("a2a" in fw or "ep" in fw.split("/")))
    return {"attention": "flash", "overlap_grad_reduce": not no_overlap,
            "overlap_param_gather": not no_overlap,
            "tp_comm_overlap": tp_overlap and not no_overlap,
            "ep_comm_overlap": ep_overlap}  # fmt: skip


@dataclass(frozen=True)
class RowResult:
    """One validated row: the prediction, the published figures and the choices made."""

    row_id: str
    model: str
    gpus: int
    published_iter_s: float
    predicted_iter_s: float
    published_tflops: float
    predicted_tflops: float
    convention: str
    choices: dict[str, Any]
    prediction: Prediction

    @property
    def error(self) -> float:
        """Signed relative error of the predicted iteration time."""
        return self.predicted_iter_s / self.published_iter_s - 1.0


def _convention(row: dict[str, str]) -> str:
    text = (row.get("tflops_flop_convention") or "").lower()
    if "narayanan" in text or "eq.3" in text:
        return "narayanan"
    if "megatron" in text:
        return "megatron"
    if "6nd" in text or "6n" in text or not text.strip() or _has_time(row):
        return "model"
    raise DataError(
        f"row {row['row_id']}: unknown FLOP convention {row.get('tflops_flop_convention')!r}",
        fix="say 'Narayanan Eq.3', 'Megatron model FLOPs' or '6ND', or give iter_time_s",
    )


def _has_time(row: dict[str, str]) -> bool:
    return any(
        (row.get(k) or "").strip()
        for k in ("iter_time_s", "derived_iter_time_s", "tokens_per_sec_per_gpu")
    )


def _convention_flops(row: dict[str, str], model: ModelSpec, conv: str) -> float:
    tokens = global_batch_seqs(row) * _int(row, "seq_len")
    if conv == "narayanan":
        return narayanan_hardware_flops(model, tokens, model.max_seq_len)
    if conv == "megatron":
        return megatron_model_flops(model, tokens, model.max_seq_len)
    return flops_per_token_6nd(model, model.max_seq_len) * tokens


def published_iteration_s(row: dict[str, str], model: ModelSpec) -> float:
    """The row's iteration time: measured or derived column, tokens/s per GPU, or TFLOP/s per
    GPU converted back with the source's own FLOP formula."""
    for key in ("iter_time_s", "derived_iter_time_s"):
        raw = (row.get(key) or "").strip()
        if raw:
            return float(raw)
    tokens = global_batch_seqs(row) * _int(row, "seq_len")
    gpus = _int(row, "num_gpus")
    tps = (row.get("tokens_per_sec_per_gpu") or "").strip()
    if tps:
        return tokens / (float(tps) * gpus)
    tf = (row.get("tflops_per_gpu") or "").strip()
    if not tf:
        raise DataError(
            f"row {row['row_id']}: no published figure (iter_time_s, derived_iter_time_s, "
            "tokens_per_sec_per_gpu or tflops_per_gpu)",
            fix="fill one of them",
        )
    return _convention_flops(row, model, _convention(row)) / (float(tf) * 1e12 * gpus)


def _candidates(row: dict[str, str], model: ModelSpec) -> tuple[list[int], list[int], list[str]]:
    pp = _int(row, "pp")
    mbs = (
        [_int(row, "micro_batch")]
        if not _unverified(row.get("micro_batch", ""))
        else list(MICRO_BATCH_CANDIDATES)
    )
    if model.layers % pp:
        vpps = [1]  # uneven pipelines run without virtual stages
    elif not _unverified(row.get("vpp", "")):
        vpps = [_int(row, "vpp", 1)]
    else:
        per = model.layers // pp if model.layers % pp == 0 else 0
        vpps = [1] + ([v for v in range(2, per + 1) if per % v == 0] if pp > 1 and per else [])
    rec_raw = (row.get("recompute") or "").lower()
    if _unverified(rec_raw):
        recs = ["none", "selective", "full"]
    elif rec_raw.startswith("full"):
        recs = ["full"]
    elif rec_raw.startswith(("selective", "partial")):
        recs = ["selective"]
    else:
        recs = ["none"]
    return mbs, vpps, recs


def row_job_options(row: dict[str, str]) -> tuple[ModelSpec, dict[str, Any], dict[str, Any]]:
    """Model, fixed execution fields and system of a row (UNVERIFIED fields left out)."""
    model = row_model(row)
    gpu, hbm = _gpu(row)
    prec_raw = (row.get("precision") or "").lower()
    precision = "fp8" if "fp8" in prec_raw else ("bf16" if "bf16" in prec_raw else "fp16")
    zero_raw = (row.get("zero_or_fsdp") or "").lower().replace(" ", "")
    zero = 0 if _legacy(row) else 1
    if "distributed" in zero_raw or "zero-1" in zero_raw or "zero1" in zero_raw:
        zero = 1
    elif zero_raw.startswith("none"):
        zero = 0
    for z in (2, 3):
        if f"zero-{z}" in zero_raw or f"zero{z}" in zero_raw:
            zero = z
    if "fsdp" in zero_raw:
        zero = 3
    sp_raw = (row.get("sp") or "").strip().lower()
    tp, pp, cp = _int(row, "tp"), _int(row, "pp"), _int(row, "cp", 1)
    gpus = _int(row, "num_gpus")
    ex: dict[str, Any] = {
        "global_batch": global_batch_seqs(row),
        "seq_len": _int(row, "seq_len"),
        "precision": precision,
        "tp": tp,
        "pp": pp,
        "dp": _int(row, "dp", max(1, gpus // (tp * pp * cp))),
        "cp": cp,
        "ep": _int(row, "ep", 1),
        "sp": sp_raw.startswith("yes") or (sp_raw == "" and tp > 1 and not _legacy(row)),
        "zero": zero,
        **_framework(row),
    }
    if model.layers % pp:
        ex["pipeline_layers"] = list(uneven_pipeline_layers(model.layers, pp))
    if (row.get("etp") or "").strip() and not _unverified(row["etp"]):
        ex["etp"] = _int(row, "etp")
    system: dict[str, Any] = {
        "gpu": gpu,
        "gpus": gpus,
        "gpus_per_node": _int(row, "gpus_per_node", 8),
        "nic_bandwidth": _nic(row, gpu),
    }
    if hbm is not None:
        system["hbm_gib"] = hbm
    return model, ex, system


def validate_row(row: dict[str, str]) -> RowResult:
    """Predict one row, choosing its UNVERIFIED settings as a tuning Megatron user would."""
    missing = [c for c in REQUIRED if not (row.get(c) or "").strip()]
    if missing:
        raise DataError(f"row {row.get('row_id', '?')}: empty columns {missing}", fix="fill them")
    model, ex, system = row_job_options(row)
    mbs, vpps, recs = _candidates(row, model)
    best: tuple[float, Prediction, dict[str, Any]] | None = None
    fallback: tuple[float, Prediction, dict[str, Any]] | None = None
    reason = ""
    for mb in mbs:
        for v in vpps:
            for rec in recs:
                opts = {"micro_batch": mb, "vpp": v, "recompute": rec}
                try:
                    pred = predict(make_job(model, {**ex, **opts}, system))
                except StarfabricError as exc:
                    reason = reason or exc.message
                    continue
                cand = (pred.iteration_s, pred, opts)
                if not pred.memory.oom and (best is None or cand[0] < best[0]):
                    best = cand
                if fallback is None or pred.memory.total < fallback[1].memory.total:
                    fallback = cand
    chosen = best or fallback
    if chosen is None:
        raise DataError(
            f"row {row['row_id']}: cannot be predicted (tp={ex['tp']}, pp={ex['pp']}, "
            f"dp={ex['dp']}): {reason}",
            fix="check the row's GPU and parallel columns",
        )
    _, pred, opts = chosen
    choices = dict(opts)
    if "pipeline_layers" in ex:
        choices["pipeline_layers"] = ex["pipeline_layers"]
    if best is None:
        choices["note"] = "every candidate exceeds GPU memory; least-memory setting used"
    conv = _convention(row)
    published = published_iteration_s(row, model)
    tf = (row.get("tflops_per_gpu") or "").strip()
    pub_tf = (
        float(tf)
        if tf
        else _convention_flops(row, model, conv) / (published * _int(row, "num_gpus")) / 1e12
    )
    return RowResult(
        row_id=row["row_id"],
        model=row["model"],
        gpus=_int(row, "num_gpus"),
        published_iter_s=published,
        predicted_iter_s=pred.iteration_s,
        published_tflops=pub_tf,
        predicted_tflops=pred.tflops_per_gpu(conv),
        convention=conv,
        choices=choices,
        prediction=pred,
    )


def read_rows(path: str | Path) -> list[dict[str, str]]:
    """Rows of a published-runs CSV; a file without the required columns is a DataError."""
    p = Path(path)
    if not p.is_file():
        raise DataError(f"{p}: no such file", fix="check the --csv path")
    with p.open(newline="") as fh:
        reader = csv.DictReader(fh)
        cols = set(reader.fieldnames or [])
        lacking = [c for c in REQUIRED if c not in cols]
        if lacking:
            raise DataError(f"{p}: missing columns {lacking}", fix="use the published_runs layout")
        return list(reader)


def validate(path: str | Path | None = None) -> list[RowResult]:
    """Predict every row of the CSV (default: the bundled Megatron weak-scaling table)."""
    return [validate_row(r) for r in read_rows(path or bundled_csv())]


def validate_all(
    path: str | Path | None = None,
) -> tuple[list[RowResult], list[tuple[str, str]]]:
    """Like `validate`, but a row Seer cannot predict (unknown GPU, unsupported layout) is
    returned as (row_id, one-line reason) instead of stopping the run."""
    done: list[RowResult] = []
    failed: list[tuple[str, str]] = []
    for row in read_rows(path or bundled_csv()):
        try:
            done.append(validate_row(row))
        except StarfabricError as exc:
            failed.append((row.get("row_id", "?"), exc.one_line()))
    return done, failed


def summary(
    results: list[RowResult], failed: list[tuple[str, str]] | None = None
) -> dict[str, Any]:
    """JSON-ready per-row errors, the mean/max absolute error and rows not predicted."""
    errs = [abs(r.error) for r in results]
    return {
        "not_predicted": [{"row_id": rid, "reason": why} for rid, why in (failed or [])],
        "rows": [
            {
                "row_id": r.row_id,
                "model": r.model,
                "gpus": r.gpus,
                "published_iter_s": r.published_iter_s,
                "predicted_iter_s": r.predicted_iter_s,
                "error": r.error,
                "published_tflops_per_gpu": r.published_tflops,
                "predicted_tflops_per_gpu": r.predicted_tflops,
                "flop_convention": r.convention,
                "choices": r.choices,
                "breakdown_s": r.prediction.breakdown,
                "memory_gib": r.prediction.memory.total / 2**30,
            }
            for r in results
        ],
        "mean_abs_error": sum(errs) / len(errs) if errs else 0.0,
        "max_abs_error": max(errs) if errs else 0.0,
    }


def plot_validation(results: list[RowResult], path: str | Path) -> Path:
    """Predicted vs published iteration time (log-log) with the ±10% band, as a PNG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    pub = [r.published_iter_s for r in results]
    pred = [r.predicted_iter_s for r in results]
    fig, ax = plt.subplots(figsize=(5.5, 5.0))
    lo, hi = min(pub + pred) * 0.8, max(pub + pred) * 1.25
    ax.plot([lo, hi], [lo, hi], color="black", lw=1)
    ax.fill_between([lo, hi], [lo * 0.9, hi * 0.9], [lo * 1.1, hi * 1.1], alpha=0.15, label="±10%")
    for src in sorted({r.row_id.split("-")[0] for r in results}):
        sel = [r for r in results if r.row_id.split("-")[0] == src]
        ax.scatter(
            [r.published_iter_s for r in sel], [r.predicted_iter_s for r in sel], label=src, s=18
        )
    ax.set(xscale="log", yscale="log", xlim=(lo, hi), ylim=(lo, hi),
           xlabel="published iteration time (s)", ylabel="Seer predicted (s)")  # fmt: skip
    ax.legend()
    ax.set_title("Seer vs published training runs")
    from starfabric.outputs import save_figure

    fig.tight_layout()
    p = save_figure(fig, path, dpi=120)
    plt.close(fig)
    return p


__all__ = [
    "RowResult",
    "bundled_csv",
    "plot_validation",
    "published_iteration_s",
    "read_rows",
    "row_model",
    "summary",
    "validate",
    "validate_all",
    "validate_row",
]
