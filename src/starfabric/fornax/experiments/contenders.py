"""The control planes compared: Fornax (the light-weight Manager on the emulated engine) and,
from fornax/baselines, the OVS-like and DOCA-like presets, the family's Fornax preset and its
one-knob ablations — all on the same engine configuration."""

from __future__ import annotations

from typing import Any

from starfabric.fornax.baselines.ovs_calibration import OvsCalibration
from starfabric.fornax.engine import EngineConfig, FastEngine
from starfabric.fornax.experiments.harness import SLOTS_PER_SESSION, Contender
from starfabric.fornax.manager import Manager
from starfabric.fornax.vpc import CompiledPolicy


def _fornax(cfg: EngineConfig, policy: CompiledPolicy, idle_timeout_s: float | None) -> Any:
    # Fornax ages in hardware by the engine's timeout classes: no software idle timeout.
    return Manager(FastEngine(cfg), policy)


def _preset(make: Any) -> Any:
    """Builder of a baseline preset on the experiment's engine.

    - A software idle timeout, when asked, replaces the preset's (OVS max-idle), so every
      contender ages at the same timeout.
    - A preset with OVS's flow limit gets `flow-limit` (and the dynamic limit's start) raised
      to hold the experiment's table, two flows per session, as an operator sets
      other_config:flow-limit for a large table; the dynamic shrink on slow dumps, the 100 ms
      idle timeout above the limit and the flush above 2x still apply."""
    from starfabric.fornax.baselines import SoftwareCentric

    def build(cfg: EngineConfig, policy: CompiledPolicy, idle_timeout_s: float | None) -> Any:
        conf = make()
        upd: dict[str, Any] = {}
        if idle_timeout_s is not None and conf.idle_timeout_s is not None:
            upd["idle_timeout_s"] = idle_timeout_s
        if conf.flow_limit is not None:
            flows = 2 * int(cfg.capacity / SLOTS_PER_SESSION)
            fl = conf.flow_limit
            upd["flow_limit"] = fl.model_copy(
                update={"start": max(fl.start, flows), "maximum": max(fl.maximum, flows)}
            )
        if upd:
            conf = conf.model_copy(update=upd)
        return SoftwareCentric(FastEngine(cfg), policy, conf)

    return build


def default_contenders(ovs_calibration: OvsCalibration | None = None) -> list[Contender]:
    """Fornax, the baseline presets, the family's Fornax preset and its ablations; the OVS-like
    preset with `ovs_calibration`'s constants (None: the built-in calibration)."""
    from starfabric.fornax.baselines import ABLATIONS, ablation, doca_like, fornax, ovs_like

    def mirrored(make: Any) -> bool:
        return bool(make().mirror == "full")

    constants = None if ovs_calibration is None else ovs_calibration.constants
    ovs = lambda: ovs_like(constants=constants)  # noqa: E731
    out = [Contender("fornax", _fornax, "fornax"),
           Contender("ovs_like", _preset(ovs), "baseline", mirrored(ovs)),
           Contender("doca_like", _preset(doca_like), "baseline", mirrored(doca_like)),
           Contender("fornax_preset", _preset(fornax), "reference")]  # fmt: skip
    for knob in ABLATIONS:
        make = lambda k=knob: ablation(k)  # noqa: E731
        out.append(Contender(knob, _preset(make), "ablation", mirrored(make)))
    return out


__all__ = ["default_contenders"]
