"""Chaos runs: traffic, policy changes and injected hardware/software faults together on a
simulated clock, through the engine and the ResilientManager, with a per-fault report.

Fault classes (YAML `faults:`):
  bit_flips        flips per entry-hour over occupied (or all) slots, `bits` per event (1 is
                   corrected by ECC, 2+ is detected uncorrectable); drawn as arrays per tick
  stalls           a port's pipeline stops at `at` for `duration` (a reset before the end
                   does not help); detected by the engine watchdog
  ring_overflows   the manager's event poller is stuck from `at` for `duration`, so the
                   bounded ring overflows and events are lost (the patrol covers them)
  crashes          the manager process dies at `at` and restarts (Manager.recover)
  engine_failures  the whole pipeline stops (every port) from `at` for `duration`

Misforwarded and lost packets are measured against an oracle: a fault-free Fornax (plain
Manager, same engine configuration, a software table large enough to never refuse) fed the
same packets minus those the chaos run lost before any session state saw them (named drops),
so the two see the same connections. Tests also check against the plain per-packet
conntrack reference (tests/fornax/manager/reference.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from starfabric.fornax.engine import EngineConfig, FastEngine, SessionEngine
from starfabric.fornax.manager.accounting import Ledger
from starfabric.fornax.manager.failover import ResilientManager
from starfabric.fornax.packets import PacketBatch
from starfabric.fornax.replay import Replay
from starfabric.fornax.run.chaos_report import (
    Trace,
    attribute,
    close_scopes,
    oracle_check,
    per_fault,
)
from starfabric.fornax.run.chaos_spec import ChaosSpec
from starfabric.fornax.run.inject import ChaosEngine, Injector
from starfabric.fornax.vpc import compile_policy, load_vpc_spec
from starfabric.fornax.workload import WorkloadBatch, workload_batches


def assign_ports(batch: PacketBatch, n_ports: int) -> PacketBatch:
    """Ingress port of each packet from its sender (an ENI's VF or the uplink), so the two
    directions of a connection usually arrive on different ports (assumption)."""
    if n_ports <= 1 or not len(batch):
        return batch
    h = (batch.src_lo ^ (batch.src_hi >> np.uint64(7)) ^ batch.vni.astype(np.uint64)) * np.uint64(
        0x9E3779B97F4A7C15
    )
    port = ((h >> np.uint64(40)) % np.uint64(n_ports)).astype(np.uint16)
    cols = batch.columns()
    cols["port"] = port
    return PacketBatch(**cols)


def _resolve(base: Path, p: str) -> str:
    q = Path(p)
    return str(q if q.is_absolute() else base / q)


def resilient(engine: SessionEngine, policy: Any, spec: ChaosSpec) -> ResilientManager:
    """The Fornax controller of a chaos run (the default `build`)."""
    return ResilientManager(engine, policy, spec.manager, softpath_config=spec.softpath,
                            health=spec.health)  # fmt: skip


def run_chaos(
    spec: ChaosSpec,
    base: Path,
    *,
    build: Callable[[SessionEngine, Any, ChaosSpec], Any] = resilient,
    fault_events: bool = True,
    vpc: Any = None,
    changes: list[tuple[float, Any]] | None = None,
    progress: Callable[[float], None] | None = None,
    oracle: bool = True,
    on_batch: Callable[[PacketBatch, Any], None] | None = None,
    on_policy: Callable[[Any], None] | None = None,
    engine_factory: Callable[[EngineConfig], SessionEngine] = FastEngine,
) -> dict[str, Any]:
    """Run traffic + policy changes + faults; returns the per-fault report (see the module
    docstring). `build(engine, policy, spec)` makes the controller (default: Fornax's
    ResilientManager); `fault_events=False` models a NIC that reports no ECC or hang events
    and whose ports recover by themselves when a fault ends (a software-centric baseline);
    a crash restarts only a ResilientManager. `on_batch(packets, fate)` and
    `on_policy(vpc_spec)` let a test check every packet against its own reference. `vpc` (a
    VpcSpec) and `changes` ((seconds, VpcSpec) pairs) replace the spec's files;
    `engine_factory` builds the engine under the faults (default the emulated NIC; the Linux
    datapath runs the faults with a kernel twin: run/datapath.py)."""
    wall0 = time.perf_counter()
    vspec = vpc if vpc is not None else load_vpc_spec(_resolve(base, spec.vpc))
    wl = spec.workload
    files = [c.model_copy(update={"vpc": _resolve(base, c.vpc)}) for c in wl.policy_changes]
    wl = wl.model_copy(update={"policy_changes": tuple(files)})
    pairs = [(c.at, load_vpc_spec(c.vpc)) for c in files] if changes is None else changes
    pending = sorted(((round(at * 1e9), v) for at, v in pairs), key=lambda x: x[0])
    eng = ChaosEngine(engine_factory(spec.engine), hide_faults=not fault_events)
    m = build(eng, compile_policy(vspec), spec)
    inj = Injector(spec, eng, self_heal=not fault_events)
    tick_ns = round(spec.tick * 1e9)
    managers: list[Any] = []
    ledgers: list[Ledger] = []
    crashes: list[dict[str, Any]] = []
    trace = Trace()
    packets: list[PacketBatch] = []
    change_log: list[tuple[int, Any]] = []
    duration_ns = round(wl.duration * 1e9)
    n_ports = spec.engine.n_ports

    def crash(t: int) -> None:
        """A manager crash (an event on the tick grid): the manager restarts from the
        engine (crashes due at one tick restart it once)."""
        nonlocal m
        if isinstance(m, ResilientManager) and not (crashes and crashes[-1]["at_ns"] == t):
            close_scopes(m, t)
            managers.append(m)
            ledgers.append(m.ledger)
            w0 = time.perf_counter()
            m = ResilientManager.recover(eng, m.policy, spec.manager, softpath=m.softpath,
                                         health=spec.health)  # fmt: skip
            m.now_ns = t
            crashes.append({"at_ns": t, "recover_wall_s": time.perf_counter() - w0})

    notify = True  # a change after the last packet is applied without notice

    def change(at: int, new: Any) -> None:
        m.apply_policy(new)
        change_log.append((at, new))
        if notify and on_policy is not None:
            on_policy(new)

    clock = Replay(tick_ns, lambda t: m.tick(t), next_tick_ns=tick_ns)
    clock.each_tick(inj.step)  # faults drawn per tick, before the manager's tick
    for c in spec.faults.crashes:
        clock.at_tick(round(c.at * 1e9), crash)
    for at, new in pending:
        clock.at(at, partial(change, at, new))

    def window(wb: WorkloadBatch) -> None:
        pb = assign_ports(wb.packets, n_ports)
        fate = m.process(pb)
        div = getattr(m, "last_diverted", None)
        trace.add(pb, fate.final, fate.action, fate.reason,
                  div if div is not None and len(div) == len(pb) else np.zeros(len(pb), bool))  # fmt: skip
        packets.append(pb)
        if on_batch is not None:
            on_batch(pb, fate)
        if progress is not None:
            progress(min(1.0, wb.t_end_ns / duration_ns))

    clock.replay(workload_batches(vspec, wl), window)
    notify = False
    clock.drain()
    clock.tick_until(duration_ns + 10 * tick_ns)
    managers.append(m)
    ledgers.append(m.ledger)
    total = Ledger()
    for lg in ledgers:
        total.offered += lg.offered
        total.final += lg.final
        total.reasons += lg.reasons
    total.check()
    report = per_fault(spec, inj, managers, trace, crashes, tick_ns)
    if not isinstance(m, ResilientManager) and spec.faults.crashes:
        report["notes"] = ["manager crashes are injected for Fornax's ResilientManager only"]
    if oracle:
        report["oracle"] = oracle_check(spec, vspec, packets, change_log, trace)
        attribute(report, trace)
    for r in report["faults"]:
        r.pop("_key", None)
        r.pop("_ports", None)
    report["packets"] = total.as_dict()
    report["manager"] = m.summary()
    report["wall_s"] = time.perf_counter() - wall0
    return report


__all__ = ["assign_ports", "resilient", "run_chaos"]
