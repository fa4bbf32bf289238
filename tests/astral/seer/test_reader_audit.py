"""Adversarial audit of the setting readers (issue 32): how another transcriber writes a cell.

Each reader is given the spellings a held-out row may use for the same setting, and the same
words negated ("no", "not", "without", "disabled", "off", "=0", "false"); hypothesis combines
them with surrounding text from the development rows. The last tests rewrite real rows' cells
and check that the row is read as the same run (or, negated, as the opposite one).
"""

from __future__ import annotations

import csv
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from astral.seer.cell_context import (
    EP_OVERLAPS,
    NEGATE_AFTER,
    NEGATE_BEFORE,
    PREFIXES,
    SUFFIXES,
    TP_OVERLAPS,
)
from starfabric.astral.seer import (
    cells,
    deepep_sm_budget,
    flash_generation,
    goodput,
    mcore_release,
    releases,
    torchtitan_eager,
    tuned_at,
    ulysses,
)
from starfabric.astral.seer.efa import efa_bus_fraction
from starfabric.astral.seer.efa_alltoall import efa_alltoall_alpha
from starfabric.astral.seer.overlap_words import DELAY_WGRAD, OverlapKind, read_overlap
from starfabric.astral.seer.statements import stated
from starfabric.astral.seer.validate import row_setup, states_forced_balance
from starfabric.errors import StarfabricError

DATA = Path(__file__).resolve().parents[2] / "data" / "published_runs"


def _cases(
    affirmed: tuple[str, ...], plain_only: tuple[str, ...] = ()
) -> st.SearchStrategy[tuple[str, bool]]:
    """(cell text, whether it states the setting): an affirmed spelling, or one negated before
    or after, between context from the development rows (`plain_only`: spellings that carry a
    value or several words, only affirmed or negated before)."""
    plain = st.sampled_from(affirmed + plain_only).map(lambda a: (a, True))
    before = st.tuples(st.sampled_from(NEGATE_BEFORE), st.sampled_from(affirmed + plain_only)).map(
        lambda t: (t[0] + t[1], False)
    )
    after = st.tuples(st.sampled_from(affirmed), st.sampled_from(NEGATE_AFTER)).map(
        lambda t: (t[0] + t[1], False)
    )
    return st.tuples(
        st.sampled_from(PREFIXES), st.one_of(plain, before, after), st.sampled_from(SUFFIXES)
    ).map(lambda t: (t[0] + t[1][0] + t[2], t[1][1]))


FORCED = (
    "forced load balancing",
    "forced balance",
    "force-load-balancing",
    "--moe-router-force-load-balancing",
    "moe_router_force_load_balancing",
    "force load balance",
    "load balancing: forced",
)
ROUND_ROBIN = ("round-robin routing", "round robin routing", "deterministic round-robin routing",
               "round-robin expert routing", "routing: round-robin")  # fmt: skip
ULYSSES = ("Ulysses", "DeepSpeed-Ulysses", "Ulysses SP", "Ulysses-SP")
DELAYS = ("--delay-wgrad-compute", "delay_wgrad_compute", "delay-wgrad", "delayed wgrad")


@settings(max_examples=200, deadline=None)
@given(_cases(FORCED + ROUND_ROBIN))
def test_forced_balance_phrasings(case: tuple[str, bool]) -> None:
    text, want = case
    assert states_forced_balance(text) is want, text


@settings(max_examples=200, deadline=None)
@given(_cases(EP_OVERLAPS, ("A2A_OVERLAP=1", "EP overlap enabled", "EP a2a overlap with 1F1B")))
def test_ep_overlap_phrasings(case: tuple[str, bool]) -> None:
    text, want = case
    assert bool(read_overlap(text).on(OverlapKind.EP_A2A)) is want, text


@settings(max_examples=150, deadline=None)
@given(_cases(ULYSSES, ("Ulysses-style sequence parallel", "Ulysses sequence parallelism")))
def test_ulysses_phrasings(case: tuple[str, bool]) -> None:
    text, want = case
    assert ulysses.names_ulysses(text) is want, text


@settings(max_examples=150, deadline=None)
@given(_cases(DELAYS))
def test_delay_wgrad_phrasings(case: tuple[str, bool]) -> None:
    text, want = case
    assert bool(stated(DELAY_WGRAD, text)) is want, text


@settings(max_examples=150, deadline=None)
@given(_cases(TP_OVERLAPS))
def test_tp_overlap_phrasings(case: tuple[str, bool]) -> None:
    text, want = case
    assert bool(read_overlap(text).on(OverlapKind.TP_COMM)) is want, text


