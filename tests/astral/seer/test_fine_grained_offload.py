"""Megatron-Core's fine-grained activation offloading (seer/fine_grained_offload.py) against its
source: NVIDIA/Megatron-LM b97184db56 (2026-01-16, #1913) `TransformerConfig.offload_modules`
("expert_fc1": offload the input of the expert fc1 part; "moe_act": the input of the moe act
part) and the feature guide (copies overlapped with compute, "nearly zero-overhead"), and the
Model Zoo row that states it (MZQ3-GB2: `--fine-grained-activation-offloading --offload-modules
expert_fc1 moe_act`, "activation offloading required")."""

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import fine_grained_offload as fgo
from starfabric.astral.seer import load_model, make_job, offload, predict
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.parallel import (
    ExecutionSpec,
    resolve_layout,
    uneven_pipeline_layers,
)
from starfabric.astral.seer.validate import read_rows, row_setup, validate_row
from starfabric.errors import ConfigError, InfeasibleError

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"
QWEN = load_model("qwen3-235b-a22b")
EX: dict[str, Any] = {
    "global_batch": 3072, "micro_batch": 3, "seq_len": 4096, "precision": "fp8",
    "fp8_recipe": "mxfp8", "tp": 1, "pp": 4, "vpp": 6, "ep": 64, "etp": 1,
    "recompute": "selective", "recompute_modules": ("moe_act", "layernorm"),
    "moe_dispatcher": "deepep", "moe_load_balance": "forced",
    "pipeline_layers": uneven_pipeline_layers(94, 24),
}  # fmt: skip
GB200 = {"gpu": "GB200", "gpus": 256, "gpus_per_node": 4}


def _job(system: dict[str, Any] | None = None, **kw: Any) -> Any:
    return make_job(QWEN, {**EX, **kw}, system or GB200)


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("--fine-grained-activation-offloading --offload-modules expert_fc1 moe_act "
         "--delay-offload-until-cuda-graph", (("expert_fc1", "moe_act"), ())),
        ("fine-grained activation offloading (--offload-modules moe_act)", (("moe_act",), ())),
        ("--fine-grained-activation-offloading --offload-modules core_attn, expert_fc1",
         (("expert_fc1",), ("core_attn",))),
        ("--fine-grained-activation-offloading", ((), ())),
        ("no fine-grained activation offloading; --offload-modules expert_fc1", None),
        ("--optimizer-cpu-offload", None),
        ("", None),
    ],
)  # fmt: skip
def test_stated_offload_modules(text: str, want: Any) -> None:
    assert fgo.stated_offload_modules(text) == want


def test_offloaded_bytes_are_the_two_inputs_megatron_names() -> None:
    """MZQ3-GB2's layout: MBS 3 x 4096 tokens, top-8, EP 64 (ETP 1, TP 1): 98,304 token
    copies per rank; FC1 input = hidden 4096 in its MXFP8 cast (1 B), act input = the FC1
    output, 2 x 1536 (SwiGLU) in 16 bit."""
    job = _job(offload_modules=("expert_fc1", "moe_act"))
    lay = resolve_layout(job.model, job.execution, job.system)
    copies = 3 * 4096 * 8
    got = fgo.offloaded_bytes_per_layer(job.model, job.execution, lay)
    assert got == pytest.approx(copies * (1 * 4096 + 2 * 2 * 1536))
    fc1 = fgo.offloaded_bytes_per_layer(
        job.model, job.execution.model_copy(update={"offload_modules": ("expert_fc1",)}), lay
    )
    assert fc1 == pytest.approx(copies * 4096)
    bf16 = job.execution.model_copy(update={"precision": "bf16", "fp8_recipe": None})
    assert fgo.offloaded_bytes_per_layer(job.model, bf16, lay) == pytest.approx(
        copies * (2 * 4096 + 2 * 2 * 1536)
    )


def test_nothing_offloaded_where_the_moe_block_keeps_nothing() -> None:
    job = _job(offload_modules=("expert_fc1", "moe_act"))
    lay = resolve_layout(job.model, job.execution, job.system)
    for upd in ({"offload_modules": ()}, {"recompute": "full"},
                {"recompute_modules": ("moe", "layernorm")}):  # fmt: skip
        ex = job.execution.model_copy(update=upd)
        assert fgo.offloaded_bytes_per_layer(job.model, ex, lay) == 0.0
    dense = load_model("llama-3.1-8b")
    ex = ExecutionSpec.model_validate(
        {"global_batch": 64, "seq_len": 4096, "tp": 1, "pp": 1, "offload_modules": ["moe_act"]}
    )
    lay = resolve_layout(dense, ex, make_job(dense, ex, {"gpu": "GB200", "gpus": 8}).system)
    assert fgo.offloaded_bytes_per_layer(dense, ex, lay) == 0.0


def test_link_is_the_grace_tier_or_the_host_link() -> None:
    gb200, h100 = get_gpu("GB200"), get_gpu("H100")
    assert fgo.link_bytes_per_s(gb200) == pytest.approx(
        gb200.offload_gbps * 1e9 * offload.LINK_FRACTION
    )
    assert fgo.link_bytes_per_s(h100) == pytest.approx(
        h100.host_link_gbps * 1e9 * offload.LINK_FRACTION
    )


