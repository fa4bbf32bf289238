"""seer/statements.py: the negation window before a mention.

"any" or "using" right after a negating word is not one of the two words the window allows
(session 22 review: "without any DP/TP/PP comm overlap" read as overlap on), and the window
still ends after two further words, so a far negation does not switch a setting off.
"""

from __future__ import annotations

import re

import pytest

from starfabric.astral.seer.statements import negated_at, stated, stated_for_run

OVERLAP = re.compile(r"overlap")


def _negated(text: str) -> bool:
    m = OVERLAP.search(text)
    assert m is not None
    return negated_at(text, m.start(), m.end())


@pytest.mark.parametrize(
    "text",
    [
        "without any DP/TP/PP comm overlap",
        "not using DP/TP comm overlap",
        "no any comm overlap",
        "without DP/TP/PP comm overlap",
        "never any overlap",
    ],
)
def test_any_or_using_after_the_negation_is_not_counted(text: str) -> None:
    assert _negated(text)
    assert stated(OVERLAP, text) is False


@pytest.mark.parametrize(
    "text",
    [
        "without any sharded three words comm overlap",
        "no fused kernels; DP comm overlap",
        "without recompute, DP/TP comm overlap",
        "not one but three comm overlap",
        "DP/TP/PP comm overlap",
    ],
)
def test_the_window_still_ends_two_words_after(text: str) -> None:
    assert not _negated(text)
    assert stated(OVERLAP, text) is True


@pytest.mark.parametrize(
    "text",
    [
        "TP comm overlap not used",
        "DP overlap was not enabled",
        "comm overlap (not used)",
        "overlap is not applied",
        "overlap: not set",
    ],
)
def test_not_used_or_not_enabled_right_after_switches_it_off(text: str) -> None:
    """'X not used' / 'X was not enabled' / 'X (not used)' state X off, as 'X off' and
    'X disabled' do ('TP overlap not used' read as on; the FP4 reader took 'FP4 not used' for
    NVFP4 training)."""
    assert _negated(text)
    assert stated(OVERLAP, text) is False


@pytest.mark.parametrize(
    "text",
    ["overlap, not used for the EP", "overlap on; MTP not used", "overlap not-used-word"],
)
def test_not_used_further_on_is_not_a_negation(text: str) -> None:
    assert not _negated(text)


@pytest.mark.parametrize(
    "text",
    [
        "EP a2a overlap disabled / DP overlap enabled",
        "TP comm overlap off | DP overlap on",
        "no recompute / DP overlap",
        "disabled - DP overlap",
    ],
)
def test_a_bare_separator_is_not_a_word_of_the_window(text: str) -> None:
    """A negation before a separator ('/', '|', '-') ends there: 'EP a2a overlap disabled /
    DP overlap enabled' read DP overlap as off (the window counted '/' as one of its words)."""
    dp = text.index("DP overlap")
    assert not negated_at(text, dp, dp + len("DP overlap"))


def test_words_with_slashes_still_count_in_the_window() -> None:
    text = "without DP/TP comm overlap"
    assert _negated(text)


@pytest.mark.parametrize(
    "text",
    [
        'overlap="False"',
        "overlap='0'",
        'overlap: "off"',
        "overlap = 'none'",
    ],
)
def test_a_quoted_off_value_switches_it_off(text: str) -> None:
    """A shell or YAML line quotes its value (`export FP8_DPA="False"`, `fp8_dpa: 'false'`);
    the quote does not make the setting on (FP8_DPA="False" read as FP8 attention on)."""
    assert _negated(text)


@pytest.mark.parametrize("text", ['overlap="True"', "overlap='1'", 'overlap: "on"'])
def test_a_quoted_on_value_stays_on(text: str) -> None:
    assert not _negated(text)


def test_stated_for_run_skips_the_reference_of_a_comparison() -> None:
    fuser = re.compile(r"op fuser")
    assert stated_for_run(fuser, "TE op fuser on") is True
    assert stated_for_run(fuser, "no op fuser") is False
    assert stated_for_run(fuser, "slower than with op fuser") is None  # compared: no mention
    assert stated_for_run(fuser, "vs. op fuser", "op fuser off") is False
    assert stated_for_run(fuser, "nothing said") is None
    # the comparison is read at the pattern's "at" group, where it has one
    scope = re.compile(r"graphs[^;]{0,24}?\b(?P<at>full iteration)\b")
    assert stated_for_run(scope, "graphs per layer rather than full iteration") is None
    assert stated_for_run(scope, "graphs over the full iteration") is True
    # a reader's own way of saying off counts as negated
    unset = re.compile(r"FP8_DPA")
    assert stated_for_run(unset, "FP8_DPA unset", off=lambda t, m: "unset" in t[m.end() :]) is False
