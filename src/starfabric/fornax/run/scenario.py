"""Scenarios: a workload replayed against a VPC through engine + manager on the replay clock
(fornax/replay.py: policy changes at their times, scrub/event ticks every `tick` seconds),
with the packet accounting checked at the end."""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from starfabric.config import Spec, load_spec
from starfabric.errors import InvariantError
from starfabric.fornax.engine import EngineConfig, FastEngine, SessionEngine
from starfabric.fornax.manager.accounting import Final
from starfabric.fornax.manager.config import ManagerConfig
from starfabric.fornax.manager.manager import Manager
from starfabric.fornax.replay import Replay
from starfabric.fornax.softpath import SoftPathConfig
from starfabric.fornax.vpc import VpcSpec, compile_policy, load_vpc_spec
from starfabric.fornax.workload import (
    PcapWorkload,
    SyntheticWorkload,
    WorkloadBatch,
    parse_workload,
    workload_batches,
)
from starfabric.units import parse_duration


class Scenario(Spec):
    """What `starfabric fornax run` replays; relative paths are relative to the file."""

    vpc: str
    workload: SyntheticWorkload | PcapWorkload
    engine: EngineConfig = EngineConfig()
    manager: ManagerConfig = ManagerConfig()
    softpath: SoftPathConfig = SoftPathConfig()
    tick: float = Field(
        0.01, gt=0, description="seconds between scrub + event-poll ticks (assumption)"
    )

    _tick = field_validator("tick", mode="before")(
        lambda v: parse_duration(v, "tick") if isinstance(v, str) else v
    )

    @field_validator("workload", mode="before")
    @classmethod
    def _workload(cls, v: Any) -> Any:
        return parse_workload(v, source="workload") if isinstance(v, dict) else v


def load_scenario(path: str | Path) -> tuple[Scenario, Path]:
    """Read a scenario file; returns it with its directory (the base of relative paths)."""
    return load_spec(Scenario, path), Path(path).resolve().parent


def _resolve(base: Path, p: str) -> str:
    q = Path(p)
    return str(q if q.is_absolute() else base / q)


def run_scenario(
    scenario: Scenario,
    base: Path,
    *,
    engine_factory: Callable[[EngineConfig], SessionEngine] = FastEngine,
    progress: Callable[[float], None] | None = None,
    metrics_out: dict[str, bytes] | None = None,
) -> dict[str, Any]:
    """Replay the scenario; returns the summary (accounting checked, InvariantError if not).
    `metrics_out['prometheus']` receives the Prometheus text when a dict is given."""
    wall0 = time.perf_counter()
    spec = load_vpc_spec(_resolve(base, scenario.vpc))
    wl = scenario.workload
    changes = [c.model_copy(update={"vpc": _resolve(base, c.vpc)}) for c in wl.policy_changes]
    wl = wl.model_copy(update={"policy_changes": tuple(changes)})
    if isinstance(wl, PcapWorkload):
        wl = wl.model_copy(update={"path": _resolve(base, wl.path)})
    change_specs = [(round(c.at * 1e9), load_vpc_spec(c.vpc)) for c in changes]
    engine = engine_factory(scenario.engine)
    m = Manager(engine, compile_policy(spec), scenario.manager, softpath_config=scenario.softpath)
    # ticks run over an idle gap: enough for the scrubber to cover the table once; the
    # first tick one period after the first packet (pcaps carry wall-clock times)
    catch_up = -(-scenario.engine.capacity // scenario.engine.scrub_slots_per_tick) + 1
    clock = Replay(round(scenario.tick * 1e9), m.tick, catch_up=catch_up)
    applied: list[dict[str, Any]] = []

    def change(at: int, new: VpcSpec) -> None:
        applied.append({"at_s": at / 1e9, **m.apply_policy(new)})

    for at, new in change_specs:
        clock.at(at, partial(change, at, new))
    end_ns = 0
    duration_ns = round(wl.duration * 1e9) if isinstance(wl, SyntheticWorkload) else 0

    def window(wb: WorkloadBatch) -> None:
        nonlocal end_ns
        m.process(wb.packets)
        end_ns = max(end_ns, wb.t_end_ns)
        if progress is not None and duration_ns:
            progress(min(1.0, wb.t_end_ns / duration_ns))

    clock.replay(workload_batches(spec, wl), window)
    clock.drain()
    m.tick(max(end_ns, clock.next_tick_ns or 0))
    _check(m)
    out = m.summary()
    out["policy_changes"] = applied
    out["simulated_s"] = end_ns / 1e9
    out["wall_s"] = time.perf_counter() - wall0
    out["engine_counters"] = engine.counters()
    if metrics_out is not None:
        metrics_out["prometheus"] = m.prometheus()
    return out


def _check(m: Manager) -> None:
    """Accounting adds up, and agrees with the engine's own counters."""
    m.ledger.check()
    c = m.engine.counters()
    if c["packets"] != m.ledger.offered:
        raise InvariantError(
            f"engine saw {c['packets']} packets, the manager accounted {m.ledger.offered}"
        )
    if c["hit"] != int(m.ledger.final[Final.HW_FORWARDED]):
        raise InvariantError(
            f"engine HIT {c['hit']} != hardware-forwarded {int(m.ledger.final[Final.HW_FORWARDED])}"
        )


__all__ = ["Scenario", "load_scenario", "run_scenario"]
