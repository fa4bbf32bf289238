"""Phrasing stress test of the row readers (issue 32): the held-out rows' classes, written the
ways a person transcribing performance pages writes them.

tests/data/published_runs/reader_phrasings.csv holds rows with INVENTED figures (its citation
cells say so; reader_phrasings.md) for the classes the held-out set covers: Megatron-Bridge /
NeMo-style MoE and dense rows on H100, B200, GB200, GB300 (FP8 recipes, MXFP8, NVFP4, BF16; EP,
PP, VPP, CP, MTP, dropless or forced routing), a long-context 7B table (4K..1M tokens, CP up to
32), GPT-3 175B rows on H100 and A100 runs of 2021-22 (Megatron-DeepSpeed, DeepSpeed +
Megatron-LM, Omni-Path with 4 NICs per 8 GPUs). Each row changes one or a few cells of a base
row into one phrasing; its `expect` cell says what the text states ("key=value; ..."), and the
tests check that Seer reads exactly that — or, for REFUSE-* rows, that it refuses in one line
naming the column, the value and the fix; UNV-* rows leave parallel degrees UNVERIFIED, which
must be chosen (fastest that fits) and printed, never refused.
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from starfabric.astral.seer import cells, row_forms
from starfabric.astral.seer.validate import (
    _gpus_per_node,
    _legacy,
    _nic_gbps,
    canonical_row,
    global_batch_seqs,
    published_iteration_s,
    row_model,
    row_setup,
    validate_row,
)
from starfabric.errors import DataError

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs" / "reader_phrasings.csv"


@cache
def _rows() -> tuple[dict[str, str], ...]:
    with DATA.open(newline="") as fh:
        return tuple(csv.DictReader(fh))


def _expect(row: dict[str, str]) -> dict[str, str]:
    pairs = (p.split("=", 1) for p in row["expect"].split("; ") if p)
    return {k.strip(): v.strip() for k, v in pairs}


def _value(text: str) -> Any:
    """An expected value as written in the `expect` cell ('-' = not set)."""
    if text == "-":
        return None
    if text in ("True", "False"):
        return text == "True"
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text


def _reading(row: dict[str, str]) -> dict[str, Any]:
    """What Seer reads from a row, under the keys the `expect` cells use."""
    st = row_setup(dict(row))
    ex, sy, first = st.execution, st.system, st.options[0][1]
    row = canonical_row(row)
    gpus = int(sy["gpus"])
    tokens = global_batch_seqs(row) * int(ex["seq_len"])
    pub_s = published_iteration_s(dict(row), st.model)
    return {
        "gpu": sy["gpu"], "hbm": sy.get("hbm_gib"), "gpus": gpus, "nic": sy["nic_bandwidth"],
        "gpn": sy["gpus_per_node"],
        "seq": ex["seq_len"], "gb": ex["global_batch"], "prec": ex["precision"],
        "rec": ex.get("fp8_recipe"), "tp": ex["tp"], "pp": ex["pp"], "cp": ex["cp"],
        "ep": ex["ep"], "etp": ex.get("etp"), "sp": ex["sp"], "zero": ex["zero"],
        "vpp": first["vpp"][0] if len(first["vpp"]) == 1 else first["vpp"],
        "mb": first["micro_batch"][0], "recompute": first["recompute"][0],
        "attn": ex["attention"], "ogr": ex["overlap_grad_reduce"],
        "host": bool(ex.get("host_launches")), "lb": ex.get("moe_load_balance"),
        "legacy": _legacy(row), "mtp": st.model.mtp_layers, "mla": st.model.is_mla,
        "kv": st.model.kv_heads, "pub_s": round(pub_s, 6),
        # the cuDNN release (cudnn_release.row_release), "v9.10": a bare 9.10 reads as 9.1
        "cudnn": f"v{ex['cudnn_release']}" if ex.get("cudnn_release") else None,
        "pub_rate": round(tokens / (pub_s * gpus), 6),
    }  # fmt: skip


def _ids(prefixes: tuple[str, ...], keep: bool = True) -> list[str]:
    return [r["row_id"] for r in _rows() if r["row_id"].startswith(prefixes) == keep]


def _row(row_id: str) -> dict[str, str]:
    return next(r for r in _rows() if r["row_id"] == row_id)


def test_the_file_says_its_figures_are_invented() -> None:
    assert len(_rows()) >= 249
    assert all("INVENTED" in r["citation"] and r["expect"] for r in _rows())


@pytest.mark.parametrize("row_id", _ids(("UNV-", "REFUSE-"), keep=False))
def test_each_phrasing_reads_as_its_text_states(row_id: str) -> None:
    row = _row(row_id)
    got = _reading(row)
    for key, want in _expect(row).items():
        if key == "pub_tflops":
            continue  # checked against the base row below
        assert got[key] == _value(want), f"{row_id}: {key} read {got[key]!r}, text says {want}"


@pytest.mark.parametrize("row_id", [r for r in _ids(("FIG-F",))])
def test_a_tflops_figure_in_its_unit_reads_as_the_plain_number(row_id: str) -> None:
    """'500 TFLOPS/GPU', '0.5 PFLOP/s' give the same iteration time as the bare 500."""
    row = _row(row_id)
    plain = {**row, "tflops_per_gpu": _expect(row)["pub_tflops"]}
    model = row_model(row)
    assert published_iteration_s(row, model) == pytest.approx(published_iteration_s(plain, model))


@pytest.mark.parametrize("row_id", [r for r in _ids(("FIG-F",))])
def test_a_tflops_figure_in_its_unit_is_reported_as_the_plain_number(row_id: str) -> None:
    """The published TFLOP/s a row's result reports is the cell in TFLOP/s: '0.5 PFLOP/s' is
    500 (it was reported as 0.5: validate_row read the cell without its unit)."""
    row = _row(row_id)
    assert validate_row(row).published_tflops == pytest.approx(float(_expect(row)["pub_tflops"]))


def test_a_tflops_cell_that_is_no_figure_is_refused_in_one_line() -> None:
    """A TFLOP/s cell that holds no number ('???') beside a usable iteration time is a
    DataError naming the column (it was a ValueError traceback out of validate_row)."""
    row = {**_row("FIG-F3"), "tflops_per_gpu": "???", "iter_time_s": "12.5"}
    with pytest.raises(DataError, match="tflops_per_gpu"):
        validate_row(row)


@pytest.mark.parametrize("row_id", _ids(("UNV-",)))
def test_unverified_degrees_are_chosen_and_printed(row_id: str) -> None:
    row = _row(row_id)
    res = validate_row(row)
    for key in _expect(row)["open"].split(","):
        assert key in res.choices, f"{row_id}: {key} not printed"
        if key != "vpp":
            assert "unverified: fastest layout that fits" in str(res.choices[key])
            assert getattr(res.prediction.job.execution, key) == cells.number(res.choices[key])


@pytest.mark.parametrize("row_id", _ids(("REFUSE-",)))
def test_refusals_are_one_line_naming_the_value_and_the_fix(row_id: str) -> None:
    row = _row(row_id)
    with pytest.raises(DataError) as err:
        validate_row(row)
    line = err.value.one_line()
    assert "\n" not in line and row_id in line and "fix:" in line
    assert _expect(row)["refused"] in line


# Direct checks of the readers the fixes touched (each failed before its fix).


@pytest.mark.parametrize(
    ("cell", "count"),
    [("128x8", 1024), ("128 nodes x 8 GPUs", 1024), ("64 × 4", 256), ("1K", 1024),
     ("16K", 16384), ("2,048", 2048), ("1024 (128 nodes)", 1024), ("UNVERIFIED", None)],
)  # fmt: skip
def test_gpu_counts(cell: str, count: int | None) -> None:
    assert row_forms.gpu_count(cell) == count


@pytest.mark.parametrize(
    ("cell", "count"),
    [("3,072 (8 x 12 x 32)", 3072), ("1,024 (128 x 8)", 1024),
     ("3072 GPUs (TP 8 x PP 12 x DP 32)", 3072), ("256 (B200 x 32 nodes)", 256)],
)  # fmt: skip
def test_gpu_count_products_are_hosts_times_gpus_only(cell: str, count: int) -> None:
    """A number inside a GPU's name ("B200 x 32" is not 200 x 32) is no factor, and a count
    the cell states before a product is the count: the product then explains it, and may be
    a layout's degrees ("8 x 12 x 32" is TP x PP x DP, not 8 x 12 hosts)."""
    assert row_forms.gpu_count(cell) == count


