"""Real telemetry formats → the store: Kineto traces, nccl-tests logs, /sys/class/infiniband,
`ethtool -m` optical DDM, dmesg Xid lines, per-worker mini-batch time CSVs, and SuperBench's
data-diagnosis (defective nodes) and node-monitor JSON lines.

Each reader validates as it goes; a malformed file or record is one DataError naming the file
and the record (line number or event index). A measurement outside its physical bound (a time
longer than a year, a bandwidth above the fastest link in the hardware catalog, a counter above
2^64; astral/bounds.py) is refused the same way: nothing of the file is stored.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
import re
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from starfabric.astral import bounds
from starfabric.astral.kineto import read_kineto
from starfabric.astral.monitor.store import TelemetryStore
from starfabric.astral.nccltests import parse_nccl_tests
from starfabric.errors import DataError

INGEST_KINDS = (
    "kineto",
    "nccl-tests",
    "sys-infiniband",
    "ddm",
    "dmesg",
    "minibatch",
    "superbench-diagnosis",
    "superbench-monitor",
)


def _open_text(p: Path) -> str:
    try:
        if p.suffix == ".gz":
            with gzip.open(p, "rt", encoding="utf-8") as fh:
                return fh.read()
        return p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError, EOFError) as e:
        raise DataError(
            f"{p}: cannot read ({e.__class__.__name__}: {e})", fix="check the file"
        ) from None


MAX_GROUP_SIZE = 2**31 - 1
"""Ranks in one NCCL communicator: NCCL's nranks is a C int [fact]."""


def _arg_int(args: dict[str, Any], key: str, where: str, bound: bounds.Bound) -> int:
    """A whole-number kernel argument inside `bound`; absent (or 0/None, as Kineto writes for
    unknown) is -1."""
    v = args.get(key)
    if v is None or v == 0 or v == "":
        return -1
    if isinstance(v, bool) or not isinstance(v, int | float | str):
        raise DataError(f"{where}: args[{key!r}] = {v!r} is not a number", fix="fix the record")
    try:
        f = float(v)
    except ValueError:
        raise DataError(
            f"{where}: args[{key!r}] = {v!r} is not a number", fix="fix the record"
        ) from None
    if f == -1:
        return -1
    bound.check(f, where, f"args[{key!r}]", "fix the record: a corrupt value")
    if not f.is_integer():
        raise DataError(f"{where}: args[{key!r}] = {v!r} is not a whole number", fix="fix it")
    return int(f)


