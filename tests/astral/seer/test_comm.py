import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.seer.comm import (
    COLLECTIVE_LAUNCH_S,
    Fabric,
    Group,
    collective_time,
    place_group,
)
from starfabric.errors import ConfigError

FAB = Fabric(nvlink_bus_bytes_per_s=360e9, nic_bus_bytes_per_s=44e9)


def test_placement_follows_megatron_rank_order() -> None:
    assert place_group(8, 1, 8) == Group(8, 8)  # TP fills a node
    assert place_group(48, 8, 8) == Group(48, 1)  # DP after TP=8: one rank per node
    assert place_group(32, 2, 8) == Group(32, 4)
    assert place_group(16, 1, 8).nodes == 2


def test_bus_bandwidth_factors() -> None:
    n, size = 8, 1e9
    g = Group(n, n)
    t_ar = collective_time("all_reduce", size, g, FAB)
    t_ag = collective_time("all_gather", size, g, FAB)
    # All-reduce moves 2(n-1)/n of the buffer, all-gather (n-1)/n: twice as long (bandwidth part).
    assert (t_ar - COLLECTIVE_LAUNCH_S) == pytest.approx(2 * (t_ag - COLLECTIVE_LAUNCH_S), rel=0.01)
    assert t_ag == pytest.approx(size * 7 / 8 / 360e9, rel=0.01)


def test_inter_node_group_limited_by_its_nics() -> None:
    one_per_node = collective_time("reduce_scatter", 1e9, Group(32, 1), FAB)
    four_per_node = collective_time("reduce_scatter", 1e9, Group(32, 4), FAB)
    assert one_per_node == pytest.approx(1e9 * 31 / 32 / 44e9, rel=0.02)
    assert four_per_node < one_per_node / 3


def test_all_to_all_uses_nvlink_for_local_peers() -> None:
    intra = collective_time("all_to_all", 1e9, Group(8, 8), FAB)
    inter = collective_time("all_to_all", 1e9, Group(64, 8), FAB)
    assert inter == pytest.approx(1e9 * 56 / 64 / 44e9, rel=0.02)
    assert intra < inter / 5


def test_unknown_collective_is_an_error() -> None:
    with pytest.raises(ConfigError, match="unknown collective"):
        collective_time("broadcast", 1.0, Group(2, 2), FAB)  # type: ignore[arg-type]


@given(
    st.sampled_from(["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "p2p"]),
    st.integers(2, 512),
    st.sampled_from([1, 2, 4, 8]),
    st.floats(1e3, 1e10),
)
def test_time_grows_with_bytes_and_is_positive(kind: str, n: int, g: int, size: float) -> None:
    grp = Group(n, min(g, n))
    t1 = collective_time(kind, size, grp, FAB)  # type: ignore[arg-type]
    t2 = collective_time(kind, 2 * size, grp, FAB)  # type: ignore[arg-type]
    assert 0 < t1 < t2
