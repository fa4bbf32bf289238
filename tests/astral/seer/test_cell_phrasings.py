"""Equivalent phrasings of a published row's cells read as the same run (issue 32).

A held-out row is written by someone else from another source: "H100 SXM5 80GB" for
"H100-SXM5-80GB", "4,096" or "4K" for 4096, "TP8" for 8, "SP on" for "yes", "activation
checkpointing (full)" for "full", "bfloat16" for "BF16", "Megatron Bridge" for "Megatron-Bridge".
These tests take the real rows of both development sets, rewrite cells into such phrasings and
assert that the row is still read and fixes the same run (model, execution, system, settings to
choose and published iteration time) — the prediction is a function of those. Phrasings that are
genuinely ambiguous are listed in `test_refused_phrasings` with the one-line DataError they get.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import cells, row_forms
from starfabric.astral.seer.fp4_format import stated_fp4
from starfabric.astral.seer.validate import (
    canonical_row,
    global_batch_seqs,
    published_iteration_s,
    row_model,
    row_setup,
    validate_row,
)
from starfabric.errors import DataError, StarfabricError

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs"
SETS = ("development_runs.csv", "development_runs_2.csv")

Rewriter = Callable[[str, dict[str, str]], list[str]]


def _plain_int(raw: str) -> int | None:
    return int(raw) if re.fullmatch(r"\d+", raw.strip()) else None


def _thousands(raw: str) -> str:
    """'1048576' → '1,048,576'; '3890.5' → '3,890.5'."""
    whole, _, frac = raw.strip().partition(".")
    out = f"{int(whole):,}"
    return f"{out}.{frac}" if frac else out


GPU_NAMES = {
    ("H100-SXM", None): ["H100 SXM5 80GB", "NVIDIA H100-SXM", "DGX H100",
                         "NVIDIA H100 80GB HBM3", "H100-SXM5-80GB (DGX H100)",
                         "8x NVIDIA H100 SXM (80 GB)", "NVIDIA HGX H100 80GB", "HGX-H100-80GB", "NVIDIA-H100-SXM5-80GB"],
    ("A100-SXM-80GB", None): ["A100-SXM4-80GB", "A100 80GB", "NVIDIA A100 SXM4 80 GB",
                              "DGX A100 (A100-SXM4-80GB)", "NVIDIA A100-SXM4-80GB (Selene)"],
    ("A100-SXM-80GB", 40.0): ["A100-SXM4-40GB", "A100 40GB", "NVIDIA A100 SXM4 40 GB",
                              "DGX A100 (40 GB)"],
    ("B200", None): ["B200 (DGX B200)", "NVIDIA B200 180GB", "DGX B200", "NVIDIA B200 SXM",
                     "DGX-B200"],
    ("B300", None): ["NVIDIA B300", "B300 SXM (HGX B300)", "HGX B300 288GB"],
    ("GB300", None): ["GB300 NVL72", "NVIDIA GB300 (NVL72 rack)", "GB300 NVL72 (288 GB)",
                      "NVL72 GB300", "DGX-GB300"],
    ("GB200", None): ["GB200 NVL72", "NVIDIA GB200 NVL72 (186 GB)", "NVL72 GB200"],
    ("H800", None): ["H800 SXM5 80GB", "NVIDIA H800"],
    ("H200", None): ["H200 SXM 141GB", "NVIDIA H200 (141 GB HBM3e)"],
}  # fmt: skip


def gpu_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    if re.search(r"\d{3,4}\s*W\b", raw):  # a power cap is part of the run
        return []
    spec, hbm = cells.match_gpu(raw)
    return GPU_NAMES.get((spec.name, hbm), [])


def count_phrasings(unit: str, hint: bool = True) -> Rewriter:
    """A count with its unit or separators; `hint`: also marked UNVERIFIED with the value as
    the hint (not for the batch and micro-batch, whose hints are choices, not values)."""

    def rewrite(raw: str, row: dict[str, str]) -> list[str]:
        n = _plain_int(raw)
        if n is None:
            return []
        out = [f"{n} {unit}"] + ([f"UNVERIFIED ({n})"] if hint else [])
        if n >= 1000:
            out += [f"{n:,}", f"{n:,} {unit}"]
        return out

    return rewrite


def seq_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    n = _plain_int(raw)
    if n is None:
        return []
    out = [f"{n:,}", f"{n} tokens", f"{n:,} tokens"]
    if n % 2**20 == 0:
        out += [f"{n >> 20}M", f"{n >> 20}M tokens"]
    elif n % 1024 == 0:
        out += [f"{n >> 10}K", f"{n >> 10}k tokens", f"{n >> 10}K context"]
    return out


def tokens_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    n = _plain_int(raw)
    if n is None or (row.get("global_batch_seqs") or "").strip():
        return []  # only read when global_batch_seqs is empty
    out = [f"{n:,}", f"{n:,} tokens"]
    if n % 2**20 == 0:
        out += [f"{n >> 20}M", f"{n >> 20}M tokens"]
    return out


def batch_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    """The global batch in sequences, or as the token count a long-context table gives."""
    n, seq = _plain_int(raw), _plain_int(row.get("seq_len") or "")
    if n is None or seq is None:
        return []
    tokens = n * seq
    out = [f"{n} sequences", f"{n:,}", f"{tokens:,} tokens"]
    if tokens % 2**20 == 0:
        out.append(f"{tokens >> 20}M tokens")
    return out


def model_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    """A bundled model named with its size or variant (only where the row takes the bundled
    config: the name of a model built from the columns is the row's own)."""
    if not raw.startswith("DeepSeek-V3") or cells.number(row.get("kv_heads")) is not None:
        return []
    return ["DeepSeek-V3 671B", "DeepSeek V3 (671B total / 37B active)", "DeepSeek-V3-Base",
            "deepseek_v3 (671B)"]  # fmt: skip


def gpus_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    n = _plain_int(raw)
    if n is None:
        return []
    out = [f"{n:,}", f"{n:,} GPUs"]
    # a host count must agree with the row's GPUs per host (row_forms.gpu_count checks it)
    gpn = row_forms.stated_gpus_per_node(row)
    if n % gpn == 0:
        out.append(f"{n} GPUs ({n // gpn} nodes)")
    if n % 8 == 0 and (row.get("gpus_per_node") or "").strip() == "8" and n >= 16:
        out += [
            f"{n // 8} nodes x 8 GPUs",
            f"8 GPUs x {n // 8} nodes",
            f"{n // 8} nodes ({n:,} GPUs)",
        ]
    return out


def figure_phrasings(unit: str) -> Rewriter:
    def rewrite(raw: str, row: dict[str, str]) -> list[str]:
        if not re.fullmatch(r"\d+(?:\.\d+)?", raw.strip()):
            return []
        out = [f"{raw} {unit}", f"~{raw}", f"{raw} {unit} (measured)"]
        if float(raw) >= 1000:
            out += [_thousands(raw), f"{_thousands(raw)} {unit}"]
        return out

    return rewrite


def degree_phrasings(key: str) -> Rewriter:
    name = key.upper()

    def rewrite(raw: str, row: dict[str, str]) -> list[str]:
        n = _plain_int(raw)
        if n is None:
            return []
        out = [f"{name}{n}", f"{key}={n}", f"{n} ({name})", f"{name} {n}", f"{n}-way"]
        if key == "tp":
            out.append(f"TP {n} / SP on")
        if n == 1 and key in ("tp", "pp", "cp", "ep"):
            out += ["none", "n/a", "-", f"1 (no {name})", "no", "off"]
        return out

    return rewrite


def vpp_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    n = _plain_int(raw)
    if n is None:
        return []
    if n == 1:
        return ["1 (1F1B)", "none", "no interleaving", "off", "VPP=1", "-", "VPP=None", "vpp: none"]
    return [f"VPP={n}", f"virtual pipeline {n}", f"interleaved, {n} chunks",
            f"{n} (interleaved 1F1B)", f"vpp {n}", f"{n} virtual stages per rank"]  # fmt: skip


def sp_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    text = raw.strip().lower()
    if "overlap" in text:
        return []  # the cell also states TP overlap
    if re.fullmatch(r"yes(?: \(.*\))?", text):
        return ["on", "true", "enabled", "SP on", "Yes", "Y", "sequence parallel: yes", "sp=true"]
    if re.fullmatch(r"no(?: \(.*\))?", text):
        return ["off", "false", "disabled", "SP off", "No", "N"]
    return []


def recompute_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    text = raw.strip().lower()
    if text == "full" or text.startswith("full ("):
        return ["full, uniform, 1 layer", "Full activation checkpointing",
                "activation checkpointing (full)", "full recompute", "Full",
                "--recompute-granularity full --recompute-method uniform"]  # fmt: skip
    if text == "none" or text.startswith("none ("):
        return ["no", "off", "disabled", "No activation checkpointing", "none (no recompute)",
                "no recompute", "recompute: none", "false"]  # fmt: skip
    if text == "selective":
        return ["selective (core_attn)", "Selective activation recompute",
                "selective (core attention)", "--recompute-granularity selective"]  # fmt: skip
    return []


def precision_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    text = raw.strip()
    if text in ("BF16", "BF16 (inferred)"):
        return ["BF16 mixed", "bfloat16", "bf16-mixed", "mixed precision (BF16)", "bf16",
                "UNVERIFIED (BF16)", "BF16 mixed (FP32 master weights)"]  # fmt: skip
    if text == "FP8 (Transformer Engine)":
        # not "FP8 (TE, delayed scaling)": it states a recipe (fp8_recipe), which this does not
        return ["FP8 hybrid", "fp8 (E4M3 fwd, E5M2 bwd)", "FP8", "FP8 hybrid (E4M3/E5M2)"]
    if text in ("FP16 mixed", "mixed 16-bit"):
        return ["FP16 mixed", "fp16", "FP16 mixed precision", "half precision (fp16)"]
    return []


FRAMEWORK_SPELLINGS = (
    ("Megatron-Core r", ["Megatron-LM core_r", "Megatron Core r", "MCore r"]),
    ("Megatron-Core ", ["Megatron Core ", "MCore ", "Megatron_Core "]),
    ("Megatron-Bridge ", ["Megatron Bridge ", "megatron-bridge "]),
    ("Megatron-LM (", ["Megatron LM (", "megatron-lm ("]),
    ("NeMo 24.07 container", ["NeMo container 24.07", "nemo:24.07", "NeMo Framework 24.07"]),
    ("TorchTitan (", ["torchtitan (", "Torchtitan ("]),
)
"""Framework spellings of the same release: (text in a dev row, how others write it)."""


def framework_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    out: list[str] = []
    for seen, others in FRAMEWORK_SPELLINGS:
        if seen in raw:
            out += [raw.replace(seen, o, 1) for o in others]
    return out


def interconnect_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    """The scale-out rate per GPU the cell states, written as others write it (not for AWS
    EFA cells, whose text also selects the EFA bus fraction)."""
    if re.search(r"EFA|unverified", raw, re.I):
        return []
    gpn = _plain_int(row.get("gpus_per_node") or "") or 8
    m = re.search(r"(\d+) ?Gb/s per GPU", raw)
    if m is None:
        return []
    g = int(m.group(1))
    out = [f"{g} Gb/s per GPU", f"{g}G per GPU", f"{g} Gbps/GPU", f"{gpn}x {g} Gb/s per node",
           f"{g} Gbps x {gpn} per node", f"{gpn} NICs per {gpn} GPUs, {g} Gb/s each",
           f"{gpn} x ConnectX-7 {g}Gb/s"]  # fmt: skip
    gen = {400: "NDR", 200: "HDR", 100: "EDR"}.get(g)
    if gen:
        out += [f"{gpn}x {gen} InfiniBand per node", f"{gpn}x {gen}{g} per node"]
    if g % 2 == 0:
        out.append(f"{gpn // 2} NICs per {gpn} GPUs ({2 * g} Gb/s each)")
    return out


def hinted(raw: str, row: dict[str, str]) -> list[str]:
    """An optional model cell marked unverified with its value as the hint."""
    n = _plain_int(raw)
    return [f"UNVERIFIED ({n})", f"UNVERIFIED({n}, per HF config)"] if n is not None else []


def mtp_phrasings(raw: str, row: dict[str, str]) -> list[str]:
    m = re.search(r"MTP depth (\d+)", raw)
    if m:
        d = m.group(1)
        alts = [f"MTP={d}", f"mtp_num_layers {d}", f"{d} MTP module", f"MTP: {d} layer",
                f"multi-token prediction (depth {d})", f"MTP ({d} layer)"]  # fmt: skip
        return [raw.replace(m.group(0), a) for a in alts]
    if "MTP disabled" in raw:
        return [raw.replace("MTP disabled (no MTP layer)", a)
                for a in ("no MTP", "MTP off", "without MTP", "MTP: none")]  # fmt: skip
    return []


REWRITERS: dict[str, Rewriter] = {
    "gpu": gpu_phrasings,
    "layers": count_phrasings("layers"),
    "hidden": hinted,
    "ffn_hidden": count_phrasings("(FFN)"),
    "heads": count_phrasings("heads"),
    "kv_heads": hinted,
    "head_dim": hinted,
    "vocab": count_phrasings("tokens"),
    "seq_len": seq_phrasings,
    "num_gpus": gpus_phrasings,
    "gpus_per_node": hinted,
    "interconnect": interconnect_phrasings,
    "moe_experts": count_phrasings("experts"),
    "moe_topk": count_phrasings("(top-k)"),
    "moe_ffn_hidden": hinted,
    "tp": degree_phrasings("tp"),
    "pp": degree_phrasings("pp"),
    "cp": degree_phrasings("cp"),
    "ep": degree_phrasings("ep"),
    "etp": degree_phrasings("etp"),
    "dp": degree_phrasings("dp"),
    "vpp": vpp_phrasings,
    "sp": sp_phrasings,
    "recompute": recompute_phrasings,
    "global_batch_seqs": batch_phrasings,
    "model": model_phrasings,
    "micro_batch": count_phrasings("sequences", hint=False),
    "tokens_per_batch": tokens_phrasings,
    "precision": precision_phrasings,
    "framework": framework_phrasings,
    "model_notes": mtp_phrasings,
    "iter_time_s": figure_phrasings("s"),
    "derived_iter_time_s": figure_phrasings("s"),
    "tokens_per_sec_per_gpu": figure_phrasings("tokens/s/GPU"),
    "tflops_per_gpu": figure_phrasings("TFLOP/s"),
}
"""Column → the equivalent phrasings of a cell's value another transcriber would write."""


NO_VALUE = ("-", "—", "n/a", "N/A", "none", "not reported")
"""How a transcriber fills a cell that has no value, where an empty cell means the same."""
FIGURES = ("iter_time_s", "derived_iter_time_s", "tokens_per_sec_per_gpu", "tflops_per_gpu")
MOE_COLUMNS = ("moe_experts", "moe_topk", "moe_shared_experts", "moe_ffn_hidden",
               "moe_dense_layers")  # fmt: skip


def no_value_phrasings(key: str, row: dict[str, str]) -> list[str]:
    """Phrasings of an empty cell whose emptiness means 'not used / not reported': published
    figures not given, MoE columns of a dense row, an unsplit cp/ep/etp, MHA kv_heads."""
    if key in FIGURES:
        return [c for c in NO_VALUE if c != "none"]
    if key in MOE_COLUMNS and (row.get("arch") or "dense").strip().lower() == "dense":
        return list(NO_VALUE)
    if key in ("cp", "ep", "etp", "kv_heads"):
        return ["-", "—", "n/a", "none"]
    return []


def phrasings(key: str, row: dict[str, str]) -> list[str]:
    """Equivalent phrasings of one cell of a row (of its value, or of its emptiness)."""
    raw = row.get(key) or ""
    if not raw.strip():
        return no_value_phrasings(key, row)
    f = REWRITERS.get(key)
    return f(raw, row) if f else []


COLUMNS = (*REWRITERS, *(k for k in (*FIGURES, *MOE_COLUMNS) if k not in REWRITERS))


def _all_rows() -> list[dict[str, str]]:
    rows: list[dict[str, str]] = []
    for name in SETS:
        with (DATA / name).open(newline="") as fh:
            rows += list(csv.DictReader(fh))
    return rows


def _fingerprint(row: dict[str, str]) -> tuple[Any, ...]:
    """What decides a row's prediction: the model, the fixed execution and system, the
    settings left to choose, and the published iteration time."""
    s = row_setup(row)
    model = row_model(canonical_row(row))
    approx = cells.is_hint(row.get("global_batch_seqs"))  # rounds the batch to dp
    return (s.model, s.execution, s.system, s.options, approx,
            published_iteration_s(row, model))  # fmt: skip


@cache
def _readable() -> tuple[tuple[dict[str, str], tuple[Any, ...]], ...]:
    out = []
    for row in _all_rows():
        if (row.get("verification") or "").upper().startswith("EXCLUDED"):
            continue
        try:
            out.append((row, _fingerprint(row)))
        except StarfabricError:
            continue  # refused as written (reported by seer validate); not a phrasing case
    return tuple(out)


@st.composite
def rewritten(draw: st.DrawFn) -> tuple[dict[str, str], dict[str, str], dict[str, str]]:
    rows = _readable()
    row, _ = rows[draw(st.integers(0, len(rows) - 1))]
    options = {k: phrasings(k, row) for k in COLUMNS}
    options = {k: v for k, v in options.items() if v}
    keys = draw(st.lists(st.sampled_from(sorted(options)), min_size=1, max_size=6, unique=True))
    changes = {k: draw(st.sampled_from(options[k])) for k in keys}
    return row, {**row, **changes}, changes


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rewritten())
def test_equivalent_phrasings_fix_the_same_run(
    case: tuple[dict[str, str], dict[str, str], dict[str, str]],
) -> None:
    row, new, changes = case
    want = next(fp for r, fp in _readable() if r is row)
    try:
        got = _fingerprint(new)
    except StarfabricError as exc:  # pragma: no cover - the failure message is the point
        pytest.fail(f"{row['row_id']} refused after rewriting {changes}: {exc.one_line()}")
    assert got[0] == want[0], f"{row['row_id']} model differs after {changes}"
    assert got[1] == want[1], f"{row['row_id']} execution differs after {changes}"
    assert got[2] == want[2], f"{row['row_id']} system differs after {changes}"
    assert got[3] == want[3], f"{row['row_id']} open settings differ after {changes}"
    assert got[4] == want[4], f"{row['row_id']} batch rounding differs after {changes}"
    assert got[5] == pytest.approx(want[5], rel=1e-12), f"{row['row_id']} figure after {changes}"


