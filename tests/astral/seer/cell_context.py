"""Cell text shared by the reader property tests (test_reader_audit.py, test_overlap_words.py).

A held-out row's transcriber surrounds a setting with other clauses and may negate it; these
are the context clauses (taken from the development rows' cells), the negations, and the
spellings of the EP and TP overlap settings that both the setting audit (issue 32) and the
overlap reader's own tests (seer/overlap_words.py, session 22) feed to the readers, kept in one
place so the two suites test the same phrasings.
"""

from __future__ import annotations

PREFIXES = ("", "Megatron-Core 0.14 (2025); ", "dispatcher DeepEP; ", "mock data, random init, ")
"""Clauses before a setting (from the development rows' cells)."""

SUFFIXES = ("", "; GA 128", " (source Table 3)", "; mean of 8 steady iterations")
"""Clauses after a setting (from the development rows' cells)."""

NEGATE_BEFORE = ("no ", "not ", "without ", "without any ", "never ", "not using ", "w/o ")
"""Words that negate the setting they precede."""

NEGATE_AFTER = (" off", " disabled", "=0", "=false", ": false", " = False", " (off)")
"""Words that negate the setting they follow."""

EP_OVERLAPS = (
    "EP a2a overlap",
    "EP overlap",
    "--overlap-moe-expert-parallel-comm",
    "overlap_moe_expert_parallel_comm",
    "moe_a2a_overlap",
    "A2A_OVERLAP",
    "EP all-to-all overlap",
    "expert-parallel comm overlap",
    "overlapped EP all-to-all",
    "overlap of EP communication",
)
"""Spellings of Megatron-Core's EP all-to-all overlap (--overlap-moe-expert-parallel-comm)."""

TP_OVERLAPS = (
    "--tp-comm-overlap",
    "TP comm overlap",
    "TP overlap",
    "tp_comm_overlap",
    "TP communication overlap",
    "AsyncTP",
)
"""Spellings of TP communication overlap (Megatron-Core --tp-comm-overlap, torchtitan AsyncTP)."""