def test_statements_that_are_not_negations() -> None:
    """Words near a mention that do not switch it off."""
    assert states_forced_balance("forced load balancing (no token dropping)")
    assert states_forced_balance("no token dropping, forced load balancing")
    assert ulysses.names_ulysses("sequence parallel 8 (Ulysses all-to-all on heads, not ring)")
    ep, tp = OverlapKind.EP_A2A, OverlapKind.TP_COMM
    assert read_overlap("EP all-to-all overlapped with 1F1B (delay_wgrad off)").on(ep)
    assert not stated(DELAY_WGRAD, "EP all-to-all overlapped with 1F1B (delay_wgrad off)")
    assert read_overlap("EP all-to-all not overlapped (dispatcher-isolation)").on(ep) is False
    assert not read_overlap("Megatron-Core (MTP; EP a2a overlap)").on(tp)  # 'tp' inside MTP
    assert read_overlap("Megatron-Core r0.8.0 (DP/TP/PP comm overlap on)").on(tp)


TT_2024 = "TorchTitan (PyTorch nightly 2024-12, FSDP2{})"


@pytest.mark.parametrize(
    ("inside", "notes", "eager"),
    [
        (", eager: no torch.compile", "", True),
        (", eager mode", "", True),
        (", torch.compile off", "", True),
        (", torch.compile disabled", "", True),
        (", without torch.compile", "", True),
        (", compile = false", "", True),
        (", torch.compile", "", False),
        (", torch.compile on", "", False),
        (", torch.compile (not eager)", "", False),
        ("", "FSDP (eager, BF16)", True),
        ("", "FSDP + torch.compile + Float8", False),
        ("", "", False),
    ],
)
def test_torchtitan_eager_phrasings(inside: str, notes: str, eager: bool) -> None:
    assert torchtitan_eager.runs_eager(TT_2024.format(inside), notes) is eager


@pytest.mark.parametrize(
    ("framework", "kernel"),
    [
        ("Megatron-LM (2022, FlashAttention)", "fa1"),
        ("Megatron-LM (2022, FA1)", "fa1"),
        ("Megatron-LM (2023-09, FA1)", "fa1"),  # versioned: decides by itself
        ("metaseq (flash-attn 1.0.4)", "fa1"),
        ("metaseq (flash_attn==1.0.4)", "fa1"),
        ("metaseq (2023-03, xFormers memory-efficient attention)", "xformers"),
        ("metaseq (2023-03, Triton FlashAttention)", "triton"),
        ("Megatron-LM (2022, without FlashAttention)", None),
        ("Megatron-LM (2022, no xformers, FlashAttention)", "fa1"),
        ("Megatron-LM (2023-03, FA2)", None),
        ("Megatron-LM (2023-03, flash_attn 2.0)", None),
    ],
)
def test_flash_generation_phrasings(framework: str, kernel: str | None) -> None:
    assert flash_generation.pre_fa2_kernel(framework) == kernel


def test_negated_flash_keeps_unfused_attention() -> None:
    assert not flash_generation.names_flash("Megatron-LM (2023, without FlashAttention)")
    assert flash_generation.names_flash("Megatron-LM (2023, --use-flash-attn)")


@pytest.mark.parametrize(
    ("framework", "notes", "sms"),
    [
        ("TorchTitan (DeepEP, num_sms 128)", "", 128),
        ("TorchTitan (DeepEP, num-sms=24)", "", 24),
        ("Megatron-Core (DeepEP --num-sms 24)", "", 24),
        ("DeepEP with 24 SMs", "", 24),
        ("Megatron-Core (DeepEP)", "DeepEP num_sms: 24", 24),
        ("Megatron-Core (DeepEP)", "20 of 132 SMs for communication", None),
        ("Megatron-Core (DeepEP)", "H800 has 132 SMs; DeepEP default budget", None),
        ("TorchTitan DeepEP branch (128 SMs)", "", 128),
        ("Megatron-Core (alltoall)", "num_sms 24", None),
    ],
)
def test_deepep_sm_budget_phrasings(framework: str, notes: str, sms: int | None) -> None:
    assert deepep_sm_budget.stated_num_sms(framework, notes) == sms


