"""SearchResult.execution hands predict the offload the search priced: OFFLOAD's index is its
bit mask (bit 0 activations, bit 1 weights + optimizer states to the second tier, bit 2
Megatron-Core's optimizer CPU offload), so "activations+optimizer" (5) offloads activations.
Before the fix execution() matched the names "activations"/"both" only and dropped the
activation offload of 5: on GB200 predict then priced another job, up to 13% off the search."""

import pytest

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.parallel import SystemSpec
from starfabric.astral.seer.search import OFFLOAD, search


def test_offload_names_are_their_bit_masks() -> None:
    for i, name in enumerate(OFFLOAD):
        acts = name in ("activations", "both", "activations+optimizer")
        assert bool(i & 1) == acts and bool(i & 4) == name.endswith("optimizer")


def test_execution_keeps_activation_offload_with_the_optimizers() -> None:
    model, system = load_model("llama-3.1-8b"), SystemSpec(gpu="GB200", gpus=16)
    res = search(model, system, 64, 8192, limit=400)
    rows = [int(i) for i in res.ranked()[:40] if OFFLOAD[int(res.configs["off"][i])]
            == "activations+optimizer"]  # fmt: skip
    assert rows
    for i in rows[:3]:
        ex = res.execution(i)
        assert ex["offload_activations"] and ex["optimizer_offload_fraction"] == 1.0
        it = predict(make_job(model, ex, system)).iteration_s
        assert it == pytest.approx(res.iteration_s[i], rel=0.01), res.row(i)
