"""Release dates of the training frameworks a published row's framework cell may name.

A row whose framework cell names a release ("DeepSpeed v0.6 + Megatron-LM", "Megatron-Core
r0.8.0", "TE 1.11") but no year ran software at least as new as the newest release it names;
`release_date` reads that (year, month). Each table maps (major, minor) to the (year, month) of
the X.Y.0 release, read from the project's own repository:

- DeepSpeed: date of the commit of tag vX.Y.0 (github.com/microsoft/DeepSpeed, `git log -1
  --format=%cs vX.Y.0`).
- Megatron-Core: commit date of tag core_vX.Y.0 / core_rX.Y.0 (github.com/NVIDIA/Megatron-LM);
  0.1-0.3 were not tagged: the dates the MINOR field of megatron/core/package_info.py was set
  (commits 9cdc714939 2023-05-11, c74cb684a7 2023-06-15, b147dbecb6 2023-08-31).
- Megatron-LM's own tags v1.0, v2.0, v2.5, v2.6 and the YY.MM tags 23.04, 23.06 (same repo).
- NeMo (framework, not the YY.MM container): commit date of tag vX.Y.0
  (github.com/NVIDIA/NeMo).
- Transformer Engine: commit date of tag vX.Y (github.com/NVIDIA/TransformerEngine).
- Megatron-Bridge: commit date of tag vX.Y.0 (github.com/NVIDIA-NeMo/Megatron-Bridge).
- PyTorch: "PyTorch Release Date" column of the pytorch/pytorch wiki page "PyTorch Versions"
  (revision of 2024-04-24, which lists up to 2.3.0).

A version not in its table (newer than the snapshot read, or a typo) gives no date: the caller
falls back to its other evidence.
"""

from __future__ import annotations

import re

YearMonth = tuple[int, int]

TE_NAMES = r"\b(?:transformer[ _-]?engine|TE)"
"""TransformerEngine's names in a cell: "Transformer Engine", "TransformerEngine",
"transformer_engine" (the Python package), "TE"."""
TE_RELEASE = re.compile(TE_NAMES + r"(?:\s+(?:release|version))?\s*v?(\d+)\.(\d+)", re.I)
"""A TE release as a cell states it: "TE 2.3+", "TE v2.6", "TransformerEngine v2.6",
"transformer_engine 2.9", "Transformer Engine release 2.9", "Transformer Engine 2.9-based"
(te_mxfp8_host and te_cp_step read it; groups: major, minor)."""

DEEPSPEED: dict[tuple[int, int], YearMonth] = {
    (0, 1): (2020, 5), (0, 2): (2020, 6), (0, 3): (2020, 9), (0, 4): (2021, 6),
    (0, 5): (2021, 8), (0, 6): (2022, 3), (0, 7): (2022, 8), (0, 8): (2023, 1),
    (0, 9): (2023, 4), (0, 10): (2023, 7), (0, 11): (2023, 10), (0, 12): (2023, 11),
    (0, 13): (2024, 1), (0, 14): (2024, 3), (0, 15): (2024, 8), (0, 16): (2024, 11),
}  # fmt: skip
"""DeepSpeed vX.Y.0 tag dates (v0.5.0 2021-08-17, v0.6.0 2022-03-07, v0.8.0 2023-01-17...)."""

MEGATRON_CORE: dict[tuple[int, int], YearMonth] = {
    (0, 1): (2023, 5), (0, 2): (2023, 6), (0, 3): (2023, 8), (0, 4): (2023, 12),
    (0, 5): (2024, 2), (0, 6): (2024, 4), (0, 7): (2024, 5), (0, 8): (2024, 8),
    (0, 9): (2024, 10), (0, 10): (2025, 2), (0, 11): (2025, 3), (0, 12): (2025, 5),
    (0, 13): (2025, 7), (0, 14): (2025, 10), (0, 15): (2025, 12), (0, 16): (2026, 2),
    (0, 17): (2026, 4), (0, 18): (2026, 6), (0, 19): (2026, 8),
}  # fmt: skip
"""Megatron-Core core_vX.Y.0 / core_rX.Y.0 commit dates (core_v0.4.0 2023-12-11, ...)."""

MEGATRON_LM: dict[tuple[int, int], YearMonth] = {
    (1, 0): (2020, 4), (2, 0): (2021, 1), (2, 5): (2021, 8), (2, 6): (2021, 8),
    (23, 4): (2023, 5), (23, 6): (2023, 6),
}  # fmt: skip
"""Megatron-LM's own release tags (v2.5 2021-08-10; 23.04 tagged 2023-05-11)."""

