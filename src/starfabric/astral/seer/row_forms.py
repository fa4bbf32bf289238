"""The forms a transcriber gives a row's counts and figures, read as the values they state.

Published tables print a GPU count as "128 nodes x 8 GPUs", "128x8" or "16K", a batch as an
"MBS/GBS 1/1024" pair copied into both batch columns, and a figure with its unit: "850 ms",
"1.2 min", "0.5 PFLOP/s", "357,888 tokens/s (total)". `canonical_counts` rewrites the count and
batch cells into plain numbers before any reader sees the row (the shipped-configuration match
included); `figure_scale` and `states_job_total` say how a published figure's unit converts to
the column's own (seconds, TFLOP/s per GPU, tokens/s per GPU).
"""

from __future__ import annotations

import re

from starfabric.astral.hardware import GPUSpec
from starfabric.astral.seer import cells
from starfabric.errors import ConfigError, DataError

NODES_TIMES_GPUS = re.compile(
    r"(?<![\w.,])(\d+)\s*(?:nodes?|hosts?|servers?|systems?|trays?)?\s*[x×*]\s*(\d+)\b", re.I
)
"""A GPU count written as hosts times GPUs per host ("128 nodes x 8 GPUs", "128x8", "64 × 4");
not a number inside a name ("B200 x 32": not 200 x 32)."""
_HOST_WORD = r"(?:nodes?|hosts?|servers?|systems?|trays?|machines?)\b"
_HOSTS = (
    r"(?:(?:(?!per\b|each\b|a\b|of\b|with\b|x\b)[A-Z][\w-]*\s+){0,2}?" + _HOST_WORD
    + r"|(?:DGX|HGX)(?:[\s-]+[A-Z]\d{3}\w*)?\b)"
)  # fmt: skip
"""What a host count counts: nodes, hosts, servers ("128 nodes", "768 DGX H100 nodes", "512 DGX
A100": a DGX is one 8-GPU host)."""
_PER_HOST = re.compile(
    r"(?<![\w.,])(\d+)\s*(?:GPUs?\s*)?(?:each\b|(?:per|/|a)\s*(?:node|host|server|tray)\b)", re.I
)
"""GPUs per host stated beside the count ("512 (64 nodes, 8 GPUs each)", "1,024 (8 per node)")."""
_GPUS = r"(?:GPUs?\b|accelerators?\b|(?:NVIDIA\s+)?[A-Z]{1,3}\d{2,3}[A-Za-z]*\b(?:\s+GPUs?\b)?)"
"""What a GPU count counts: GPUs, or GPUs by name ("4 GB200", "8 H100 GPUs")."""
_STANDALONE = re.compile(r"(?<![\w.,])(\d[\d,]*(?:\.\d+)?)(\s*[KM](?![A-Za-z]))?")
"""A number standing alone (not the 200 of "B200", the 72 of "NVL72")."""
RACKS = re.compile(
    r"(?<![\w.,])(\d+)\s*(?:[x×*]\s*)?(?:[\w-]+\s+){0,3}?[\w-]*NVL(\d+)[\w-]*\s+racks?\b", re.I
)
"""Racks of an NVLink domain ("4 x GB200 NVL72 racks": 4 x 72 GPUs; an NVL72 rack holds 72)."""
HOSTS_OF = re.compile(
    r"(?<![\w.,])(\d[\d,]*)\s*" + _HOSTS + r"\s*(?:of|with|x|×|\*)\s*(\d+)\s*(?:x\s*)?" + _GPUS,
    re.I,
)
"""Hosts of so many GPUs ("64 nodes of 4 GB200", "128 nodes with 8 GPUs")."""
_PRODUCT = re.compile(
    r"(?<![\w.,])(\d[\d,]*)\s*("
    + _HOSTS
    + "|"
    + _GPUS
    + r")?\s*[x×*]\s*(\d[\d,]*)\s*("
    + _HOSTS
    + "|"
    + _GPUS
    + r")?",
    re.I,
)
"""Two factors, either labelled ("8 GPUs x 128 nodes", "128 nodes x 8 GPUs", "128x8")."""
_LABELLED = re.compile(r"(?<![\w.,])(\d[\d,]*)\s*(?:(" + _HOSTS + ")|(" + _GPUS + "))", re.I)
_FIX = "write the GPU count alone (e.g. '1024') or hosts x GPUs per host ('128 nodes x 8 GPUs')"

