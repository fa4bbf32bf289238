"""Fewer NICs than GPUs: the scale-out NIC count an interconnect cell states, per GPU.

Seer prices a cross-node collective at the bandwidth of the NICs its members use (`comm.py`:
a node's g members of a group carry the ring on g per-GPU shares). The share is the node's
NIC count x the NIC's line rate / GPUs per node; nothing else about the NIC count enters the
model, and that reading is what nccl-tests reach on such nodes: on three servers of 8 A100
SXM4 40GB with 4 HDR InfiniBand HCAs each (4 x 200 Gb/s = 100 GB/s per node, NVIDIA/nccl-tests
issue 119, 2022-11-17) all_reduce_perf peaked at 96 GB/s bus bandwidth (84.8 GB/s averaged over
its 8 B - 128 MiB sweep), 0.96 of the node's line rate, against 86.7 GB/s at 128 MiB (0.88 x 100
less the ring latency) in Seer's formula (`NCCL_4HCA_A100_PEAK_BUSBW_GBS`;
`tests/astral/seer/test_nic_count.py`): two GPUs
sharing a NIC lose nothing beyond sharing its line rate. On p4d's EFA the NCCL plugin reaches
less of it (`efa.py`).

So what matters is reading the count. `validate._nic_gbps` reads "4x100 Gb/s per node" and
"8x HDR200"; this module reads the phrasings it does not, where a node's count of adapters
comes with words between it and the rate or after the rate ("4 Omni-Path 100 Gb/s NICs per
node", "InfiniBand, 4 HDR per node", "100 Gb/s Omni-Path, 4 per node", "four 100 Gb/s links per
node") — each of which it used to read as one NIC per node (a rate "per node") or not at all
(the reference design's one NIC per GPU, four times the share of a 4-NIC node) — and, one
reader for both of validate's uses (`stated_nics_per_gpu`), a count of adapters per GPUs or per
node beside a rate ("4 NICs per 8 GPUs, 100 Gb/s each": times that rate) or without one ("4 EFA
NICs per 8 GPUs"), whose adapters then run at the fabric's own rate: p4d's EFA adapters at 100
Gb/s (`P4D_EFA_ADAPTERS`, AWS p4d.24xlarge spec), any other at the GPU's reference NIC
(`validate.DEFAULT_NIC_PER_GPU`: one NIC per GPU, so its per-GPU rate is the per-NIC rate).
"""

from __future__ import annotations

import re

from starfabric.astral.seer.efa import P4D_NODE_LINE_RATE_GBS

NCCL_4HCA_A100_PEAK_BUSBW_GBS = 96.0
"""all_reduce_perf peak bus bandwidth on 3 nodes of 8 A100-SXM4-40GB with 4 HDR HCAs each,
24 ranks (NVIDIA/nccl-tests issue 119): the calibration check of the per-GPU share."""
NCCL_4HCA_A100_NODE_LINE_RATE_GBS = 100.0
"""That node's line rate: 4 HCAs x 200 Gb/s = 800 Gb/s = 100 GB/s."""

P4D_EFA_ADAPTERS = 4
"""EFA adapters of a p4d/p4de node (AWS instance spec: 4 x 100 Gb/s)."""
P4D_EFA_ADAPTER_GBPS = P4D_NODE_LINE_RATE_GBS * 8.0 / P4D_EFA_ADAPTERS
"""Line rate of one p4d EFA adapter in Gb/s (100)."""