NEMO: dict[tuple[int, int], YearMonth] = {
    (1, 0): (2021, 6), (1, 1): (2021, 7), (1, 2): (2021, 7), (1, 3): (2021, 8),
    (1, 4): (2021, 9), (1, 5): (2021, 11), (1, 6): (2022, 1), (1, 7): (2022, 3),
    (1, 8): (2022, 4), (1, 9): (2022, 6), (1, 10): (2022, 7), (1, 11): (2022, 9),
    (1, 12): (2022, 10), (1, 13): (2022, 12), (1, 14): (2022, 12), (1, 15): (2023, 2),
    (1, 16): (2023, 3), (1, 17): (2023, 4), (1, 18): (2023, 5), (1, 19): (2023, 6),
    (1, 20): (2023, 8), (1, 21): (2023, 10), (1, 22): (2024, 1), (1, 23): (2024, 2),
    (2, 0): (2024, 11), (2, 1): (2025, 1), (2, 2): (2025, 3), (2, 3): (2025, 5),
    (2, 4): (2025, 7),
}  # fmt: skip
"""NeMo framework vX.Y.0 tag dates (v1.0.0 2021-06-03, v2.0.0 2024-11-14, ...)."""

TRANSFORMER_ENGINE: dict[tuple[int, int], YearMonth] = {
    (0, 1): (2022, 9), (0, 2): (2022, 10), (0, 3): (2022, 11), (0, 4): (2022, 12),
    (0, 5): (2023, 1), (0, 6): (2023, 3), (0, 7): (2023, 4), (0, 8): (2023, 4),
    (0, 9): (2023, 5), (0, 10): (2023, 6), (0, 11): (2023, 7), (0, 12): (2023, 8),
    (0, 13): (2023, 10), (1, 0): (2023, 10), (1, 1): (2023, 11), (1, 2): (2023, 12),
    (1, 3): (2024, 2), (1, 4): (2024, 3), (1, 5): (2024, 4), (1, 6): (2024, 5),
    (1, 7): (2024, 5), (1, 8): (2024, 7), (1, 9): (2024, 8), (1, 10): (2024, 9),
    (1, 11): (2024, 10), (1, 12): (2024, 11), (1, 13): (2024, 12), (2, 0): (2025, 2),
    (2, 1): (2025, 3), (2, 2): (2025, 4), (2, 3): (2025, 4), (2, 4): (2025, 6),
    (2, 5): (2025, 6), (2, 6): (2025, 7), (2, 7): (2025, 8), (2, 8): (2025, 10),
    (2, 9): (2025, 10), (2, 10): (2025, 11), (2, 11): (2025, 12), (2, 12): (2026, 1),
    (2, 13): (2026, 2), (2, 14): (2026, 4), (2, 15): (2026, 5), (2, 16): (2026, 5),
    (2, 17): (2026, 7), (2, 18): (2026, 8),
}  # fmt: skip
"""Transformer Engine vX.Y tag dates (v0.1 2022-09-28, v1.0 2023-10-31, v2.0 2025-02-12...)."""

MEGATRON_BRIDGE: dict[tuple[int, int], YearMonth] = {
    (0, 2): (2025, 11), (0, 3): (2026, 2), (0, 4): (2026, 4), (0, 5): (2026, 6),
    (0, 6): (2026, 8),
}  # fmt: skip
"""Megatron-Bridge vX.Y.0 tag dates (v0.2.0 2025-11-26, v0.4.0 2026-04-16, ...)."""

PYTORCH: dict[tuple[int, int], YearMonth] = {
    (1, 4): (2020, 1), (1, 5): (2020, 4), (1, 6): (2020, 7), (1, 7): (2020, 10),
    (1, 8): (2021, 3), (1, 9): (2021, 6), (1, 10): (2021, 10), (1, 11): (2022, 2),
    (1, 12): (2022, 6), (1, 13): (2022, 10), (2, 0): (2023, 3), (2, 1): (2023, 10),
    (2, 2): (2024, 1), (2, 3): (2024, 4),
}  # fmt: skip
"""PyTorch X.Y.0 release dates (wiki "PyTorch Versions": 1.11.0 02/10/2022, 2.0.0 03/15/2023)."""

_V = r"\s*(?:==|v|version)?\s*(\d+)\.(\d+)"
DEEPSPEED_RELEASE = re.compile(r"deep[- ]?speed" + _V, re.I)
"""A DeepSpeed release as a cell states it: "DeepSpeed v0.6", "deepspeed==0.9.5",
"DeepSpeed version 0.5" (groups: major, minor)."""
_PATTERNS: tuple[tuple[re.Pattern[str], dict[tuple[int, int], YearMonth]], ...] = (
    (DEEPSPEED_RELEASE, DEEPSPEED),
    (re.compile(r"(?:megatron[- ]?core|\bmcore|\bcore_)\s*[rv]?(\d+)\.(\d+)", re.I), MEGATRON_CORE),
    (re.compile(r"megatron[- ]?lm" + _V, re.I), MEGATRON_LM),
    (re.compile(r"\bnemo(?:\s*framework)?" + _V, re.I), NEMO),
    (re.compile(r"(?:transformer[- ]?engine|\bte)" + _V, re.I), TRANSFORMER_ENGINE),
    (re.compile(r"megatron[- ]?bridge" + _V, re.I), MEGATRON_BRIDGE),
    (re.compile(r"(?:pytorch|\btorch)" + _V, re.I), PYTORCH),
)

