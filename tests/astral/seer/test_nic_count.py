"""Fewer NICs than GPUs (nic_count.py): the per-GPU share Seer gives a 4-NIC node against the
nccl-tests figure of such a node (NVIDIA/nccl-tests issue 119), and every phrasing of a node's
NIC count read as that share — not against any development row's error."""

import csv
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from starfabric.astral.hardware import get_gpu
from starfabric.astral.seer.comm import collective_time, make_fabric
from starfabric.astral.seer.efficiency import efficiency_for
from starfabric.astral.seer.fabric import Group
from starfabric.astral.seer.nic_count import (
    NCCL_4HCA_A100_NODE_LINE_RATE_GBS,
    NCCL_4HCA_A100_PEAK_BUSBW_GBS,
    P4D_EFA_ADAPTER_GBPS,
    count_rate_gbps,
    stated_nics_per_gpu,
)
from starfabric.astral.seer.validate import _gpu, _nic, _nic_gbps
from starfabric.errors import DataError

DATA = Path(__file__).parents[2] / "data" / "published_runs"


def test_per_gpu_share_reaches_what_nccl_tests_measured_on_a_4_hca_a100_node() -> None:
    """24 ranks on 3 nodes of 8 A100-40GB, 4 HDR HCAs each: all_reduce_perf peaked at 96 GB/s
    bus bandwidth. Seer's ring over the per-GPU share (4 x 200 / 8 = 100 Gb/s) at its IB bus
    fraction gives a bus bandwidth within 10% of it and not above the node's line rate."""
    gpu = get_gpu("A100")
    per_gpu = _nic_gbps("4 HCAs per 8 GPUs (HDR 200 Gb/s)", 8)
    assert per_gpu == pytest.approx(100.0)
    fabric = make_fabric(gpu.nvlink_gbps * 1e9, per_gpu * 1e9 / 8, efficiency_for(gpu))
    nbytes = 128 * 2**20  # the test's largest size
    t = collective_time("all_reduce", nbytes, Group(size=24, per_node=8), fabric)
    busbw_gbs = 2 * 23 / 24 * nbytes / t / 1e9
    assert busbw_gbs <= NCCL_4HCA_A100_NODE_LINE_RATE_GBS
    assert busbw_gbs == pytest.approx(NCCL_4HCA_A100_PEAK_BUSBW_GBS, rel=0.10)


def test_one_nic_per_gpu_would_overstate_that_node_by_twice() -> None:
    """The reference design's default (one HDR NIC per A100) on the same node: the ring would
    run at twice the NICs' line rate, which the measurement rules out."""
    gpu = get_gpu("A100")
    fabric = make_fabric(gpu.nvlink_gbps * 1e9, 200e9 / 8, efficiency_for(gpu))
    nbytes = 128 * 2**20
    t = collective_time("all_reduce", nbytes, Group(size=24, per_node=8), fabric)
    assert 2 * 23 / 24 * nbytes / t / 1e9 > 1.5 * NCCL_4HCA_A100_PEAK_BUSBW_GBS


@pytest.mark.parametrize(
    ("cell", "per_gpu"),
    [
        ("4 Omni-Path 100 Gb/s NICs per node", 50.0),
        ("Omni-Path 100 Gb/s, 4 per node", 50.0),
        ("four 100 Gb/s Omni-Path links per node", 50.0),
        ("4 InfiniBand HDR 200 Gb/s per node", 100.0),
        ("InfiniBand, 4 HDR per node", 100.0),
        ("4 ConnectX-6 200 Gb/s HCAs per node", 100.0),
        # read before this module, unchanged
        ("EFA 4x100 Gb/s per node (400 Gb/s per node)", 50.0),
        ("4 NICs per 8 GPUs, 100 Gb/s each", 50.0),
        ("4 NICs per node (100 Gb/s Omni-Path)", 50.0),
        ("8x HDR 200Gb/s", 200.0),
        ("400 Gb/s per node", 50.0),
        ("4 InfiniBand 25 GB/s NICs per node", 100.0),  # B/s is bytes
        ("4 INFINIBAND HDR 200 Gb/s PER NODE", 100.0),
        # a count of nodes or GPUs is not a count of NICs
        ("2 nodes, 200 Gb/s per node", 25.0),
    ],
)
def test_interconnect_cells_read_as_the_per_gpu_share(cell: str, per_gpu: float) -> None:
    assert _nic_gbps(cell, 8) == pytest.approx(per_gpu)