@pytest.mark.parametrize(
    ("ic", "efa"),
    [
        ("AWS EFA", True),
        ("3,200 Gbps EFAv2 (32 x 100G)", True),
        ("Elastic Fabric Adapter v3", True),
        ("efa (p5.48xlarge)", True),
        ("InfiniBand NDR (not EFA)", False),
        ("InfiniBand NDR", False),
    ],
)
def test_efa_phrasings(ic: str, efa: bool) -> None:
    assert (efa_alltoall_alpha(ic, "H100") is not None) is efa
    assert (efa_bus_fraction(ic, "A100") is not None) is efa


@pytest.mark.parametrize(
    "text",
    ["4/4/.../4/1", "PP layout 4,4,4,...,1", "[4, 4, 4, ..., 4, 1]", "layers 4;4;...;4;1"],
)
def test_layer_split_phrasings(text: str) -> None:
    assert cells.layer_split(text, 61, 16) == (4,) * 15 + (1,)


def test_layer_split_is_not_a_thousands_number() -> None:
    assert cells.layer_split("1,024 GPUs", 1024, 2) is None


@pytest.mark.parametrize(
    ("notes", "scale"),
    [
        ("as tuned at 128 GPUs, global batch 256", (128, 256)),
        ("tuned at 1,024 GPUs (GBS 512)", (1024, 512)),
        ("settings tuned at 64 GPUs with global batch size 128", (64, 128)),
        ("not as tuned at 128 GPUs, global batch 256", None),
        ("parallel mapping as tuned at 128 GPUs (Table 3)", (128, 1024)),  # the row's batch
    ],
)
def test_tuned_at_phrasings(notes: str, scale: tuple[int, int] | None) -> None:
    assert tuned_at.tuning_scale(notes, own_batch=1024) == scale


@pytest.mark.parametrize(
    ("metric", "notes", "production"),
    [
        ("GPU-hours", "", True),
        ("2,048 GPU-hours", "", True),
        ("GPU hrs per 1T tokens", "", True),
        ("tokens/s/GPU", "production average (restarts included)", True),
        ("tokens/s/GPU", "steady state; not a production average", False),
        ("tokens/s/GPU", "no production average: steady-state benchmark", False),
        ("tokens/s/GPU", "steady state (est. 84 days)", False),
    ],
)
def test_production_average_phrasings(metric: str, notes: str, production: bool) -> None:
    row = {"metric_primary": metric, "notes": notes, "derivation_note": ""}
    assert goodput.states_production_average(row) is production


@pytest.mark.parametrize(
    ("framework", "release"),
    [
        ("Megatron-Core v0.9", (0, 9)),
        ("megatron-core==0.13.0", (0, 13)),
        ("MCore (v0.12)", (0, 12)),
        ("Megatron-Core release 0.11", (0, 11)),
        ("Megatron-LM core_r0.9.0", (0, 9)),
        ("Megatron-Core 5D parallelism (2025)", None),
    ],
)
def test_megatron_core_version_phrasings(framework: str, release: tuple[int, int] | None) -> None:
    assert releases.named_megatron_core(framework) == release
    if release is not None:
        assert mcore_release.megatron_core_release(framework, "") == release


def _row(row_id: str) -> dict[str, str]:
    for name in ("development_runs.csv", "development_runs_2.csv"):
        with (DATA / name).open(newline="") as fh:
            for row in csv.DictReader(fh):
                if row["row_id"] == row_id:
                    return row
    raise KeyError(row_id)


@pytest.mark.parametrize(
    ("framework_add", "notes", "overlap"),
    [
        ("", None, True),  # as transcribed: stated in the notes only
        ("; --overlap-moe-expert-parallel-comm", "", True),
        ("; moe_a2a_overlap: true", "", True),
        ("; EP overlap enabled", "", True),
        ("; A2A_OVERLAP=0", "", False),
        ("; moe_a2a_overlap: false", "", False),
        ("", "EP all-to-all not overlapped (dispatcher-isolation regime)", False),
    ],
)
def test_aws_overlap_row_reads_the_overlap(
    framework_add: str, notes: str | None, overlap: bool
) -> None:
    """AWSQ30-EP16-MB4-OV states the EP overlap only in its notes; other spellings of the same
    statement, in either cell, read the same, and negated ones read it off."""
    row = _row("AWSQ30-EP16-MB4-OV")
    new = dict(row, framework=row["framework"] + framework_add)
    if notes is not None:
        new["notes"] = notes
    ex = row_setup(new).execution
    assert ex["ep_comm_overlap"] is overlap
    assert ex["ep_delay_wgrad"] is False  # "delay_wgrad off" in the notes, or not stated


