"""The manager is extended by composition: ResilientManager and the software-centric
baselines add parts and methods of their own, and override none of the Manager's."""

from __future__ import annotations

import pytest

from starfabric.fornax.baselines import SoftwareCentric
from starfabric.fornax.manager import Manager
from starfabric.fornax.manager.failover import ResilientManager

_DUNDER_OK = {"__init__", "__doc__", "__module__", "__qualname__", "__getattr__",
              "__firstlineno__", "__static_attributes__", "__annotations__"}  # fmt: skip


@pytest.mark.parametrize("cls", [ResilientManager, SoftwareCentric])
def test_no_manager_method_is_overridden(cls: type) -> None:
    own = set(vars(cls)) - _DUNDER_OK
    assert not own & set(vars(Manager)), sorted(own & set(vars(Manager)))