_WORDS = {
    "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8,
    "nine": 9, "ten": 10, "twelve": 12, "sixteen": 16, "thirty-two": 32,
}  # fmt: skip
_SPEED = r"(\d+(?:\.\d+)?)\s*(G|T)(B/s|b/?s|bps|bit/s|b\b|\b(?!/))"
"""A line rate: in bits ("100 Gb/s", "200Gbps", "400G", as `validate._SPEED`) or in bytes
("25 GB/s"); case matters (B is bytes)."""
_NIC = r"(?i:NICs?|HCAs?|adapters?|ports?|links?|cards?|rails?|interfaces?)"
_INTRA = r"(?![\w-]*(?i:nvlink|nvswitch|pcie|xgmi|infinity))"
"""Not a scale-out adapter: NVLink/NVSwitch/PCIe links join the GPUs of a node."""
_WORD = (
    r"(?![\w-]*(?i:node|gpu|server|host|rack|tray|switch))(?!G?[A-Z]{1,2}\d{2,3}\b)"
    r"[A-Za-z][\w-]*,?"
)
"""A word between a count and its rate: not a unit the count could be counting instead
(nodes, GPUs — also by name: "64 hosts x 4 GB300, 200 Gb/s per node" counts GPUs)."""
_PER_NODE = r"(?i:per|/|in each|each)\s*(?i:node|server|host)"
_COUNT = r"(?<![\w.-])(\d+)"
"""A count of adapters: a number standing alone, not one inside a product or version name
("ConnectX-7", "Slingshot-11", "CX7", "RoCE v2")."""
_NOT_A_RATE = r"(?!\s*[GT](?:b|B|bps|bit)?(?:/s)?\b)"
"""Not the number of a rate ("400G NIC" is one NIC at 400 Gb/s, not 400 NICs)."""


PRODUCT_GENERATION = re.compile(
    r"\b(?:(Slingshot)\s+(1[01])|(ConnectX|CX)\s+([3-9])|(BlueField)\s+([1-3])|(EFA)\s+(v\d))\b"
    r"(?!\s*(?:[x×]|[GT](?:b|B|bps|bit)?(?:/s)?\b))",
    re.I,
)
"""A product's generation written after a space: HPE Slingshot 10/11, NVIDIA ConnectX-3..9,
BlueField-1..3, AWS EFA v2/v3 — a name, not a count of NICs ("Slingshot 11 200 Gb/s NICs" is
NICs of 200 Gb/s, not 11 of them)."""
IB_GENERATION_RATE = re.compile(
    r"\b(XDR|NDR|HDR|EDR)\s+(\d{3})\b(?!\s*(?:[GT](?:b|B|bps|bit)?(?:/s)?\b|[x×]))"
)
"""An InfiniBand generation with its port rate after a space ("NDR 400", "HDR 200", "HDR 100":
HDR100 is a 100 Gb/s 2x-width HDR port) — a rate, not a count."""


def joined_names(text: str) -> str:
    """The interconnect text with each product generation (`PRODUCT_GENERATION`) and each
    InfiniBand generation's rate (`IB_GENERATION_RATE`) joined to its name ("Slingshot-11",
    "ConnectX-7", "EFA-v2", "NDR400"), as the readers read the hyphenated forms."""
    text = PRODUCT_GENERATION.sub(lambda m: "-".join(g for g in m.groups() if g is not None), text)
    return IB_GENERATION_RATE.sub(lambda m: m.group(1) + m.group(2), text)


def _digits(text: str) -> str:
    """Number words as digits ("four HCAs" → "4 HCAs"), so the patterns read one form."""
    pat = r"\b(" + "|".join(sorted(_WORDS, key=len, reverse=True)) + r")\b"
    return re.sub(pat, lambda m: str(_WORDS[m.group(1).lower()]), text, flags=re.IGNORECASE)


def _gbps(value: str, unit: str, suffix: str) -> float:
    """Gb/s of a matched rate (T = 1000 G; B/s = 8 bits)."""
    return (
        float(value) * (1000.0 if unit.upper() == "T" else 1.0) * (8.0 if suffix == "B/s" else 1.0)
    )


