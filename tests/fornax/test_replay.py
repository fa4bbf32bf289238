"""The one replay clock (fornax/replay.py): ticks, per-tick processes, tick events and
scheduled actions run in the documented order."""

from __future__ import annotations

from starfabric.fornax.replay import Replay


def test_order_at_each_tick_and_batch_boundary() -> None:
    log: list[tuple[str, int]] = []
    clock = Replay(10, lambda t: log.append(("tick", t)), next_tick_ns=10)
    clock.each_tick(lambda t: log.append(("fault", t)))
    clock.at_tick(15, lambda t: log.append(("crash", t)))
    clock.at_tick(19, lambda t: log.append(("crash2", t)))
    clock.at(12, lambda: log.append(("policy", 12)))
    clock.advance(25)
    assert log == [("fault", 10), ("tick", 10), ("fault", 20), ("crash", 20), ("crash2", 20),
                   ("tick", 20), ("policy", 12)]  # fmt: skip
    assert clock.ticks == 2 and clock.pending == 0


def test_catch_up_runs_only_the_last_ticks_of_a_gap() -> None:
    seen: list[int] = []
    clock = Replay(10, seen.append, next_tick_ns=10, catch_up=2)
    clock.each_tick(lambda t: seen.append(-t))
    clock.tick_until(100)
    assert seen == [-90, 90, -100, 100]
