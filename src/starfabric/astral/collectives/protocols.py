"""NCCL's protocols (LL, LL128, Simple) and tuner constants, as named parameters with sources.

Every number here is read from NVIDIA NCCL's source (github.com/NVIDIA/nccl @ 5067397c, 2026):
`src/graph/tuning.cc` (base and hardware latencies, protocol bandwidth ratios, NVLS
efficiency, per-channel caps), `src/include/device.h` and `src/init.cc` (buffer sizes,
NCCL_STEPS), `src/include/collectives.h` (chunk and slice steps), `src/enqueue.cc` (chunk-size
rules) and `src/transport/nvls.cc` (NVLS chunk). Nothing is fitted to a log.
"""

from __future__ import annotations

from dataclasses import dataclass

from starfabric.errors import ConfigError

ALGORITHMS = ("ring", "tree", "collnet_direct", "collnet_chain", "nvls", "nvls_tree", "pat")
"""NCCL's algorithm order (NCCL_ALGO_*), which indexes the tables below."""

NCCL_STEPS = 8
"""Slots of a connection's FIFO (device.h): up to 8 steps of a channel are in flight."""

SIMPLE_BUFFSIZE = 1 << 22
"""DEFAULT_BUFFSIZE (init.cc): 4 MiB per connection, so a Simple step is 512 KiB."""

LL_BUFFSIZE = 8 * 512 * NCCL_STEPS * 16
"""DEFAULT_LL_BUFFSIZE: LL_LINES_PER_THREAD (8) x LL_MAX_NTHREADS (512) x NCCL_STEPS x 16 B."""

LL128_BUFFSIZE = 120 * 640 * NCCL_STEPS * 8
"""DEFAULT_LL128_BUFFSIZE: LL128_ELEMS_PER_THREAD (120) x LL128_MAX_NTHREADS (640) x STEPS x 8 B."""

RING_CHUNK_STEPS = NCCL_STEPS // 2
"""ALLREDUCE/ALLGATHER/REDUCESCATTER_CHUNKSTEPS (collectives.h): a ring chunk is 4 steps."""

NVLS_CHUNK_BYTES = 128 * 1024
"""NCCL_NVLS_CHUNKSIZE default (transport/nvls.cc)."""

NET_OVERHEAD_US = 1.0
"""getNetOverhead (tuning.cc) on x86 Intel: 1 µs of network post overhead per step (x3 Simple)."""

NVLS_EFFICIENCY = {"volta": 0.0, "ampere": 0.0, "hopper": 0.85, "blackwell": 0.74}
"""nvlsEfficiency (tuning.cc): NVLink SHARP's fraction of the NVLink rate per GPU generation
(0 = no NVLS: NVSwitch multicast/reduce arrived with Hopper's third-generation NVSwitch)."""

TREE_BW_RATIO = 0.92
"""Tree all-reduce busbw x 0.92 in NCCL's model (tuning.cc, 'Various model refinements')."""


@dataclass(frozen=True)
class Protocol:
    """One NCCL protocol: wire efficiency, step size and the latencies NCCL charges for it.

    `bw_fraction` is payload over wire bytes: LL sends 8 B of data with 8 B of flags per 16 B
    line (0.5); LL128 uses 120 of every 128 bytes (0.9375); Simple sends data as is (1.0).
    `base_lat_us[algo]` and `hw_lat_us[(hw, algo)]` are tuning.cc's baseLatencies and
    hwLatencies (hw = nvlink or net), in µs per collective and per step.
    """

    name: str
    bw_fraction: float
    buffsize: int
    base_lat_us: dict[str, float]
    hw_lat_us: dict[tuple[str, str], float]

    @property
    def step_bytes(self) -> int:
        """Payload of one step of one channel (buffsize / NCCL_STEPS, less LL's flags)."""
        step = self.buffsize // NCCL_STEPS
        return int(step * self.bw_fraction)

    def chunk_bytes(self, algorithm: str) -> int:
        """The pipelining unit: a ring Simple chunk is 4 steps, everything else one step."""
        if self.name == "Simple" and algorithm == "ring":
            return self.step_bytes * RING_CHUNK_STEPS
        if algorithm in ("nvls", "nvls_tree"):
            return min(self.step_bytes, NVLS_CHUNK_BYTES)
        return self.step_bytes

    def base_us(self, algorithm: str) -> float:
        return self.base_lat_us.get(algorithm, 0.0)

    def hw_us(self, hw: str, algorithm: str) -> float:
        return self.hw_lat_us.get((hw, algorithm), 0.0)


