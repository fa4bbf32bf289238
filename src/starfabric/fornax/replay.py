"""One replay clock for every run on simulated time (`fornax run`, chaos runs and their
oracle, the experiments): periodic ticks (scrub, events, patrol, aging threads), processes
that run at every tick before it (fault injection: port stalls, ring windows, bit flips
drawn per tick), one-shot events on the tick grid (a manager crash: at the first tick at
or after its time, before that tick) and one-shot actions scheduled at a time (policy
changes), in the style of a SimPy environment reduced to what the runs need.

Order at a batch boundary: `advance(t)` first runs every tick due at or before t — each
tick: its processes, its due tick events, then `on_tick` — then every scheduled action due
at or before t, then the caller processes the batch; so a policy change takes effect at
the first batch at or after its time, after that batch's ticks.
Over a long idle gap (pcaps carry wall-clock times) only the last `catch_up` ticks run:
nothing else happens in the gap, and that many cover the scrubber's pass of the table.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable, Iterable
from typing import Protocol, TypeVar


class _Window(Protocol):
    @property
    def t_start_ns(self) -> int: ...


W = TypeVar("W", bound=_Window)


class Replay:
    """Ticks every `tick_ns` (the first at `next_tick_ns`, or one period after the first
    `advance` when None) and scheduled actions (see the module docstring)."""

    def __init__(
        self,
        tick_ns: int,
        on_tick: Callable[[int], None],
        *,
        next_tick_ns: int | None = None,
        catch_up: int | None = None,
    ) -> None:
        self.tick_ns = int(tick_ns)
        self.on_tick = on_tick
        self.next_tick_ns = next_tick_ns
        self.catch_up = catch_up
        self.ticks = 0
        self._queue: list[tuple[int, int, Callable[[], object]]] = []
        self._seq = itertools.count()
        self._processes: list[Callable[[int], object]] = []
        self._tick_events: list[tuple[int, int, Callable[[int], object]]] = []

    def each_tick(self, process: Callable[[int], object]) -> None:
        """Run `process(t)` at every tick, before the tick's events and `on_tick` (in the
        order the processes were added)."""
        self._processes.append(process)

    def at_tick(self, t_ns: int, event: Callable[[int], object]) -> None:
        """Run `event(t)` at the first tick t at or after t_ns, after that tick's processes
        and before its `on_tick` (equal times: in scheduling order)."""
        heapq.heappush(self._tick_events, (int(t_ns), next(self._seq), event))

    def at(self, t_ns: int, action: Callable[[], object]) -> None:
        """Schedule `action` at simulated time t_ns (equal times: in scheduling order)."""
        heapq.heappush(self._queue, (int(t_ns), next(self._seq), action))

    @property
    def pending(self) -> int:
        """Scheduled actions not run yet."""
        return len(self._queue)

    def tick_until(self, t_ns: int) -> None:
        """Run every tick due at or before t_ns (only the last `catch_up` of a long gap)."""
        if self.next_tick_ns is None:
            self.next_tick_ns = t_ns + self.tick_ns
        due = (t_ns - self.next_tick_ns) // self.tick_ns + 1 if t_ns >= self.next_tick_ns else 0
        if self.catch_up is not None and due > self.catch_up:
            self.next_tick_ns += (due - self.catch_up) * self.tick_ns
            due = self.catch_up
        for _ in range(due):
            t = self.next_tick_ns
            self.next_tick_ns = t + self.tick_ns
            self.ticks += 1
            for p in self._processes:
                p(t)
            while self._tick_events and self._tick_events[0][0] <= t:
                heapq.heappop(self._tick_events)[2](t)
            self.on_tick(t)

    def run_due(self, t_ns: int) -> None:
        """Run the scheduled actions due at or before t_ns, in time order."""
        while self._queue and self._queue[0][0] <= t_ns:
            heapq.heappop(self._queue)[2]()

    def advance(self, t_ns: int) -> None:
        """Ticks due, then scheduled actions due (a batch starting at t_ns comes next)."""
        self.tick_until(t_ns)
        self.run_due(t_ns)

    def drain(self) -> None:
        """Run every scheduled action left, in time order (changes after the last packet
        still take effect)."""
        while self._queue:
            heapq.heappop(self._queue)[2]()

    def replay(self, windows: Iterable[W], on_window: Callable[[W], None]) -> None:
        """Advance to each window's start, then hand the window over."""
        for w in windows:
            self.advance(w.t_start_ns)
            on_window(w)


__all__ = ["Replay"]
