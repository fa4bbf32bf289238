"""Reader for NVIDIA nccl-tests output (`*_perf` tables), robust to the variants seen in the wild.

Handles rank prefixes (`0: `, `[1,0]<stdout>:`), tables without `#`, `N/A` in `#wrong`, stray
NCCL INFO lines inside the table, the old format without the `root` column, and excerpts that
hold only some rows. Sizes are bytes, times microseconds, bandwidths GB/s (decimal), as printed.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np
import numpy.typing as npt

from starfabric.astral.bounds import Bound, bandwidth, duration, message_bytes
from starfabric.errors import DataError

COLLECTIVES = (
    "all_reduce",
    "all_gather",
    "reduce_scatter",
    "alltoall",
    "broadcast",
    "reduce",
    "sendrecv",
)
_ALIASES = {
    "allreduce": "all_reduce",
    "all_reduce": "all_reduce",
    "allgather": "all_gather",
    "all_gather": "all_gather",
    "reducescatter": "reduce_scatter",
    "reduce_scatter": "reduce_scatter",
    "alltoall": "alltoall",
    "broadcast": "broadcast",
    "sendrecv": "sendrecv",
    "reduce": "reduce",
}
GPUS_PER_NODE = 8
"""Assumption: a file named '<N>node' with no other rank evidence ran 8 GPUs per node (DGX/HGX)."""

DTYPES = frozenset(
    {"float", "half", "double", "bfloat16", "int8", "uint8", "int32", "uint32", "int64",
     "uint64", "f8e4m3", "f8e5m2", "fp8_e4m3", "fp8_e5m2", "int", "char"}
)  # fmt: skip
"""Element types nccl-tests prints in the `type` column: a line with one is a table row."""

_PREFIX = re.compile(r"^\s*(?:\[\d+,\d+\]<std(?:out|err)>:|\d+:\s)")
_WORD = re.compile(
    r"(all_?reduce|all_?gather|reduce_?scatter|all_?to_?all|alltoall|broadcast|sendrecv)", re.I
)


def busbw_factor(collective: str, ranks: int) -> float:
    """busbw / algbw as nccl-tests defines it (PERFORMANCE.md): the bytes each rank must move."""
    n = ranks
    if collective == "all_reduce":
        return 2.0 * (n - 1) / n
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return (n - 1) / n
    return 1.0


@dataclass(frozen=True)
class NcclHeader:
    """What nccl-tests prints above its table: the device list (one line per rank) and the size
    sweep (`minBytes ... maxBytes ... step: 2(factor)`), when the log kept them."""

    device_ranks: int = 0
    hosts: tuple[str, ...] = ()
    devices: tuple[str, ...] = ()
    max_bytes: int | None = None
    step_factor: int | None = None
    preamble: bool = False
    trailer: bool = False

    @property
    def complete_device_list(self) -> bool:
        return self.device_ranks >= 2 and len(self.hosts) >= 1


@dataclass(frozen=True)
class NcclRun:
    """One nccl-tests run: the collective, the rank count and the table's rows."""

    path: str
    collective: str
    ranks: int
    ranks_inferred: bool
    size_bytes: npt.NDArray[np.int64]
    time_us: npt.NDArray[np.float64]  # out-of-place
    algbw_gbps: npt.NDArray[np.float64]
    busbw_gbps: npt.NDArray[np.float64]
    time_us_inplace: npt.NDArray[np.float64]
    busbw_gbps_inplace: npt.NDArray[np.float64]
    dtype: str
    header: NcclHeader = field(default_factory=NcclHeader)

    def __len__(self) -> int:
        return int(self.size_bytes.shape[0])

    @property
    def busbw_mean_gbps(self) -> npt.NDArray[np.float64]:
        """busbw averaged over the out-of-place and in-place columns where both were measured
        (nccl-tests' own "Avg bus bandwidth" averages both): two measurements of the same
        collective at the same size, so one run's dip in one column weighs half."""
        both = np.stack([self.busbw_gbps, self.busbw_gbps_inplace])
        return np.asarray(np.nanmean(both, axis=0), np.float64)

    def at_least(self, min_bytes: int) -> NcclRun:
        """Rows with size >= min_bytes."""
        keep = self.size_bytes >= min_bytes
        return replace(
            self,
            size_bytes=self.size_bytes[keep],
            time_us=self.time_us[keep],
            algbw_gbps=self.algbw_gbps[keep],
            busbw_gbps=self.busbw_gbps[keep],
            time_us_inplace=self.time_us_inplace[keep],
            busbw_gbps_inplace=self.busbw_gbps_inplace[keep],
        )


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?|N/A|[-+]?(?:nan|inf)", re.I)
_DEVICE = re.compile(
    r"^#?\s*Rank\s+(\d+)\s+(?:Group\s+\d+\s+)?Pid\s+\d+\s+on\s+(\S+)\s+device\s+\d+\s+\[[^\]]*\]\s*(.*)$"
)
_SWEEP = re.compile(r"maxBytes\s+(\d+)\s+step:\s*(\d+)\(factor\)")
_MAX_BYTES_FILE = 64 * 2**20
"""Refuse nccl-tests logs above 64 MiB (a real one is a few KB; a multi-run capture under 1 MB)."""