def _table(values: dict[str, tuple[float, float, float]], index: int) -> dict[str, float]:
    return {a: v[index] for a, v in values.items()}


_BASE = {
    "tree": (6.8, 14.0, 8.4),
    "ring": (6.6, 14.0, 8.4),
    "pat": (8.0, 8.0, 8.0),
}
_HW_NVLINK = {
    "tree": (0.6, 1.25, 4.0),
    "ring": (0.6, 1.9, 3.4),
    "collnet_direct": (0.0, 0.0, 3.7),
    "collnet_chain": (0.0, 0.0, 2.8),
    "nvls": (0.0, 0.0, 25.0),
    "nvls_tree": (0.0, 0.0, 25.0),
    "pat": (0.0, 0.0, 4.0),
}
_HW_NET = {
    "tree": (5.0, 8.5, 14.0),
    "ring": (2.7, 4.0, 14.0),
    "collnet_direct": (0.0, 0.0, 31.0),
    "collnet_chain": (0.0, 0.0, 30.0),
    "nvls": (0.0, 0.0, 18.0),
    "nvls_tree": (0.0, 0.0, 20.9),
    "pat": (0.0, 0.0, 14.0),
}


def _protocol(name: str, index: int, bw: float, buffsize: int) -> Protocol:
    hw = {("nvlink", a): v for a, v in _table(_HW_NVLINK, index).items()}
    hw.update({("net", a): v for a, v in _table(_HW_NET, index).items()})
    return Protocol(name, bw, buffsize, _table(_BASE, index), hw)


PROTOCOLS: dict[str, Protocol] = {
    "LL": _protocol("LL", 0, 0.5, LL_BUFFSIZE),
    "LL128": _protocol("LL128", 1, 120.0 / 128.0, LL128_BUFFSIZE),
    "Simple": _protocol("Simple", 2, 1.0, SIMPLE_BUFFSIZE),
}
"""The three protocols with tuning.cc's latencies (LL, LL128, Simple columns)."""

LL_MAX_BW_GBS = {"volta": 39.0, "ampere": 87.7, "hopper": 141.0, "blackwell": 282.0}
"""llMaxBws (tuning.cc), one node: the LL protocol's busbw ceiling per GPU generation."""

LL_MAX_BW_MULTI_GBS = (39.0, 20.4)
"""llMaxBws row for x86 Intel hosts across nodes: 2 nodes, more than 2 nodes."""

PER_CH_MAX_TREE_BW_GBS = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (38.7, 41.4, 36.0),
    "blackwell": (70.0, 42.8, 24.0),
}
"""perChMaxTreeBws (tuning.cc): per-channel tree busbw caps for 1, 2, and more nodes."""

PER_CH_MAX_NVLS_TREE_BW_GBS = {
    "volta": (26.5, 18.5, 10.0),
    "ampere": (24.0, 23.6, 17.8),
    "hopper": (0.0, 57.7, 45.5),
    "blackwell": (0.0, 96.0, 80.0),
}
"""perChMaxNVLSTreeBws (tuning.cc)."""

PER_CH_MAX_RING_LL128_BW_GBS = {"volta": 20.0, "ampere": 20.0, "hopper": 36.7, "blackwell": 40.0}
"""perChMaxRingLL128Bws (tuning.cc)."""


def get_protocol(name: str) -> Protocol:
    """A protocol by name (case-insensitive)."""
    for key, p in PROTOCOLS.items():
        if key.lower() == name.lower():
            return p
    raise ConfigError(f"protocol {name!r}", fix=f"use one of: {', '.join(PROTOCOLS)}")


def gpu_generation(gpu: str) -> str:
    """The GPU generation NCCL's tables are indexed by, from a catalog GPU name."""
    g = gpu.upper()
    if g.startswith(("B", "GB")):
        return "blackwell"
    if g.startswith(("H", "GH")):
        return "hopper"
    if g.startswith("A"):
        return "ampere"
    return "volta"