@pytest.mark.parametrize("row_id", ["N21-T2-05", "MZQ3-LC2F", "MPF-T4-03", "NEMO2407-01"])
def test_rewritten_row_predicts_the_same_iteration_time(row_id: str) -> None:
    """End to end on a few rows: every rewritable cell rewritten at once, same prediction."""
    rows = {r["row_id"]: r for r, _ in _readable()}
    if row_id not in rows:
        pytest.skip(f"{row_id} not in the development sets")
    row = rows[row_id]
    new = dict(row)
    for k, f in REWRITERS.items():
        alts = f(row.get(k) or "", row) if (row.get(k) or "").strip() else []
        if alts:
            new[k] = alts[-1]
    assert new != row
    a, b = validate_row(row), validate_row(new)
    assert b.predicted_iter_s == pytest.approx(a.predicted_iter_s, rel=1e-12)
    assert b.published_iter_s == pytest.approx(a.published_iter_s, rel=1e-12)


@pytest.mark.parametrize(
    ("cell", "value"),
    [("4,096", 4096), ("1,048,576", 1048576), ("TP8", 8), ("tp=8", 8), ("8 (TP)", 8),
     ("TP 8 / SP on", 8), ("1F1B interleaved, vpp 4", 4), ("interleaved, 4 chunks", 4),
     ("8k tokens", 8000), ("~50K", 50000), ("UNVERIFIED(3 in Table 5)", 3), ("2x", None),
     ("1F1B", None)],
)  # fmt: skip
def test_number_reads_separators_and_labels(cell: str, value: int | None) -> None:
    assert cells.number(cell) == value