def _num(
    tok: str, p: Path, lineno: int, column: str, *, na_ok: bool = False, bound: Bound | None = None
) -> float:
    """One table cell: a finite, non-negative number (N/A only where nccl-tests prints it),
    inside its physical `bound` (astral/bounds.py) when one is given."""
    if tok.upper() == "N/A":
        if na_ok:
            return float("nan")
        raise DataError(
            f"{p}: line {lineno}: {column} is N/A",
            fix="repair or drop the row (N/A only in #wrong)",
        )
    try:
        v = float(tok)
    except ValueError:
        raise DataError(
            f"{p}: line {lineno}: {column} {tok!r} is not a number", fix="repair or drop the row"
        ) from None
    if not math.isfinite(v) or v < 0:
        raise DataError(
            f"{p}: line {lineno}: {column} {tok} is not a finite non-negative number",
            fix="repair or drop the row (nccl-tests prints times and bandwidths >= 0)",
        )
    if bound is not None:
        bound.check(v, f"{p}: line {lineno}", column, "repair or drop the row: a corrupt cell")
    return v


def _collective_from_text(text: str) -> str | None:
    m = re.search(r"(\w+)_perf", text)
    if m and m.group(1).lower() in _ALIASES:
        return _ALIASES[m.group(1).lower()]
    return None


def _collective_from_table(redops: set[str], algbw: np.ndarray, busbw: np.ndarray) -> str | None:
    """The collectives the table itself identifies: busbw/algbw is 2(n-1)/n > 1 only for
    all_reduce; below 1 with a reduction operator only for reduce_scatter (PERFORMANCE.md)."""
    ok = algbw >= 1.0
    if not ok.any():
        return None
    r = float(np.median(busbw[ok] / algbw[ok]))
    if r > 1.05:
        return "all_reduce"
    if r < 0.97 and redops & {"sum", "prod", "max", "min", "avg"}:
        return "reduce_scatter"
    return None


def _collective_from_name(name: str) -> str | None:
    m = _WORD.search(name)
    return _ALIASES.get(m.group(1).lower().replace("_", "")) if m else None


def _infer_ranks(collective: str, algbw: np.ndarray, busbw: np.ndarray) -> int | None:
    ok = algbw >= 10.0  # two printed decimals: the ratio is precise only on large values
    if not ok.any():
        return None
    r = float(np.median(busbw[ok] / algbw[ok]))
    if collective == "all_reduce":
        return max(1, round(2.0 / (2.0 - r))) if r < 2.0 else None
    if collective in ("all_gather", "reduce_scatter", "alltoall"):
        return max(1, round(1.0 / (1.0 - r))) if r < 1.0 else None
    return None


def _header(lines: list[str]) -> NcclHeader:
    ranks: dict[int, tuple[str, str]] = {}
    max_bytes = step = None
    preamble = trailer = False
    for line in lines:
        m = _DEVICE.match(line.strip())
        if m:
            ranks[int(m.group(1))] = (m.group(2), m.group(3).strip())
            continue
        if re.match(r"^#?\s*nThread\s+\d+", line.strip()):
            preamble = True
            sw = _SWEEP.search(line)
            if sw:
                max_bytes, step = int(sw.group(1)), int(sw.group(2))
        if re.match(r"^#?\s*(Avg bus bandwidth|Out of bounds values)", line.strip()):
            trailer = True
    hosts = tuple(sorted({h for h, _ in ranks.values()}))
    devices = tuple(sorted({d for _, d in ranks.values()}))
    complete = bool(ranks) and sorted(ranks) == list(range(len(ranks)))
    return NcclHeader(
        device_ranks=len(ranks) if complete else 0,
        hosts=hosts if complete else (),
        devices=devices,
        max_bytes=max_bytes,
        step_factor=step,
        preamble=preamble,
        trailer=trailer,
    )


