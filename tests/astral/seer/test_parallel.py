import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.seer import load_model, make_job, predict
from starfabric.errors import ConfigError, InfeasibleError

SYS = {"gpu": "H100", "gpus": 64}


def _job(model: str = "llama-3.1-8b", **ex: object):
    return make_job(model, {"global_batch": 64, "seq_len": 4096, **ex}, SYS)


@pytest.mark.parametrize(
    ("model", "ex", "why"),
    [
        ("llama-3.1-8b", {"tp": 3}, "tp = 3 does not divide gpus|tp\\*pp\\*cp"),
        ("llama-3.1-8b", {"pp": 8, "vpp": 3}, "layers = 32 not divisible by pp\\*vpp = 24"),
        ("llama-3.1-8b", {"global_batch": 65}, "global_batch = 65 not divisible"),
        ("llama-3.1-8b", {"ep": 2}, "ep = 2 on a dense model"),
        ("llama-3.1-8b", {"vpp": 2}, "vpp > 1 needs pp > 1"),
        ("llama-3.1-8b", {"pp": 4, "vpp": 2, "global_batch": 96}, "multiple of pp"),
        ("llama-3.1-8b", {"cp": 64, "seq_len": 4000}, "2\\*cp"),
        ("mixtral-8x7b-v0.1", {"ep": 3}, "ep = 3 does not divide moe_experts = 8"),
        ("mixtral-8x7b-v0.1", {"ep": 8, "etp": 16}, "ep\\*etp = 8\\*16 must divide"),
        ("llama-3.1-8b", {"pp": 2, "pipeline_layers": [10, 10]}, "summing to layers = 32"),
        ("llama-3.1-8b", {"dp": 7}, "tp\\*pp\\*cp\\*dp = 7"),
    ],
)
def test_impossible_combinations_say_why(model: str, ex: dict, why: str) -> None:
    with pytest.raises(InfeasibleError, match=why) as err:
        predict(_job(model, **ex))
    assert "\n" not in str(err.value) and "fix:" in str(err.value)


def test_query_groups_split_or_replicated_over_tp() -> None:
    """TP 16 over 8 KV groups replicates each group on 2 ranks (as MQA/GQA runs with TP above
    the group count did); a TP that neither divides nor is divided by the groups is refused."""
    pred = predict(_job("llama-3.1-8b", tp=16, pp=4))
    assert pred.layout.tp == 16
    with pytest.raises(InfeasibleError, match="tp = 20 and kv_heads = 8: neither divides"):
        predict(
            make_job(
                "qwen2.5-32b-instruct",
                {"global_batch": 64, "seq_len": 4096, "tp": 20},
                {"gpu": "H100", "gpus": 160},
            )
        )


def test_unknown_and_mistyped_fields_are_config_errors() -> None:
    with pytest.raises(ConfigError, match="execution: unknown field 'tensor_parallel'"):
        make_job("llama-3.1-8b", {"global_batch": 8, "seq_len": 8, "tensor_parallel": 2}, SYS)
    with pytest.raises(ConfigError, match="recompute"):
        make_job("llama-3.1-8b", {"global_batch": 8, "seq_len": 8, "recompute": "some"}, SYS)
    with pytest.raises(ConfigError, match="unknown gpu"):
        predict(
            make_job("llama-3.1-8b", {"global_batch": 8, "seq_len": 8}, {"gpu": "Z9", "gpus": 8})
        )
    with pytest.raises(ConfigError, match="no 'fp8'"):
        predict(make_job("llama-3.1-8b", {"global_batch": 8, "seq_len": 8, "precision": "fp8"},
                         {"gpu": "A100", "gpus": 8}))  # fmt: skip


def test_uneven_pipeline_split_is_accepted() -> None:
    m = load_model("llama-3.1-8b")
    p = predict(make_job(m, {"global_batch": 64, "seq_len": 4096, "pp": 4,
                             "pipeline_layers": [7, 9, 9, 7]}, SYS))  # fmt: skip
    assert p.layout.stage_layers == ((7,), (9,), (9,), (7,))
    assert p.iteration_s > 0


@given(st.integers(1, 200), st.integers(1, 64))
def test_uneven_pipeline_split(layers: int, pp: int) -> None:
    from starfabric.astral.seer.parallel import uneven_pipeline_layers

    if pp > layers + 2:
        with pytest.raises(InfeasibleError):
            uneven_pipeline_layers(layers, pp)
        return
    split = uneven_pipeline_layers(layers, pp)
    assert len(split) == pp and sum(split) == layers and max(split) - min(split) <= 1
    # Only the end stages (embedding, loss) may be left without a layer.
    assert min(split[1:-1] or (1,)) >= 1 and min(split) >= 0
    if pp > 2 and max(split) != min(split):
        assert split[0] <= min(split[1:-1]) and split[-1] <= min(split[1:-1])


def test_zero3_with_pipelines_keeps_parameters_gathered_across_micro_batches() -> None:
    """Llama 3 ran FSDP with PP: parameters gathered once per step, not per micro-batch, so
    weight memory is the stage's full share while gradients and optimizer stay sharded."""
    z3 = predict(_job(zero=3, pp=2))
    z1 = predict(_job(zero=1, pp=2))
    assert z3.memory.weights == pytest.approx(z1.memory.weights)
    assert z3.memory.grads < z1.memory.grads


def test_end_virtual_stages_may_hold_only_embedding_and_loss() -> None:
    """Llama 3 405B: 126 layers on 16 x 8 virtual stages, the first holding only the embedding
    and the last only the loss (Llama 3 paper section 3.3.2)."""
    from starfabric.astral.seer.parallel import uneven_pipeline_layers

    pl = list(uneven_pipeline_layers(126, 128))
    assert pl[0] == pl[-1] == 0 and set(pl[1:-1]) == {1}
    p = predict(make_job("llama-3.1-405b", {"global_batch": 64, "seq_len": 4096, "tp": 8,
                                            "pp": 16, "vpp": 8, "pipeline_layers": pl},
                         {"gpu": "H100", "gpus": 512}))  # fmt: skip
    assert p.layout.stage_layers[0][0] == 0 and p.layout.stage_layers[-1][-1] == 0
    with pytest.raises(InfeasibleError, match="at least one layer"):
        predict(make_job("llama-3.1-8b", {"global_batch": 64, "seq_len": 4096, "pp": 4,
                                          "pipeline_layers": [11, 0, 11, 10]}, SYS))  # fmt: skip
