"""FlashAttention-3 kernels in a Kineto (PyTorch profiler) trace: their shape, read from the
launch grid and the kernel's template, and what ran beside them on other streams.

A kernel event names its C++ template and carries its launch grid. FlashAttention-3's Hopper
kernels (Dao-AILab/flash-attention `hopper/`, the 2024 layout; DeepSeek's fork adds the value
head dim as a further template argument) are recognised by name:

- forward `flash::compute_attn_ws<Flash_fwd_kernel_traits<d_qk, kBlockM, kBlockN, warps,
  stages, Q_in_regs, cluster, dtype[, d_v]>, Is_causal, Scheduler, SeqLenTraits<varlen>>`:
  grid (query blocks, heads, batch) -> seq = grid.x * kBlockM;
- backward `flash::FlashAttnBwd<CollectiveMainloopBwd<stages, cluster, (kBlockM, kBlockN,
  d_qk)[, (kBlockM, kBlockN, d_v)], dtype, acc, Sm90, Is_causal, Varlen, ...>`: grid (key
  blocks, heads, batch) -> seq = grid.x * kBlockN;
- `FlashAttnBwdPreprocess<(kBlockM, d_qk)[, (kBlockM, d_v)], ...>` (dO . O row sums) and
  `FlashAttnBwdPostprocessConvertdQ<(kBlockM, d_qk), ...>` (dQ accumulator to BF16): grid
  (query blocks, heads, batch) -> seq = grid.x * kBlockM. Their templates carry no causal flag;
  they take the k-th backward kernel's (the k-th pre/post processing of a trace belongs to it).

seq is the tile count times the tile, i.e. the sequence rounded up to the tile (exact for a
multiple of it). With the varlen path and FA3's single-tile scheduler grid.z is the number of
sequences (one packed sequence: 1).

Beside each attention kernel: every GPU event on another stream of the same device whose
interval meets it, with the fraction of the attention kernel's duration it covers; the union
of those intervals for communication kernels (DeepEP `::ep::`, NCCL) and for the rest; the
largest grid of a communication kernel met (DeepEP launches one block per SM it uses) and the
fewest registers one of their blocks holds (registers per thread x threads), which decides
whether an attention block can share an SM with it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np

from starfabric.errors import DataError

KINDS = ("fwd", "bwd", "bwd_pre", "bwd_post")
"""Attention kernel kinds: forward, backward main kernel, backward pre- and post-processing."""

_B = r"(true|false)"
_T2 = r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)> >"
_T3 = r"cute::tuple<cute::C<(\d+)>, cute::C<(\d+)>, cute::C<(\d+)> >"
_FWD = re.compile(
    r"flash::compute_attn_ws<Flash_fwd_kernel_traits<(\d+), (\d+), (\d+), (\d+), (\d+), "
    r"(?:true|false), (\d+), cutlass::(\w+)(?:, (\d+))?>, " + _B + r", [\w:]+, "
    r"flash::SeqLenTraits<" + _B + ">"
)
_BWD = re.compile(
    r"flash::FlashAttnBwd<flash::CollectiveMainloopBwd<(\d+), " + _T3 + ", " + _T3
    + "(?:, " + _T3 + r")?, cutlass::(\w+), float, cutlass::arch::Sm90, " + _B + ", " + _B
)  # fmt: skip
_PRE = re.compile(
    r"flash::FlashAttnBwdPreprocess<" + _T2 + "(?:, " + _T2 + r")?, cutlass::(\w+), float, "
    r"cutlass::arch::Sm90, " + _B + ", " + _B + ">"
)
_POST = re.compile(r"flash::FlashAttnBwdPostprocessConvertdQ<" + _T2 + r", cutlass::(\w+)")
_COMM = re.compile(r"::ep::|nccl", re.I)
"""Communication kernels: DeepEP's (namespace `ep`, DeepSeek's `dpsk::ep::internode::...`) and
NCCL's."""
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")


@dataclass(frozen=True)
class FlashKernel:
    """One attention kernel event, its shape from grid and template, and its neighbours."""

    call: int
    kind: str
    ts_us: float
    duration_us: float
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    regs_per_thread: int
    smem_bytes: int
    tile_m: int
    tile_n: int
    seq: int
    heads: int
    batch: int
    d_qk: int
    d_v: int
    causal: bool
    varlen: bool
    dtype: str
    comm_overlap_fraction: float
    comm_blocks_max: int
    comm_regs_per_block_min: int
    other_overlap_fraction: float
    concurrent: str


@dataclass(frozen=True)
class _Parsed:
    kind: str
    tile_m: int
    tile_n: int
    d_qk: int
    d_v: int
    causal: bool | None
    varlen: bool | None
    dtype: str


def parse_template(name: str) -> _Parsed | None:
    """The attention kind and template parameters of a kernel name, or None (not FA3's)."""
    if m := _FWD.search(name):
        d_qk, bm, bn, _, _, _, dt, dv, causal, varlen = m.groups()
        return _Parsed("fwd", int(bm), int(bn), int(d_qk), int(dv or d_qk), causal == "true",
                       varlen == "true", dt)  # fmt: skip
    if m := _BWD.search(name):
        g = m.groups()  # stages, cluster x3, (bM, bN, d_qk), [value tile x3], dtype, flags
        d_v = int(g[9]) if g[7] is not None else int(g[6])
        return _Parsed("bwd", int(g[4]), int(g[5]), int(g[6]), d_v, g[11] == "true",
                       g[12] == "true", g[10])  # fmt: skip
    if m := _PRE.search(name):
        bm, d_qk, _, dv, dt, _, varlen = m.groups()
        return _Parsed("bwd_pre", int(bm), 0, int(d_qk), int(dv or d_qk), None,
                       varlen == "true", dt)  # fmt: skip
    if m := _POST.search(name):
        bm, d_qk, dt = m.groups()
        return _Parsed("bwd_post", int(bm), 0, int(d_qk), 0, None, None, dt)
    return None