def _check_table(p: Path, sizes: np.ndarray, linenos: list[int], hdr: NcclHeader) -> None:
    """A complete, consistent table: sizes rising by the sweep's factor, none missing, and the
    whole sweep there when the log says how far it went."""
    if (np.diff(sizes) < 0).any():
        i = int(np.argmax(np.diff(sizes) < 0)) + 1
        raise DataError(
            f"{p}: line {linenos[i]}: size {int(sizes[i])} does not grow after {int(sizes[i - 1])}",
            fix="give one run's table (concatenated runs or shuffled rows are not one run)",
        )
    big = sizes >= 2**20  # nccl-tests rounds small sizes to the element count; large ones double
    if hdr.step_factor and hdr.step_factor > 1 and big.sum() >= 2:
        s = sizes[big].astype(np.float64)
        ratio = s[1:] / s[:-1]
        bad = np.abs(ratio - hdr.step_factor) > 0.01 * hdr.step_factor
        if bad.any():
            i = int(np.argmax(bad))
            raise DataError(
                f"{p}: rows missing between sizes {int(s[i])} and {int(s[i + 1])} "
                f"(the log's step factor is {hdr.step_factor})",
                fix="give the complete table",
            )
    if (
        hdr.max_bytes is not None
        and hdr.step_factor
        and sizes[-1] * hdr.step_factor <= hdr.max_bytes
    ):
        raise DataError(
            f"{p}: the table stops at size {int(sizes[-1])} but the run went to maxBytes "
            f"{hdr.max_bytes}: the log is cut short",
            fix="give the complete nccl-tests output",
        )
    if hdr.preamble and not hdr.trailer:
        raise DataError(
            f"{p}: the table has no closing '# Avg bus bandwidth' line: the log is cut short",
            fix="give the complete nccl-tests output",
        )


