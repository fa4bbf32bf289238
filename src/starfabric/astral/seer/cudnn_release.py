"""cuDNN fused attention by release: the run's cuDNN release -> a rate multiplier on Seer's
Hopper cuDNN curve (the FlashAttention-3 paper's 2024 curve, which is cuDNN 9.1's own training
benchmark within a few percent: tests/astral/seer/test_cudnn_training_curve.py).

Source: NVIDIA/cudnn-frontend's isolated SDPA training benchmarks on Hopper, BF16, head dim 128,
causal (tests/data/attention/cudnn_training_hopper.csv, read with `git show` from the public
repository): cuDNN 9.1.0 (b740542), 9.4.0 (de355c7, "Updated benchmark numbers with cudnn
9.4.0"), 9.19.1 (df73764, H200). The multiplier of a measured release is its forward and its
backward rate over 9.1.0's, geometric mean over the sequence lengths both runs measured
(4K-32K); every per-length ratio lies within RATIO_SPREAD of it. Between measured releases the
multiplier is interpolated linearly in the minor version; after the last it holds; releases
before 9.1 (and cuDNN 8) get 1.0, as does a run whose release is unknown (today's behaviour).

Only Hopper is covered: Seer's Blackwell curves are Hopper's times a Blackwell/H200 ratio
measured at one release (efficiency.yaml), and cudnn-frontend publishes no Blackwell sweep near
9.1. Its Blackwell sweeps that pair two releases on one GPU through one path
(tests/data/attention/cudnn_training_blackwell.csv: B200 9.10.2 -> 9.13.1, GB200 and GB300
9.18.1 -> 9.19.1) move forward and backward by under BLACKWELL_RELEASE_SPREAD at 4K-32K, so a
Blackwell run keeps 1.0 at every release from 9.10 on.

What a row states (`row_release`): the cuDNN release it names for the run ("cuDNN 9.11",
"CUDNN_VERSION=91002"; a negated ("cuDNN 9.4 not used"), compared or planned mention is not the run's, and a number
outside cuDNN's numbering, "cuDNN 12.4", is no release); else the NeMo Framework container it
names (read the same way), through NEMO_CONTAINER_CUDNN (NVIDIA-NeMo/Megatron-Bridge
docs/releases/software-versions.md, the "cuDNN" row of each container's component table);
else nothing. A container outside that table (the NGC PyTorch and older NeMo containers: their
release notes' component lists are not in the stored pages) and a date alone give no release:
at any date older containers are still in use, and their cuDNN releases differ, so a date never
fixes one release (a date could decide only where every container of that date had the same cuDNN).
"""

from __future__ import annotations

import re

from starfabric.astral.seer.statements import compared_at, negated_at

Release = tuple[int, int]

BASE: Release = (9, 1)
"""The release Seer's Hopper cuDNN curve is (test_cudnn_training_curve.py)."""

MEASURED_HOPPER: dict[Release, tuple[float, float]] = {
    (9, 1): (1.0, 1.0),
    (9, 4): (1.117, 0.994),
    (9, 19): (1.138, 1.140),
}
"""(forward, backward) causal training rate over cuDNN 9.1.0's, geometric mean over 4K-32K:
9.4.0 forward 1.131/1.128/1.108/1.102, backward 0.988/0.997/0.982/1.009 (cudnn-frontend
de355c7 over b740542, same script and shapes); 9.19.1 forward 1.090/1.124/1.147/1.192, backward
1.069/1.167/1.163/1.163 (df73764, H200, 64 query / 8 KV heads, over b740542's 16 heads)."""

RATIO_SPREAD = 0.07
"""Every per-length ratio of MEASURED_HOPPER's source rows lies within 7% of the release's
multiplier (the farthest: 9.19.1's backward at 4K, 1.069 against 1.140; its forward spans
1.090-1.192 around 1.138): one multiplier per release, not a curve by length."""

BLACKWELL_RELEASE_SPREAD = 0.03
"""Largest change of a Blackwell causal training rate between two paired releases at 4K-32K
(GB200 9.18.1 -> 9.19.1 forward at 4K, +2.9%): below what a per-release multiplier would carry."""

_CUDNN = re.compile(
    r"cu[dD][nN][nN](?:-cu\d+)?(?:[\s_]*(?:backend|library|lib|release|version|ver))?"
    r"\s*(?:==|[:=(/])?\s*v?(\d+)\.(\d+)(?!\d*\s*(?:%|x\b|\u00d7))",
    re.I,
)
"""A cuDNN version a cell states: "cuDNN 9.11", "cudnn v9.4.0", "cuDNN==9.19.1", "cuDNN/9.4",
"cuDNN backend 9.10", "cuDNN version: 9.10", "CUDNN_VERSION = 9.10.2", "cuDNN (9.10)",
"nvidia-cudnn-cu12==9.10.2.21" (the library's pip wheel); not a share or a speed-up after the
name ("cuDNN (8.5% faster)", "cuDNN: 9.1x")."""
_CUDNN_CODE = re.compile(
    r"(?:CUDNN_VERSION|cudnn(?:\.version\(\))?)\s*(?:[:=]|==)?\s*(\d{4,6})(?![\d.])", re.I
)
"""cudnn_version.h's CUDNN_VERSION as an environment dump prints it ("CUDNN_VERSION=91002",
"torch.backends.cudnn.version() = 91900", PyTorch's environment line "cudnn 90900"): MAJOR * 10000 + MINOR * 100 + PATCHLEVEL from
cuDNN 9 on, MAJOR * 1000 + MINOR * 100 + PATCHLEVEL for 7.x and 8.x."""