@pytest.mark.parametrize(("cell", "value"), [("4K", 4096), ("128K", 131072), ("1M", 2**20)])
def test_sequence_lengths_are_binary(cell: str, value: int) -> None:
    assert cells.number(cell, binary=True) == value


@pytest.mark.parametrize(
    ("cell", "kind"),
    [("full, uniform, 1 layer", "full"), ("activation checkpointing (full)", "full"),
     ("none", "none"), ("No activation checkpointing", "none"), ("-", None), ("n/a", None),
     ("selective (core_attn)", "selective"), ("RMSNorm + MLA up-projections recomputed",
     "selective"), ("yes", cells.RECOMPUTE_ON), ("activation checkpointing", cells.RECOMPUTE_ON),
     ("UNVERIFIED", None)],
)  # fmt: skip
def test_recompute_kind(cell: str, kind: str | None) -> None:
    assert cells.recompute_kind(cell, legacy=False) == kind


def test_recompute_on_before_2023_is_full() -> None:
    # Megatron-LM, Megatron-DeepSpeed and fairseq checkpointed whole layers before 2023.
    assert cells.recompute_kind("yes", legacy=True) == "full"


def _base() -> dict[str, str]:
    return next(r for r, _ in _readable() if r["row_id"] == "N21-T2-01")


