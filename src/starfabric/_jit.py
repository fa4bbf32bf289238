"""The one place numba options are set: every kernel module imports `njit` from here.

Kernels are compiled with `cache=True` so test runs and CLI calls reuse machine code. The cache
lives in NUMBA_CACHE_DIR when set (the Makefile sets it), else in the user's cache folder
($XDG_CACHE_HOME or ~/.cache, /starfabric/numba), never in the installed source tree. The CLI
prints one line when a kernel has no cached machine code yet (`announce_compiles`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar, cast

import numba
import numpy as np
import numpy.typing as npt
from numba.core import event as numba_event

F = TypeVar("F", bound=Callable[..., Any])
T = TypeVar("T", bound=tuple[Any, ...])

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}


def cache_dir() -> Path:
    """Where compiled kernels are cached: NUMBA_CACHE_DIR, else the user cache folder."""
    env = os.environ.get("NUMBA_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "starfabric" / "numba"


_config: Any = numba.config
if not _config.CACHE_DIR:  # numba read NUMBA_CACHE_DIR at import; honour it if set
    _config.CACHE_DIR = str(cache_dir())


class _Printer(Protocol):
    def print(self, *objects: Any, markup: bool = ...) -> None: ...


class _CompileNote(numba_event.Listener):
    """Says once, when numba starts compiling (a cache hit never raises this event)."""

    def __init__(self, console: _Printer) -> None:
        self.console = console
        self.said = False

    def on_start(self, event: Any) -> None:
        if not self.said:
            self.said = True
            self.console.print(
                f"compiling kernels (first run only; cached in {_config.CACHE_DIR})", markup=False
            )

    def on_end(self, event: Any) -> None:
        pass


class _CompileClock(numba_event.Listener):
    """Thread CPU seconds spent compiling (outermost compile events only), so measurements
    of management CPU can leave the one-time JIT cost out (a cold run and a warm run of the
    same seed then report the same work)."""

    def __init__(self) -> None:
        self.depth = 0
        self.t0 = 0.0
        self.total = 0.0

    def on_start(self, event: Any) -> None:
        if self.depth == 0:
            self.t0 = time.thread_time()
        self.depth += 1

    def on_end(self, event: Any) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.total += time.thread_time() - self.t0


_CLOCK = _CompileClock()
numba_event.register("numba:compile", _CLOCK)


def compile_cpu_s() -> float:
    """Thread CPU seconds this process has spent compiling kernels so far."""
    return _CLOCK.total + (time.thread_time() - _CLOCK.t0 if _CLOCK.depth else 0.0)


def announce_compiles(console: _Printer) -> None:
    """From now on, say once (on `console`) when a kernel is compiled rather than loaded."""
    numba_event.register("numba:compile", _CompileNote(console))


def njit(fn: F) -> F:
    """Compile `fn` in nopython mode with the project's options."""
    return numba.njit(**_OPTIONS)(fn)


def frozen(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """`a` as a kernel's input array: C-contiguous (a copy only when it is not) and read-only
    (a view). numba compiles a kernel once per writable/read-only and layout mix of its array
    arguments (a minute for the packet pipeline), so inputs reach kernels one way only."""
    v = np.ascontiguousarray(a).view()
    v.flags.writeable = False
    return v


def frozen_each(arrays: T) -> T:
    """`frozen` applied to each array of a tuple (its length and types kept for the checker)."""
    return cast(T, tuple(frozen(a) for a in arrays))


def njit_inline(fn: F) -> F:
    """Like `njit`, inlined into its callers at numba IR level: for small helpers that take
    the table arrays, whose calls would otherwise cost reference counting each."""
    return numba.njit(inline="always", **_OPTIONS)(fn)