@pytest.mark.parametrize(
    ("cell", "pair"),
    [("MBS/GBS 1/1024", (1, 1024)), ("GBS/MBS: 1024/2", (2, 1024)),
     ("micro-batch/global-batch 4/512", (4, 512)), ("1/1024", None), ("4/4/.../4/1", None)],
)  # fmt: skip
def test_batch_pairs(cell: str, pair: tuple[int, int] | None) -> None:
    assert row_forms.batch_pair(cell) == pair


def test_an_unverified_batch_hint_is_left_as_written() -> None:
    row = {"row_id": "x", "micro_batch": "UNVERIFIED", "global_batch_seqs": "~1024 UNVERIFIED"}
    assert row_forms.canonical_counts(row) == row


@pytest.mark.parametrize(
    ("key", "cell", "scale"),
    [("iter_time_s", "850 ms", 1e-3), ("iter_time_s", "1.2 min", 60.0),
     ("iter_time_s", "12.3 s", 1.0), ("iter_time_s", "6.0 (step time, s)", 1.0),
     ("derived_iter_time_s", "0.5 hours", 3600.0), ("tflops_per_gpu", "0.5 PFLOP/s", 1e3),
     ("tflops_per_gpu", "540 TFLOP/s", 1.0), ("tokens_per_sec_per_gpu", "3.9K tokens/s", 1.0),
     ("tokens_per_sec_per_gpu", "60,000 tokens/min", 1 / 60)],
)  # fmt: skip
def test_figure_units(key: str, cell: str, scale: float) -> None:
    assert row_forms.figure_scale(key, cell) == pytest.approx(scale)