@pytest.mark.parametrize(
    ("column", "cell", "why"),
    [
        # A range or two numbers is not one published figure: which one was measured?
        ("iter_time_s", "12.1-12.9 s", "not a number"),
        ("tokens_per_sec_per_gpu", "3890 (3,950 at peak)", "not a number"),
        # A GPU the catalog does not hold cannot be timed.
        ("gpu", "AMD MI300X", "unknown gpu"),
        # A PCIe card is another part (clocks, power) than the catalog's SXM one.
        ("gpu", "H100 PCIe 80GB", "PCIe card"),
        ("gpu", "A100-PCIe-40GB", "PCIe card"),
        # A sequence length without a number.
        ("seq_len", "long", "not a number"),
        # A precision cell that names no precision Seer times (a typo, FP32/TF32 training).
        ("precision", "FP9 weird", "names no precision"),
        ("precision", "TF32", "names no precision"),
        ("precision", "not FP16", "names no precision"),
    ],
)
def test_refused_phrasings(column: str, cell: str, why: str) -> None:
    """Genuinely ambiguous or unreadable cells: one-line DataError naming row and field."""
    figures = ("iter_time_s", "derived_iter_time_s", "tokens_per_sec_per_gpu", "tflops_per_gpu")
    row = _base()
    if column in figures:  # the cell under test is the row's only published figure
        row = {**row, **dict.fromkeys(figures, "")}
    row = {**row, column: cell}
    with pytest.raises(DataError) as err:
        validate_row(row)
    line = err.value.one_line()
    assert "\n" not in line and why in line and "N21-T2-01" in line


