"""Release-date reading of framework cells (seer/releases.py) and its use in validate._year:
dates are the projects' own tag dates (DeepSpeed v0.5.0 2021-08-17, v0.6.0 2022-03-07,
Megatron-Core core_v0.4.0 2023-12-11, core_v0.12.0 2025-05-06, ...)."""

from __future__ import annotations

import pytest

from starfabric.astral.seer import releases
from starfabric.astral.seer.validate import _legacy, _year


@pytest.mark.parametrize(
    ("framework", "year"),
    [
        ("Megatron-DeepSpeed (DeepSpeed 0.5.x)", 2021),
        ("DeepSpeed v0.6 + Megatron-LM", 2022),
        ("deepspeed==0.8.0", 2023),
        ("DeepSpeed version 0.7.3", 2022),
        ("Megatron-LM core_r0.4", 2023),
        ("Megatron-Core r0.8.0", 2024),
        ("Megatron-Core v0.9", 2024),
        ("mcore 0.10", 2025),
        ("Megatron-LM v2.5", 2021),
        ("NeMo 1.11 (Megatron-LM)", 2022),
        ("NeMo framework 2.0", 2024),
        ("TE 1.11", 2024),
        ("Transformer Engine v0.8", 2023),
        ("PyTorch 1.10 + Megatron-LM", 2021),
        ("Megatron-Bridge 0.4.2", 2026),
        ("Megatron-LM (run of 2021-11-03)", 2021),
        ("custom stack, 2022-09", 2022),
    ],
)
def test_each_form_reads_its_year(framework: str, year: int | None) -> None:
    assert _year({"framework": framework}) == year


def test_newest_component_dates_the_stack() -> None:
    # PyTorch 1.10 (2021-10) with TE 0.8 (2023-04): at least as new as TE.
    assert releases.release_date("PyTorch 1.10, TE 0.8") == (2023, 4)
    assert _year({"framework": "NeMo 22.09 container, Megatron-Core 0.4"}) == 2023


def test_deepspeed_0_5_is_legacy_and_megatron_core_0_12_is_not() -> None:
    assert _legacy({"framework": "DeepSpeed 0.5"})
    assert not _legacy({"framework": "Megatron-Core 0.12"})
    # The release decides before the citation does.
    cited = {"framework": "DeepSpeed 0.5", "citation": "arXiv:2401.00001"}
    assert _legacy(cited)


@pytest.mark.parametrize(
    "framework",
    ["DeepSpeed 0.99", "Megatron-Core 0.42", "PyTorch 24.09 container", "XTuner 0.1.x"],
)
def test_unknown_versions_fall_back_to_the_citation(framework: str) -> None:
    assert releases.release_date(framework) is None
    assert _year({"framework": framework}) is None
    assert _year({"framework": framework, "citation": "arXiv:2104.04473"}) == 2021


def test_explicit_year_wins_over_releases_and_notes_are_not_read() -> None:
    assert _year({"framework": "DeepSpeed 0.5 (2023 fork)"}) == 2023
    row = {"framework": "DeepSpeed 0.6", "notes": "transcribed 2026-01-05", "verification": "2026"}
    assert _year(row) == 2022


def test_tables_are_monotone_in_version() -> None:
    for table in (
        releases.DEEPSPEED,
        releases.MEGATRON_CORE,
        releases.NEMO,
        releases.TRANSFORMER_ENGINE,
        releases.MEGATRON_BRIDGE,
        releases.PYTORCH,
    ):
        dates = [table[v] for v in sorted(table)]
        assert dates == sorted(dates)


@pytest.mark.parametrize(
    ("framework", "minimum", "expected"),
    [
        ("Megatron-Core 0.12", (0, 12), True),
        ("Megatron-Core 0.12", (0, 13), False),
        ("MCore 0.13", (0, 13), True),
        ("Megatron-Core core_v0.14.0", (0, 13), True),
        ("megatron-core==0.13.0", (0, 13), True),
        ("Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1", (0, 13), True),
        ("Megatron Bridge", (0, 14), True),
        ("Megatron Bridge", (0, 15), False),
        ("NeMo 25.07", (0, 13), True),
        ("NeMo 25.02", (0, 12), False),
        ("TorchTitan", (0, 1), False),
    ],
)
def test_megatron_core_at_least_reads_core_bridge_and_nemo_containers(
    framework, minimum, expected
) -> None:
    """The one release check the optimizer features share (BF16 moments from Core 0.13, CPU
    offload from 0.12): a named Core release, Bridge as Core 0.14, NeMo 25.07 as Core 0.13."""
    from starfabric.astral.seer.releases import megatron_core_at_least

    assert megatron_core_at_least(framework, minimum) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Megatron-Core v0.9", (0, 9)),
        ("Megatron-Bridge 0.4.2 / Megatron-Core 0.17.1 (NeMo 26.04.01 image)", (0, 17)),
        ("megatron core r0.12", (0, 12)),
        ("MCore 0.13", (0, 13)),
        ("core_v0.11.0", (0, 11)),
        ("Megatron-LM (NeMo 25.02)", None),
        ("score_v1.2", None),
        (None, None),
    ],
)
def test_named_megatron_core_reads_the_release_a_cell_names(text, expected) -> None:
    """The one reader of a named Megatron-Core version that the FLOP-formula and the MoE-release
    checks share: the release's (major, minor), never a word that merely ends in 'core_'."""
    assert releases.named_megatron_core(text) == expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Megatron-LM (2022)", 2022),
        ("DeepSpeed 0.5, 2021 and 2022", 2021),
        ("nightly 2024-12", 2024),
        ("run 120250 steps", None),
        ("Megatron-LM", None),
        (None, None),
    ],
)
def test_stated_year_reads_the_first_whole_word_year(text, expected) -> None:
    """The bare year the attention-generation and Megatron-Core-release bounds both read: a
    whole word only, never digits inside a longer number."""
    assert releases.stated_year(text) == expected
