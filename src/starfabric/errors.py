"""One exception tree by meaning; the CLI turns each into a single line and exit code 2.

Every message names what is wrong (field, value, file, record) and how to fix it, so a user
never needs a traceback to act on it.
"""

from __future__ import annotations


class StarfabricError(Exception):
    """Base of every error a user can cause; carries a one-line message and an optional fix."""

    exit_code = 2

    def __init__(self, message: str, *, fix: str | None = None) -> None:
        self.message = " ".join(message.split())
        self.fix = " ".join(fix.split()) if fix else None
        super().__init__(self.one_line())

    def one_line(self) -> str:
        return f"{self.message} (fix: {self.fix})" if self.fix else self.message


class ConfigError(StarfabricError):
    """A configuration or option is malformed: wrong type, unknown key, out of range."""


class InfeasibleError(StarfabricError):
    """A well-formed request that cannot be realised (a topology that cannot be built)."""


class DataError(StarfabricError):
    """Input data (pcap, trace, log) is corrupt or not in the expected format."""


class InvariantError(StarfabricError):
    """An internal invariant failed (counters that do not add up): a bug, reported loudly."""