DEFAULT_GPUS_PER_NODE = 8
"""GPUs per host of a row that leaves gpus_per_node empty and whose GPU's catalog entry gives
no `gpus_per_node_default` (HGX/DGX boards hold 8)."""


def _catalog_gpu(row: dict[str, str]) -> GPUSpec | None:
    """The catalog entry of the row's GPU cell, None when the cell names no catalogued GPU (the
    row's own readers refuse that; these defaults only step aside)."""
    try:
        return cells.match_gpu(row.get("gpu") or "")[0]
    except ConfigError:
        return None


def default_gpus_per_node(row: dict[str, str]) -> int:
    """GPUs per host when the cell is empty: the catalog GPU's reference host
    (`GPUSpec.gpus_per_node_default`: 4 on a GB200/GB300 NVL72 compute tray), else 8."""
    spec = _catalog_gpu(row)
    if spec is None:
        return DEFAULT_GPUS_PER_NODE
    return spec.gpus_per_node_default or DEFAULT_GPUS_PER_NODE


def states_nvlink_domain(row: dict[str, str], n: int) -> bool:
    """True when a gpus_per_node of `n` is the row GPU's multi-host NVLink domain rather than a
    host ("72" or "72 (NVL72)" on GB200/GB300, whose hosts are 4-GPU compute trays): a
    transcriber copying the rack's size, not a 72-GPU host."""
    spec = _catalog_gpu(row)
    if spec is None:
        return False
    host = spec.gpus_per_node_default
    return spec.nvlink_domain is not None and host is not None and n == spec.nvlink_domain != host


def stated_gpus_per_node(row: dict[str, str]) -> int:
    """The row's GPUs per host: its cell's number (the catalog host where the number is the
    NVLink domain, `states_nvlink_domain`), else `default_gpus_per_node`."""
    val = cells.number(row.get("gpus_per_node") or "")
    if not val:
        return default_gpus_per_node(row)
    n = int(round(val))
    return default_gpus_per_node(row) if states_nvlink_domain(row, n) else n


def _int_of(text: str) -> int:
    return int(text.replace(",", ""))


def _is_host(label: str | None) -> bool:
    return bool(label) and re.fullmatch(_HOSTS, (label or "").strip(), re.I) is not None


