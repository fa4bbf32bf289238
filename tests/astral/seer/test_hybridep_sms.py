"""The HybridEP SM budget (seer/hybridep_sms.py) against Megatron-Core's flag and default
(NVIDIA/Megatron-LM 3df2009 and fca1679: `--moe-hybridep-num-sms`, default 16), the Model Zoo
launch script that sets 32 (`sbatch_benchmarking.sh`, DISPATCHER=hybridep @020b8136), and the
Model Zoo Qwen3-235B Blackwell rows' other stated settings as the reader takes them."""

from pathlib import Path

import pytest

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer import hybridep_sms as hs
from starfabric.astral.seer.comm import make_fabric
from starfabric.astral.seer.deepep_kernels import deepep_nvlink_bytes_per_s
from starfabric.astral.seer.deepep_sm_budget import nvlink_ceiling
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.validate import read_rows, row_setup, validate_row

DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"


@pytest.fixture(scope="module")
def rows() -> dict[str, dict[str, str]]:
    return {r["row_id"]: r for r in read_rows(DEV2)}


@pytest.mark.parametrize(
    ("fw", "want"),
    [
        ("flex dispatcher (--moe-token-dispatcher-type flex --moe-flex-dispatcher-backend "
         "hybridep --moe-hybridep-num-sms 32)", (32, True)),
        ("Megatron-Core, DISPATCHER=hybridep", (hs.HYBRIDEP_DEFAULT_NUM_SMS, False)),
        ("flex dispatcher with the HybridEP backend, moe_hybridep_num_sms=24", (24, True)),
        ("flex dispatcher, DeepEP (--moe-deepep-num-sms 24)", None),
        ("Enable DeepEP (Will switch to HybridEP)", None),
        ("", None),
    ],
)  # fmt: skip
def test_hybridep_num_sms(fw: str, want: tuple[int, bool] | None) -> None:
    assert hs.hybridep_num_sms(fw) == want


def test_default_is_megatron_cores() -> None:
    assert hs.HYBRIDEP_DEFAULT_NUM_SMS == 16  # arguments.py '--moe-hybridep-num-sms' default


def test_rows_read_their_stated_budget(rows) -> None:
    for rid in ("MZQ3-GB1", "MZQ3-GB2", "MZQ3-GBX1", "MZQ3-GBX2", "MZQ3-GBX3", "MCGB-L12"):
        st = row_setup(rows[rid])
        assert st.execution["deepep_num_sms"] == 32, rid
        assert "HybridEP" in st.read["deepep_num_sms"] or rid == "MCGB-L12", rid
    row = dict(rows["MZQ3-GB1"])
    row["framework"] = row["framework"].replace(" --moe-hybridep-num-sms 32", "")
    st = row_setup(row)
    assert st.execution["deepep_num_sms"] == 16 and "default" in st.read["deepep_num_sms"]
    # A DeepEP row whose notes only announce HybridEP keeps the DeepEP budget it states.
    l03 = row_setup(rows["MCGB-L03"])
    assert l03.execution["deepep_num_sms"] == 24 and "DeepEP" in l03.read["deepep_num_sms"]


def test_the_budget_reaches_the_ep_copy_rate() -> None:
    """At EP 8 on GB200 the SMs bind below the NVLink-5 ceiling: 32 SMs copy faster than
    Megatron's HybridEP default 16 and DeepEP's 20."""
    gpu = get_gpu("GB200")
    link = make_fabric(gpu.nvlink_gbps * 1e9, 50e9, efficiency_for(gpu)).tiers("all_to_all")[0]
    ceiling = nvlink_ceiling(gpu.nvlink_gbps)
    assert ceiling is not None
    link = min(link, ceiling)
    r16, r20, r32 = (deepep_nvlink_bytes_per_s(link, 8, n) for n in (16, 20, 32))
    assert r16 < r20 < r32 <= link