MAJORS = (7, 8, 9)
"""cuDNN's release majors (a "cuDNN 12.4" is a CUDA version in the wrong place)."""
MAX_MINOR = 99
"""CUDNN_VERSION keeps two digits for the minor (cudnn_version.h): no release has a larger one."""
_PLAN = re.compile(
    r"\b(?:will|would|plan(?:s|ned|ning)?|to\s+be|next|upcoming|future)\b\s*"
    r"(?:[\w./:-]+\s+){0,4}$",
    re.I,
)
"""Words before a mention that make it a plan ("planned upgrade to NeMo 26.04", "will move to
cuDNN 9.19"), not what the run used."""
_CLAUSE_END = re.compile(r"[;,()\[\]]|\.(?!\d)|\b(?:but|while|whereas)\b", re.I)
"""Where the clause after a mention ends: a comma, semicolon, bracket, a full stop (not a
version's dot) or a contrasting conjunction ("cuDNN 9.10, FA2 not used": the negation is the
next clause's)."""
_OFF_LATER = re.compile(
    r"(?:\b(?:not|never)|n't)\s+(?:been\s+)?(?:used|enabled)\b|\b(?:unused|disabled)\b", re.I
)
"""A negation later in the mention's clause: "cuDNN 9.4 not used", "cuDNN 9.19 was not
enabled", "cuDNN 9.4 kernels unused", "cuDNN 9.19 backend is disabled"
(statements.negated_at reads only the word right after a mention, or one more)."""


def _off_in_clause(text: str, end: int) -> bool:
    """Whether the clause after a mention ending at text[end] switches it off (_OFF_LATER
    before _CLAUSE_END)."""
    stop = _CLAUSE_END.search(text, end)
    return bool(_OFF_LATER.search(text[end : stop.start() if stop else len(text)]))


def is_release(release: Release) -> bool:
    """Whether (major, minor) is a release cuDNN's numbering has (MAJORS, MAX_MINOR)."""
    return release[0] in MAJORS and 0 <= release[1] <= MAX_MINOR


def _for_the_run(text: str, m: re.Match[str]) -> bool:
    """Whether a mention names what the run used: not negated ("without cuDNN 9.4", "not the
    NeMo 25.09 container", "cuDNN 9.4 not used" within its clause), not a comparison's
    reference ("compared with NeMo 25.09"), not a plan ("will move to cuDNN 9.19")
    (statements.negated_at / compared_at, _off_in_clause)."""
    return not (
        negated_at(text, m.start(), m.end())
        or _off_in_clause(text, m.end())
        or compared_at(text, m.start())
        or _PLAN.search(text[: m.start()])
    )


