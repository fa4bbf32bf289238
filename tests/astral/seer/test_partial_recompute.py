"""Megatron-Core's partial full recompute (`--recompute-method uniform|block
--recompute-num-layers N`) against what `TransformerBlock._checkpointed_forward` does
(core_v0.14.0): uniform re-runs every layer and keeps one input per group of N, block re-runs
the first N layers of each (virtual) pipeline chunk and runs the rest plainly."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from starfabric.astral.seer import cells, partial_recompute
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.parallel import ExecutionSpec
from starfabric.astral.seer.predict import make_job, predict
from starfabric.astral.seer.search_stack import search_base
from starfabric.astral.seer.validate import validate_row
from starfabric.errors import ConfigError, StarfabricError

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"

# llama-3.1-8b: 32 layers over pp 2 x vpp 2 = 8 layers per chunk
BASE: dict[str, Any] = {"tp": 2, "pp": 2, "vpp": 2, "global_batch": 32, "micro_batch": 1,
                        "seq_len": 4096}  # fmt: skip
PER_CHUNK = 8
_CACHE: dict[tuple[Any, ...], tuple[float, float, float]] = {}


def run(**kw: Any) -> tuple[float, float, float]:
    """(iteration s, peak activation bytes, recompute FLOPs) of llama-3.1-8b on 16 H100s."""
    key = tuple(sorted(kw.items()))
    if key not in _CACHE:
        p = predict(make_job("llama-3.1-8b", {**BASE, **kw}, {"gpu": "H100", "gpus": 16}))
        _CACHE[key] = (p.iteration_s, p.memory.activations, p.timeline.recompute_flops)
    return _CACHE[key]


def block(n: int) -> tuple[float, float, float]:
    return run(recompute="full", recompute_method="block", recompute_num_layers=n)


def test_block_with_every_layer_of_a_chunk_is_full_recompute() -> None:
    assert block(PER_CHUNK) == pytest.approx(run(recompute="full"), rel=1e-12)


def test_block_with_no_layer_is_no_recompute() -> None:
    assert block(0) == pytest.approx(run(recompute="none"), rel=1e-12)


def test_uniform_groups_of_one_layer_are_todays_full_recompute() -> None:
    one = run(recompute="full", recompute_method="uniform", recompute_num_layers=1)
    assert one == pytest.approx(run(recompute="full"), rel=1e-12)


def test_uniform_re_runs_every_layer_whatever_the_group() -> None:
    full = run(recompute="full")
    four = run(recompute="full", recompute_method="uniform", recompute_num_layers=4)
    assert four[0] == pytest.approx(full[0], rel=1e-12)  # same re-run forward
    assert four[2] == pytest.approx(full[2], rel=1e-12)
    assert four[1] > full[1]  # a group's replay holds its 4 layers at once


@settings(max_examples=9, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, PER_CHUNK))
def test_block_lies_between_none_and_full(n: int) -> None:
    none, full, got = run(recompute="none"), run(recompute="full"), block(n)
    assert full[1] <= got[1] <= none[1]  # memory
    assert none[0] <= got[0] <= full[0]  # time
    # the recompute FLOPs are exactly n of the chunk's layers
    assert got[2] == pytest.approx(full[2] * n / PER_CHUNK, rel=1e-9)


def test_block_time_is_linear_in_the_layer_count() -> None:
    t = np.array([block(n)[0] for n in range(PER_CHUNK + 1)])
    steps = np.diff(t)
    assert steps == pytest.approx(np.full(PER_CHUNK, steps.mean()), rel=1e-6)
    assert steps.mean() > 0


@given(st.integers(1, 40), st.integers(0, 60), st.integers(1, 60))
def test_chunk_bytes_linear_in_n_per_chunk(layers: int, n: int, k: int) -> None:
    """A chunk's saved bytes: block keeps N inputs and layers - N full layers (linear in N,
    capped at the chunk); uniform keeps ceil(layers / N) inputs."""
    rec = partial_recompute.recomputed_layers("block", n, layers)
    assert rec == min(n, layers)
    assert partial_recompute.kept_inputs("block", n, layers) == rec
    assert partial_recompute.kept_inputs("uniform", k, layers) == -(-layers // k)
    assert partial_recompute.recomputed_layers("uniform", k, layers) == layers
    assert partial_recompute.replay_layers("uniform", k, layers) == min(k, layers) - 1
    rd, rm = partial_recompute.recomputed_split(layers // 3, layers - layers // 3, rec)
    assert rd + rm == rec and rd == min(rec, layers // 3)


def test_block_counts_per_virtual_chunk() -> None:
    """Each virtual-pipeline chunk is its own TransformerBlock: block 4 with vpp 2 re-runs 4
    layers of each of the stage's 2 chunks (half the layers), not 4 of the stage's 16."""
    half = block(4)[2]
    assert half == pytest.approx(run(recompute="full")[2] / 2, rel=1e-9)


@pytest.mark.parametrize(
    ("update", "words"),
    [
        ({"recompute": "selective", "recompute_method": "block", "recompute_num_layers": 2},
         "recompute_method = 'block' with recompute = 'selective'"),
        ({"recompute": "full", "recompute_method": "block"}, "give both or neither"),
        ({"recompute": "full", "recompute_num_layers": 2}, "give both or neither"),
        ({"recompute": "full", "recompute_method": "uniform", "recompute_num_layers": 0},
         "at least one layer"),
    ],
)  # fmt: skip
def test_bad_settings_are_one_line_errors(update: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        ExecutionSpec.model_validate({"global_batch": 8, "seq_len": 1024, **update})


def test_more_layers_than_a_chunk_holds_is_refused() -> None:
    with pytest.raises(StarfabricError) as exc:
        block(PER_CHUNK + 1)
    assert "holds at most 8 layers" in exc.value.one_line()
    assert "\n" not in exc.value.one_line()


@pytest.mark.parametrize(
    ("cell", "want"),
    [
        ("full (block, 10 layers)", ("block", 10)),
        ("recompute 10 layers", ("block", 10)),
        ("uniform, 1 layer", ("uniform", 1)),
        ("full (4 layers, uniform)", ("uniform", 4)),
        ("--recompute-granularity full --recompute-method block --recompute-num-layers 3",
         ("block", 3)),
        ("full", None),
        ("0 layers", None),
        ("UNVERIFIED", None),
        ("full (bench script: overlap=off keeps VPP=1 + 32 layers)", None),
    ],
)  # fmt: skip
def test_recompute_cell_reads_method_and_layers(cell: str, want: Any) -> None:
    assert cells.recompute_layers(cell) == want
    if want is not None:
        assert cells.recompute_kind(cell.lower(), False) == "full"


CMD = """torchrun pretrain_gpt.py --num-layers 32 --hidden-size 4096 --ffn-hidden-size 14336 \\
  --num-attention-heads 32 --group-query-attention --num-query-groups 8 --seq-length 4096 \\
  --micro-batch-size 1 --global-batch-size 64 --tensor-model-parallel-size 2 \\
  --pipeline-model-parallel-size 2 --swiglu --normalization RMSNorm --bf16 \\
  --vocab-size 128256 --recompute-granularity full """


def test_megatron_launch_flags_reach_the_spec() -> None:
    ex = parse_megatron_command(CMD + "--recompute-method block --recompute-num-layers 5")
    assert ex["execution"]["recompute_method"] == "block"
    assert ex["execution"]["recompute_num_layers"] == 5


def test_megatron_full_without_method_is_refused_as_megatron_does() -> None:
    with pytest.raises(ConfigError, match="needs --recompute-method"):
        parse_megatron_command(CMD)


def test_search_refuses_them_in_one_line() -> None:
    spec = ExecutionSpec(global_batch=8, seq_len=1024, recompute="full",
                         recompute_method="block", recompute_num_layers=2)  # fmt: skip
    with pytest.raises(ConfigError) as exc:
        search_base(spec, 8, 1024, "bf16")
    assert "use seer predict" in exc.value.one_line()


def _row(row_id: str, **cells_: str) -> dict[str, str]:
    with DEV2.open() as f:
        row = next(r for r in csv.DictReader(f) if r["row_id"] == row_id)
    return {**row, **cells_}


def test_validate_reads_and_prints_a_rows_block_recompute() -> None:
    """AWSQ30-EP16-MB4 (Qwen3-30B-A3B, 48 layers, pp 4: 12 per chunk) rewritten to block 4:
    chosen as stated, printed, and priced between no recompute and full."""
    res = validate_row(_row("AWSQ30-EP16-MB4", recompute="full (block, 4 layers)"))
    assert res.choices["recompute_method"] == "block"
    assert res.choices["recompute_num_layers"] == 4
    full = validate_row(_row("AWSQ30-EP16-MB4", recompute="full"))
    none = validate_row(_row("AWSQ30-EP16-MB4", recompute="none"))
    assert none.predicted_iter_s < res.predicted_iter_s < full.predicted_iter_s


def test_an_unverified_expert_tp_is_chosen_and_printed() -> None:
    res = validate_row(_row("AWSQ30-EP16-MB4", etp="UNVERIFIED"))
    assert "(unverified: fastest layout that fits)" in str(res.choices["etp"])
    chosen = int(str(res.choices["etp"]).split()[0])
    assert res.prediction.layout.etp == chosen
    stated = validate_row(_row("AWSQ30-EP16-MB4", etp=str(chosen)))
    assert stated.predicted_iter_s == pytest.approx(res.predicted_iter_s, rel=1e-12)


def test_trace_replays_only_blocks_first_layers() -> None:
    """The Perfetto trace re-runs the forward of a chunk's first N layers only."""
    from starfabric.astral.seer.trace import trace_json

    def recomputed(n: int) -> int:
        ex = {**BASE, "recompute": "full", "recompute_method": "block", "recompute_num_layers": n}
        pred = predict(make_job("llama-3.1-8b", ex, {"gpu": "H100", "gpus": 16}))
        events = trace_json(pred)["traceEvents"]
        return sum(1 for e in events if "(recompute)" in str(e.get("name", "")))

    assert recomputed(0) == 0
    assert recomputed(2) * 2 == recomputed(4) > 0


def test_an_empty_expert_tp_cell_is_megatrons_default() -> None:
    res = validate_row(_row("AWSQ30-EP16-MB4", etp=""))
    assert "etp" not in res.choices and res.prediction.layout.etp == 1


def test_block_recompute_with_fine_grained_offload_is_refused_in_one_line() -> None:
    # Merged beside fine_grained_offload: block's plain layers would offload, its checkpointed
    # ones not; the pair is refused rather than priced as if nothing moved.
    with pytest.raises(ValueError, match=r"offload_modules .* recompute_method 'block'"):
        ExecutionSpec(
            tp=1, pp=1, global_batch=8, micro_batch=1, seq_len=4096, recompute="full",
            recompute_method="block", recompute_num_layers=2, offload_modules=("expert_fc1",),
        )  # fmt: skip