def ingest_kineto(store: TelemetryStore, path: str | Path) -> int:
    """NCCL kernels of one rank's Kineto (PyTorch profiler) trace → app_collective rows."""
    p = Path(path)
    msg = bounds.message_bytes()
    nelems = bounds.Bound(0.0, msg.hi, "elements", msg.why)  # an element is at least a byte
    ranks = bounds.Bound(1.0, MAX_GROUP_SIZE, "ranks", "NCCL's int nranks, MAX_GROUP_SIZE")
    trace = read_kineto(p)  # the input layer: truncated gzip, bad times, no kernels refused
    rank = trace.rank
    doc = {"traceEvents": trace.events}
    rows: dict[str, list[Any]] = {
        k: [] for k in ("collective", "kernel", "ts_us", "dur_us", "nelems", "group_size")
    }
    for i, ev in enumerate(doc["traceEvents"]):
        if not isinstance(ev, dict):
            raise DataError(f"{p}: traceEvents[{i}] is not an object")
        name = ev.get("name", "")
        if (
            ev.get("cat") != "kernel"
            or not isinstance(name, str)
            or not name.startswith(("ncclDevKernel", "ncclKernel"))
        ):
            continue
        ts, dur = ev.get("ts"), ev.get("dur")
        if not isinstance(ts, int | float) or not isinstance(dur, int | float) or dur < 0:
            raise DataError(
                f"{p}: traceEvents[{i}] ({name[:40]}) has ts={ts!r} dur={dur!r}",
                fix="fix the record",
            )
        args = ev.get("args") or {}
        m = re.match(r"nccl(?:Dev)?Kernel_([A-Za-z]+)", name)
        coll = str(args.get("Collective name") or (m.group(1).lower() if m else "unknown"))
        rows["collective"].append(coll)
        rows["kernel"].append(name.split("(")[0])
        rows["ts_us"].append(float(ts))
        rows["dur_us"].append(float(dur))
        where = f"{p}: traceEvents[{i}] ({name[:40]})"
        rows["nelems"].append(_arg_int(args, "In msg nelems", where, nelems))
        rows["group_size"].append(_arg_int(args, "Group size", where, ranks))
    n = len(rows["ts_us"])
    order = np.argsort(np.asarray(rows["ts_us"]), kind="stable")
    cols = {k: np.asarray(v)[order] if n else np.asarray(v) for k, v in rows.items()}
    return store.write(
        "app_collective",
        {
            "source": np.full(n, p.name),
            "rank": np.full(n, rank, dtype=np.int32),
            "seq": np.arange(n, dtype=np.int32),
            "collective": cols["collective"].astype(str),
            "kernel": cols["kernel"].astype(str),
            "ts_us": cols["ts_us"].astype(np.float64),
            "dur_us": cols["dur_us"].astype(np.float64),
            "nelems": cols["nelems"].astype(np.int64),
            "group_size": cols["group_size"].astype(np.int32),
        },
    )


def ingest_nccl_tests(store: TelemetryStore, path: str | Path) -> int:
    """An nccl-tests output table (via astral.nccltests) → app_nccltest rows."""
    r = parse_nccl_tests(path)
    n = len(r)
    return store.write(
        "app_nccltest",
        {
            "source": np.full(n, Path(path).name),
            "collective": np.full(n, r.collective),
            "ranks": np.full(n, r.ranks, dtype=np.int32),
            "size_bytes": r.size_bytes,
            "time_us": r.time_us,
            "algbw_gbps": r.algbw_gbps,
            "busbw_gbps": r.busbw_gbps,
        },
    )