def count_rate_gbps(text: str, per_node: int) -> float | None:
    """Gb/s per GPU from a node's adapter count and their rate when words separate them:
    "4 Omni-Path 100 Gb/s NICs per node", "4 InfiniBand HDR 200 Gb/s per node" (count, up
    to three words, rate, then NICs or "per node"), "Omni-Path 100 Gb/s, 4 per node" (rate,
    then ", N per node"); None when the cell says neither."""
    text = _digits(text)
    count_first = (
        _COUNT + r"\s*[x×]?\s+(?:" + _INTRA + _WORD + r"\s+){0,3}?" + _SPEED
        + r"\s*(?:[A-Za-z][\w-]*\s+){0,2}?(?:" + _NIC + r"\b\s*(?:" + _PER_NODE + r")?|"
        + _PER_NODE + r")"
    )  # fmt: skip
    m = re.search(count_first, text)
    if m:
        return int(m.group(1)) * _gbps(m.group(2), m.group(3), m.group(4)) / per_node
    rate_first = (
        _SPEED + r"[^,;()]{0,40}?,\s*(\d+)\s*(?:" + _NIC + r"\s*)?(?:[A-Za-z][\w-]*\s+){0,2}?"
        + _PER_NODE
    )  # fmt: skip
    m = re.search(rate_first, text)
    if m:
        return int(m.group(4)) * _gbps(m.group(1), m.group(2), m.group(3)) / per_node
    return None


_NAME_WORD = _INTRA + r"(?!\d+\s)[\w-]+\s+"
"""A word naming the adapters between a count and its noun ("EFA", "ConnectX-7", "100G"): not
an NVLink/NVSwitch/PCIe/xGMI link, not a bare number."""
_SHARED_PER = r"\s*(?i:per|for|/|shared\s+by)\s*(?i:every\s+)?"
"""Between the adapters and what shares them: "per", "for", "/", "shared by", "per every"."""
_NICS_PER = re.compile(
    r"(?:(?<![\w.-])(\d+(?!\d)|(?i:an?)\b)" + _NOT_A_RATE
    + r"\s*(?:" + _NAME_WORD + r"){0,2}?" + _NIC
    + _SHARED_PER + r"(?:(\d+)\s*(?i:GPUs?)|(?i:node|server|host))\b"
    + r"|(?<![\w-])" + _NAME_WORD + r"(?i:NIC|HCA|adapter|port|link|card|rail|interface)(?!s)"
    + _SHARED_PER + r"(\d+)\s*(?i:GPUs?)\b)"
)  # fmt: skip
"""A count of scale-out adapters per GPUs or per node: "4 EFA NICs per 8 GPUs", "four HCAs per
node", "a NIC for every two GPUs", "4 HCAs shared by 8 GPUs"; a named adapter without a count is
one, per GPUs only ("ConnectX-7 NIC per 2 GPUs": the 7 names the product; "400G NIC per node"
says no count)."""


def stated_nics_per_gpu(text: str, per_node: int) -> float | None:
    """Scale-out adapters per GPU a cell states (`_NICS_PER`: "4 NICs per 8 GPUs" → 0.5, "4 HCAs
    per node" on 8 GPUs → 0.5), with or without a rate beside it; None when it does not count
    them. `validate._nic_gbps` multiplies it by a stated rate; `validate._nic` by the fabric's
    adapter rate (`nic_rate_for_count`) when none is stated."""
    m = _NICS_PER.search(_digits(text))
    if m is None:
        return None
    count, per_gpus, named_per_gpus = m.groups()
    nics = 1 if count is None or not count.isdigit() else int(count)  # "a", "an", a named one
    gpus = int(per_gpus or named_per_gpus or per_node)
    return nics / gpus if gpus > 0 else None


def nic_rate_for_count(efa_a100: bool, default_per_gpu_gbps: float) -> float:
    """Line rate of one adapter of a counted NIC without a stated rate: p4d's EFA adapter on an
    A100 EFA node, else the GPU's reference NIC (one per GPU, so its per-GPU rate) — an
    assumption: the cell names how many adapters, not which."""
    return P4D_EFA_ADAPTER_GBPS if efa_a100 else default_per_gpu_gbps


__all__ = [
    "IB_GENERATION_RATE",
    "NCCL_4HCA_A100_NODE_LINE_RATE_GBS",
    "NCCL_4HCA_A100_PEAK_BUSBW_GBS",
    "P4D_EFA_ADAPTERS",
    "P4D_EFA_ADAPTER_GBPS",
    "PRODUCT_GENERATION",
    "count_rate_gbps",
    "joined_names",
    "nic_rate_for_count",
    "stated_nics_per_gpu",
]
