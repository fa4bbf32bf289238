"""The one output layer: every path a command writes is checked before work starts, and every
file is written to a temporary name in its own folder and renamed over the target, so a failed
or interrupted run never leaves half a file nor replaces a good one.

`check_file`/`check_dir` are also Typer option callbacks (`callback=output_file("--json")`), so
an unwritable path is refused while the command line is parsed, before any computation.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from starfabric.errors import ConfigError


def _nearest_existing(p: Path) -> Path:
    q = p
    while not q.exists() and q != q.parent:
        q = q.parent
    return q


def _probe_writable(folder: Path, what: str, option: str) -> None:
    """Create and remove a file in `folder`: the only test that also holds for root, read-only
    mounts and ACLs (os.access answers yes to root on a read-only bind mount)."""
    if not folder.is_dir():
        raise ConfigError(
            f"{option} {what}: {folder} is not a folder",
            fix=f"give {option} a path inside an existing folder",
        )
    try:
        fd, name = tempfile.mkstemp(prefix=".starfabric-probe-", dir=folder)
    except OSError as exc:
        raise ConfigError(
            f"{option} {what}: cannot write in {folder} ({exc.strerror or exc.__class__.__name__})",
            fix=f"give {option} a path in a folder you can write",
        ) from None
    os.close(fd)
    os.unlink(name)


def check_file(path: str | Path, option: str) -> Path:
    """`path` can be written as a file: not a folder, its folder (or nearest existing ancestor,
    the folders are then created) writable, an existing file replaceable. Returns the Path."""
    p = Path(path)
    what = str(path)
    if not what.strip():
        raise ConfigError(f"{option}: empty path", fix=f"give {option} a file name")
    if p.is_dir():
        raise ConfigError(
            f"{option} {what}: is a folder, not a file",
            fix=f"give {option} a file name, e.g. {p / 'out'}",
        )
    if p.exists() and not p.is_file():
        raise ConfigError(
            f"{option} {what}: is not a regular file", fix=f"give {option} a file name"
        )
    _probe_writable(_nearest_existing(p.parent), what, option)
    return p


def check_dir(path: str | Path, option: str) -> Path:
    """`path` is (or can be created as) a folder the run can write files in."""
    p = Path(path)
    what = str(path)
    if not what.strip():
        raise ConfigError(f"{option}: empty path", fix=f"give {option} a folder name")
    if p.exists() and not p.is_dir():
        raise ConfigError(
            f"{option} {what}: is a file, not a folder", fix=f"give {option} a folder name"
        )
    _probe_writable(_nearest_existing(p), what, option)
    return p


def output_file(option: str) -> Callable[[Any], Any]:
    """A Typer option callback: checks a file output (None / "" = not asked for) at parse time."""

    def cb(value: Any) -> Any:
        if value not in (None, "") and not isinstance(value, bool):
            check_file(value, option)
        return value

    cb.starfabric_output = "file"  # type: ignore[attr-defined]  # found by the CLI tests
    return cb


def output_dir(option: str) -> Callable[[Any], Any]:
    """A Typer option callback: checks a folder output at parse time."""

    def cb(value: Any) -> Any:
        if value not in (None, ""):
            check_dir(value, option)
        return value

    cb.starfabric_output = "dir"  # type: ignore[attr-defined]  # found by the CLI tests
    return cb


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """A temporary path beside `path` (same suffix, so writers that look at it still work);
    renamed over `path` when the block ends normally, removed when it raises."""
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{p.name}.", suffix=f".tmp{p.suffix}", dir=p.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        if p.exists():  # keep the user's permission bits on the replaced file
            with contextlib.suppress(OSError):
                shutil.copymode(p, tmp)
        else:
            os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, p)
    finally:
        tmp.unlink(missing_ok=True)
        for side in (Path(f"{tmp}.wal"),):  # DuckDB's write-ahead log
            side.unlink(missing_ok=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_bytes(path: str | Path, data: bytes) -> Path:
    """Write `data` to `path` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)
    return Path(path)


def write_text(path: str | Path, text: str) -> Path:
    """Write `text` (UTF-8) to `path` atomically."""
    return write_bytes(path, text.encode())


def write_json(path: str | Path, data: Any, **dumps: Any) -> Path:
    """Serialize first (a value json cannot write fails before the file is touched), then
    write atomically. `dumps` are json.dumps options (indent, sort_keys, default)."""
    dumps.setdefault("indent", 2)
    text = json.dumps(data, **dumps)
    return write_text(path, text if text.endswith("\n") else text + "\n")


def save_figure(fig: Any, path: str | Path, **savefig: Any) -> Path:
    """A matplotlib figure saved atomically (the format follows the target's suffix)."""
    p = Path(path)
    savefig.setdefault("format", p.suffix.lstrip(".") or "png")
    with atomic_path(p) as tmp:
        fig.savefig(tmp, **savefig)
    return p


@contextlib.contextmanager
def replacing_copy(path: str | Path) -> Iterator[Path]:
    """For a file a run updates in place (a DuckDB store): work on a copy of it (or on a fresh
    temporary file when it does not exist) and rename the copy over it only on success, so a
    failed run leaves the file as it was and never leaves an empty one behind."""
    p = Path(path)
    with atomic_path(p) as tmp:
        tmp.unlink()
        if p.exists():
            shutil.copy2(p, tmp)
        yield tmp


__all__ = [
    "atomic_path",
    "check_dir",
    "check_file",
    "output_dir",
    "output_file",
    "replacing_copy",
    "save_figure",
    "write_bytes",
    "write_json",
    "write_text",
]
