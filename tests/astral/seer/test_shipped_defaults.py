"""seer/shipped_defaults.py: a Megatron-Bridge results row that matches one shipped performance
configuration exactly takes the settings it leaves unstated from it.

Golden data: Megatron-Bridge v0.5.0's 99 MoE performance configurations
(tests/data/shipped_configs/megatron_bridge_moe_perf.csv, provenance in its .md; bundled as
published_runs/megatron_bridge_moe_perf_v050.csv). Differential: each configuration stripped to
what a results table carries is read with exactly the configuration's settings and predicted
at the same step time as the full row."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from starfabric.astral.seer import shipped_defaults as sd

V = importlib.import_module("starfabric.astral.seer.validate")

CSV = Path(__file__).parents[2] / "data" / "shipped_configs" / "megatron_bridge_moe_perf.csv"
ROWS = V.read_rows(CSV)
BY_ID = {r["row_id"]: r for r in ROWS}

RESULTS_TABLE_PRECISION = {
    "BF16": "BF16",
    "FP8 (current scaling, tensorwise)": "FP8-CS",
    "MXFP8": "FP8-MX",
    "FP8 (subchannel / blockwise scaling)": "FP8-SC",
    "NVFP4": "NVFP4",
}
"""How a results table names each precision (Megatron-Bridge's own config-name suffixes)."""


def stripped(row: dict[str, str]) -> dict[str, str]:
    """What a results table carries: the stripping of scripts/seer_shipped_configs.py
    (--without-notes: no notes, the framework cell's first clause, recompute UNVERIFIED)."""
    return {**row, "notes": "", "framework": row["framework"].split(",")[0],
            "recompute": "UNVERIFIED"}  # fmt: skip


def bare(row: dict[str, str]) -> dict[str, str]:
    """Stripped further: the precision as a results table abbreviates it and no MTP depth."""
    notes = "; ".join(p for p in row["model_notes"].split(";") if "MTP" not in p)
    return {**stripped(row), "precision": RESULTS_TABLE_PRECISION[row["precision"]],
            "model_notes": notes}  # fmt: skip


def test_bundled_copy_is_the_golden_file() -> None:
    assert sd.config_csv().read_bytes() == CSV.read_bytes()
    assert len(sd.configurations()) == 99


def test_configuration_shapes_are_the_models_seer_reads() -> None:
    for c in sd.configurations():
        assert c.shape == sd._shape(V.row_model(c.row)), c.name


@pytest.mark.parametrize("strip", [stripped, bare])
def test_every_configuration_stripped_reads_its_own_settings(strip) -> None:  # type: ignore[no-untyped-def]
    for row in ROWS:
        full = V.row_setup(row, shipped=False)
        got = V.row_setup(strip(row))
        assert got.shipped is not None and got.shipped.config == row["mb_config"], row["row_id"]
        assert got.model == full.model, row["row_id"]
        assert got.execution == full.execution, row["row_id"]
        assert got.options == full.options, row["row_id"]
        assert got.layout_recipe == full.layout_recipe, row["row_id"]
        assert f"performance config {row['mb_config']}" in got.read["megatron_bridge_config"]


def test_every_configuration_stripped_predicts_the_full_rows_step() -> None:
    """All 99 (about 3 s): Seer's step for the stripped row equals the full row's."""
    for row in ROWS:
        full = V.fastest_fitting(row, shipped=False)[0]
        got = V.fastest_fitting(bare(row))[0]
        assert full is not None and got is not None, row["row_id"]
        assert got[0] == pytest.approx(full[0], rel=1e-12), row["row_id"]
        assert got[2] == full[2], row["row_id"]


def test_without_the_configuration_the_stripped_rows_differ() -> None:
    """The test above can fail: read alone, stripped rows choose other settings."""
    moved = [r["row_id"] for r in ROWS
             if V.row_setup(stripped(r), shipped=False).options
             != V.row_setup(r, shipped=False).options]  # fmt: skip
    assert len(moved) == len(ROWS)


MX = BY_ID["MBPERF-DSV3-GB300-FP8_MX-V1"]  # HybridEP, EP overlap, full-iteration graphs, MTP 1


def _setup(**cells: str):  # type: ignore[no-untyped-def]
    return V.row_setup({**bare(MX), **cells})


def test_a_stated_setting_wins() -> None:
    base = _setup()
    assert base.shipped is not None
    assert base.execution["ep_comm_overlap"] and base.execution["cuda_graphs"]
    assert base.options[0][1]["moe_dispatcher"] == ["deepep"]
    assert base.options[0][1]["recompute"] == ["none"]
    assert base.model.mtp_layers == 1
    assert base.execution["moe_load_balance"] == "forced"
    own = _setup(recompute="selective (mla_up_proj)",
                 framework="Megatron-Bridge 0.5.0, MoE dispatcher alltoall",
                 notes="EP a2a overlap off; CUDA graphs off; dropless, real routing",
                 model_notes="MTP disabled")  # fmt: skip
    assert own.shipped is not None  # still matched: the other settings come from it
    opts = own.options[0][1]
    assert opts["recompute"] == ["selective"] and opts["recompute_modules"] == [("mla_up_proj",)]
    assert opts["moe_dispatcher"] == ["alltoall"]
    assert not own.execution["ep_comm_overlap"] and not own.execution["cuda_graphs"]
    assert "moe_load_balance" not in own.execution
    assert own.model.mtp_layers == 0
    assert opts["optimizer_moments"] == ["bf16"]  # not stated: the configuration's
    taken = " ".join(own.shipped.taken)
    assert "dispatcher" not in taken and "recompute" not in taken and "optimizer" in taken


def test_recompute_stated_on_takes_the_configurations_modules() -> None:
    row = BY_ID["MBPERF-DSV3-B200-FP8_CS-V1"]
    got = V.row_setup({**bare(row), "recompute": "yes"})
    assert got.options == V.row_setup(row, shipped=False).options


def _unchanged(row: dict[str, str]) -> None:
    assert V.row_setup(row).shipped is None
    a, b = V.row_setup(row), V.row_setup(row, shipped=False)
    assert (a.execution, a.options, a.model, a.read) == (b.execution, b.options, b.model, b.read)


@pytest.mark.parametrize(
    "cells",
    [
        {"global_batch_seqs": "3072"},  # no configuration has this batch
        {"ep": "16"},
        {"num_gpus": "512", "dp": "128"},
        {"micro_batch": "UNVERIFIED"},  # unstated, and the configurations differ in it
        {"vpp": ""},
        {"precision": "FP8"},  # no recipe, and DeepSeek-V3 on GB300 ships FP8-CS and FP8-MX
        {"precision": "FP8 (delayed scaling)"},
        {"precision": ""},
        {"gpu": "H100"},
        {"model": "DeepSeek-V2", "layers": "60"},
    ],
)
def test_a_row_that_matches_no_configuration_is_unchanged(cells: dict[str, str]) -> None:
    row = {**bare(MX), **cells}
    if "layers" in cells:
        row["kv_heads"] = "128"  # read from the columns, not the bundled DeepSeek-V3
    _unchanged(row)


def test_a_row_that_does_not_name_megatron_bridge_is_unchanged() -> None:
    _unchanged({**bare(MX), "framework": "Megatron-LM core_r0.14.0", "citation": "a paper"})
    _unchanged({**bare(MX), "framework": "not Megatron-Bridge: Megatron-LM", "citation": ""})
    cited = V.row_setup({**bare(MX), "framework": "NeMo 25.09", "citation": "Megatron-Bridge docs"})
    assert cited.shipped is not None


def test_several_matching_configurations_leave_the_row_unchanged(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    configs = sd.configurations()
    twin = next(c for c in configs if c.name == MX["mb_config"])
    other = sd.ShippedConfig("TWIN", {**twin.row, "recompute": "selective (moe_act)"},
                             twin.gpu, twin.shape, twin.key)  # fmt: skip
    monkeypatch.setattr(sd, "configurations", lambda: (*configs, other))
    assert "2 configurations" in sd.match(bare(MX), V.row_model(MX), "GB300").reason
    _unchanged(bare(MX))


def test_an_unstated_field_matches_when_every_configuration_agrees_on_it() -> None:
    # CP is 1 in every configuration: an UNVERIFIED CP still matches, and is taken.
    got = V.row_setup({**bare(MX), "cp": "UNVERIFIED"})
    assert got.shipped is not None and "cp 1" in got.shipped.taken
    assert got.options == V.row_setup(MX, shipped=False).options
    # FP8 with no recipe where the model ships one FP8 recipe on that GPU (Qwen3-30B on H100).
    h100 = BY_ID["MBPERF-Q3-30B-H100-FP8_CS-V1"]
    got = V.row_setup({**bare(h100), "precision": "FP8"})
    assert got.shipped is not None and got.execution["fp8_recipe"] == "tensorwise"
    assert got.options == V.row_setup(h100, shipped=False).options


@pytest.mark.parametrize(
    ("cell", "cls"),
    [
        ("BF16", "bf16"),
        ("FP8-CS", "fp8:tensorwise"),
        ("fp8_mx", "fp8:mxfp8"),
        ("MXFP8", "fp8:mxfp8"),
        ("FP8 (subchannel / blockwise scaling)", "fp8:blockwise"),
        ("FP8-SC", "fp8:blockwise"),
        ("FP8 (MX)", "fp8:mxfp8"),
        # A negated suffix names no recipe (the Megatron-Bridge names were read unnegated).
        ("FP8 (not FP8-CS)", "fp8"),
        ("FP8 (fp8_mx disabled)", "fp8"),
        ("MXFP8, not FP8-CS", "fp8:mxfp8"),
        ("FP8 hybrid", "fp8"),
        ("NVFP4", "nvfp4"),
        ("UNVERIFIED", None),
        ("", None),
    ],
)
def test_precision_class(cell: str, cls: str | None) -> None:
    assert sd.precision_class(cell) == cls


def test_validate_prints_the_configuration() -> None:
    row = {**bare(MX), "iter_time_s": "10", "row_id": "T-1"}
    res = V.validate_row(row)
    assert f"performance config {MX['mb_config']}" in res.choices["megatron_bridge_config"]
    assert "from Megatron-Bridge v0.5.0" in res.choices["megatron_bridge_config"]
    row = {**bare(BY_ID["MBPERF-DSV3-B200-FP8_CS-V1"]), "iter_time_s": "10", "row_id": "T-2"}
    res = V.validate_row(row)
    assert (
        "performance config DEEPSEEK_V3_PRETRAIN_CONFIG_B200_FP8_CS_V1" in res.choices["recompute"]
    )


@pytest.mark.parametrize(
    "model_notes",
    [
        "MLA: q_lora 1536, kv_lora 512; node-limited routing <=4 nodes; aux-loss-free balancing",
        "sigmoid routing, auxiliary-loss-free load balancing (expert bias)",
        "sequence-wise balance loss 0.0001",
        "seq aux loss",
    ],
)
def test_the_models_own_balancing_is_not_the_runs_routing_balance(model_notes: str) -> None:
    """DeepSeek-V3's aux-loss-free bias or a balance loss describes the model's router, which
    Megatron-Core keeps under --moe-router-force-load-balancing: the configuration's forced
    balancing is still taken (a row copying the model description was read as stating it)."""
    st = _setup(model_notes=model_notes)
    assert st.shipped is not None
    assert "routing balance forced" in st.shipped.taken
    assert st.execution["moe_load_balance"] == "forced"


@pytest.mark.parametrize("notes", ["dropless, real routing", "no forced load balancing"])
def test_a_stated_routing_balance_still_wins(notes: str) -> None:
    st = _setup(notes=notes)
    assert st.shipped is not None
    assert not any(t.startswith("routing balance") for t in st.shipped.taken)
    assert "moe_load_balance" not in st.execution


@pytest.mark.parametrize(
    "notes", ["TP/PP/CP/EP = 1/2/1/32", "measured 2025/11/03", "1 / 2 / 1 / 32 (TP/PP/CP/EP)"]
)
def test_a_slash_list_that_is_no_layer_split_does_not_state_the_layout(notes: str) -> None:
    """A layout tuple or a date in the notes is not a pipeline layout (validate reads a split
    only through cells.layer_split): the configuration's layout is still taken."""
    st = _setup(notes=notes)
    assert st.shipped is not None
    assert any(t.startswith("pipeline layout") for t in st.shipped.taken)


def test_a_stated_layer_split_still_wins() -> None:
    st = _setup(notes="layers 4/4/.../4/1")
    assert st.shipped is not None
    assert not any(t.startswith("pipeline layout") for t in st.shipped.taken)


H100_CS = BY_ID["MBPERF-DSV3-H100-FP8_CS-V1"]
H100_SC = BY_ID["MBPERF-DSV3-H100-FP8_SC-V1"]


def test_fp8_naming_no_recipe_takes_what_the_recipes_configurations_share() -> None:
    """DeepSeek-V3 on H100 ships FP8_CS_V1 and FP8_SC_V1 on one layout, differing only in the
    recipe and the FP8 parameter gather: a results row "FP8" took nothing (Seer's own search);
    it takes their shared settings, the recipe left unstated and both names printed."""
    row = {**bare(H100_CS), "precision": "FP8"}
    got = V.row_setup(row)
    assert got.shipped is not None
    assert "FP8_CS_V1" in got.shipped.config and "FP8_SC_V1" in got.shipped.config
    assert not any(t.startswith("FP8 recipe FP8") for t in got.shipped.taken)
    assert "fp8_recipe" not in got.execution  # no recipe stated: as an FP8 cell naming none
    full_cs = V.row_setup(H100_CS, shipped=False)
    assert got.options[0][1]["moe_dispatcher"] == full_cs.options[0][1]["moe_dispatcher"]
    assert got.options[0][1]["recompute"] == full_cs.options[0][1]["recompute"]
    assert got.execution["moe_load_balance"] == "forced"
    # with the recipe named, the one configuration as before
    named = V.row_setup({**bare(H100_SC)})
    assert named.shipped is not None and named.shipped.config.endswith("FP8_SC_V1")


def test_fp8_naming_no_recipe_over_configurations_that_differ_matches_nothing(
    monkeypatch,  # type: ignore[no-untyped-def]
) -> None:
    configs = sd.configurations()
    sc = next(c for c in configs if c.name.endswith("H100_FP8_SC_V1"))
    other = sd.ShippedConfig(sc.name, {**sc.row, "recompute": "full"}, sc.gpu, sc.shape, sc.key)
    monkeypatch.setattr(sd, "configurations", lambda: (*(c for c in configs if c is not sc), other))
    row = {**bare(H100_CS), "precision": "FP8"}
    assert sd.match(row, V.row_model(row), sc.gpu).config is None