def test_a_count_of_gpus_is_not_read_as_nics() -> None:
    assert count_rate_gbps("64 hosts x 4 GB300, 200 Gb/s per node", 4) is None
    assert count_rate_gbps("4 x A100, 100 Gb/s per node", 4) is None
    assert count_rate_gbps("NVLink3/NVSwitch; HDR200 IB", 8) is None
    assert count_rate_gbps("12 NVLink 25 GB/s links per node", 8) is None  # intra-node links
    assert stated_nics_per_gpu("18 NVLink links per node", 8) is None


@given(
    n=st.integers(min_value=1, max_value=16),
    rate=st.sampled_from([25, 50, 100, 200, 400, 800]),
    per_node=st.sampled_from([4, 8]),
    fabric=st.sampled_from(["Omni-Path", "InfiniBand HDR", "RoCE", "EFA", "ConnectX-7"]),
    form=st.integers(min_value=0, max_value=2),
)
def test_count_times_rate_over_gpus(
    n: int, rate: int, per_node: int, fabric: str, form: int
) -> None:
    """Whichever order a cell puts count, fabric and rate in, the share is count x rate / GPUs."""
    cell = [
        f"{n} {fabric} {rate} Gb/s NICs per node",
        f"{fabric} {rate} Gb/s, {n} per node",
        f"{n} {fabric} {rate} Gb/s per node",
    ][form]
    assert count_rate_gbps(cell, per_node) == pytest.approx(n * rate / per_node)


def test_a_count_without_a_rate_takes_the_fabric_s_adapter() -> None:
    """p4d's 4 EFA adapters at 100 Gb/s (AWS spec) on an A100; elsewhere the reference NIC."""
    assert stated_nics_per_gpu("4 EFA NICs per 8 GPUs", 8) == pytest.approx(0.5)
    assert stated_nics_per_gpu("four HCAs per node", 8) == pytest.approx(0.5)
    assert stated_nics_per_gpu("NVLink3/NVSwitch; HDR200 IB", 8) is None
    assert pytest.approx(100.0) == P4D_EFA_ADAPTER_GBPS
    row = {"row_id": "x", "interconnect": "4 EFA NICs per 8 GPUs"}
    assert _nic(row, "A100") == "50G"
    row = {"row_id": "x", "interconnect": "InfiniBand, 4 HCAs per node"}
    assert _nic(row, "A100") == "100G"  # 4 x HDR 200 (DGX A100's NIC) / 8
    row = {"row_id": "x", "interconnect": "UNVERIFIED (4 EFA NICs per 8 GPUs)"}
    assert _nic(row, "A100") == "200G"  # an unverified cell is not read


def test_the_a100_class_rows_read_their_stated_nics() -> None:
    """BloombergGPT's p4d cell, StarCoder's p4de cell (EFA stated by its launch script) and
    Falcon-180B's p4d cell (its model card: "P4d instances"), 4 x 100 Gb/s per node, are half a
    NIC per GPU; the rows whose interconnect is UNVERIFIED keep the reference design."""
    rows = {r["row_id"]: r for r in csv.DictReader((DATA / "development_runs_2.csv").open())}
    gpu = lambda r: _gpu(r)[0]  # noqa: E731
    for rid in ("BBGPT-01", "STARCODER-01", "FALCON180B-01"):
        assert _nic(rows[rid], gpu(rows[rid])) == "50G"
    for rid in ("GLM130B-01", "LLAMA1-01"):
        assert _nic(rows[rid], gpu(rows[rid])) == "200G"