_DATE = re.compile(r"\b(20\d\d)-(0[1-9]|1[0-2])(?:-(?:0[1-9]|[12]\d|3[01]))?\b")
"""A YYYY-MM or YYYY-MM-DD date ("2025-10"); "2025-26" is a span of years, not a month."""


def named_releases(framework: str) -> list[YearMonth]:
    """(year, month) of every release in the tables that a framework cell names."""
    found = []
    for pattern, table in _PATTERNS:
        for m in pattern.finditer(framework):
            when = table.get((int(m.group(1)), int(m.group(2))))
            if when is not None:
                found.append(when)
    return found


_NEMO_CONTAINER_TAG = re.compile(r"nemo\s*(\d\d)\.(0[1-9]|1[0-2])\b", re.I)
"""A NeMo container tag, YY.MM ("NeMo 24.07"); framework versions (1.x, 2.x) are `NEMO`."""


def stated_month(framework: str | None) -> YearMonth | None:
    """The first YYYY-MM(-DD) date a framework cell writes ("nightly 2024-12"), else None."""
    m = _DATE.search(framework or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


_YEAR = re.compile(r"\b(20\d\d)\b")


def stated_year(text: str | None) -> int | None:
    """The first bare year (20YY, a whole word) a cell writes ("Megatron-LM (2022)"), else None."""
    m = _YEAR.search(text or "")
    return int(m.group(1)) if m else None


def release_date(framework: str) -> YearMonth | None:
    """The newest (year, month) a framework cell dates its stack to: a YYYY-MM(-DD) date it
    writes, a NeMo container tag ("NeMo 24.07"), or the newest release it names (a stack is
    at least as new as its newest component); None when it names none of them."""
    dates = [(int(m.group(1)), int(m.group(2))) for m in _DATE.finditer(framework)]
    dates += [(2000 + int(m.group(1)), int(m.group(2)))
              for m in _NEMO_CONTAINER_TAG.finditer(framework) if int(m.group(1)) >= 20]  # fmt: skip
    dates += named_releases(framework)
    return max(dates) if dates else None


_MCORE_SEP = r"\s*(?:==\s*|\(\s*|release\s+|version\s+|[-_]\s*)?"
"""Between a Megatron-Core name and its version: "megatron-core==0.13.0", "MCore (v0.12)",
"Megatron-Core release 0.9", "mcore-0.12"."""
_MCORE_VERSION = re.compile(
    r"(?:megatron[-_ ]?core|\bmcore|\bcore_)" + _MCORE_SEP + r"[rv]?(\d+)\.(\d+)", re.I
)


def named_deepspeed(text: str | None) -> tuple[int, int] | None:
    """The DeepSpeed release a cell names by version ("DeepSpeed v0.6", "deepspeed==0.9.5"),
    as (major, minor); None when it names none."""
    m = DEEPSPEED_RELEASE.search(text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def named_megatron_core(text: str | None) -> tuple[int, int] | None:
    """The Megatron-Core release a cell names by version ("Megatron-Core v0.9", "mcore 0.12",
    "core_r0.13"), as (major, minor); None when it names none."""
    m = _MCORE_VERSION.search(text or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


_NEMO_CONTAINER = re.compile(r"nemo\s*(?:framework\s*)?(\d\d)\.(\d\d)", re.I)
BRIDGE_MIN_MCORE = (0, 14)
"""Megatron-Bridge's first releases are built on Megatron Core 0.14 (its pyproject pin)."""
NEMO_CONTAINER_MCORE = ((25, 7), (0, 13))
"""The first NeMo container (YY.MM) built on Megatron Core 0.13, and that release; earlier
containers are not assumed to carry any later feature."""


def megatron_core_at_least(framework: str, minimum: tuple[int, int]) -> bool:
    """True when the stack a framework cell names runs Megatron Core >= `minimum`: the Core
    release named by version, any Megatron-Bridge (BRIDGE_MIN_MCORE), or a NeMo container
    from NEMO_CONTAINER_MCORE on; False when it names none of them."""
    named = named_megatron_core(framework)
    if named is not None:
        return named >= minimum
    if re.search(r"megatron[- ]bridge", framework, re.I):
        return minimum <= BRIDGE_MIN_MCORE
    n = _NEMO_CONTAINER.search(framework)
    tag, core = NEMO_CONTAINER_MCORE
    return n is not None and (int(n.group(1)), int(n.group(2))) >= tag and core >= minimum