def _from_code(code: int) -> Release:
    if code >= 90000:
        return (code // 10000, code // 100 % 100)
    return (code // 1000, code // 100 % 10)


def stated_release(*texts: str | None) -> Release | None:
    """The first cuDNN release (major, minor) the texts state for the run ("cuDNN 9.11 MLA
    kernels", "CUDNN_VERSION=91002"), else None. A cuDNN Frontend version ("cuDNN Frontend
    1.7", "cuDNN v1.13 (frontend)") and a number cuDNN never released ("cuDNN 12.4") are no
    release; a negated, compared or planned mention is not the run's."""
    for text in texts:
        t = text or ""
        found = [(m, (int(m.group(1)), int(m.group(2)))) for m in _CUDNN.finditer(t)]
        found += [(m, _from_code(int(m.group(1)))) for m in _CUDNN_CODE.finditer(t)]
        for m, rel in sorted(found, key=lambda f: f[0].start()):
            if is_release(rel) and _for_the_run(t, m):
                return rel
    return None


NEMO_CONTAINER_CUDNN: dict[tuple[int, int], Release] = {
    (25, 9): (9, 11),
    (25, 11): (9, 13),
    (26, 2): (9, 18),
    (26, 4): (9, 20),
}
"""NeMo Framework training container (YY.MM) -> its cuDNN (major, minor), from
NVIDIA-NeMo/Megatron-Bridge docs/releases/software-versions.md (commit 2075a5b8aa): 25.09
cuDNN 9.11.0.98, 25.11 9.13.1.26, 26.02 9.18.0.50, 26.04 9.20.0.48-1. A patch image
(26.04.01) is taken as its month's container (assumption: a patch does not downgrade cuDNN;
every release from 9.19 on gets the same held multiplier anyway)."""

_NEMO_CONTAINER = re.compile(
    r"\bnemo(?:\s*framework)?(?:\s*(?:container|image))?\s*[:\s]\s*(\d\d)\.(0[1-9]|1[0-2])\b(?!\.\d{4})",
    re.I,
)
"""A NeMo container tag a cell names: "NeMo 26.04.01 image", "nemo:25.09", "NeMo Framework
25.11" (NeMo's own 1.x/2.x versions have one-digit majors and are not containers; a date
"25.09.2025" is no tag)."""


def container_release(*texts: str | None) -> tuple[str, Release | None] | None:
    """The first NeMo container a cell names for the run (not negated, compared or planned), as ("YY.MM", its cuDNN or None when the
    container is not in NEMO_CONTAINER_CUDNN); None when no cell names one."""
    for text in texts:
        t = text or ""
        for m in _NEMO_CONTAINER.finditer(t):
            if _for_the_run(t, m):
                tag = (int(m.group(1)), int(m.group(2)))
                return f"{m.group(1)}.{m.group(2)}", NEMO_CONTAINER_CUDNN.get(tag)
    return None


def row_release(*texts: str | None) -> tuple[Release | None, str]:
    """A row's cuDNN release and how it was read: the cuDNN it states, else its NeMo
    container's (NEMO_CONTAINER_CUDNN), else None with the reason (printed as the row's
    assumption)."""
    named = stated_release(*texts)
    if named is not None:
        return named, f"{named[0]}.{named[1]} (stated)"
    container = container_release(*texts)
    if container is not None:
        tag, rel = container
        if rel is not None:
            return rel, f"{rel[0]}.{rel[1]} (NeMo {tag} container)"
        return None, f"unknown (NeMo {tag} container not in the sourced table): cuDNN 9.1 curve"
    return None, "unknown (not stated): Seer's cuDNN 9.1 curve"


def parse_release(text: str) -> Release:
    """A `--cudnn` / `execution.cudnn_release` value ("9.4", "9.19.1") as (major, minor); a
    value that is not MAJOR.MINOR, or a number cuDNN never released (is_release: "12.4" is a
    CUDA version), is a ValueError."""
    m = re.fullmatch(r"\s*v?(\d+)\.(\d+)(?:\.\d+)*\s*", text)
    if not m:
        raise ValueError(f"cuDNN release {text!r} is not MAJOR.MINOR (e.g. 9.4 or 9.19.1)")
    release = (int(m.group(1)), int(m.group(2)))
    if not is_release(release):
        raise ValueError(
            f"cuDNN release {text!r} is not a cuDNN release (majors 7-9, minor at most "
            f"{MAX_MINOR}; a CUDA version such as 12.4 is not cuDNN's)"
        )
    return release


def hopper_multiplier(release: Release | None) -> tuple[float, float]:
    """(forward, backward) rate multiplier on the Hopper cuDNN curve for `release`: measured
    releases exactly, linear in the minor version between two measured ones, the last measured
    value after it; 1.0 before 9.1, for another major version before 9 and when unknown."""
    if release is None or release <= BASE:
        return (1.0, 1.0)
    known = sorted(MEASURED_HOPPER)
    if release >= known[-1]:
        return MEASURED_HOPPER[known[-1]]
    if release[0] != BASE[0]:
        return (1.0, 1.0)
    lo = max(r for r in known if r <= release)
    hi = min(r for r in known if r >= release)
    if lo == hi:
        return MEASURED_HOPPER[lo]
    w = (release[1] - lo[1]) / (hi[1] - lo[1])
    a, b = MEASURED_HOPPER[lo], MEASURED_HOPPER[hi]
    return (a[0] + w * (b[0] - a[0]), a[1] + w * (b[1] - a[1]))


KERNEL_NAMES = {
    "fa2": "FlashAttention-2",
    "fa1": "FlashAttention-1",
    "xformers": "xFormers",
    "triton": "Triton's fused attention",
}
"""How the note names a fused-attention kernel that is not cuDNN's (ExecutionSpec.flash_kernel)."""


def not_applied(release: str | None, kernel: str, hopper: bool, gpu: str) -> str | None:
    """Why a stated release leaves the run's attention as it is, in one line (`seer predict`
    prints it), else None: the same conditions as rate_multiplier's 1.0 for a stated release
    (a kernel that is not cuDNN's; a GPU that is not Hopper)."""
    if not release:
        return None
    head = f"cuDNN {release} release not applied"
    if kernel != "cudnn":
        name = KERNEL_NAMES.get(kernel, kernel)
        return f"{head}: the attention kernel is {kernel}; {name} is not cuDNN"
    if not hopper:
        return (
            f"{head} on {gpu}: the release multiplier is measured on Hopper only "
            "(seer.cudnn_release); Seer's attention curve as is"
        )
    return None


def rate_multiplier(release: str | None, kernel: str, hopper: bool) -> tuple[float, float]:
    """(forward, backward) multiplier of a run's fused attention: cuDNN's kernel on Hopper only
    (FlashAttention-2 and older kernels are not cuDNN's; Blackwell has no per-release data here)."""
    if kernel != "cudnn" or not hopper or not release:
        return (1.0, 1.0)
    return hopper_multiplier(parse_release(release))
