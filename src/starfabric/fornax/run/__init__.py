"""Runs of Fornax on a simulated clock (fornax/replay.py): `fornax run` scenarios
(scenario.py), chaos runs with faults injected under traffic and their fault-free oracle
(chaos.py; its spec chaos_spec.py, fault injector inject.py, report chaos_report.py), and
the rich tables of a run summary (report.py). These are the harnesses above the manager:
they build engines and managers, the manager never imports them."""

from starfabric.fornax.run.chaos import run_chaos
from starfabric.fornax.run.chaos_report import summary_rows
from starfabric.fornax.run.chaos_spec import ChaosSpec, load_chaos
from starfabric.fornax.run.scenario import Scenario, load_scenario, run_scenario

__all__ = [
    "ChaosSpec",
    "Scenario",
    "load_chaos",
    "load_scenario",
    "run_chaos",
    "run_scenario",
    "summary_rows",
]
