"""Backend registry: one `make_backend(name)` for every caller; steady rates agree with the
max-min reference (flow) and the equal-share bottleneck (analytical)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oracles.maxmin import maxmin_reference
from starfabric.astral.netsim import (
    BUILTIN_BACKENDS,
    Analytical,
    FlowSim,
    backend_names,
    make_backend,
    register_backend,
    steady_rates,
)
from starfabric.errors import ConfigError


def _csr(paths: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    ptr = np.zeros(len(paths) + 1, np.int64)
    ptr[1:] = np.cumsum([len(p) for p in paths])
    return ptr, np.array([x for p in paths for x in p], np.int64)


def test_registry_builds_each_builtin_and_rejects_unknown_names() -> None:
    assert isinstance(make_backend("flow", [1.0, 2.0]), FlowSim)
    assert isinstance(make_backend("analytical", [1.0, 2.0], [0.0, 0.0]), Analytical)
    assert make_backend("flow", [1.0], rel_tol=0.01).rel_tol == 0.01
    assert set(BUILTIN_BACKENDS) <= set(backend_names())
    with pytest.raises(ConfigError, match="unknown"):
        make_backend("ns3", [1.0])
    with pytest.raises(ConfigError, match="taken"):
        register_backend("flow", FlowSim)


def test_registered_backend_is_made_by_name() -> None:
    register_backend("test-analytical-copy", Analytical)
    assert "test-analytical-copy" in backend_names()
    assert isinstance(make_backend("test-analytical-copy", [5.0]), Analytical)


instances = st.integers(1, 5).flatmap(
    lambda n_links: st.tuples(
        st.lists(st.floats(1.0, 100.0), min_size=n_links, max_size=n_links),
        st.lists(
            st.lists(st.integers(0, n_links - 1), min_size=1, max_size=3, unique=True),
            min_size=1,
            max_size=7,
        ),
    )
)


@settings(max_examples=60, deadline=None)
@given(instances)
def test_steady_rates_match_references(inst: tuple[list[float], list[list[int]]]) -> None:
    caps, paths = inst
    ptr, links = _csr(paths)
    flow = steady_rates(make_backend("flow", caps), ptr, links)
    np.testing.assert_allclose(flow, maxmin_reference(paths, caps), rtol=1e-9)
    ana = steady_rates(make_backend("analytical", caps), ptr, links)
    share = np.asarray(caps) / np.maximum(np.bincount(links, minlength=len(caps)), 1)
    np.testing.assert_allclose(ana, [min(share[p]) for p in paths], rtol=1e-12)
    assert (flow >= ana * (1 - 1e-9)).all()  # max-min never gives a flow less than equal share
