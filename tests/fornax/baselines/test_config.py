"""Knob validation and presets."""

from __future__ import annotations

import pytest

from starfabric.errors import ConfigError
from starfabric.fornax.baselines import (
    ABLATIONS,
    ControlPlane,
    ablation,
    doca_like,
    fornax,
    ovs_like,
    software_centric_config,
)
from starfabric.fornax.manager import Manager

from .helpers import controller


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"entries": "both"}, "entries"),
        ({"aging": "scan"}, "aging"),
        ({"stats_lag_s": -1}, "stats_lag_s"),
        ({"flow_limit": {"start": 0}}, "flow_limit.start"),
        ({"mirorr": "full"}, "mirorr"),
        ({"stats_lag_s": 2.0}, "stats_lag_s"),  # needs mirror=full and revalidators
        ({"flow_limit": {}}, "flow_limit"),  # needs aging=revalidate
        ({"aging": "revalidate", "flow_limit": {"start": 500}}, "minimum"),
    ],
)
def test_bad_config_is_one_line_naming_the_field(data: dict, field: str) -> None:
    with pytest.raises(ConfigError) as e:
        software_centric_config(data)
    text = str(e.value)
    assert "\n" not in text and field in text


def test_unknown_ablation() -> None:
    with pytest.raises(ConfigError, match="no_mirror"):
        ablation("no_mirror")


def test_presets_and_ablations_flip_what_they_say() -> None:
    f = fornax()
    o = ovs_like()
    assert (o.entries, o.aging, o.policy, o.mirror) == (
        "per_direction", "revalidate", "rescan", "full",
    )  # fmt: skip
    assert o.flow_limit is not None and o.flow_limit.start == 10000
    assert o.flow_limit.maximum == 200000 and o.stats_lag_s == 2.0
    assert o.period_s() == 0.5  # min(max-idle 10 s, max-revalidator 500 ms)
    d = doca_like()
    assert (d.entries, d.aging, d.policy, d.mirror) == ("bidirectional", "poll", "rescan", "none")
    for knob in ABLATIONS:
        a = ablation(knob)
        diff = {k for k, v in a.model_dump().items() if v != f.model_dump()[k]}
        assert len(diff) == 1, (knob, diff)


def test_manager_and_every_preset_are_control_planes() -> None:
    for cfg in (fornax(), ovs_like(), doca_like()):
        assert isinstance(controller(cfg), ControlPlane)
    m = controller(fornax())
    assert isinstance(Manager(m.hw, m.policy), ControlPlane)
