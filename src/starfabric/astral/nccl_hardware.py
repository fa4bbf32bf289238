"""The hardware an nccl-tests log ran on, from the log itself or the user's options.

nccl-tests prints one `Rank N ... on HOST device D [bus] NAME` line per rank: the rank count,
the hosts (nodes) and the GPU model. It never prints NIC speeds, so a log spanning nodes needs
`--nic` unless its file name is one of the bundled logs (`KNOWN_FABRICS`). Precedence:
options, then the log's device list, then a bundled log's known hardware; anything still
unknown is a ConfigError naming the option that supplies it.
"""

from __future__ import annotations

import re

from starfabric.astral.collectives.fit import KNOWN_FABRICS, FabricSpec
from starfabric.astral.hardware import get_gpu
from starfabric.astral.nccltests import NcclRun
from starfabric.config import parse_spec
from starfabric.errors import ConfigError
from starfabric.units import parse_bandwidth

SINGLE_NODE_NIC_GBIT_S = 400.0
"""Assumption: the NIC rate given to a one-node fabric, where no collective crosses a NIC (the
fit and the predictions do not depend on it)."""


def known_fabric(path: str) -> FabricSpec | None:
    """The bundled log's hardware when the file keeps a bundled name (legacy fallback)."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    for prefix, spec in KNOWN_FABRICS.items():
        if name.startswith(prefix):
            return spec
    return None


def _catalog_gpu(device: str) -> tuple[str, float] | None:
    """Catalog name and NVLink GB/s of a device name as nccl-tests prints it
    ('NVIDIA H100 80GB HBM3', 'A100-SXM4-40GB'), trying the name, then its leading word."""
    name = re.sub(r"^NVIDIA\s+", "", device.strip(), flags=re.I)
    for cand in (name, name.split()[0] if name else "", re.split(r"[-\s]", name)[0]):
        if not cand:
            continue
        try:
            g = get_gpu(cand)
        except ConfigError:
            continue
        return g.name, float(g.nvlink_gbps)
    return None


def fabric_of(
    run: NcclRun,
    *,
    gpu: str | None = None,
    nodes: int | None = None,
    gpus_per_node: int | None = None,
    nic: str | None = None,
    nvlink_gbyte_s: float | None = None,
) -> FabricSpec:
    """The FabricSpec of `run`: options override the log's device list, which overrides a
    bundled log's known hardware."""
    hdr = run.header
    known = known_fabric(run.path)
    where = f"{run.path}"
    for opt, v in (("--nodes", nodes), ("--gpus-per-node", gpus_per_node)):
        if v is not None and v < 1:
            raise ConfigError(f"{opt} {v}: must be at least 1", fix=f"give {opt} 1 or more")
    if nodes is None:
        if hdr.complete_device_list:
            nodes = len(hdr.hosts)
        elif gpus_per_node is not None and run.ranks % gpus_per_node == 0:
            nodes = run.ranks // gpus_per_node
        elif known is not None:
            nodes = known.nodes
    if gpus_per_node is None:
        if hdr.complete_device_list and hdr.device_ranks % len(hdr.hosts) == 0:
            gpus_per_node = hdr.device_ranks // len(hdr.hosts)
        elif nodes is not None and run.ranks % nodes == 0:
            gpus_per_node = run.ranks // nodes
        elif known is not None:
            gpus_per_node = known.gpus_per_node
    if nodes is None or gpus_per_node is None:
        raise ConfigError(
            f"{where}: the log has no device list, so its nodes and GPUs per node are unknown",
            fix="give --nodes N --gpus-per-node G",
        )
    if nodes * gpus_per_node != run.ranks and not run.ranks_inferred:
        raise ConfigError(
            f"{where}: {nodes} node(s) x {gpus_per_node} GPUs = {nodes * gpus_per_node}, but the "
            f"log ran {run.ranks} ranks",
            fix="make --nodes x --gpus-per-node equal the log's rank count",
        )
    label = gpu
    nvl = nvlink_gbyte_s
    device = gpu or (hdr.devices[0] if len(hdr.devices) == 1 else None)
    if nvl is None and device is not None:
        found = _catalog_gpu(device)
        if found is None and gpu is not None:
            get_gpu(gpu)  # the catalog's own error, listing the names it knows
        if found is not None:  # the label keeps the log's own name (A100-SXM4-40GB)
            label, nvl = (gpu or re.sub(r"^NVIDIA\s+", "", device.strip())), found[1]
    if nvl is None and known is not None:
        nvl, label = known.nvlink_gbyte_s, label or known.gpu
    if nvl is None:
        seen = f"device {device!r} is not in the GPU catalog" if device else "no device list"
        raise ConfigError(
            f"{where}: cannot tell the GPU's NVLink rate ({seen})",
            fix="give --gpu NAME (a catalog GPU) or --nvlink GBYTES_PER_S",
        )
    if nic is not None:
        nic_gbit = parse_bandwidth(nic, "--nic") / 1e9
        if nic_gbit <= 0:
            raise ConfigError(f"--nic {nic}: must be above 0", fix="give e.g. --nic 400G")
    elif known is not None and known.nodes == nodes:
        nic_gbit = known.nic_gbit_s
    elif nodes == 1:
        nic_gbit = SINGLE_NODE_NIC_GBIT_S
    else:
        raise ConfigError(
            f"{where}: the log spans {nodes} nodes and nccl-tests does not print NIC speeds",
            fix="give --nic RATE, the scale-out bandwidth per GPU (e.g. --nic 200G)",
        )
    same_as_known = known is not None and (nodes, gpus_per_node, nvl, nic_gbit) == (
        known.nodes,
        known.gpus_per_node,
        known.nvlink_gbyte_s,
        known.nic_gbit_s,
    )
    name = known.name if same_as_known and known else f"{nodes}x{gpus_per_node} {label or 'GPU'}"
    data = {
        "name": name,
        "gpu": label or (known.gpu if known else "GPU"),
        "gpus_per_node": gpus_per_node,
        "nodes": nodes,
        "nvlink_gbyte_s": nvl,
        "nic_gbit_s": nic_gbit,
    }
    return parse_spec(FabricSpec, data, "hardware (--gpu/--nodes/--gpus-per-node/--nic)")
