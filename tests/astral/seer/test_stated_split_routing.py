"""Reading what TorchTitan's DeepSeek-V3 report (docs/dsv3_671b_dist_moe_256gpu_report.md
@9739e6e) states about its runs: the asymmetric "4/4/.../4/1" layer split and deterministic
round-robin routing (cells.layer_split, validate.states_forced_balance), and the fused
dispatch of the MTP module's experts (cost._gemms_named)."""

import numpy as np
import pytest

from starfabric.astral.seer import cells
from starfabric.astral.seer.cost import FUSED_EXPERT_GEMMS, _gemms_named
from starfabric.astral.seer.ops import GEMM, OpTable
from starfabric.astral.seer.validate import states_forced_balance


@pytest.mark.parametrize(
    ("text", "layers", "stages", "split"),
    [
        ("the asymmetric 4/4/.../4/1 layer split", 61, 16, (4,) * 15 + (1,)),
        ("split 4/4/…/4/1", 61, 16, (4,) * 15 + (1,)),
        ("stages 7/8/8/7", 30, 4, (7, 8, 8, 7)),
        ("3/4/.../4/2", 61, 16, (3,) + (4,) * 14 + (2,)),
        ("the asymmetric 4/4/.../4/1 layer split", 61, 8, None),  # does not sum to 61
        ("PP2/VPP8, 16,777,216 tokens", 61, 16, None),
        ("dates 2025/11/24", 61, 16, None),
        (None, 61, 16, None),
    ],
)
def test_layer_split(
    text: str | None, layers: int, stages: int, split: tuple[int, ...] | None
) -> None:
    assert cells.layer_split(text, layers, stages) == split


@pytest.mark.parametrize(
    ("text", "forced"),
    [
        ("deterministic round-robin routing", True),
        ("round robin expert routing", True),
        ("forced load balance (debug.moe_force_load_balance = true)", True),
        ("routing balance (C4 data, no forced balance stated)", False),
        ("learned routing, round-robin data loader", False),
        ("not round-robin routing", False),
    ],
)
def test_round_robin_routing_is_balanced(text: str, forced: bool) -> None:
    assert states_forced_balance(text) is forced


def test_mtp_module_experts_are_fused_gemms() -> None:
    t = OpTable()
    t.gemm("moe.expert_fc1", 8, 8, 8)
    t.gemm("mtp0.moe.expert_fc1", 8, 8, 8)
    t.gemm("mtp0.moe.expert_fc2.dgrad", 8, 8, 8)
    t.gemm("mtp0.attn.proj", 8, 8, 8)
    t.gemm("xmtp0.moe.expert_fc1", 8, 8, 8)
    kind = np.full(len(t), GEMM)
    mask = _gemms_named(t, kind, FUSED_EXPERT_GEMMS)
    assert mask.tolist() == [True, True, True, False, False]


def test_fused_dispatch_has_no_permute_kernels() -> None:
    """TorchTitan's DistMoE hands unpermuted tokens and top-k IDs to one fused call
    (torchtitan models/common/dist_moe.py @2e4b4a4): no permute/sort/unpermute of its own;
    every other dispatcher keeps them."""
    from starfabric.astral.seer.model import load_model
    from starfabric.astral.seer.ops import layer_ops
    from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout

    model = load_model("deepseek-v3")
    names = {}
    for fused in (False, True):
        ex = ExecutionSpec(
            seq_len=4096, global_batch=256, ep=64, moe_dispatcher="deepep",
            moe_fused_dispatch=fused, precision="fp8",
        )  # fmt: skip
        lay = resolve_layout(model, ex, SystemSpec(gpu="GB300", gpus=256, gpus_per_node=4))
        names[fused] = set(layer_ops(model, ex, lay, moe=True).name)
    permutes = {"moe.permute", "moe.unpermute"}
    assert permutes <= names[False]
    assert not (permutes & names[True])
    assert {n for n in names[True] if "sort" in n} == set()
    assert names[False] - names[True] - {n for n in names[False] if "sort" in n} == permutes


@pytest.mark.parametrize(
    ("notes", "pp", "vpp"),
    [
        ("virtual-stage layers 4/4/.../4/1", "2", "8"),  # the split ends the notes
        ("layers per stage 4,4,...,4,1", "2", "8"),
        ("", "2 (layout 4/4/.../4/1)", "8"),
        ("EP 32 over 8 hosts", "2", "8 (4/4/.../4/1)"),
    ],
)
def test_a_row_split_is_read_from_each_cell_apart(notes: str, pp: str, vpp: str) -> None:
    """notes, pp and vpp were joined with ';' and the comma-list reader ran the PP and VPP
    degrees onto a split ending the notes ("4/4/.../4/1/2/8"): no split was read."""
    row = {"notes": notes, "pp": pp, "vpp": vpp}
    assert cells.row_layer_split(row, 61, 16) == (4,) * 15 + (1,)


def test_a_row_without_a_split_reads_none() -> None:
    row = {"notes": "TP/PP/CP/EP = 1/2/1/32; measured 2025/11/03", "pp": "2", "vpp": "8"}
    assert cells.row_layer_split(row, 61, 16) is None


def test_validate_reads_a_split_that_ends_the_notes() -> None:
    import importlib
    from pathlib import Path

    v = importlib.import_module("starfabric.astral.seer.validate")
    csv = Path(__file__).parents[2] / "data" / "shipped_configs" / "megatron_bridge_moe_perf.csv"
    row = next(r for r in v.read_rows(csv) if r["row_id"] == "MBPERF-DSV3-GB300-FP8_MX-V1")
    row = {**row, "notes": "layers per virtual stage 5/4/.../4/0"}  # not the recipe's map
    st = v.row_setup(row, shipped=False)
    assert st.execution["pipeline_layers"] == [5] + [4] * 14 + [0]
