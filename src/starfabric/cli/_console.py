"""The CLI's consoles: no emoji codes (':1234:' in 'link_crc:1234:0.7:2' is not 🔢), no
automatic highlighting, and, when output is piped, a wide line so tables wrap their text
instead of cutting numbers to fit 80 columns (COLUMNS, when set, still decides)."""

from __future__ import annotations

import os
import sys
from typing import Any

from rich.console import Console

PIPED_WIDTH = 200
"""Line width when stdout is not a terminal and COLUMNS is unset."""


def console(*, stderr: bool = False, **kw: Any) -> Console:
    """A Console for command output (stdout) or messages (stderr)."""
    stream = sys.stderr if stderr else sys.stdout
    if "width" not in kw and "COLUMNS" not in os.environ and not stream.isatty():
        kw["width"] = PIPED_WIDTH
    kw.setdefault("highlight", False)
    return Console(stderr=stderr, emoji=False, **kw)
