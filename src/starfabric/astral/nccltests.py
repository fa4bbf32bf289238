"""Reader for NVIDIA nccl-tests output (`*_perf` tables), robust to the variants seen in the wild.

Handles rank prefixes (`0: `, `[1,0]<stdout>:`), tables without `#`, `N/A` in `#wrong`, stray
NCCL INFO lines inside the table, the old format without the `root` column, and excerpts that
hold only some rows. Sizes are bytes, times microseconds, bandwidths GB/s (decimal), as printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import numpy.typing as npt

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
        return NcclRun(
            self.path,
            self.collective,
            self.ranks,
            self.ranks_inferred,
            self.size_bytes[keep],
            self.time_us[keep],
            self.algbw_gbps[keep],
            self.busbw_gbps[keep],
            self.time_us_inplace[keep],
            self.busbw_gbps_inplace[keep],
            self.dtype,
        )


def _num(tok: str) -> float:
    return float("nan") if tok.upper() == "N/A" else float(tok)


def _collective_from(text: str, name: str) -> str | None:
    m = re.search(r"(\w+)_perf", text)
    if m and m.group(1).lower() in _ALIASES:
        return _ALIASES[m.group(1).lower()]
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


def parse_nccl_tests(
    path: str | Path, *, collective: str | None = None, ranks: int | None = None
) -> NcclRun:
    """Parse one nccl-tests output file; a row that cannot be read is a one-line DataError."""
    p = Path(path)
    try:
        raw = p.read_text(errors="strict")
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(
            f"{p}: cannot read nccl-tests output ({exc.__class__.__name__})", fix="check the file"
        ) from None
    lines = [_PREFIX.sub("", line, count=1) for line in raw.splitlines()]
    text = "\n".join(lines)
    coll = collective or _collective_from(text, p.name)
    if coll is None or coll not in COLLECTIVES:
        raise DataError(
            f"{p}: cannot tell which collective this run measured",
            fix=f"pass collective= one of {', '.join(COLLECTIVES)}",
        )
    rows: list[tuple[float, ...]] = []
    dtype = ""
    for lineno, line in enumerate(lines, start=1):
        toks = line.split()
        if len(toks) < 7 or not toks[0].isdigit() or not toks[1].isdigit():
            continue  # headers, comments, INFO lines, command lines
        if toks[2][0].isdigit():
            continue
        measures = toks[3:]
        while measures and not re.fullmatch(r"[-+0-9.eE]+|N/A", measures[0]):
            measures = measures[1:]  # redop word
        if len(measures) in (9, 5):
            measures = measures[1:]  # root column
        try:
            vals = [_num(t) for t in measures]
        except ValueError:
            raise DataError(
                f"{p}: line {lineno}: unreadable row {line.strip()[:60]!r}",
                fix="repair or drop the row",
            ) from None
        if len(vals) == 8:
            t, alg, bus, _w, t2, _alg2, bus2, _w2 = vals
        elif len(vals) == 4:
            t, alg, bus, _w = vals
            t2, bus2 = float("nan"), float("nan")
        else:
            raise DataError(
                f"{p}: line {lineno}: expected 4 or 8 measurements, found {len(vals)}",
                fix="repair or drop the row",
            )
        rows.append((float(toks[0]), t, alg, bus, t2, bus2))
        dtype = toks[2]
    if not rows:
        raise DataError(
            f"{p}: no nccl-tests result rows found",
            fix="give the output of an nccl-tests *_perf run",
        )
    a = np.array(rows)
    size = a[:, 0].astype(np.int64)
    n = ranks
    inferred = False
    if n is None:
        per_node_gpus = re.search(r"(\d+)node[_-](\d+)gpu", p.name)
        m = re.search(r"(\d+)gpu", p.name)
        devices = len(re.findall(r"^#?\s*Rank\s+\d+\s", text, flags=re.M))
        if per_node_gpus:
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
    if n is None or n < 1:
        raise DataError(f"{p}: cannot tell how many ranks ran", fix="pass ranks=")
    return NcclRun(
        str(p), coll, int(n), inferred, size, a[:, 1], a[:, 2], a[:, 3], a[:, 4], a[:, 5], dtype
    )