_IB = re.compile(r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/(counters|hw_counters)/([^/]+)$")
_IB_PORT = re.compile(
    r"^/sys/class/infiniband/([^/]+)/ports/(\d+)/(state|phys_state|rate|link_layer)$"
)


def _sys_ib_pairs(p: Path) -> list[tuple[str, str, int]]:
    """(sysfs path, value, record number) from a flattened TSV or a real sysfs directory tree."""
    if p.is_dir():
        out = []
        for i, f in enumerate(sorted(p.rglob("*"))):
            if f.is_file():
                rel = "/sys/class/infiniband/" + f.relative_to(p).as_posix()
                out.append((rel, f.read_text(errors="replace").strip(), i))
        return out
    text = _open_text(p)
    out = []
    for ln, line in enumerate(text.splitlines(), 1):
        if not line.strip() or (ln == 1 and line.startswith("sysfs_path")):
            continue
        parts = line.split("\t")
        if len(parts) != 2 or not parts[0].startswith("/sys/class/infiniband/"):
            raise DataError(f"{p}: line {ln} is not 'sysfs_path<TAB>value': {line[:60]!r}")
        out.append((parts[0], parts[1], ln))
    return out


def ingest_sys_infiniband(store: TelemetryStore, path: str | Path) -> int:
    """RDMA port counters and states from /sys/class/infiniband (tree or flattened TSV)."""
    p = Path(path)
    counter = bounds.counter()
    link = bounds.Bound(0.0, bounds.max_link_gbytes_per_s() * 8, "Gb/sec",
                        "the fastest link in the hardware catalog")  # fmt: skip
    cnt: dict[str, list[Any]] = {"device": [], "port": [], "counter": [], "value": []}
    ports: dict[tuple[str, int], dict[str, str]] = {}
    for sp, val, rec in _sys_ib_pairs(p):
        m = _IB.match(sp)
        if m:
            try:
                v = float(val.split()[0])
            except (ValueError, IndexError):
                raise DataError(f"{p}: record {rec} ({sp}) has non-numeric value {val!r}") from None
            if not math.isfinite(v) or v < 0:  # sysfs counters are unsigned integers
                raise DataError(
                    f"{p}: record {rec} ({sp}) value {val!r} is not a counter (finite, >= 0)",
                    fix="give the sysfs snapshot as read",
                )
            counter.check(v, f"{p}: record {rec} ({sp})", "value",
                          "give the sysfs snapshot as read: a corrupt counter")  # fmt: skip
            cnt["device"].append(m.group(1))
            cnt["port"].append(int(m.group(2)))
            cnt["counter"].append(m.group(4))
            cnt["value"].append(v)
            continue
        m = _IB_PORT.match(sp)
        if m:
            ports.setdefault((m.group(1), int(m.group(2))), {})[m.group(3)] = val
    if not cnt["device"] and not ports:
        raise DataError(f"{p}: no /sys/class/infiniband port counters found", fix="give a snapshot")
    n = len(cnt["device"])
    rows = store.write(
        "phys_ib_counter",
        {
            "source": np.full(n, p.name),
            "device": np.asarray(cnt["device"], dtype=str),
            "port": np.asarray(cnt["port"], dtype=np.int32),
            "counter": np.asarray(cnt["counter"], dtype=str),
            "value": np.asarray(cnt["value"], dtype=np.float64),
        },
    )
    keys = sorted(ports)
    rate = []
    for k in keys:
        r = re.match(r"\s*(\d+(?:\.\d*)?(?:[eE][-+]?\d+)?)\s*Gb/sec", ports[k].get("rate", ""))
        where = f"{p}: {k[0]} port {k[1]}"
        fix = "give the sysfs snapshot as read: a corrupt rate"
        rate.append(link.check(float(r.group(1)), where, "rate", fix) if r else float("nan"))
    rows += store.write(
        "phys_ib_port",
        {
            "source": np.full(len(keys), p.name),
            "device": np.asarray([k[0] for k in keys], dtype=str),
            "port": np.asarray([k[1] for k in keys], dtype=np.int32),
            "state": np.asarray([ports[k].get("state", "") for k in keys], dtype=str),
            "phys_state": np.asarray([ports[k].get("phys_state", "") for k in keys], dtype=str),
            "rate_gbps": np.asarray(rate, dtype=np.float64),
            "link_layer": np.asarray([ports[k].get("link_layer", "") for k in keys], dtype=str),
        },
    )
    return rows


_XID = re.compile(r"NVRM: Xid \(PCI:([0-9a-fA-F:.]+)\): (\d+), (.*)$")
_TS_BRACKET = re.compile(r"^\[([A-Z][a-z]{2} [A-Z][a-z]{2} +\d+ [\d:]+ \d{4})\]")
_TS_ISO = re.compile(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:,(\d+))?")
_TS_MONO = re.compile(r"^\[\s*(\d+\.\d+)\]")


def _ts_ms(line: str) -> float:
    m = _TS_BRACKET.match(line)
    if m:
        return (
            datetime.strptime(" ".join(m.group(1).split()), "%a %b %d %H:%M:%S %Y").timestamp()
            * 1e3
        )
    m = _TS_ISO.search(line)
    if m:
        frac = float("0." + m.group(2)) if m.group(2) else 0.0
        return (datetime.fromisoformat(m.group(1)).timestamp() + frac) * 1e3
    m = _TS_MONO.match(line)
    return float(m.group(1)) * 1e3 if m else float("nan")


def ingest_dmesg(store: TelemetryStore, path: str | Path) -> int:
    """NVRM Xid lines of a dmesg/kern.log → phys_xid (GPU index unknown: -1; PCI kept)."""
    p = Path(path)
    ts, pci, xid, msg = [], [], [], []
    for ln, line in enumerate(_open_text(p).splitlines(), 1):
        if "NVRM: Xid" not in line:
            continue
        m = _XID.search(line)
        if not m:
            raise DataError(
                f"{p}: line {ln} has 'NVRM: Xid' but no '(PCI:...): CODE, ...': {line[:80]!r}"
            )
        ts.append(_ts_ms(line))
        pci.append(m.group(1))
        xid.append(int(m.group(2)))
        msg.append(m.group(3).strip())
    n = len(ts)
    return store.write(
        "phys_xid",
        {
            "ts_ms": np.asarray(ts, dtype=np.float64),
            "gpu": np.full(n, -1, dtype=np.int32),
            "pci": np.asarray(pci, dtype=str),
            "xid": np.asarray(xid, dtype=np.int32),
            "message": np.asarray(msg, dtype=str),
        },
    )


_DDM = {
    "tx": re.compile(r"^\s*Laser output power[^:]*:.*?(-?[\d.]+|-inf)\s*dBm", re.I),
    "rx": re.compile(r"^\s*Receiver signal[^:]*optical power[^:]*:.*?(-?[\d.]+|-inf)\s*dBm", re.I),
    "temp": re.compile(r"^\s*Module temperature\s*:\s*(-?[\d.]+)\s*degrees C", re.I),
    "bias": re.compile(r"^\s*Laser (?:tx )?bias current[^:]*:\s*(-?[\d.]+)\s*mA", re.I),
}


_DDM_WHAT = {"tx": "laser output power", "rx": "receiver optical power",
             "temp": "module temperature", "bias": "laser bias"}  # fmt: skip


def ingest_ethtool_ddm(store: TelemetryStore, path: str | Path, device: str | None = None) -> int:
    """Optical DDM from `ethtool -m DEV` output (per-lane values averaged) → phys_ddm."""
    p = Path(path)
    vals: dict[str, list[float]] = {k: [] for k in _DDM}
    for ln, line in enumerate(_open_text(p).splitlines(), 1):
        for k, rx in _DDM.items():
            m = rx.match(line)
            if m:
                try:
                    vals[k].append(float(m.group(1)))
                except ValueError:
                    raise DataError(
                        f"{p}: line {ln}: {line.strip()[:60]!r} has no number"
                    ) from None
                if k == "bias" and vals[k][-1] < 0:
                    raise DataError(
                        f"{p}: line {ln}: laser bias {m.group(1)} mA is negative",
                        fix="give `ethtool -m` output as printed",
                    )
                if vals[k][-1] != -math.inf:  # -inf dBm: no light at all, as ethtool prints
                    bounds.ddm(k).check(vals[k][-1], f"{p}: line {ln}", _DDM_WHAT[k],
                                        "give `ethtool -m` output as printed")  # fmt: skip
    if not vals["rx"] and not vals["temp"]:
        raise DataError(f"{p}: no optical DDM readings ('Receiver signal ... power', 'Module temperature')",
                        fix="give `ethtool -m <dev>` output of a module with diagnostics")  # fmt: skip

    def avg(k: str) -> float:
        v = [x for x in vals[k] if np.isfinite(x)]
        return float(np.mean(v)) if v else float("nan")

    return store.write(
        "phys_ddm",
        {
            "source": np.array([p.name]),
            "device": np.array([device or p.stem]),
            "tx_power_dbm": np.array([avg("tx")], dtype=np.float32),
            "rx_power_dbm": np.array(
                [min(vals["rx"]) if vals["rx"] else float("nan")], dtype=np.float32
            ),
            "temperature_c": np.array([avg("temp")], dtype=np.float32),
            "bias_ma": np.array([avg("bias")], dtype=np.float32),
        },
    )


def ingest_minibatch_csv(store: TelemetryStore, path: str | Path) -> int:
    """Per-worker mini-batch times (Alibaba PAI v2020 'worker,gpu,time,batch_time_norm') →
    app_iteration (iter = time step rank, iter_ms = batch time; phases unknown: NaN)."""
    p = Path(path)
    rows = list(csv.reader(_open_text(p).splitlines()))
    if not rows:
        raise DataError(f"{p}: empty file")
    head = [h.strip() for h in rows[0]]
    need = ("worker", "time", "batch_time_norm")
    if any(h not in head for h in need):
        raise DataError(f"{p}: header {head} lacks {need}", fix="give a mini-batch time CSV")
    iw, it, ib = (head.index(h) for h in need)
    batch = bounds.duration("ms", 1e3)  # stored as app_iteration.iter_ms
    span = bounds.duration("ms", 1e3)  # a time stamp of a job: within a year of its start
    w, t, b = [], [], []
    for ln, r in enumerate(rows[1:], 2):
        if not r:
            continue
        try:
            w.append(int(r[iw]))
            t.append(float(r[it]))
            b.append(float(r[ib]))
        except (ValueError, IndexError):
            raise DataError(
                f"{p}: line {ln} is not worker,time,batch_time: {','.join(r)[:60]!r}"
            ) from None
        if w[-1] < 0 or not (math.isfinite(t[-1]) and math.isfinite(b[-1]) and b[-1] >= 0):
            raise DataError(
                f"{p}: line {ln}: worker {r[iw]!r}, time {r[it]!r}, batch time {r[ib]!r} must be "
                "a rank >= 0 and finite times (batch time >= 0)",
                fix="repair or drop the row",
            )
        batch.check(b[-1], f"{p}: line {ln}", "batch time", "repair or drop the row")
        span.check(abs(t[-1]), f"{p}: line {ln}", "time", "repair or drop the row")
    wa, ta, ba = np.asarray(w), np.asarray(t), np.asarray(b)
    steps = np.unique(ta)
    step = np.searchsorted(steps, ta).astype(np.int32)
    n = wa.size
    nan = np.full(n, np.nan)
    return store.write(
        "app_iteration",
        {
            "iter": step,
            "rank": wa.astype(np.int32),
            "start_ms": ta.astype(np.float64),
            "data_ms": nan,
            "compute_ms": nan,
            "tp_ms": nan,
            "dp_ms": nan,
            "iter_ms": ba.astype(np.float64),
        },
    )


_SB_DETAIL = re.compile(
    r"(?P<metric>[\w./-]+?)(?::(?P<dev>\d+))?(?:_miss|\((?:B/L: (?P<bl>[-\d.eE+]+) )?"
    r"VAL: (?P<val>[-\d.eE+]+)(?: VAR: (?P<var>[-\d.eE+]+)%)? Rule:(?P<rule>[^)]*)\))"
)


def _detail_number(text: str | None, where: str, what: str) -> float:
    """A number of a 'Defective Details' entry (NaN where the entry has none)."""
    if not text:
        return float("nan")
    try:
        v = float(text)
    except ValueError:
        raise DataError(
            f"{where}: {what} {text!r} is not a number", fix="repair the line"
        ) from None
    return bounds.magnitude().check(v, where, what, "repair the line: a corrupt value")


def _jsonl(p: Path) -> list[tuple[int, dict[str, Any]]]:
    out = []
    for ln, line in enumerate(_open_text(p).splitlines(), 1):
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except json.JSONDecodeError as e:
            raise DataError(
                f"{p}: line {ln} is not JSON ({e.msg})", fix="one object per line"
            ) from None
        if not isinstance(rec, dict):
            raise DataError(f"{p}: line {ln} is not a JSON object")
        out.append((ln, rec))
    if not out:
        raise DataError(
            f"{p}: no JSON lines (an empty file)", fix="give the tool's JSON-lines output"
        )
    return out


def _split_details(text: str) -> list[str]:
    """Split 'Defective Details' at commas outside parentheses (rules contain none at top level)."""
    parts: list[str] = []
    cur: list[str] = []
    depth = 0
    for ch in text:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [x.strip() for x in parts if x.strip()]


def ingest_superbench_diagnosis(store: TelemetryStore, path: str | Path) -> int:
    """SuperBench data-diagnosis JSON lines (one node each: 'index', 'Category', 'Defective
    Details' and per-metric deviations from baseline) → phys_node_check, one row per metric
    (category/rule set where the source's rules flagged it; 'miss' = metric absent)."""
    p = Path(path)
    cols: dict[str, list[Any]] = {
        k: []
        for k in ("node", "category", "metric", "device", "baseline", "value", "deviation", "rule")
    }

    def row(
        node: str, cat: str, metric: str, dev: int, bl: float, val: float, d: float, rule: str
    ) -> None:
        for k, v in zip(cols, (node, cat, metric, dev, bl, val, d, rule), strict=True):
            cols[k].append(v)

    for ln, rec in _jsonl(p):
        node = rec.get("index")
        if not isinstance(node, str) or "Category" not in rec:
            raise DataError(
                f"{p}: line {ln} has no 'index'/'Category' (not a SuperBench diagnosis line)"
            )
        cat = str(rec["Category"])
        flagged: set[tuple[str, int]] = set()
        for part in _split_details(str(rec.get("Defective Details", ""))):
            m = _SB_DETAIL.fullmatch(part)
            if not m:
                raise DataError(f"{p}: line {ln}: defective detail {part[:60]!r} is not understood")
            dev = int(m["dev"]) if m["dev"] else -1
            miss = part.endswith("_miss")
            where = f"{p}: line {ln}: defective detail {part[:40]!r}"
            row(
                node,
                cat,
                m["metric"],
                dev,
                _detail_number(m["bl"], where, "B/L"),
                float("nan") if miss else _detail_number(m["val"], where, "VAL"),
                _detail_number(m["var"], where, "VAR") / 100,
                "missing" if miss else str(m["rule"]),
            )
            flagged.add((m["metric"], dev))
        for k, v in rec.items():
            if k in ("index", "Category", "Defective Details") or not isinstance(v, int | float):
                continue
            metric, _, d = k.rpartition(":")
            metric, dev = (metric, int(d)) if metric and d.isdigit() else (k, -1)
            if (metric, dev) not in flagged:
                fv = bounds.magnitude().check(_number(v, f"{p}: line {ln}", k), f"{p}: line {ln}",
                                              k, "repair or drop the line: a corrupt value")  # fmt: skip
                row(node, "", metric, dev, float("nan"), float("nan"), fv, "")
    n = len(cols["node"])
    return store.write(
        "phys_node_check",
        {
            "source": np.full(n, p.name),
            "node": np.asarray(cols["node"], dtype=str),
            "category": np.asarray(cols["category"], dtype=str),
            "metric": np.asarray(cols["metric"], dtype=str),
            "device": np.asarray(cols["device"], dtype=np.int32),
            "baseline": np.asarray(cols["baseline"], dtype=np.float64),
            "value": np.asarray(cols["value"], dtype=np.float64),
            "deviation": np.asarray(cols["deviation"], dtype=np.float64),
            "rule": np.asarray(cols["rule"], dtype=str),
        },
    )


def _number(v: Any, where: str, what: str) -> float:
    """A JSON number as a float; one too large for a float (a 400-digit integer) is refused."""
    if isinstance(v, bool) or not isinstance(v, int | float):
        raise DataError(f"{where}: {what} = {str(v)[:40]!r} is not a number", fix="repair it")
    try:
        return float(v)
    except OverflowError:
        raise DataError(
            f"{where}: {what} = {str(v)[:20]}... is too large for any reading", fix="repair it"
        ) from None


def _monitor_bound(key: str) -> bounds.Bound:
    """A node-monitor reading's physical range: temperatures above absolute zero; usage,
    power, memory, ECC counts and bandwidths non-negative counters; anything else within a
    64-bit counter's magnitude."""
    metric = key.partition(":")[0]
    if "temperature" in metric:
        return bounds.temperature_c()
    if metric.endswith(("_usage", "_bw", "_ecc")) or metric.startswith(("gpu_mem", "gpu_power")):
        return bounds.counter()
    return bounds.magnitude()


def ingest_superbench_monitor(store: TelemetryStore, path: str | Path) -> int:
    """SuperBench node-monitor JSON lines ('time' plus 'metric[:device]' readings) →
    phys_node_sample, one row per reading."""
    p = Path(path)
    ts: list[str] = []
    met: list[str] = []
    dev: list[str] = []
    val: list[float] = []
    for ln, rec in _jsonl(p):
        if "time" not in rec:
            raise DataError(f"{p}: line {ln} has no 'time' (not a SuperBench monitor sample)")
        for k, v in rec.items():
            if k == "time":
                continue
            fv = _number(v, f"{p}: line {ln}", k)
            _monitor_bound(k).check(fv, f"{p}: line {ln}", k,
                                    "repair or drop the sample: a corrupt reading")  # fmt: skip
            m, _, d = k.partition(":")
            if m.endswith(("_receive_bw", "_transmit_bw")):
                d, m = m.rsplit("_", 2)[0], "_".join(m.rsplit("_", 2)[1:])
            ts.append(str(rec["time"]))
            met.append(m)
            dev.append(d)
            val.append(fv)
    n = len(ts)
    return store.write(
        "phys_node_sample",
        {
            "source": np.full(n, p.name),
            "ts": np.asarray(ts, dtype=str),
            "metric": np.asarray(met, dtype=str),
            "device": np.asarray(dev, dtype=str),
            "value": np.asarray(val, dtype=np.float64),
        },
    )


def detect_kind(path: str | Path) -> str:
    """Guess a file's format from its name and first bytes."""
    p = Path(path)
    name = p.name.lower()
    if p.is_dir() or "infiniband" in name:
        return "sys-infiniband"
    head = _open_text(p)[:4000]
    if '"traceEvents"' in head or ("kineto" in name and name.endswith((".json", ".json.gz"))):
        return "kineto"
    if "/sys/class/infiniband/" in head:
        return "sys-infiniband"
    if "NVRM: Xid" in head or "dmesg" in name:
        return "dmesg"
    if "batch_time" in head.splitlines()[0] if head else False:
        return "minibatch"
    if '"Defective Details"' in head:
        return "superbench-diagnosis"
    if head.lstrip().startswith('{"time"') and "gpu_" in head:
        return "superbench-monitor"
    if re.search(r"Receiver signal .*optical power|Module temperature", head):
        return "ddm"
    if re.search(r"nccl-tests|out-of-place|#\s*size\s+count|^\s*size\s+count|nThread\s+\d+\s+nGpus", head,
                 re.I | re.M):  # fmt: skip
        return "nccl-tests"
    raise DataError(
        f"{p}: cannot tell the format", fix=f"pass --kind, one of {', '.join(INGEST_KINDS)}"
    )


def ingest_path(
    store: TelemetryStore, path: str | Path, kind: str | None = None
) -> tuple[str, int]:
    """Ingest one file (or sysfs tree) of a given or detected kind; returns (kind, rows)."""
    k = kind or detect_kind(path)
    readers = {
        "kineto": ingest_kineto,
        "nccl-tests": ingest_nccl_tests,
        "sys-infiniband": ingest_sys_infiniband,
        "ddm": ingest_ethtool_ddm,
        "dmesg": ingest_dmesg,
        "minibatch": ingest_minibatch_csv,
        "superbench-diagnosis": ingest_superbench_diagnosis,
        "superbench-monitor": ingest_superbench_monitor,
    }
    if k not in readers:
        raise DataError(
            f"ingest kind {k!r} is unknown", fix=f"use one of {', '.join(INGEST_KINDS)}"
        )
    return k, readers[k](store, path)