def test_tokens_per_batch_reading_must_divide_seq_len() -> None:
    """'4M tokens' at seq 4096 is 4 x 2^20 (1,024 sequences); at seq 3000 neither 4,000,000
    nor 4,194,304 is whole sequences: refused."""
    row = {**_base(), "global_batch_seqs": "", "tokens_per_batch": "4M tokens", "seq_len": "4096"}
    assert global_batch_seqs(row) == 1024
    with pytest.raises(DataError, match="not a multiple of seq_len"):
        global_batch_seqs({**row, "seq_len": "3000"})


@pytest.mark.parametrize(
    ("cell", "gbps"),
    [("4 NICs per 8 GPUs, 100 Gb/s each", 50), ("4 NICs per 8 GPUs (200 Gb/s HDR each)", 100),
     ("100 Gbps x 4 per node", 50), ("8x NDR400 per node", 400), ("8x HDR InfiniBand per node", 200),
     ("InfiniBand NDR 400G per GPU", 400), ("8 x ConnectX-7 400Gb/s", 400),
     ("ConnectX-7 400Gb/s x8", 400), ("InfiniBand 8x HDR 200G", 200),
     ("4x 200 Gb/s HDR InfiniBand per 8-GPU node", 100), ("3.2 Tbps per node", 400)],
)  # fmt: skip
def test_interconnect_phrasings(cell: str, gbps: int) -> None:
    """Scale-out rate per GPU on an A100 row (whose unstated default is 200 Gb/s, so a cell
    read as nothing shows): NICs shared by GPUs, rate x count, InfiniBand generation names."""
    row = {**_base(), "interconnect": cell, "gpus_per_node": "8"}
    assert row_setup(row).system["nic_bandwidth"] == f"{gbps}G"