@pytest.mark.parametrize(
    ("cell", "total"),
    [("357,888 tokens/s (total)", True), ("aggregate 1.2M tokens/s", True),
     ("699 tokens/s/GPU", False), ("699 tokens/s per GPU (total 357,888)", False),
     ("357,888 total tokens/s", True), ("357,888 tokens/s across all GPUs", True),
     ("357,888 (global)", True),
     # a word about the batch, the run's token count or an average is not the rate's scope
     ("3,100 (global batch 2048)", False), ("3,100 tokens/s, total batch 4M tokens", False),
     ("3,100 (1T total tokens)", False), ("3,100 tokens/s (mean over all GPUs)", False),
     ("3,100 tokens/s averaged across all GPUs", False)],
)  # fmt: skip
def test_job_total_rates(cell: str, total: bool) -> None:
    assert row_forms.states_job_total(cell) is total


@pytest.mark.parametrize(
    ("text", "per_node", "gbps"),
    [("2x200 Gb/s per GPU", 8, 400.0), ("4 NICs per 8 GPUs (Omni-Path 100 Gb/s)", 8, 50.0),
     ("one 100G NIC per 2 GPUs", 8, 50.0), ("4 NICs per 8 GPUs", 8, None)],
)  # fmt: skip
def test_nic_rates(text: str, per_node: int, gbps: float | None) -> None:
    assert _nic_gbps(text, per_node) == gbps


def test_nvlink_ports_are_not_nics() -> None:
    assert _nic_gbps("18 NVLink ports per 8 GPUs; 400 Gb/s per GPU", 8) == 400.0


@pytest.mark.parametrize(
    ("cell", "stage"),
    [("ZeRO stage 1", 1), ("ZeRO stage 2", 2), ("zero_stage=3", 3), ("Z1", 1), ("stage 2", 2),
     ("no ZeRO stage 3", 0), ("ZeRO (stage not stated)", 0), ("ZeRO stage 3 (no FSDP)", 3)],
)  # fmt: skip
def test_numbered_zero_stages_on_a_2021_run(cell: str, stage: int) -> None:
    assert cells.zero_stage(cell, legacy=True) == stage


@pytest.mark.parametrize(
    ("cell", "value"), [("2^20", 1048576), ("2**17", 131072), ("2 ^ 20", 1048576), ("4K", 4096)]
)
def test_powers(cell: str, value: int) -> None:
    assert cells.number(cell, binary=True) == value


def test_gpus_per_node_of_one_host_is_not_refused_on_nvl72() -> None:
    assert _gpus_per_node({**_row("GPU-05"), "gpus_per_node": "4"}) == 4


