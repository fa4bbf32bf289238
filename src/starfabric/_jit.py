"""The one place numba options are set: every kernel module imports `njit` from here.

Kernels are compiled with `cache=True` so test runs and CLI calls reuse machine code
(NUMBA_CACHE_DIR, set by the Makefile, keeps the cache out of the source tree).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numba

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS: dict[str, Any] = {"cache": True, "nogil": True, "error_model": "numpy"}


def njit(fn: F) -> F:
    """Compile `fn` in nopython mode with the project's options."""
    return numba.njit(**_OPTIONS)(fn)


def njit_parallel(fn: F) -> F:
    """Like `njit`, with `prange` loops spread over threads."""
    return numba.njit(parallel=True, **_OPTIONS)(fn)


def njit_inline(fn: F) -> F:
    """Like `njit`, inlined into its callers at numba IR level: for small helpers that take
    the table arrays, whose calls would otherwise cost reference counting each."""
    return numba.njit(inline="always", **_OPTIONS)(fn)
