"""Checks on the command line itself, run before any work: options that would be ignored or
that conflict are errors (a user who typed them expects them to matter), and counts that must
be positive say so in one line (Click's own range errors print a usage block instead)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from starfabric.errors import ConfigError
from starfabric.ranges import IntRange, option


def given(ctx: Any, name: str) -> bool:
    """True when the user typed the option (not its default)."""
    src = ctx.get_parameter_source(name)  # Typer's vendored Click: compare by name
    return src is not None and src.name not in ("DEFAULT", "DEFAULT_MAP")


def _flag(ctx: Any, name: str) -> str:
    for p in ctx.command.params:
        if p.name == name:
            return str(p.opts[0])
    return f"--{name.replace('_', '-')}"


def needs(ctx: Any, option: str, *, requires: str, because: str = "") -> None:
    """`option` has an effect only with `requires`: typing it alone is an error."""
    if given(ctx, option) and not given(ctx, requires):
        a, b = _flag(ctx, option), _flag(ctx, requires)
        raise ConfigError(
            f"{a} is used only with {b}{': ' + because if because else ''}",
            fix=f"add {b}, or drop {a}",
        )


def excludes(ctx: Any, option: str, *, others: tuple[str, ...], because: str = "") -> None:
    """`option` replaces `others`: typing both is an error (one would be ignored)."""
    if not given(ctx, option):
        return
    clash = [_flag(ctx, o) for o in others if given(ctx, o)]
    if clash:
        a = _flag(ctx, option)
        raise ConfigError(
            f"{', '.join(clash)} would be ignored with {a}{': ' + because if because else ''}",
            fix=f"put them in the file given to {a}, or drop {a}",
        )


MAX_SEEDS = 1000
"""Assumption: seeds (ECMP placements, fault placements) a sweep accepts; each seed is one more
simulation, and results stop moving long before (the defaults are 3)."""


SEED = IntRange(0, 2**63 - 1, "a seed: a non-negative 64-bit integer")
"""Seeds go to numpy generators and ECMP hashes (uint64/int64): a negative one or one above
2^63 - 1 used to end in an OverflowError."""


def seed_option(flag: str, room: int = 0) -> Callable[[Any], Any]:
    """The Typer callback of a seed option; `room`: seeds counted up from it (seed0 + i)."""
    return option(flag, SEED.narrower(hi=SEED.hi - room))


def at_least(option: str, low: float = 1) -> Callable[[Any], Any]:
    """A Typer option callback: a number >= low (and finite), refused in one line."""

    def cb(value: Any) -> Any:
        if value is not None and (value != value or value in (float("inf"), float("-inf"))):
            raise ConfigError(
                f"{option} {value}: not a finite number", fix=f"give {option} a number"
            )
        if value is not None and value < low:
            raise ConfigError(
                f"{option} {value}: must be at least {low}", fix=f"give {option} {low} or more"
            )
        return value

    return cb


def between(option: str, low: float, high: float, why: str) -> Callable[[Any], Any]:
    """A Typer option callback: a finite number in low..high (`why` names the upper bound)."""
    base = at_least(option, low)

    def cb(value: Any) -> Any:
        base(value)
        if value is not None and value > high:
            hi = f"{int(high):,}" if float(high).is_integer() and high >= 1e6 else f"{high:g}"
            raise ConfigError(
                f"{option} {value}: above {hi} ({why})", fix=f"give {option} {low:g}..{hi}"
            )
        return value

    return cb