def test_a_power_beyond_any_sequence_length_is_refused_in_one_line() -> None:
    """'2^99' in seq_len reads as its value (row_forms' powers); past MAX_SEQ_LEN the row is
    refused in one line — it sent the validate search into minutes of work (2^40 ran past
    40 s on one row) instead of an error."""
    from starfabric.astral.seer import load_model, make_job
    from starfabric.astral.seer.parallel import MAX_SEQ_LEN
    from starfabric.errors import ConfigError

    assert MAX_SEQ_LEN >= 1 << 20  # long-context tables reach 2^20 tokens
    with pytest.raises(ConfigError, match="seq_len"):
        make_job(
            load_model("llama-3-8b"),
            {"global_batch": 8, "seq_len": MAX_SEQ_LEN * 2},
            {"gpu": "H100", "gpus": 8},
        )


# Session 17h: count cells whose numbers are all accounted for or refused; product
# generations and IB rates after a space; both batch cells agree; the NVL72 tray default.


@pytest.mark.parametrize(
    ("cell", "per_node", "count"),
    [("8 GPUs x 128 nodes", 8, 1024), ("128 nodes x 8 GPUs", 8, 1024),
     ("128 nodes (1,024 GPUs)", 8, 1024), ("1,024 (128 nodes)", 8, 1024),
     ("4 x GB200 NVL72 racks", 4, 288), ("4 NVL72 racks", None, 288),
     ("64 nodes of 4 GB200", 4, 256), ("128 nodes with 8 GPUs", 8, 1024), ("8xH100", None, 8),
     ("3,072 (8 x 12 x 32)", 8, 3072), ("256 (B200 x 32 nodes)", 8, 256),
     ("512 (64 nodes, 8 GPUs each)", 8, 512), ("1,024 (8 per node)", 8, 1024),
     ("6,144 (768 DGX H100 nodes)", 8, 6144), ("4,096 (Selene: 512 DGX A100)", 8, 4096),
     ("128 H100 nodes (1,024 GPUs)", 8, 1024), ("72 (1 NVL72 rack)", 4, 72),
     ("64 GB200 (16 trays)", 4, 64), ("8 (1 node)", 8, 8)],
)  # fmt: skip
def test_every_number_of_a_count_cell_is_accounted_for(
    cell: str, per_node: int | None, count: int
) -> None:
    assert row_forms.gpu_count(cell, "r", per_node) == count


@pytest.mark.parametrize(
    ("cell", "per_node", "says"),
    [("128 nodes (1,000 GPUs)", 8, "1000"), ("1,024 (128 nodes)", 4, "512 GPUs"),
     ("64 nodes of 4 GB200", 8, "512 GPUs"), ("1,024 (2 runs)", 8, "'2'"),
     ("128 nodes", 8, "counts hosts"), ("512 (64 x 4)", 8, "'64'"),
     ("1,024 (4 per node)", 8, "4 GPUs per host"), ("8 GPUs per node", 8, "not the GPU count"),
     ("512 (64 nodes, 4 GPUs each)", None, "4 GPUs per host")],
)  # fmt: skip
def test_a_count_cell_with_numbers_left_over_is_refused_in_one_line(
    cell: str, per_node: int | None, says: str
) -> None:
    with pytest.raises(DataError) as err:
        row_forms.gpu_count(cell, "r", per_node)
    line = err.value.one_line()
    assert "\n" not in line and f"column 'num_gpus' = {cell!r}" in line and says in line
    assert "fix:" in line


@pytest.mark.parametrize(
    ("micro", "glob", "pair"),
    [("", "GBS 1024 (MBS 2)", ("2", "1024")), ("2", "GBS 1024 (MBS 2)", ("2", "1024")),
     ("MBS 1", "MBS/GBS 1/1024", ("1", "1024")), ("", "4M tokens", ("", "4M tokens")),
     ("1", "2048 (after the 1024-sequence warm-up)",
      ("1", "2048 (after the 1024-sequence warm-up)"))],
)  # fmt: skip
def test_batch_figures_both_cells_state(micro: str, glob: str, pair: tuple[str, str]) -> None:
    row = {"row_id": "r", "micro_batch": micro, "global_batch_seqs": glob}
    out = row_forms.canonical_counts(row)
    assert (out["micro_batch"], out["global_batch_seqs"]) == pair


