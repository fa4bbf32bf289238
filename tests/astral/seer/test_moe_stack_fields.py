"""Session 19's MoE stack fields refuse settings they cannot apply: on a dense model, without
the DeepEP dispatcher they configure, or without the forced balance they refine."""

import pytest

from starfabric.astral.seer import make_job, predict
from starfabric.errors import ConfigError

SYS = {"gpu": "B200", "gpus": 64}


def _job(model: str, **ex: object):
    return make_job(model, {"global_batch": 64, "seq_len": 4096, **ex}, SYS)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("moe_flex_backend", "hybridep"),
        ("moe_round_robin_routing", True),
        ("moe_torch_grouped_mm", True),
        ("ep_dispatch_dtype", "bf16"),
    ],
)
def test_moe_field_on_dense_model_is_refused(field: str, value: object) -> None:
    needs = {"moe_round_robin_routing": {"moe_load_balance": "forced"},
             "moe_flex_backend": {"moe_dispatcher": "deepep"}}  # fmt: skip
    extra = needs.get(field, {})
    with pytest.raises(ConfigError, match=f"{field} = {value!r} on a dense model") as err:
        predict(_job("llama-3.1-8b", **{field: value}, **extra))
    assert "\n" not in str(err.value) and "fix:" in str(err.value)


def test_hybridep_needs_the_deepep_dispatcher() -> None:
    with pytest.raises(ConfigError, match="moe_flex_backend = 'hybridep' with moe_dispatcher"):
        _job("mixtral-8x7b-v0.1", ep=8, moe_flex_backend="hybridep", moe_dispatcher="alltoall")


def test_fp8_dispatch_needs_the_deepep_dispatcher() -> None:
    with pytest.raises(ConfigError, match="ep_dispatch_dtype = 'fp8' with moe_dispatcher"):
        _job("mixtral-8x7b-v0.1", ep=8, precision="fp8", ep_dispatch_dtype="fp8",
             moe_dispatcher="alltoall")  # fmt: skip


def test_round_robin_needs_forced_balance() -> None:
    with pytest.raises(ConfigError, match="moe_round_robin_routing = True with moe_load_balance"):
        _job("mixtral-8x7b-v0.1", ep=8, moe_round_robin_routing=True)


def test_moe_fields_on_an_moe_model_are_accepted() -> None:
    predict(_job("mixtral-8x7b-v0.1", ep=8, moe_dispatcher="deepep", moe_flex_backend="hybridep",
         moe_load_balance="forced", moe_round_robin_routing=True,
         moe_torch_grouped_mm=True))  # fmt: skip


def test_search_refuses_moe_fields_on_a_dense_model_as_predict_does() -> None:
    """search prices its layouts without resolve_layout's per-job check: it refuses the same
    stack up front rather than price it as if the field were unset."""
    from starfabric.astral.seer.model import load_model
    from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec
    from starfabric.astral.seer.search import search

    stack = ExecutionSpec(global_batch=64, seq_len=4096, moe_torch_grouped_mm=True)
    with pytest.raises(ConfigError, match="moe_torch_grouped_mm = True on a dense model"):
        search(load_model("llama-3.1-8b"), SystemSpec(gpu="B200", gpus=8), 64, 4096, limit=5,
               stack=stack)  # fmt: skip


@pytest.mark.parametrize(
    ("field", "extra"),
    [
        ("moe_round_robin_routing", {"moe_load_balance": "forced"}),
        ("moe_flex_backend", {"moe_dispatcher": "deepep"}),
    ],
)
def test_topology_refuses_what_its_simulated_all_to_all_ignores(field: str, extra: dict) -> None:
    """The simulated EP all-to-all (simcomm) routes random top-k as DeepEP V1 flows: it would
    price round-robin routing or HybridEP's kernels as if they were unset."""
    from pathlib import Path

    from starfabric.astral.seer import load_job

    job = load_job(Path(__file__).parents[3] / "examples" / "jobs" / "deepseek_v3_moe.yaml")
    value = {"moe_round_robin_routing": True, "moe_flex_backend": "hybridep"}[field]
    ex = job.execution.model_copy(update={field: value, **extra})
    with pytest.raises(ConfigError, match=f"{field} = {value!r} with system.topology"):
        predict(make_job(job.model, ex, job.system))
