"""Chrome-trace / Perfetto JSON: complete events ("X") on named process/thread tracks.

Times are given in seconds and written in microseconds, as the format expects. The writer
checks what Perfetto would reject (negative durations, non-finite times) before writing.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starfabric.errors import InvariantError


@dataclass
class ChromeTrace:
    """Accumulates slices and counters; `write` produces a file ui.perfetto.dev opens."""

    events: list[dict[str, Any]] = field(default_factory=list)
    _pids: dict[str, int] = field(default_factory=dict)
    _tids: dict[tuple[int, str], int] = field(default_factory=dict)

    def track(self, process: str, thread: str) -> tuple[int, int]:
        """(pid, tid) of a named track, declaring its names on first use."""
        if process not in self._pids:
            pid = len(self._pids) + 1
            self._pids[process] = pid
            self.events.append(
                {"ph": "M", "name": "process_name", "pid": pid, "tid": 0, "args": {"name": process}}
            )
            self.events.append(
                {
                    "ph": "M",
                    "name": "process_sort_index",
                    "pid": pid,
                    "tid": 0,
                    "args": {"sort_index": pid},
                }
            )
        pid = self._pids[process]
        key = (pid, thread)
        if key not in self._tids:
            tid = len([k for k in self._tids if k[0] == pid]) + 1
            self._tids[key] = tid
            self.events.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": thread}}
            )
        return pid, self._tids[key]

    def slice(
        self,
        process: str,
        thread: str,
        name: str,
        start_s: float,
        dur_s: float,
        cat: str = "",
        args: dict[str, Any] | None = None,
    ) -> None:
        """One complete event from start_s lasting dur_s."""
        if not (math.isfinite(start_s) and math.isfinite(dur_s)) or dur_s < 0:
            raise InvariantError(
                f"trace slice {name!r}: start {start_s}, duration {dur_s}", fix="report a bug"
            )
        pid, tid = self.track(process, thread)
        ev: dict[str, Any] = {
            "ph": "X",
            "name": name,
            "pid": pid,
            "tid": tid,
            "ts": start_s * 1e6,
            "dur": dur_s * 1e6,
        }
        if cat:
            ev["cat"] = cat
        if args:
            ev["args"] = args
        self.events.append(ev)

    def counter(self, process: str, name: str, t_s: float, values: dict[str, float]) -> None:
        """A counter sample (e.g. link utilization) at time t_s."""
        pid, _ = self.track(process, "counters")
        self.events.append({"ph": "C", "name": name, "pid": pid, "ts": t_s * 1e6, "args": values})

    def to_json(self) -> dict[str, Any]:
        return {"traceEvents": self.events, "displayTimeUnit": "ms"}

    def write(self, path: str | Path) -> Path:
        from starfabric.outputs import write_text

        return write_text(path, json.dumps(self.to_json(), separators=(",", ":")))