def short_name(name: str) -> str:
    """A readable kernel name: the qualified function (or cutlass::device_kernel's kernel
    class) without templates and arguments, its last three components; DeepEP's prefixed."""
    s = name.removeprefix("void ").strip()
    if s.startswith("cutlass::device_kernel<"):
        s = s[len("cutlass::device_kernel<") :]
    s = re.split(r"[<(]", s, maxsplit=1)[0]
    parts = [p for p in s.split("::") if p]
    out = "::".join(parts[-3:]) if parts else name[:40]
    return f"DeepEP {out}" if "::ep::" in name else out


def _int(v: Any, default: int = -1) -> int:
    """An integer cell of a trace event, `default` when absent or not a number."""
    ok = isinstance(v, int | float) and not isinstance(v, bool) and np.isfinite(v)
    return int(v) if ok else default


def _ints(v: Any, n: int = 3) -> tuple[int, int, int]:
    vals = list(v) if isinstance(v, list | tuple) else []
    vals = [int(x) for x in vals if isinstance(x, int | float) and not isinstance(x, bool)]
    vals = (vals + [1] * n)[:n]
    return vals[0], vals[1], vals[2]


def _union(starts: np.ndarray, ends: np.ndarray) -> float:
    """Length of the union of intervals [starts, ends) (vectorized sweep)."""
    if starts.size == 0:
        return 0.0
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], np.maximum.accumulate(ends[o])
    new = np.ones(s.size, dtype=bool)
    new[1:] = s[1:] > e[:-1]
    grp = np.cumsum(new) - 1
    lo = s[new]
    hi = np.zeros(lo.size)
    np.maximum.at(hi, grp, e)
    return float(np.sum(hi - lo))


def flash_kernels(events: list[dict[str, Any]], where: str = "trace") -> list[FlashKernel]:
    """Every FlashAttention-3 kernel event of `events` (a Kineto trace's traceEvents), in time
    order, with its shape and what ran beside it on other streams of its device."""
    gpu = [e for e in events if e.get("cat") in GPU_CATEGORIES and e.get("ph") == "X"]
    if not gpu:
        raise DataError(f"{where}: no GPU events", fix="give a trace profiled with CUDA activity")
    ts = np.array([float(e["ts"]) for e in gpu])
    end = ts + np.array([float(e["dur"]) for e in gpu])
    args = [e.get("args") or {} for e in gpu]
    stream = np.array([_int(a.get("stream", e.get("tid"))) for a, e in zip(args, gpu, strict=True)])
    device = np.array([_int(a.get("device", e.get("pid"))) for a, e in zip(args, gpu, strict=True)])
    comm = np.array([bool(_COMM.search(str(e.get("name", "")))) for e in gpu])
    blocks = np.array([int(np.prod(_ints(a.get("grid")))) for a in args])
    regs = np.array([_int(a.get("registers per thread"), 0) * int(np.prod(_ints(a.get("block"))))
                     for a in args])  # fmt: skip
    t0 = float(ts.min())
    found = []
    for i in np.argsort(ts, kind="stable"):
        p = parse_template(str(gpu[i].get("name", "")))
        if p is not None and gpu[i].get("cat") == "kernel":
            found.append((int(i), p))
    mains = [p for _, p in found if p.kind == "bwd"]
    counts = dict.fromkeys(KINDS, 0)
    out: list[FlashKernel] = []
    for i, p in found:
        dur = float(end[i] - ts[i])
        if dur <= 0:
            raise DataError(f"{where}: attention kernel at ts={ts[i]:g} has duration {dur:g} us",
                            fix="give a complete trace")  # fmt: skip
        call = counts[p.kind]
        counts[p.kind] += 1
        causal, varlen, d_v = p.causal, p.varlen, p.d_v
        if p.kind in ("bwd_pre", "bwd_post"):
            main = mains[call] if call < len(mains) else None
            causal = main.causal if main else None
            varlen = varlen if varlen is not None else (main.varlen if main else None)
            d_v = d_v or (main.d_v if main else 0)
        grid, blk = _ints(args[i].get("grid")), _ints(args[i].get("block"))
        tile = p.tile_n if p.kind == "bwd" else p.tile_m
        lo, hi = np.maximum(ts, ts[i]), np.minimum(end, end[i])
        meet = (hi > lo) & (stream != stream[i]) & (device == device[i])
        c, o = meet & comm, meet & ~comm
        beside = [
            f"{short_name(str(gpu[j]['name']))} ({(hi[j] - lo[j]) / dur:.2f})"
            for j in np.flatnonzero(meet)[np.argsort(ts[meet], kind="stable")]
        ]
        out.append(FlashKernel(
            call=call, kind=p.kind, ts_us=float(ts[i] - t0), duration_us=dur, grid=grid,
            block=blk, regs_per_thread=_int(args[i].get("registers per thread"), 0),
            smem_bytes=_int(args[i].get("shared memory"), 0), tile_m=p.tile_m, tile_n=p.tile_n,
            seq=grid[0] * tile, heads=grid[1], batch=grid[2], d_qk=p.d_qk, d_v=d_v,
            causal=bool(causal), varlen=bool(varlen), dtype=p.dtype,
            comm_overlap_fraction=_union(lo[c], hi[c]) / dur,
            comm_blocks_max=int(blocks[c].max()) if c.any() else 0,
            comm_regs_per_block_min=int(regs[c].min()) if c.any() else 0,
            other_overlap_fraction=_union(lo[o], hi[o]) / dur,
            concurrent="; ".join(beside),
        ))  # fmt: skip
    return out
