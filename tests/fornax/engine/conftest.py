"""Engine tests run against both implementations of the interface."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from starfabric.fornax.engine import FastEngine, SessionEngine
from starfabric.fornax.engine.reference import ReferenceEngine

from .fornax_engine_helpers import small_config


@pytest.fixture(params=["fast", "reference"])
def make_engine(request: pytest.FixtureRequest) -> Callable[..., SessionEngine]:
    cls = FastEngine if request.param == "fast" else ReferenceEngine

    def make(**kw: Any) -> SessionEngine:
        return cls(small_config(**kw))

    return make