@pytest.mark.parametrize(
    "cell",
    [
        "ConnectX-7 400 Gb/s NICs per node",
        "InfiniBand ConnectX-7 400Gb/s per node",
        "HPE Slingshot-11 200 Gb/s NICs per node",
        "CX7 400G NIC per node",
        "EFA v2 400 Gb/s per node",
        "RoCE v2 400 Gb/s per node",
    ],
)
def test_a_number_in_a_product_name_is_not_a_count(cell: str) -> None:
    """The 7 of "ConnectX-7", the 11 of "Slingshot-11", the 2 of "RoCE v2" name a product
    or version, not how many adapters a node has: the rate reads as the node's (400 Gb/s per
    node over 8 GPUs), as before the count reader, not 7 x 400 / 8."""
    assert count_rate_gbps(cell, 8) is None
    assert stated_nics_per_gpu(cell, 8) is None


def test_a_rate_is_not_a_count_of_nics() -> None:
    # "400G NIC per node": one 400 Gb/s NIC, not 400 NICs.
    assert stated_nics_per_gpu("CX7 400G NIC per node", 8) is None
    assert stated_nics_per_gpu("one 400G NIC per node", 8) == pytest.approx(1 / 8)  # "one" counts
    assert _nic_gbps("one 400G NIC per node", 8) == pytest.approx(50.0)
    assert stated_nics_per_gpu("4 NICs per node", 8) == pytest.approx(0.5)


def test_the_ratio_reader_skips_product_numbers() -> None:
    assert stated_nics_per_gpu("ConnectX-7 NIC per 2 GPUs, 400 Gb/s", 8) == pytest.approx(0.5)
    assert stated_nics_per_gpu("one ConnectX-7 NIC per 2 GPUs", 8) == pytest.approx(0.5)
    assert stated_nics_per_gpu("4 NICs per 8 GPUs", 8) == pytest.approx(0.5)
    assert stated_nics_per_gpu("InfiniBand NICs per 8 GPUs", 8) is None  # how many is not said
    assert stated_nics_per_gpu("CX7 NIC per node", 8) is None  # per node, a count must be said


_COUNTS = {"1": 1, "one": 1, "a": 1, "2": 2, "two": 2, "4": 4, "four": 4, "8": 8, "eight": 8}
_NAMES = ["", "EFA ", "ConnectX-7 ", "Omni-Path ", "CX7 "]
_PER_GPUS = {"8 GPUs": 8, "2 GPUs": 2, "two GPUs": 2, "4 GPUs": 4, "node": 8, "server": 8}
_RATES = {"": None, ", 100 Gb/s each": 100.0, " (HDR 200 Gb/s)": 200.0, ", 400G": 400.0}


@given(
    count=st.sampled_from(sorted(_COUNTS)),
    name=st.sampled_from(_NAMES),
    noun=st.sampled_from(["NIC", "HCA", "adapter", "port", "link", "rail", "card", "interface"]),
    prep=st.sampled_from(["per", "for", "/", "shared by", "per every"]),
    per=st.sampled_from(sorted(_PER_GPUS)),
    rate=st.sampled_from(sorted(_RATES)),
    lead=st.sampled_from(["", "InfiniBand, "]),
)
def test_one_count_reader_beside_a_rate_or_without(
    count: str, name: str, noun: str, prep: str, per: str, rate: str, lead: str
) -> None:
    """One reader of a stated NIC count serves both callers: beside a rate (`_nic_gbps`: count
    x rate / GPUs) and without one (`_nic`: count x the GPU's reference NIC / GPUs), in every
    phrasing either used to read alone ("a NIC for every two GPUs", "4 HCAs shared by 8 GPUs",
    "4 rails per node"). Before they were one reader (496df04), 42% of these phrasings read
    another share (a per-node count beside a rate read at the reference NIC's rate, "shared by"
    not at all)."""
    n = _COUNTS[count]
    noun = noun if n == 1 else noun + "s"
    cell = f"{lead}{count} {name}{noun} {prep} {per}{rate}"
    per_nic = _RATES[rate] or 400.0  # H100's reference NIC: 400 Gb/s per GPU
    row = {"row_id": "x", "interconnect": cell, "gpus_per_node": "8"}
    assert _nic(row, "H100") == f"{n * per_nic / _PER_GPUS[per]:g}G"