def parse_nccl_tests(
    path: str | Path,
    *,
    collective: str | None = None,
    ranks: int | None = None,
    default_ranks: int | None = None,
) -> NcclRun:
    """Parse one nccl-tests output file; every row is validated (finite, non-negative, sizes
    rising), a cut-short or corrupt table is a one-line DataError naming file, line and value.

    A log that kept neither nccl-tests' preamble nor its closing lines (an excerpt pasted from
    a README) cannot be told from one cut at a row boundary; its rows are taken as given."""
    p = Path(path)
    try:
        if p.stat().st_size > _MAX_BYTES_FILE:
            raise DataError(
                f"{p}: {p.stat().st_size:,} bytes is not an nccl-tests log (limit "
                f"{_MAX_BYTES_FILE // 2**20} MiB)",
                fix="give one nccl-tests run's output",
            )
        raw = p.read_text(errors="strict")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(
            f"{p}: cannot read nccl-tests output ({exc.__class__.__name__})", fix="check the file"
        ) from None
    if "\x00" in raw:
        raise DataError(f"{p}: binary data (NUL bytes) in an nccl-tests log", fix="check the file")
    lines = [_PREFIX.sub("", line, count=1) for line in raw.splitlines()]
    text = "\n".join(lines)
    bw = bandwidth()  # the hardware catalog's fastest link, read once per file
    bounds = {"time": duration("us", 1e6), "algbw": bw, "busbw": bw}
    size_bound = message_bytes()
    hdr = _header(lines)
    rows: list[tuple[float, ...]] = []
    linenos: list[int] = []
    dtype = ""
    redops: set[str] = set()
    widths: set[int] = set()
    for lineno, line in enumerate(lines, start=1):
        toks = line.split()
        row_like = len(toks) >= 7 and toks[2].lower() in DTYPES and not toks[0].startswith("#")
        if row_like and not (toks[0].isdigit() and toks[1].isdigit()):
            raise DataError(
                f"{p}: line {lineno}: size {toks[0]!r} and count {toks[1]!r} must be whole numbers",
                fix="repair or drop the row",
            )
        if len(toks) < 2 or not toks[0].isdigit() or not toks[1].isdigit():
            continue  # headers, comments, INFO lines, command lines
        if row_like:
            size_bound.check(float(toks[0]), f"{p}: line {lineno}", "size",
                             "repair or drop the row: a corrupt cell")  # fmt: skip
        if len(toks) < 7:
            if len(toks) >= 3 and toks[2][0].isalpha():
                raise DataError(
                    f"{p}: line {lineno}: row {line.strip()[:60]!r} is cut short "
                    f"({len(toks)} fields)",
                    fix="give the complete nccl-tests output, or drop the partial row",
                )
            continue
        if toks[2][0].isdigit():
            continue
        measures = toks[3:]
        while measures and not _NUMBER.fullmatch(measures[0]):
            redops.add(measures[0].lower())
            measures = measures[1:]  # redop word
        if len(measures) in (9, 5):
            measures = measures[1:]  # root column
        if len(measures) not in (8, 4):
            raise DataError(
                f"{p}: line {lineno}: expected 4 or 8 measurements, found {len(measures)}",
                fix="repair or drop the row",
            )
        names = ("time", "algbw", "busbw", "#wrong") * 2
        place = ("out-of-place",) * 4 + ("in-place",) * 4
        vals = [
            _num(t, p, lineno, f"{pl} {nm}", na_ok=nm == "#wrong", bound=bounds.get(nm))
            for t, nm, pl in zip(measures, names, place, strict=False)
        ]
        if len(vals) == 8:
            t, alg, bus, _w, t2, _alg2, bus2, _w2 = vals
        else:
            t, alg, bus, _w = vals
            t2, bus2 = float("nan"), float("nan")
        if t <= 0 or (len(vals) == 8 and t2 <= 0):
            raise DataError(f"{p}: line {lineno}: a time of 0 us", fix="repair or drop the row")
        size_b = float(toks[0])
        for tt, aa in ((t, alg), (t2, vals[5] if len(vals) == 8 else float("nan"))):
            # algbw is size / time, printed with two decimals (nccl-tests PERFORMANCE.md)
            if aa == aa and aa >= 1.0 and abs(size_b / (tt * 1e3) - aa) > 0.05 * aa + 0.01:
                raise DataError(
                    f"{p}: line {lineno}: algbw {aa} GB/s does not match size {toks[0]} B / "
                    f"time {tt} us = {size_b / (tt * 1e3):.2f} GB/s",
                    fix="repair the row (a corrupt or cut-short number)",
                )
        widths.add(len(vals))
        if len(widths) > 1:
            raise DataError(
                f"{p}: line {lineno}: {len(vals)} measurements where the rows above have "
                f"{8 if len(vals) == 4 else 4}",
                fix="give the complete row (a cut-short line?)",
            )
        rows.append((float(toks[0]), t, alg, bus, t2, bus2))
        linenos.append(lineno)
        dtype = toks[2]
    last = next((i for i in range(len(lines), 0, -1) if lines[i - 1].strip()), 0)
    if last and (not linenos or linenos[-1] != last) and re.match(r"\s*\d+(\s|$)", lines[last - 1]):
        raise DataError(
            f"{p}: line {last}: the file ends inside a table row "
            f"({lines[last - 1].strip()[:40]!r}): the log is cut short",
            fix="give the complete nccl-tests output",
        )
    if not rows:
        raise DataError(
            f"{p}: no nccl-tests result rows found",
            fix="give the output of an nccl-tests *_perf run",
        )
    a = np.array(rows)
    size = a[:, 0].astype(np.int64)
    _check_table(p, size, linenos, hdr)
    coll = (
        collective
        or _collective_from_text(text)
        or _collective_from_table(redops, a[:, 2], a[:, 3])
        or _collective_from_name(p.name)
    )
    if coll is None or coll not in COLLECTIVES:
        raise DataError(
            f"{p}: cannot tell which collective this run measured (no '*_perf' command line, "
            "and its bandwidth columns fit several)",
            fix="put the collective in the file name (e.g. all_gather.txt) or keep "
            "nccl-tests' command line in the log",
        )
    n = ranks
    inferred = False
    if n is None:
        per_node_gpus = re.search(r"(\d+)node[_-](\d+)gpu", p.name)
        m = re.search(r"(\d+)gpu", p.name)
        devices = len(re.findall(r"^#?\s*Rank\s+\d+\s", text, flags=re.M))
        if hdr.complete_device_list:
            n = hdr.device_ranks
        elif per_node_gpus:
            n = int(per_node_gpus.group(1)) * int(per_node_gpus.group(2))
        elif m:
            n = int(m.group(1))
        elif devices >= 2:  # an excerpt may keep only one device line
            n = devices
        else:
            n = _infer_ranks(coll, a[:, 2], a[:, 3])
            inferred = True
            nodes = re.search(r"(\d+)node", p.name)
            if n is None and nodes:
                per_node = re.search(r"(\d+)x[abhv]\d+", p.name)
                n = int(nodes.group(1)) * (int(per_node.group(1)) if per_node else GPUS_PER_NODE)
    if n is None and default_ranks is not None:
        n, inferred = default_ranks, True  # the caller's hardware (e.g. sim fit's fabric)
    if n is None or n < 1:
        raise DataError(
            f"{p}: cannot tell how many ranks ran (no device list in the log)",
            fix="give the hardware: --nodes N --gpus-per-node G",
        )
    return NcclRun(
        str(p), coll, int(n), inferred, size, a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5], dtype,
        hdr,
    )  # fmt: skip