def gpu_count(raw: str | None, row_id: str = "?", per_node: int | None = None) -> int | None:
    """GPUs a num_gpus cell states, None when it holds no number: racks of an NVLink domain
    (`RACKS`), hosts of so many GPUs (`HOSTS_OF`), a product of two factors that opens the cell
    (`_PRODUCT`, labelled in either order), a count labelled GPUs beside a host count ("128
    nodes (1,024 GPUs)"), else the first number with K read as 1,024 (cluster sizes are
    written so: Llama 3's "16K GPUs" are 16,384 H100s, arXiv 2407.21783 section 3.3). Every
    other standalone number must be accounted for — a host count that x `per_node` (when
    given) makes the count, a parenthesised product equal to it ("3,072 (8 x 12 x 32)": TP x
    PP x DP) — else the cell is a one-line DataError: a count is refused, not guessed."""
    text = re.sub(r"(?<=\d)\s*([x×*])\s*(?=\d)", r" \1 ", raw or "")
    nums = list(_STANDALONE.finditer(text))
    if not nums:
        val = cells.number(text, binary=True)
        return None if val is None else int(round(val))

    def refuse(why: str) -> DataError:
        return DataError(f"row {row_id}: column 'num_gpus' = {cells.quoted(raw)} {why}", fix=_FIX)

    if _PER_HOST.match(text, nums[0].start()):
        raise refuse("states GPUs per host, not the GPU count")
    used: list[tuple[int, int]] = []
    hosts: int | None = None
    count: int | None = None
    first = nums[0]
    if (m := RACKS.search(text)) and m.start() == first.start():
        count, used = int(m.group(1)) * int(m.group(2)), [m.span()]
    elif (m := HOSTS_OF.search(text)) and m.start() == first.start():
        hosts = _int_of(m.group(1))
        count, used = hosts * int(m.group(2)), [m.span()]
    elif (m := _PRODUCT.search(text)) and m.start() == first.start():
        count, used = _int_of(m.group(1)) * _int_of(m.group(3)), [m.span()]
        hosts = next((_int_of(m.group(i)) for i in (1, 3) if _is_host(m.group(i + 1))), None)
    else:
        lab = _LABELLED.match(text, first.start())
        if lab is not None and lab.group(2):  # "128 nodes (1,024 GPUs)": hosts, then the count
            hosts, used = _int_of(lab.group(1)), [lab.span()]
            gpus = [g for g in _LABELLED.finditer(text, lab.end()) if g.group(3)]
            if not gpus:
                raise refuse("counts hosts, not GPUs")
            count = _int_of(gpus[0].group(1))
            used.append(gpus[0].span())
        else:
            val = cells.number(first.group(0), binary=True)
            count, used = int(round(val or 0)), [first.span()]
    for group in re.finditer(r"\(([^()]*)\)", text):  # a product that explains the count
        found = [n.group(1) for n in _STANDALONE.finditer(group.group(1))]
        if "." in "".join(found):  # "(6.4 Tb/s, ...)": a rate, not a product of counts
            continue
        factors = [_int_of(n) for n in found]
        if len(factors) > 1 and re.search(r"[x×*]", group.group(1)):
            product = 1
            for f in factors:
                product *= f
            if product == count:
                used.append(group.span())
    per_host: int | None = None
    for n in nums:
        if any(a <= n.start() < b for a, b in used):
            continue
        lab = _LABELLED.match(text, n.start())
        if (each := _PER_HOST.match(text, n.start())) is not None:
            per_host = int(each.group(1))  # checked below against the host count
        elif (rack := RACKS.match(text, n.start())) and int(rack.group(1)) * int(
            rack.group(2)
        ) == count:
            used.append(rack.span())  # "72 (1 NVL72 rack)"
        elif lab is not None and lab.group(2) and hosts in (None, _int_of(lab.group(1))):
            hosts = _int_of(lab.group(1))  # "1,024 (128 nodes)"
        elif lab is not None and lab.group(3) and _int_of(lab.group(1)) == count:
            continue  # the count again, labelled
        else:
            raise refuse(f"holds {n.group(0).strip()!r}, which the count {count} does not explain")
    if per_host is not None and (
        (per_node and per_host != per_node)
        or (hosts and hosts * per_host != count)
        or count % per_host
    ):
        raise refuse(
            f"states {per_host} GPUs per host, which do not make {count} GPUs"
            + (f" at gpus_per_node {per_node}" if per_node else "")
        )
    one_host = hosts == 1 and count <= (per_node or 0)  # "4 (1 node)": part of one host
    if hosts is not None and per_node and hosts * per_node != count and not one_host:
        raise refuse(
            f"states {hosts} hosts, which at gpus_per_node {per_node} are {hosts * per_node} "
            f"GPUs, not {count}"
        )
    return count


_LABEL = r"(mbs|gbs|micro[-_ ]?batch(?:[-_ ]?size)?|global[-_ ]?batch(?:[-_ ]?size)?|mb|gb)"
_LABELLED_PAIR = re.compile(
    _LABEL + r"\s*/\s*" + _LABEL + r"\s*[:=]?\s*\(?\s*(\d[\d,]*)\s*/\s*(\d[\d,]*)(?![\d/])", re.I
)
_PAIR = re.compile(r"(?<![\d/.])(\d[\d,]*)\s*/\s*(\d[\d,]*)(?![\d/.])")
_BATCH_KEYS = ("micro_batch", "global_batch_seqs")
_NAMES = {"micro_batch": "micro-batch", "global_batch_seqs": "global batch (sequences)"}


def _is_micro(label: str) -> bool:
    return label.lower().startswith(("mb", "micro"))


def batch_pair(raw: str | None) -> tuple[int, int] | None:
    """(micro-batch, global batch) of a cell that states both as a labelled pair ("MBS/GBS
    1/1024", "GBS/MBS: 1024/1", "micro/global batch 2/512"); None otherwise."""
    m = _LABELLED_PAIR.search(raw or "")
    if m is None or _is_micro(m.group(1)) == _is_micro(m.group(2)):
        return None
    a, b = (int(g.replace(",", "")) for g in m.group(3, 4))
    return (a, b) if _is_micro(m.group(1)) else (b, a)


_LABELLED_ONE = re.compile(r"(?<![\w/])" + _LABEL + r"\s*[:=]?\s*(\d[\d,]*)(?![\d/,.])", re.I)
"""One labelled batch figure ("GBS 1024", "MBS 2", "micro-batch: 4")."""
_PLAIN = re.compile(r"\s*(\d[\d,]*)(?![\d,./]|\s*(?:[KMB]\b|tokens?\b|x\b))", re.I)
"""A batch cell's own number at its start ("1024 (MBS 2)"), not a token count ("4M tokens")."""


