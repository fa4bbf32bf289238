from collections.abc import Iterator

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from starfabric.astral.seer import load_model  # noqa: E402
from starfabric.astral.seer.distributed import check_address  # noqa: E402
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec  # noqa: E402
from starfabric.astral.seer.search import search  # noqa: E402
from starfabric.errors import ConfigError  # noqa: E402


@pytest.fixture(scope="module")
def local_ray() -> Iterator[None]:
    if ray.is_initialized():  # another module's cluster: use it, leave it running
        yield
        return
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING")
    yield
    ray.shutdown()


def test_ray_sweep_equals_local(local_ray: None) -> None:
    model = load_model("mixtral-8x7b-v0.1")
    system = SystemSpec(gpu="H100", gpus=64)
    local = search(model, system, 256, 4096, limit=600)
    dist = search(model, system, 256, 4096, limit=600, ray="local", ray_chunk=128)
    assert len(dist) == len(local) and len(local) > 256  # several chunks
    for c in local.configs:
        np.testing.assert_array_equal(dist.configs[c], local.configs[c])
    np.testing.assert_array_equal(dist.iteration_s, local.iteration_s)
    np.testing.assert_array_equal(dist.memory_bytes, local.memory_bytes)
    np.testing.assert_array_equal(dist.ranked(), local.ranked())
    assert dist.top(5) == local.top(5)
    auto = search(model, system, 256, 4096, limit=600, ray="local")  # one chunk per CPU
    np.testing.assert_array_equal(auto.iteration_s, local.iteration_s)


def test_ray_sweep_carries_the_stack(local_ray: None) -> None:
    """The Ray tasks price the layouts with the search's stack, as the local sweep does."""
    model = load_model("mixtral-8x7b-v0.1")
    system = SystemSpec(gpu="H100", gpus=64)
    stack = ExecutionSpec(
        global_batch=256, seq_len=4096, moe_dispatcher="deepep", flash_kernel="fa2"
    )
    local = search(model, system, 256, 4096, limit=300, stack=stack)
    dist = search(model, system, 256, 4096, limit=300, stack=stack, ray="local", ray_chunk=128)
    np.testing.assert_array_equal(dist.iteration_s, local.iteration_s)
    plain = search(model, system, 256, 4096, limit=300)
    assert (plain.iteration_s != dist.iteration_s).any()


def test_bad_addresses_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="is not a Ray address"):
        check_address("not an address")
    with pytest.raises(ConfigError, match="is not a Ray address"):
        check_address("host:99999")
    with pytest.raises(ConfigError, match="cannot reach a Ray cluster"):
        check_address("127.0.0.1:1")
    check_address("local")


def test_ray_rejects_scalar_mode_and_bad_chunk() -> None:
    model = load_model("llama-3.1-8b")
    system = SystemSpec(gpu="H100", gpus=8)
    with pytest.raises(ConfigError, match="cannot run on Ray"):
        search(model, system, 64, 2048, mode="scalar", ray="local")
    with pytest.raises(ConfigError, match="ray_chunk = 0"):
        search(model, system, 64, 2048, ray="local", ray_chunk=0)
