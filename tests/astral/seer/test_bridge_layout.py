"""Megatron-Bridge's DeepSeek-V3 / Kimi-K2 recipe layouts (seer/bridge_layout.py) against the
recipes' own (PP, VPP) maps: NVIDIA-NeMo/Megatron-Bridge v0.5.0 (fcbb603)
`recipes/deepseek/deepseek_v3.py` `set_deepseek_v3_pipeline_model_parallel_layout` and
`recipes/kimi/kimi_k2.py` `_get_kimi_k2_pipeline_layout` (decoder layers per virtual stage;
the embedding rides on the first, MTP and the loss on the last)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from starfabric.astral.seer.bridge_layout import layout_recipe, recipe_split
from starfabric.astral.seer.shipped_configs import answer
from starfabric.astral.seer.validate import fastest_fitting, row_setup

SOURCE_MAP = {
    (4, 1): [16, 16, 16, 13],
    (8, 1): [8] * 7 + [5],
    (4, 2): [8] * 7 + [5],
    (16, 1): [4] * 15 + [1],
    (8, 2): [4] * 15 + [1],
    (4, 4): [4] * 15 + [1],
}
"""deepseek_v3.py's layout_map, its "decoder" entries counted per stage."""
KIMI_EXTRA = {(2, 8): [4] * 15 + [1]}
"""kimi_k2.py's map adds (2, 8); its other entries are DeepSeek-V3's."""

CSV = Path(__file__).parents[2] / "data" / "shipped_configs" / "megatron_bridge_moe_perf.csv"


@pytest.mark.parametrize(("pp", "vpp"), sorted(SOURCE_MAP))
def test_the_split_is_the_recipe_map(pp: int, vpp: int) -> None:
    assert recipe_split("deepseek_v3", 61, pp, vpp) == tuple(SOURCE_MAP[(pp, vpp)])
    assert recipe_split("kimi_k2", 61, pp, vpp) == tuple(SOURCE_MAP[(pp, vpp)])


@pytest.mark.parametrize("layers", [16, 30, 45, 60, 62])
def test_a_model_of_another_depth_is_not_split_by_the_61_layer_map(layers: int) -> None:
    """The map lists 61 decoder layers; its ceil split on a shortened proxy (45 layers on
    PP 16: 3 x 15 + 0, an empty last stage) is no layout the recipe sets."""
    for pp, vpp in SOURCE_MAP:
        assert recipe_split("deepseek_v3", layers, pp, vpp) is None


def test_kimi_maps_pp2_vpp8_and_deepseek_does_not() -> None:
    assert recipe_split("kimi_k2", 61, 2, 8) == tuple(KIMI_EXTRA[(2, 8)])
    assert recipe_split("deepseek_v3", 61, 2, 8) is None


@pytest.mark.parametrize(("pp", "vpp"), [(1, 1), (8, 4), (2, 4), (32, 1)])
def test_pairs_outside_the_map_have_no_recipe_split(pp: int, vpp: int) -> None:
    assert recipe_split("deepseek_v3", 61, pp, vpp) is None


@pytest.mark.parametrize(
    ("model", "framework", "recipe"),
    [
        ("DeepSeek-V3", "Megatron-Bridge 0.5.0 performance scripts", "deepseek_v3"),
        (
            "DeepSeek-V3 (671B total / 37B active)",
            "Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1",
            "deepseek_v3",
        ),
        ("Kimi-K2", "Megatron Bridge 26.02", "kimi_k2"),
        ("DeepSeek-V3", "Megatron-LM core_v0.14 (Megatron-MoE-ModelZoo)", None),
        ("DeepSeek-V3", "TorchTitan DistMoE (2026-10)", None),
        ("DeepSeek-V3", "Megatron-Core, not Megatron-Bridge", None),
        ("Qwen3-235B-A22B", "Megatron-Bridge 0.5.0", None),
    ],
)
def test_which_rows_run_a_recipe_layout(model: str, framework: str, recipe: str | None) -> None:
    assert layout_recipe(model, framework) == recipe


def test_a_citation_of_megatron_bridge_counts_when_the_framework_cell_does_not_say() -> None:
    cite = "github.com/NVIDIA-NeMo/Megatron-Bridge scripts/performance/configs"
    assert layout_recipe("DeepSeek-V3", "NeMo 25.11 container", cite) == "deepseek_v3"
    assert layout_recipe("DeepSeek-V3", "NeMo 25.11 container", "arXiv 2412.19437") is None


def _shipped(row_id: str) -> dict[str, str]:
    with CSV.open(newline="") as fh:
        return next(r for r in csv.DictReader(fh) if r["row_id"] == row_id)


def test_a_bridge_row_without_a_split_runs_the_recipe_map() -> None:
    # DEEPSEEK_V3_PRETRAIN_CONFIG_B200_V1: PP 16, no VPP; the B200 function sets the map's
    # (16, 1) layout. Without the notes that state it, Seer now takes the same split.
    row = _shipped("MBPERF-DSV3-B200-BF16-V1")
    bare = {**row, "notes": ""}
    # shipped=False: the row alone, without the matching configuration's settings
    # (shipped_defaults would take the same split from the configuration's notes)
    assert "pipeline_layers" not in row_setup(bare, shipped=False).execution
    best, _, _ = fastest_fitting(bare, shipped=False)
    assert best is not None and best[3]["pipeline_layers"] == SOURCE_MAP[(16, 1)]
    stated, unstated = answer(row), answer(bare)
    # the notes also state forced balance: the step differs by that alone, not by the split
    forced = answer({**bare, "notes": "forced load balancing (moe_router_force_load_balancing)"})
    assert forced.step_s == pytest.approx(stated.step_s, rel=1e-9)
    assert unstated.step_s > stated.step_s


def test_a_stated_split_and_other_frameworks_keep_their_own() -> None:
    row = _shipped("MBPERF-DSV3-H100-BF16-V1")  # Et|(tt|)*30mL, stated in the notes
    assert row_setup(row).execution["pipeline_layers"] == [1] + [2] * 30 + [0]
    other = {**row, "notes": "", "framework": "Megatron-LM core_v0.14", "citation": "", "vpp": "1", "pp": "16",
             "dp": "32"}  # fmt: skip
    best, _, _ = fastest_fitting(other)
    assert best is not None and best[3]["pipeline_layers"] == [3, 3] + [4] * 13 + [3]


@pytest.mark.parametrize(
    ("framework", "bridge"),
    [
        ("Megatron-LM core_v0.14.0 (not Megatron-Bridge)", False),
        ("Megatron-Core, no Megatron-Bridge", False),
        ("Megatron-Bridge 25.11", True),
        ("NeMo 25.11 container", True),  # the framework cell does not say: the citation does
    ],
)
def test_the_framework_cell_decides_before_the_citation(framework: str, bridge: bool) -> None:
    """names_bridge's rule: the citation counts only when the framework cell does not say;
    a framework cell that negates Megatron-Bridge was overruled by a Megatron-Bridge URL."""
    from starfabric.astral.seer.bridge_layout import names_bridge

    cite = "github.com/NVIDIA-NeMo/Megatron-Bridge issue 1234"
    assert names_bridge(framework, cite) is bridge