@pytest.mark.parametrize(
    ("notes", "depth"),
    [("MTP disabled (no MTP layer)", 0), ("no MTP", 0), ("without multi-token prediction", 0),
     ("MTP depth 1", 1), ("mtp_num_layers 2", 2), ("MTP: none", 0), ("dims from the HF config", 1)],
)  # fmt: skip
def test_mtp_stated_on_a_bundled_model(notes: str, depth: int) -> None:
    """A row naming a bundled config (DeepSeek-V3: num_nextn_predict_layers 1) keeps the MTP
    depth its notes state; notes that state none keep the config's."""
    row = next(r for r, _ in _readable() if r["row_id"] == "TTDSV3-03")
    model = row_model({**row, "model_notes": f"MLA: q_lora 1536, kv_lora 512; {notes}"})
    assert model.mtp_layers == depth


@pytest.mark.parametrize(
    ("row_id", "kv", "mla", "source"),
    [("DSV3-01", 128, True, "bundled config"), ("TT24-T2-01", 8, False, "bundled config"),
     ("N21-T2-01", 96, False, "multi-head attention assumed")],
)  # fmt: skip
def test_unstated_kv_heads_is_read_and_printed(
    row_id: str, kv: int, mla: bool, source: str
) -> None:
    """kv_heads = UNVERIFIED (no number): the bundled config of the model's name (MLA stays
    MLA, Llama-3.1-8B's 8 groups), else multi-head attention; the choice is printed."""
    row = {**next(r for r, _ in _readable() if r["row_id"] == row_id), "kv_heads": "UNVERIFIED"}
    model = row_model(row)
    assert (model.kv_heads, model.is_mla) == (kv, mla)
    assert source in row_setup(row).read["kv_heads"]


