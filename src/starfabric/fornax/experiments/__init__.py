"""The Fornax paper's experiments, side by side with the software-centric baselines: E1
storage, E2 management CPU, E3 zero-drop CPS, E4 aging, E5 policy storm, E6 surge, E8 restart,
E9 ablations and the SONiC-DASH hero shape, at --scale ci|default|paper.

Adding an experiment: one module with `run(ctx) -> Result` and `plot(result) -> Figure`, and
one `register(Experiment(...))` line below."""

from starfabric.fornax.experiments import (
    e1_storage,
    e2_cpu,
    e3_zero_drop,
    e4_aging,
    e5_policy_storm,
    e6_surge,
    e7_faults,
    e8_restart,
    e9_ablations,
    hero,
)
from starfabric.fornax.experiments.harness import Contender, Context, ControlPlane, Run
from starfabric.fornax.experiments.output import Result
from starfabric.fornax.experiments.registry import (
    EXPERIMENTS,
    Experiment,
    get_experiment,
    register,
)
from starfabric.fornax.experiments.runner import headline, run_experiments
from starfabric.fornax.experiments.scales import SCALES, Scale, get_scale

register(Experiment("E1", "software storage vs table size", e1_storage.run, e1_storage.plot))
register(Experiment("E2", "management CPU vs table size", e2_cpu.run, e2_cpu.plot))
register(Experiment("E3", "highest zero-drop CPS", e3_zero_drop.run, e3_zero_drop.plot))
register(Experiment("E4", "aging accuracy and occupancy", e4_aging.run, e4_aging.plot))
register(Experiment("E5", "policy-update storm", e5_policy_storm.run, e5_policy_storm.plot))
register(Experiment("E6", "x10 CPS surge", e6_surge.run, e6_surge.plot))
register(Experiment("E7", "fault injection", e7_faults.run, e7_faults.plot))
register(Experiment("E8", "manager restart recovery", e8_restart.run, e8_restart.plot))
register(Experiment("E9", "ablations", e9_ablations.run, e9_ablations.plot))
register(Experiment("hero", "SONiC-DASH hero shape", hero.run, hero.plot))

__all__ = [
    "EXPERIMENTS",
    "SCALES",
    "Contender",
    "Context",
    "ControlPlane",
    "Experiment",
    "Result",
    "Run",
    "Scale",
    "get_experiment",
    "get_scale",
    "headline",
    "register",
    "run_experiments",
]