def test_negated_forced_balance_in_a_real_row() -> None:
    row = _row("MZQ3-LC1F")
    assert row_setup(row).execution.get("moe_load_balance") == "forced"
    for notes in (
        "dispatcher DeepEP; routing without forced load balancing",
        "dispatcher DeepEP; moe_router_force_load_balancing: false",
        "dispatcher DeepEP; forced load balancing disabled",
    ):
        ex = row_setup(dict(row, notes=notes)).execution
        assert ex.get("moe_load_balance") != "forced", notes


@pytest.mark.parametrize(
    ("framework", "dp", "ep"),
    [
        ("Megatron-Core (no overlap)", False, False),
        ("Megatron-Core 0.9, without overlap", False, False),
        ("Megatron-Core (EP a2a: no overlap)", True, False),  # only the EP overlap is off
        ("Megatron-Core (2025; TP no overlap; EP a2a overlap)", True, True),
    ],
)
def test_no_overlap_names_its_kind(framework: str, dp: bool, ep: bool) -> None:
    row = _row("MZQ3-LC1F")
    ex = row_setup(dict(row, framework=framework, notes="")).execution
    assert ex["overlap_grad_reduce"] is dp
    assert ex["ep_comm_overlap"] is ep


# A negated statement of a setting, and the execution key it would turn on if misread.
NEGATED_NOTES = (
    ("no forced load balancing", "moe_load_balance"),
    ("moe_router_force_load_balancing: false", "moe_load_balance"),
    ("routing not round-robin", "moe_load_balance"),
    ("EP all-to-all not overlapped", "ep_comm_overlap"),
    ("A2A_OVERLAP=0", "ep_comm_overlap"),
    ("without --overlap-moe-expert-parallel-comm", "ep_comm_overlap"),
    ("delay_wgrad_compute: false", "ep_delay_wgrad"),
    ("ring attention, not Ulysses", "cp_algorithm"),
    ("no TP comm overlap", "tp_comm_overlap"),
)


def _off(ex: dict[str, object], key: str) -> bool:
    return ex.get(key) in (None, False, "ring", "none", "dropless", "top_k", "aux_loss")


@cache
def _real_rows() -> tuple[tuple[dict[str, str], object], ...]:
    out = []
    for name in ("development_runs.csv", "development_runs_2.csv"):
        with (DATA / name).open(newline="") as fh:
            for row in csv.DictReader(fh):
                try:
                    out.append((row, row_setup(row)))
                except StarfabricError:
                    continue  # refused as written
    return tuple(out)


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_negated_statements_leave_a_real_row_unchanged(data: st.DataObject) -> None:
    """Any development row, with negated statements of settings it does not use added to its
    framework or notes cell, is read as the same run."""
    rows = _real_rows()
    row, setup = rows[data.draw(st.integers(0, len(rows) - 1))]
    ex = setup.execution  # type: ignore[attr-defined]
    usable = [n for n, key in NEGATED_NOTES if _off(ex, key)]
    if not usable:
        return
    added = data.draw(st.lists(st.sampled_from(usable), min_size=1, max_size=3, unique=True))
    cell = data.draw(st.sampled_from(("notes", "framework")))
    new = dict(row, **{cell: (row.get(cell) or "") + "; " + "; ".join(added)})
    got = row_setup(new)
    assert got.execution == ex, f"{row['row_id']}: {cell} + {added}"
    want = setup.options  # type: ignore[attr-defined]
    if "no TP comm overlap" in added:
        # Stated off, TP overlap is no longer one of the settings a tuning user tries.
        want = [(c, {k: v for k, v in o.items() if k != "tp_comm_overlap"}) for c, o in want]
    assert got.options == want, f"{row['row_id']}: {cell} + {added}"


@pytest.mark.parametrize(
    "citation",
    ["arXiv:2504.14960", "arXiv 2504.14960", "https://arxiv.org/abs/2504.14960v2",
     "Liu et al., arxiv.org/pdf/2504.14960"],
)  # fmt: skip
def test_arxiv_month_spellings(citation: str) -> None:
    assert mcore_release.published_month(citation) == (2025, 4)
    assert flash_generation.run_month("Megatron-LM", citation) == (2025, 4)


def test_forced_balance_is_read_from_the_framework_cell_too() -> None:
    row = _row("MZQ3-LC1F")
    new = dict(
        row,
        notes="dispatcher DeepEP",
        framework=row["framework"] + "; --moe-router-force-load-balancing",
    )
    assert row_setup(new).execution.get("moe_load_balance") == "forced"
    assert row_setup(dict(row, notes="dispatcher DeepEP")).execution.get("moe_load_balance") is None