def test_stated_budget_shortens_the_exposed_all_to_all(rows) -> None:
    row = rows["MZQ3-GB1"]  # EP 8, A2A_OVERLAP=0: every dispatch and combine exposed
    fewer = dict(row)
    fewer["framework"] = row["framework"].replace("--moe-hybridep-num-sms 32", "")
    ep32 = validate_row(row).prediction.breakdown["ep"]
    ep16 = validate_row(fewer).prediction.breakdown["ep"]
    assert ep32 < ep16


def test_model_zoo_blackwell_rows_read_as_stated(rows) -> None:
    """What the launch commands state: forced balance, HybridEP on the flex dispatcher, CUDA
    graphs except the 128K command, EP overlap where A2A_OVERLAP=1, no TP overlap under
    PR=mxfp8 (sbatch_benchmarking.sh adds --tp-comm-overlap for bf16 only)."""
    want_graphs = {"MZQ3-GB1": True, "MZQ3-GB2": True, "MZQ3-GBX1": True, "MZQ3-GBX2": False,
                   "MZQ3-GBX3": True}  # fmt: skip
    want_overlap = {"MZQ3-GB2", "MZQ3-GBX3"}
    for rid, graphs in want_graphs.items():
        st = row_setup(rows[rid])
        ex = st.execution
        assert ex["moe_load_balance"] == "forced", rid
        assert ex["cuda_graphs"] is graphs, rid
        assert ex["ep_comm_overlap"] is (rid in want_overlap), rid
        assert all(o["moe_dispatcher"] == ["deepep"] for _, o in st.options), rid
        if rid != "MZQ3-GB1":
            assert not ex["tp_comm_overlap"], rid
            assert all("tp_comm_overlap" not in o for _, o in st.options), rid


CMD = (
    "pretrain_gpt.py --num-layers 4 --hidden-size 1024 --num-attention-heads 8 --seq-length 2048 "
    "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64 --bf16 "
    "--num-experts 8 --moe-router-topk 2 --expert-model-parallel-size 8 "
    "--moe-token-dispatcher-type flex "
)


@pytest.mark.parametrize(
    ("extra", "sms"),
    [("--moe-flex-dispatcher-backend hybridep --moe-hybridep-num-sms 32", 32),
     ("--moe-flex-dispatcher-backend hybridep", hs.HYBRIDEP_DEFAULT_NUM_SMS),
     ("--moe-flex-dispatcher-backend hybridep --moe-deepep-num-sms 24", 16),
     ("--moe-flex-dispatcher-backend deepep --moe-deepep-num-sms 24 --moe-hybridep-num-sms 32", 24),
     ("--moe-deepep-num-sms 24", 24)],
)  # fmt: skip
def test_launch_command_takes_the_backends_own_budget(extra: str, sms: int) -> None:
    assert parse_megatron_command(CMD + extra)["execution"]["deepep_num_sms"] == sms


@pytest.mark.parametrize(
    "fw",
    [
        "Megatron-Core, flex dispatcher, DeepEP backend (not the HybridEP backend)",
        "Megatron-Core --moe-flex-dispatcher-backend deepep; will switch to the HybridEP backend",
        "flex dispatcher, no HybridEP backend",
    ],
)
def test_negated_or_other_backend_is_not_hybridep(fw: str) -> None:
    # A DeepEP run keeps DeepEP's default budget (20), not HybridEP's 16.
    assert hs.hybridep_num_sms(fw) is None


def test_budget_stated_in_the_notes_cell() -> None:
    # The flag in the notes cell, the backend in the framework cell: the stated 32, not 16.
    got = hs.hybridep_num_sms("Megatron-Core, HybridEP backend", "--moe-hybridep-num-sms 32")
    assert got == (32, True)


def test_hybridep_flag_is_not_deepeps_budget() -> None:
    from starfabric.astral.seer.deepep_sm_budget import stated_num_sms

    # HybridEP's flag in a DeepEP row's notes is not DeepEP's SM budget.
    assert stated_num_sms("flex dispatcher, DeepEP", "--moe-hybridep-num-sms 32") is None
    assert stated_num_sms("flex dispatcher, DeepEP", "--moe-deepep-num-sms 24") == 24