@pytest.mark.parametrize(
    ("micro", "glob", "says"),
    [("1", "MBS/GBS 0/1024", "micro-batch of 0"), ("MBS 0", "1024", "micro-batch of 0"),
     ("1", "GBS 0", "global batch (sequences) of 0"),
     ("1", "GBS 1024 (MBS 2)", "stated twice"), ("1", "MBS/GBS 2/1024", "stated twice"),
     ("MBS 4", "GBS/MBS 1024/2", "stated twice")],
)  # fmt: skip
def test_a_zero_or_conflicting_batch_is_refused_in_one_line(
    micro: str, glob: str, says: str
) -> None:
    row = {"row_id": "r", "micro_batch": micro, "global_batch_seqs": glob}
    with pytest.raises(DataError) as err:
        row_forms.canonical_counts(row)
    line = err.value.one_line()
    assert "\n" not in line and says in line and "fix:" in line


@pytest.mark.parametrize(
    ("cell", "per_node", "gbps"),
    [("Slingshot 11 200 Gb/s NICs", 4, 200.0), ("4 Slingshot 11 200 Gb/s NICs per node", 4, 200.0),
     ("4x ConnectX 7 400Gb/s NICs per node", 8, 200.0), ("8x HDR 100", 8, 100.0),
     ("8x HDR100", 8, 100.0), ("InfiniBand NDR 400 per GPU", 8, 400.0),
     ("8x NDR 200", 8, 200.0), ("EFA v2 3200 Gb/s per node", 8, 400.0),
     ("8x HDR 200Gb/s", 8, 200.0), ("4x 100Gb/s Omni-Path per node", 8, 50.0)],
)  # fmt: skip
def test_product_generations_and_ib_rates_after_a_space_are_not_counts(
    cell: str, per_node: int, gbps: float
) -> None:
    from starfabric.astral.seer import nic_count

    assert _nic_gbps(nic_count.joined_names(cell), per_node) == pytest.approx(gbps)


@pytest.mark.parametrize(
    ("cell", "joined"),
    [("Slingshot 11 200 Gb/s", "Slingshot-11 200 Gb/s"), ("ConnectX 7 NICs", "ConnectX-7 NICs"),
     ("EFA v2", "EFA-v2"), ("NDR 400", "NDR400"), ("HDR 200 Gb/s", "HDR 200 Gb/s"),
     ("EFA 4 NICs", "EFA 4 NICs"), ("ConnectX 7 x 8", "ConnectX 7 x 8")],
)  # fmt: skip
def test_joined_names(cell: str, joined: str) -> None:
    from starfabric.astral.seer import nic_count

    assert nic_count.joined_names(cell) == joined


def test_an_empty_gpus_per_node_takes_the_catalog_host() -> None:
    """GB200/GB300 NVL72 compute trays hold 4 GPUs (gpus.yaml gpus_per_node_default); an HGX
    GPU's host 8; the value is printed in the row's choices as unstated."""
    from starfabric.astral.hardware import list_gpus

    assert {g.name: g.gpus_per_node_default for g in list_gpus() if g.name.startswith("GB")} == {
        "GB200": 4, "GB300": 4
    }  # fmt: skip
    assert _gpus_per_node({**_row("GPU-05"), "gpus_per_node": ""}) == 4
    assert _gpus_per_node({**_row("GPU-10"), "gpus_per_node": ""}) == 8
    assert "4 (unstated" in str(row_setup(dict(_row("GPU-18"))).read["gpus_per_node"])
    assert "gpus_per_node" not in row_setup(dict(_row("GPU-05"))).read


@pytest.mark.parametrize(("key", "cell"), [("pp", "0"), ("vpp", "0"), ("heads", "0"), ("tp", "0")])
def test_a_zero_size_or_degree_is_refused_in_one_line(key: str, cell: str) -> None:
    """A model size or parallel degree of 0 is a DataError naming the column (pp, vpp and heads
    of 0 were ZeroDivisionError tracebacks out of validate_row)."""
    row = {**_row("FIG-F3"), key: cell}
    with pytest.raises(DataError, match=key):
        validate_row(row)