@pytest.mark.parametrize(
    "cell",
    [
        "8 NICs per node, 2x200 Gb/s per GPU",
        "4 HCAs per 8 GPUs; 400 Gb/s per GPU",
        "a ConnectX-7 NIC per 2 GPUs, 50 GB/s per GPU",
    ],
)
def test_a_rate_stated_per_gpu_wins_over_a_nic_count(cell: str) -> None:
    """A rate the cell states per GPU is the share itself (`_nic_gbps`: most explicit first);
    the NIC count multiplies only a rate of one adapter."""
    assert _nic_gbps(cell, 8) == pytest.approx(400.0)


def test_a_rate_per_node_beside_a_nic_count_is_the_node_rate_shared_by_its_gpus() -> None:
    """ "8 NICs per node, 3.2 Tb/s per node": the rate is the node's, not each NIC's, so each of
    8 GPUs gets 400 Gb/s (it was read as 8/8 x 3,200 = 3,200)."""
    assert _nic_gbps("8 NICs per node, 3.2 Tb/s per node", 8) == pytest.approx(400.0)
    assert _nic_gbps("4 HCAs per node, 800 Gb/s / node", 8) == pytest.approx(100.0)
    assert _nic_gbps("4 NICs per 8 GPUs, 200 Gb/s each", 8) == pytest.approx(100.0)


def test_links_times_a_rate_per_node_beside_a_nic_count_is_the_node_rate() -> None:
    """ "4 ConnectX-6 HCAs per 8 GPUs (4x200 Gb/s per node)" (GPT-NeoX-20B, a100_era_runs.csv):
    the node has 4 x 200 = 800 Gb/s, 100 per GPU; the count beside the rate was dropped and the
    200 read as the whole node's (25 Gb/s per GPU)."""
    cell = "InfiniBand, 4 ConnectX-6 HCAs per 8 GPUs (4x200 Gb/s per node, HDR rate assumed)"
    assert _nic_gbps(cell, 8) == pytest.approx(100.0)
    assert _nic_gbps("8 NICs per node, 8 x 400 Gb/s per node", 8) == pytest.approx(400.0)
    # a node rate without a link count keeps its meaning
    assert _nic_gbps("4 HCAs per node, 800 Gb/s per node", 8) == pytest.approx(100.0)


@pytest.mark.parametrize("cell", ["0 NICs per node, 400 Gb/s", "0 HCAs per 8 GPUs"])
def test_a_zero_nic_count_is_refused_in_one_line(cell: str) -> None:
    """No scale-out adapter is not a bandwidth of 0: the row is refused, naming the column."""
    row = {"row_id": "Z-1", "interconnect": cell, "gpu": "H100-SXM5-80GB", "gpus_per_node": "8"}
    with pytest.raises(DataError, match=r"row Z-1: column 'interconnect' = .*0 .*fix"):
        _nic(row, "H100-SXM5-80GB")


def test_a_byte_rate_beside_a_nic_count_is_not_read_as_bits() -> None:
    """ "50 GB/s" is bytes: beside a NIC count it must not be taken as 50 Gb/s per NIC (the
    per-node reading of the rate may only relax the case of "per node", not of the unit)."""
    assert _nic_gbps("4 NICs per 8 GPUs, 50 GB/s each", 8) != pytest.approx(25.0)
    assert _nic_gbps("4 NICs per 8 GPUs, 50 gb/s each", 8) is None  # not a unit Seer reads
