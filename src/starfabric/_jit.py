"""The one place numba options are set: every kernel module imports `njit` from here.

Kernels are compiled with `cache=True` so test runs and CLI calls reuse machine code. The cache
lives in NUMBA_CACHE_DIR when set (the Makefile sets it), else in the user's cache folder
($XDG_CACHE_HOME or ~/.cache, /starfabric/numba), never in the installed source tree. The CLI
prints one line when a kernel has no cached machine code yet (`announce_compiles`).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])

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


_announce: _Printer | None = None
_announced = False


def announce_compiles(console: _Printer) -> None:
    """From now on, say once (on `console`) when a kernel is about to be compiled."""
    global _announce
    _announce = console


def _cold(dispatcher: Any) -> bool:
    """True when the dispatcher's on-disk cache index does not exist yet (first run)."""
    try:
        index = dispatcher._cache._cache_file._index_path
    except AttributeError:  # a numba without these internals: say nothing
        return False
    return not os.path.exists(index)


def _note(dispatcher: Any) -> None:
    global _announced
    if _announce is not None and not _announced and _cold(dispatcher):
        _announced = True
        _announce.print(
            f"compiling kernels (first run only; cached in {_config.CACHE_DIR})",
            markup=False,
        )


def njit(fn: F) -> F:
    """Compile `fn` in nopython mode with the project's options."""
    d = numba.njit(**_OPTIONS)(fn)
    _note(d)
    return d


def njit_parallel(fn: F) -> F:
    """Like `njit`, with `prange` loops spread over threads."""
    d = numba.njit(parallel=True, **_OPTIONS)(fn)
    _note(d)
    return d
