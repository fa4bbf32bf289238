"""Validated, frozen specs read from YAML/JSON; every problem becomes a one-line ConfigError.

`Spec` is the base of every user-facing description: `extra="forbid"` (a misspelled key is an
error, never silently dropped) and frozen (a spec compiled into arrays cannot drift).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, ValidationError

from starfabric import ranges
from starfabric.errors import ConfigError

S = TypeVar("S", bound=BaseModel)


class Spec(BaseModel):
    """Base for user-facing specifications: unknown keys are errors, instances are immutable."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


def _loc(loc: tuple[Any, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "<root>"


_FIXES = {
    "extra_forbidden": "remove it or check its spelling",
    "missing": "add it",
    "int_parsing": "give a whole number",
    "float_parsing": "give a number",
    "bool_parsing": "give true or false",
    "literal_error": "use one of the listed values",
    "enum": "use one of the listed values",
}

_BOUNDS = {
    "greater_than_equal": ("ge", ">="),
    "greater_than": ("gt", ">"),
    "less_than_equal": ("le", "<="),
    "less_than": ("lt", "<"),
}


def validation_message(err: ValidationError, source: str = "") -> ConfigError:
    """Turn pydantic's report into one line naming the field, the value and the fix."""
    errors = _causes(err.errors())
    first = errors[0]
    where = _loc(tuple(first["loc"]))
    kind = first["type"]
    value = first.get("input")
    msg = first["msg"]
    prefix = f"{source}: " if source else ""
    fix = _FIXES.get(kind, "correct the value")
    if kind in _BOUNDS:  # pydantic's ge/gt/le/lt: say which bound
        key, op = _BOUNDS[kind]
        fix = f"give {where} a value {op} {(first.get('ctx') or {}).get(key)}"
    if kind == ranges.RANGE_ERROR:  # ranges.ranged: the words every range check uses
        ctx = first.get("ctx") or {}
        r = ranges.IntRange(ctx["lo"], ctx["hi"], ctx["what"])
        text = f"{prefix}{ranges.message(where, ctx['value'], r)}"
        fix = ranges.fix_for(where, r)
    elif kind == "extra_forbidden":
        text = f"{prefix}unknown field '{where}'"
    elif kind == "missing":
        text = f"{prefix}field '{where}' is required"
    else:
        if kind == "value_error":  # our validators' own words, without pydantic's preamble
            msg = msg.removeprefix("Value error, ")
        if not first["loc"]:  # a whole-spec check: its message names the fields
            text = f"{prefix}{msg}"
        elif isinstance(value, dict | list):  # a section: the message says what is wrong
            text = f"{prefix}field '{where}': {msg}"
        else:
            shown = repr(value)
            if len(shown) > 60:
                shown = shown[:57] + "..."
            text = f"{prefix}field '{where}' = {shown}: {msg}"
    rest = errors[1:]
    if rest:  # name every other field too (up to a few), not just how many there are
        shown_rest = [f"'{_loc(tuple(e['loc']))}' ({_short(e)})" for e in rest[:4]]
        text += "; also " + ", ".join(shown_rest)
        if len(rest) > 4:
            text += f" and {len(rest) - 4} more"
    return ConfigError(text, fix=fix)


def _causes(errors: list[Any]) -> list[Any]:
    """Without a list's "too short" that only follows from an item of it failing (a VPC file
    with one tenant whose rule is wrong is not also a file without tenants)."""

    def inside(e: Any) -> bool:
        loc = tuple(e["loc"])
        return any(tuple(o["loc"])[: len(loc)] == loc and len(o["loc"]) > len(loc) for o in errors)

    kept = [e for e in errors if not (e["type"] == "too_short" and inside(e))]
    return kept or errors


def _short(e: Any) -> str:
    if e["type"] == "extra_forbidden":
        return "unknown field"
    if e["type"] == "missing":
        return "required"
    return str(e["msg"]).removeprefix("Value error, ")


MAX_SPEC_MB_DEFAULT = 16.0
"""Largest spec file (YAML/JSON) read, in MiB; the biggest bundled one is a few KB. A 50 MB VPC
YAML takes minutes and gigabytes to load, so it is refused before parsing. Raise it with the
environment variable STARFABRIC_MAX_SPEC_MB."""


def max_spec_bytes() -> int:
    """The spec-file size limit in bytes (STARFABRIC_MAX_SPEC_MB, else the default)."""
    raw = os.environ.get("STARFABRIC_MAX_SPEC_MB", "")
    try:
        mb = float(raw) if raw else MAX_SPEC_MB_DEFAULT
    except ValueError:
        raise ConfigError(
            f"STARFABRIC_MAX_SPEC_MB={raw!r} is not a number", fix="set it to a size in MiB"
        ) from None
    return int(mb * 2**20)


_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's C parser when built


def read_mapping(path: str | Path) -> dict[str, Any]:
    """Read a YAML or JSON file holding a mapping; refuse anything else in one line."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{p}: no such file", fix="check the path")
    size, limit = p.stat().st_size, max_spec_bytes()
    if size > limit:
        raise ConfigError(
            f"{p}: {size / 2**20:,.1f} MiB is above the {limit / 2**20:g} MiB limit for a "
            "spec file (it would take minutes and gigabytes to load)",
            fix="split it into smaller files, or set STARFABRIC_MAX_SPEC_MB to allow it",
        )
    try:
        text = p.read_text()
        data = json.loads(text) if p.suffix == ".json" else yaml.load(text, Loader=_Loader)
    except (yaml.YAMLError, json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(getattr(exc, "problem_mark", None), "line", None)
        if line is None:
            line = getattr(exc, "lineno", None)
        at = (
            f" near line {line + 1 if isinstance(exc, yaml.YAMLError) else line}"
            if line is not None
            else ""
        )
        raise ConfigError(f"{p}: not valid YAML/JSON{at}", fix="fix the syntax") from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"{p}: top level must be a mapping of fields", fix="write 'field: value' pairs"
        )
    return data


def parse_spec(model: type[S], data: dict[str, Any], source: str = "") -> S:
    """Validate `data` against `model`; a failure is a one-line ConfigError."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise validation_message(exc, source) from None


def load_spec(model: type[S], path: str | Path) -> S:
    """Read and validate a spec file."""
    return parse_spec(model, read_mapping(path), source=str(path))