def _batch_statements(cells_: dict[str, str]) -> dict[str, list[tuple[int, str, bool]]]:
    """Every figure the two batch cells state for each of micro-batch and global batch, with
    the column that states it and whether it is that column's plain number: labelled pairs (`batch_pair`), labelled figures ("GBS 1024 (MBS
    2)"), and each cell's own leading number."""
    out: dict[str, list[tuple[int, str, bool]]] = {k: [] for k in _BATCH_KEYS}
    for key in _BATCH_KEYS:
        text = cells_[key]
        if not text or cells.unverified(text):
            continue
        if (pair := batch_pair(text)) is not None:
            out["micro_batch"].append((pair[0], key, False))
            out["global_batch_seqs"].append((pair[1], key, False))
            continue
        labelled = list(_LABELLED_ONE.finditer(text))
        for m in labelled:
            which = "micro_batch" if _is_micro(m.group(1)) else "global_batch_seqs"
            out[which].append((int(m.group(2).replace(",", "")), key, False))
        own = _PLAIN.match(text)
        if own and not any(lab.start() <= own.start(1) < lab.end() for lab in labelled):
            out[key].append((int(own.group(1).replace(",", "")), key, True))
    return out


def canonical_counts(row: dict[str, str]) -> dict[str, str]:
    """The row with its GPU count (`gpu_count`) and an "MBS/GBS" pair in either batch column
    (`batch_pair`) written as plain numbers; an unlabelled pair ("1/1024") in both batch cells
    is read the same way (the global batch is never below the micro-batch). A pair in one
    batch cell without labels is a one-line DataError: which is which cannot be told; so is a
    batch the cells state twice with different figures ("MBS/GBS 2/1024" beside a micro-batch
    cell of 1) or as zero — the row is refused, not read by whichever cell came first."""
    out = dict(row)
    rid = row.get("row_id", "?")
    for key in ("num_gpus", "gpus_per_node", *_BATCH_KEYS):  # read as Python ints below
        if (run := cells.overlong_count(row.get(key))) is not None:
            raise DataError(
                f"row {rid}: column {key!r} = {cells.quoted(row.get(key))} holds a number of "
                f"{len(run.replace(',', ''))} digits, above {cells.MAX_COUNT} (cells.MAX_COUNT)",
                fix="give the count the source prints",
            )
    raw = row.get("num_gpus") or ""
    n = None if cells.is_hint(raw) else gpu_count(raw, rid, stated_gpus_per_node(row))
    if n is not None and str(n) != raw.strip() and not cells.is_hint(raw):
        out["num_gpus"] = str(n)
    cells_ = {k: (row.get(k) or "").strip() for k in _BATCH_KEYS}
    pair = next((p for k in _BATCH_KEYS if (p := batch_pair(cells_[k]))), None)
    same = cells_["micro_batch"] == cells_["global_batch_seqs"]
    if pair is None and same and (m := _PAIR.fullmatch(cells_["micro_batch"])):
        a, b = (int(g.replace(",", "")) for g in m.groups())
        pair = (min(a, b), max(a, b))
    for key in _BATCH_KEYS:
        text = cells_[key]
        unlabelled = _PAIR.fullmatch(text) and not batch_pair(text)
        if unlabelled and not cells.unverified(text) and not (pair is not None and same):
            raise DataError(
                f"row {rid}: column {key!r} = {cells.quoted(text)} holds two numbers and does not say "
                "which is the micro-batch and which the global batch",
                fix=f"write the {_NAMES[key]} alone, or label the pair (e.g. 'MBS/GBS 1/1024')",
            )
    stated = {} if pair is not None and same else _batch_statements(cells_)
    for i, key in enumerate(_BATCH_KEYS):
        figures = stated.get(key, [])
        if pair is not None and same:
            figures = [(pair[i], key, False)]
        for value, col, _ in figures:
            if value < 1:
                raise DataError(
                    f"row {rid}: column {col!r} = {cells.quoted(cells_[col])} states a {_NAMES[key]} of 0",
                    fix=f"give the {_NAMES[key]} (at least 1 sequence)",
                )
        values = {v for v, _, _ in figures}
        if len(values) > 1:
            said = "; ".join(f"column {c!r} = {cells_[c]!r} says {v}" for v, c, _ in figures)
            raise DataError(
                f"row {rid}: the {_NAMES[key]} is stated twice with different figures ({said})",
                fix=f"give one {_NAMES[key]} (correct the cell that is wrong)",
            )
        text = cells_[key]
        if values and not (text and cells.unverified(text)):
            value = values.pop()
            if not all(plain for _, _, plain in figures):
                out[key] = str(value)  # stated by a label or a pair, in either cell
    return out