@pytest.mark.parametrize("column", ["moe_experts", "moe_topk", "moe_ffn_hidden"])
def test_unstated_moe_shape_is_refused(column: str) -> None:
    """An MoE row that does not state its experts, top-k or expert width defines no model:
    refused in one line naming the column (no default would be more than a guess)."""
    row = {**next(r for r, _ in _readable() if r["row_id"] == "MPF-T3-01"), column: "UNVERIFIED"}
    with pytest.raises(DataError) as err:
        validate_row(row)
    assert column in err.value.one_line() and "MPF-T3-01" in err.value.one_line()


@pytest.mark.parametrize(
    ("cell", "want"),
    [
        ("BF16 (MXFP8 disabled)", "bf16"),
        ("BF16, no FP8", "bf16"),
        ("BF16 mixed (FP8 off)", "bf16"),
        ("FP16 mixed (not BF16)", "fp16"),
        ("FP8 hybrid, BF16 for the rest", "fp8"),
        ("MXFP8 (not BF16)", "fp8"),
    ],
)
def test_precision_negated_mentions(cell: str, want: str) -> None:
    """A precision named only negated ("MXFP8 disabled", "not BF16") is not the run's."""
    assert cells.precision(cell) == want


@pytest.mark.parametrize(
    ("cell", "want", "fp4"),
    [
        ("BF16; FP4 (E2M1) disabled", "bf16", None),
        ("BF16; FP4 (E2M1)", "fp8", "nvfp4"),
        ("BF16 (NVFP4 off)", "bf16", None),
        ("NVFP4", "fp8", "nvfp4"),
        ("FP8; FP4 disabled", "fp8", None),
    ],
)
def test_precision_reads_fp4_as_the_fp4_format_does(cell: str, want: str, fp4: str | None) -> None:
    """An FP4 mention counts toward 'fp8' exactly when `fp4_format.stated_fp4` finds one (s22e:
    "BF16; FP4 (E2M1) disabled" was read FP8 here while the FP4 format said no FP4)."""
    assert stated_fp4(cell) == fp4
    assert cells.precision(cell) == want