def test_memory_moves_the_inflight_layers_to_the_grace_tier() -> None:
    """HBM keeps `RESIDENT_LAYERS` layers of the offloaded tensors; the rest is counted in the
    tier (on Grace the host memory is the tier), and nothing else moves."""
    on = predict(_job(offload_modules=("expert_fc1", "moe_act")))
    off = predict(_job())
    moved = off.memory.activations - on.memory.activations
    assert moved > 0
    assert on.memory.offloaded == pytest.approx(moved)
    assert on.memory.weights == off.memory.weights and on.memory.optimizer == off.memory.optimizer
    per_layer = fgo.offloaded_bytes_per_layer(on.job.model, on.job.execution, on.layout)
    inflight_layers = (moved + fgo.resident_bytes(per_layer)) / per_layer
    assert inflight_layers > offload.RESIDENT_LAYERS
    assert off.memory.oom and not on.memory.oom  # the row's "activation offloading required"


def test_time_exposed_only_beyond_the_pass_compute() -> None:
    """On GB200 (C2C to Grace) the copies hide behind each MoE layer's pass; over an H100's
    PCIe link the same bytes exceed the pass and the excess lands in `offload`."""
    gb = predict(_job(offload_modules=("expert_fc1", "moe_act")))
    assert gb.breakdown["offload"] == 0.0
    h100 = {"gpu": "H100", "gpus": 256, "gpus_per_node": 8}
    ex = {"precision": "bf16", "fp8_recipe": None, "ep": 8, "pp": 8, "vpp": 4, "micro_batch": 4,
          "global_batch": 4096, "pipeline_layers": uneven_pipeline_layers(94, 32)}  # fmt: skip
    slow = predict(_job(h100, offload_modules=("expert_fc1", "moe_act"), **ex))
    base = predict(_job(h100, **ex))
    assert slow.breakdown["offload"] > 0
    assert slow.iteration_s > base.iteration_s


@settings(max_examples=15, deadline=None)
@given(mb=st.integers(1, 4), mods=st.sampled_from([("expert_fc1",), ("moe_act",),
                                                   ("expert_fc1", "moe_act")]))  # fmt: skip
def test_offload_never_saves_time_and_grows_with_bytes(mb: int, mods: tuple[str, ...]) -> None:
    kw = {"micro_batch": mb, "global_batch": 3072 if 3072 % (mb * 64) == 0 else mb * 64 * 8}
    on = predict(_job(offload_modules=mods, **kw))
    off = predict(_job(**kw))
    assert on.iteration_s >= off.iteration_s - 1e-12
    assert on.memory.total <= off.memory.total


def test_the_model_zoo_row_is_read_with_its_offload() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV2)}
    st_ = row_setup(rows["MZQ3-GB2"])
    assert st_.execution["offload_modules"] == ("expert_fc1", "moe_act")
    assert "offload_modules" in st_.read
    res = validate_row(rows["MZQ3-GB2"])
    assert "note" not in res.choices  # fits with its stated offload (no least-memory fallback)
    assert not res.prediction.memory.oom
    for rid in ("MZQ3-GB1", "MZQ3-GBX1", "MZQ3-02"):
        assert not row_setup(rows[rid]).execution.get("offload_modules")


CMD = (
    "pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048 "
    "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 --bf16 "
    "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 "
    "--moe-token-dispatcher-type alltoall "
)


def test_launch_command_reads_the_offload_flags() -> None:
    on = parse_megatron_command(
        CMD + "--fine-grained-activation-offloading --offload-modules moe_act expert_fc1 "
        "--delay-offload-until-cuda-graph --use-separate-send-recv-groups"
    )
    assert on["execution"]["offload_modules"] == ("expert_fc1", "moe_act")
    # The module list means nothing without the feature (Megatron ignores it).
    assert (
        "offload_modules"
        not in parse_megatron_command(CMD + "--offload-modules moe_act")["execution"]
    )


@pytest.mark.parametrize(
    ("extra", "match"),
    [("--fine-grained-activation-offloading", "without --offload-modules"),
     ("--fine-grained-activation-offloading --offload-modules core_attn expert_fc1",
      "--offload-modules core_attn: Seer models offloading the MoE experts' inputs only")],
)  # fmt: skip
def test_launch_command_refuses_what_it_cannot_price(extra: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match) as err:
        parse_megatron_command(CMD + extra)
    assert "\n" not in str(err.value)


def test_with_whole_layer_offload_is_refused() -> None:
    """Megatron-Core asserts "fine_grained_activation_offloading cannot be enabled with
    cpu_offloading" (transformer_config.py): Seer's whole-layer offload_activations is that
    layer-level offload, so the pair is refused (the schedule priced the copies' time beside the
    whole-layer offload while memory dropped their bytes)."""
    with pytest.raises(ConfigError, match=r"offload_modules .* offload_activations"):
        _job(offload_activations=True, offload_modules=("expert_fc1",))


def test_gpu_without_a_host_link_is_refused_in_one_line() -> None:
    """A GPU whose catalog entry has no host link (H20) cannot price the copies: the layout
    check refuses it (exit 2), not an internal-invariant error raised while scheduling."""
    job = _job(
        {"gpu": "H20", "gpus": 256, "gpus_per_node": 8},
        precision="bf16",
        fp8_recipe=None,
        offload_modules=("expert_fc1",),
    )
    with pytest.raises(InfeasibleError, match="H20 has no host link"):
        resolve_layout(job.model, job.execution, job.system)