TIME_UNITS = (
    (re.compile(r"^(?:ms|msec|millisec\w*)\b", re.I), 1e-3),
    (re.compile(r"^(?:µs|us|microsec\w*)\b", re.I), 1e-6),
    (re.compile(r"^(?:min|mins|minutes?)\b", re.I), 60.0),
    (re.compile(r"^(?:h|hr|hrs|hours?)\b", re.I), 3600.0),
)
"""Units of an iteration-time cell other than seconds ("850 ms", "1.2 min")."""
FLOP_UNITS = (
    (re.compile(r"^P(?:FLOP|FLOPS|FLOP/s)\b", re.I), 1e3),
    (re.compile(r"^G(?:FLOP|FLOPS|FLOP/s)\b", re.I), 1e-3),
)
"""Units of a TFLOP/s cell other than TFLOP/s ("0.5 PFLOP/s" = 500 TFLOP/s)."""
RATE_UNITS = (
    (re.compile(r"^(?:tokens?|tok)\s*/\s*(?:min|minute)\b", re.I), 1 / 60),
    (re.compile(r"^(?:tokens?|tok)\s*/\s*(?:h|hr|hour)\b", re.I), 1 / 3600),
)
"""Units of a tokens-per-second cell other than per second ("tokens/min")."""
_UNITS = {
    "iter_time_s": TIME_UNITS,
    "derived_iter_time_s": TIME_UNITS,
    "tflops_per_gpu": FLOP_UNITS,
    "tokens_per_sec_per_gpu": RATE_UNITS,
}
_AFTER_NUMBER = re.compile(r"^\s*~?\s*[\d,]*\.?\d+\s*(?:[KM](?![A-Za-z]))?\s*")


def figure_scale(key: str, raw: str) -> float:
    """Factor from the unit a published-figure cell writes after its number to its column's
    unit (seconds, TFLOP/s, tokens/s); 1 for that unit or none."""
    rest = _AFTER_NUMBER.sub("", raw, count=1)
    for pat, scale in _UNITS.get(key, ()):
        if pat.match(rest):
            return scale
    return 1.0


JOB_TOTAL = re.compile(
    r"\b(?:total|aggregate|whole[- ]job|job[- ]wide|cluster[- ]wide|all\s+GPUs|global)\b"
    r"(?!\s+(?:batch|tokens?\b(?!\s*/)|steps?|iter\w*|train\w*))",
    re.I,
)
"""A tokens-per-second cell that gives the whole job's rate, not one GPU's ("(total)",
"aggregate", "across all GPUs"); not a word about something else the cell mentions ("global
batch 2048", "1T total tokens")."""
_AVERAGED = re.compile(r"\b(?:mean|average[ds]?|avg)\b(?:\s+\w+){0,2}\s*$", re.I)
"""Words before "all GPUs" that make the figure a per-GPU average ("mean over all GPUs")."""


def states_job_total(raw: str) -> bool:
    """True when a tokens/s cell says its figure is the job's total ("357,888 tokens/s
    (total)") and not per GPU (nor a mean over the GPUs)."""
    if re.search(r"per\s*GPU|/\s*GPU", raw, re.I):
        return False
    return any(not _AVERAGED.search(raw[: m.start()]) for m in JOB_TOTAL.finditer(raw))


TRAIN_TIME = re.compile(r"time[- ]to[- ]train|train(?:ing)?[- ]time|\bTTT\b", re.I)
"""A metric that is a whole training's wall time (MLPerf's time-to-train), not a step's."""


__all__ = [
    "DEFAULT_GPUS_PER_NODE",
    "FLOP_UNITS",
    "HOSTS_OF",
    "JOB_TOTAL",
    "NODES_TIMES_GPUS",
    "RACKS",
    "RATE_UNITS",
    "TIME_UNITS",
    "TRAIN_TIME",
    "batch_pair",
    "canonical_counts",
    "default_gpus_per_node",
    "figure_scale",
    "gpu_count",
    "stated_gpus_per_node",
    "states_job_total",
    "states_nvlink_domain",
]