@pytest.mark.parametrize("cell", ["", "UNVERIFIED", "UNVERIFIED (mixed)", "  "])
def test_unstated_precision_keeps_the_default(cell: str) -> None:
    """A blank or UNVERIFIED precision cell is not malformed: BF16 (same peak as FP16)."""
    assert cells.precision(cell) == "bf16"


@pytest.mark.parametrize(
    "cell", ["mixed precision", "mixed", "AMP (apex O2)", "automatic mixed precision"]
)
def test_mixed_precision_without_a_format_reads_as_fp16(cell: str) -> None:
    """An A100-era "mixed precision" that names no format is FP16 (as read before unknown cells
    were refused), not a malformed cell: a held-out row in that wording must still be read."""
    assert cells.precision(cell) == "fp16"


def test_unknown_precision_is_one_line() -> None:
    with pytest.raises(DataError) as err:
        cells.precision("FP9 weird", where="row X-01")
    line = err.value.one_line()
    assert "\n" not in line and "row X-01" in line and "'FP9 weird'" in line and "BF16" in line


@pytest.mark.parametrize("cell", ["-", "n/a", "N/A", "None", "unknown", "not stated", "—", "?"])
def test_a_precision_cell_that_states_nothing_reads_as_empty(cell: str) -> None:
    """A results table's "no value" marks read as an empty cell (BF16, Seer's default), as
    before unknown precision cells were refused; they were refused (the row not read)."""
    assert cells.precision(cell) == "bf16"
    assert cells.precision(cell) == cells.precision("")


@pytest.mark.parametrize("cell", ["-", "n/a", "None", "unknown"])
def test_a_precision_that_states_nothing_is_unstated_for_the_shipped_match(cell: str) -> None:
    from starfabric.astral.seer.shipped_defaults import precision_class

    assert precision_class(cell) is None  # not BF16: matches only where one precision ships


@pytest.mark.parametrize(
    ("cell", "stage"),
    [
        ("no FSDP", 1),  # a results table's FSDP column negated: Megatron's default, not ZeRO-3
        ("FSDP: off", 1),
        ("without FSDP (distributed optimizer)", 1),
        ("not ZeRO-3 (ZeRO-1)", 1),
        ("FSDP", 3),
        ("ZeRO-3", 3),
        ("FSDP on", 3),
    ],
)
def test_a_negated_fsdp_is_not_zero_3(cell: str, stage: int) -> None:
    assert cells.zero_stage(cell, legacy=False) == stage
