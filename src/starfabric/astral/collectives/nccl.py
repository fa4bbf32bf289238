"""NCCL's algorithms as pipelined plans on the topology: channels, ring, tree, NVLS, CollNet.

A plan here is what NCCL runs at steady state: every channel's transfers at once, each pair
carrying its total bytes (NCCL pipelines chunks through all steps), so one flow-level step
gives the bandwidth time on the real paths (ECMP collisions, shared NICs, NVLink). The plan's
notes carry what the flows cannot see, and `run_plan` adds it:

* latency (tuning.cc's model): base latency + per-step hardware latency of the protocol for
  each sequential step, NVLink steps and network steps apart (a path slower than that
  hardware latency adds the difference per step);
* pipeline fill: a chunk (NCCL_STEPS slots, chunk size per protocol) has to cross every stage
  of a tree or NVLS pipeline before the last chunk leaves, `(stages - 1) x chunk time` at the
  channel's share of the link (reduce and broadcast are separate connections, so the
  bottleneck stays busy with the other direction meanwhile);
* capacity scaling: the protocol's wire efficiency on every link, NVLS efficiency on NVLink,
  the achievable NIC fraction on the network.

Channels follow NCCL's topology search on NVSwitch hosts with one NIC per GPU (rail-matched):
`2 x NICs per host` channels (the search duplicates its rings), channel c entering and leaving
each host on rail c mod local, so every NIC carries the same number of rings and trees.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from starfabric.astral.collectives.algorithms import alltoall, ring
from starfabric.astral.collectives.plan import FloatArray, IntArray, Plan, Step
from starfabric.astral.collectives.protocols import (
    LL_MAX_BW_GBS,
    LL_MAX_BW_MULTI_GBS,
    NET_OVERHEAD_US,
    NVLS_EFFICIENCY,
    PER_CH_MAX_NVLS_TREE_BW_GBS,
    PER_CH_MAX_RING_LL128_BW_GBS,
    PER_CH_MAX_TREE_BW_GBS,
    PROTOCOLS,
    TREE_BW_RATIO,
    get_protocol,
)
from starfabric.astral.hardware import get_gpu
from starfabric.astral.nccltests import busbw_factor
from starfabric.astral.topology import Topology
from starfabric.errors import ConfigError, InvariantError

NVLINK_EFF = 0.8
"""Assumption: achievable fraction of NVLink for copy/reduce kernels (8xA100 nccl-tests ring
all_reduce reaches ~235 of 300 GB/s; shared with `fit.NVLINK_EFF`)."""

NIC_EFF = 23.3 / 25.0
"""Achievable fraction of a 200 Gb/s-class NIC: perftest ib_write_bw peaks at 23.3 GB/s on a
200 Gb/s HDR port (shared/data/telemetry superbench_ib_write_bw_loopback_all_sizes.log),
0.932; assumption: the same below 200 Gb/s and for RoCE, EFA and TCPX(O) NICs."""

NIC_EFF_400G = 48.5 / 50.0
"""Achievable fraction of a 400 Gb/s-class NIC: 48.5 of 50 GB/s, the NIC bandwidth SimAI's
analytical model takes for a 400G NIC (aliyun/SimAI README, `-nic 48.5`, beside `-nv 360`
for H100 NVLink, i.e. 0.8 of 450 as NVLINK_EFF)."""


def nic_eff(nic_gbs: float) -> float:
    """The achievable NIC fraction for a per-GPU NIC of `nic_gbs` GB/s."""
    return NIC_EFF_400G if nic_gbs >= 50.0 else NIC_EFF


MAX_CHANNELS = 32
"""NCCL's MAXCHANNELS/2 ceiling on the channels its search builds (assumption: 32 used)."""

NVLS_CHANNELS_SM90 = 16
"""NVLS_NCHANNELS_SM90 (transport/nvls.cc)."""

NVLS_CHANNELS_SM100_NVL = 24
"""NVLS_NCHANNELS_SM100_NVL: Blackwell inside one NVLink domain."""

NVLS_CHANNELS_SM100 = 32
"""NVLS_NCHANNELS_SM100: Blackwell across domains (ncclNvlsTreeSm100Tuning may lower it)."""

ALGOS = ("ring", "tree", "nvls", "nvls_tree", "collnet_direct", "collnet_chain", "pxn", "direct")
"""The algorithms a NCCL plan may name (NCCL_ALGO names, plus all-to-all's pxn/direct)."""


@dataclass(frozen=True)
class NcclShape:
    """What NCCL's search and tuner see of a communicator: ranks, NVLink domain, NICs, GPU.

    `local` GPUs share one NVLink domain (a host, or a 72-GPU NVL72 rack) and each has its own
    NIC; `nvswitch` says the domain is switched (NVLS needs Hopper+ NVSwitch); `sharp` says the
    network switches reduce in-network (CollNet). Bandwidths are per GPU and direction, GB/s
    (`nic_port_gbs`: one port's, which sets the NIC's achievable fraction).
    """

    ranks: int
    local: int
    generation: str = "hopper"
    nvlink_gbs: float = 450.0
    nic_gbs: float = 50.0
    nvswitch: bool = True
    sharp: bool = False
    nic_port_gbs: float | None = None  # one port's rate when a NIC has several (2x200G)
    nvls_enable: bool = True  # NCCL_NVLS_ENABLE (see `with_nccl_env`)
    collnet_enable: bool = True  # NCCL_COLLNET_ENABLE
    nic_via_c2c: bool = False  # the NIC hangs off the CPU, reached over C2C (GB200)
    ll128_c2c: bool = True  # NCCL_LL128_C2C: LL128 across nodes over such a NIC path
    nvls_nchannels: int = 0  # NCCL_NVLS_NCHANNELS (0: ncclNvlsTuning's own count)
    nvlstree_max_chunk: int = 0  # NCCL_NVLSTREE_MAX_CHUNKSIZE (0: the tuning's own)

    def __post_init__(self) -> None:
        if self.ranks < 2:
            raise ConfigError(f"collective: ranks = {self.ranks}", fix="use --gpus >= 2")
        if self.local < 1 or self.ranks % self.local:
            raise ConfigError(
                f"collective: {self.ranks} ranks are not whole domains of {self.local} GPUs",
                fix="use a multiple of the GPUs per host",
            )

    @property
    def nodes(self) -> int:
        return self.ranks // self.local

    def channels(self, algorithm: str) -> int:
        """Channels NCCL's search would build: 2 per NIC (or per GPU in one node), <= 32."""
        if algorithm in ("nvls", "nvls_tree"):
            return self._nvls_tuning()[0]
        return max(2, min(MAX_CHANNELS, 2 * self.local))

    def _nvls_tuning(self) -> tuple[int, int]:
        """(channels, tree max chunk) as ncclNvlsTuning sets them (nvls.cc), or as the job's
        NCCL_NVLS_NCHANNELS / NCCL_NVLSTREE_MAX_CHUNKSIZE override them."""
        ch, tree_max = self._nvls_default_tuning()
        # nvls.cc clamps the count to [minCTAs, maxCTAs]: at most MAXCHANNELS
        return (min(MAX_CHANNELS, self.nvls_nchannels or ch), self.nvlstree_max_chunk or tree_max)

    def _nvls_default_tuning(self) -> tuple[int, int]:
        """NCCL 2.27+'s defaults (2.25/2.26: 32 channels on Blackwell everywhere and a tree max
        chunk of 64 KiB from 4 nodes, else 128 KiB; logs.yaml sets those as env for them)."""
        chunk = 128 * 1024
        if self.generation != "blackwell":
            return NVLS_CHANNELS_SM90, (65536 if self.nodes >= 4 else chunk)
        if self.nodes == 1:
            return NVLS_CHANNELS_SM100_NVL, chunk
        # ncclNvlsTreeSm100Tuning, NIC attached through a PCIe switch (PXB) as on HGX boards
        if self.nodes == 2 and self.nic_gbs >= 48.0:
            tree_max = 64 * 1024 if (self.local >= 16 or self.nic_gbs < 96.0) else chunk
            return 32, tree_max
        if self.nic_gbs >= 96.0:
            if self.local <= 8:
                return 24, 256 * 1024
            return 32, (chunk if self.local < 32 else 65536)
        if self.nic_gbs >= 48.0:
            return 24, 65536
        return NVLS_CHANNELS_SM100, (65536 if self.nodes >= 4 else chunk)

    def chunk_bytes(self, algorithm: str, proto: str, nbytes: float) -> int:
        """The chunk NCCL's computeColl settles on for this size (enqueue.cc rules)."""
        base = get_protocol(proto).chunk_bytes(algorithm)
        if algorithm == "nvls":
            ops = self.channels("nvls") * nvls_heads(self)  # concurrentOps: channels x heads
            chunk = min(base, 128 * 1024)
            for mult, floor in ((64, 65536), (8, 32768), (2, 16384)):
                if nbytes < mult * ops * chunk and chunk > floor:
                    chunk = floor
            return chunk
        if algorithm == "collnet_chain":
            # calcCollChunking: at most 256 KiB, halved while a channel has fewer chunks than
            # the chain's depth (GPUs per node) x 64 / x 8 / x 1, down to 128 / 64 / 32 KiB
            ch, depth = self.channels(algorithm), self.local
            chunk = min(256 * 1024, base)
            for mult, floor in ((64, 131072), (8, 65536), (1, 32768)):
                while nbytes / (ch * chunk) < depth * mult and chunk > floor:
                    chunk //= 2
            return chunk
        if algorithm == "nvls_tree":
            ch, tree_max = self._nvls_tuning()
            ops = ch * nvls_heads(self)
            chunk = min(128 * 1024, tree_max)
            for mult, floor in ((32, 262144), (16, 131072), (4, 65536), (1, 32768)):
                if nbytes < mult * ops * chunk and chunk > floor:
                    chunk = floor
            return chunk
        return base


def _rail_rings(shape: NcclShape, channels: int) -> list[IntArray]:
    """Channel c's ring: host-major, entering and leaving each host on rails c-1 and c."""
    n, local, hosts = shape.ranks, shape.local, shape.nodes
    k = np.arange(local, dtype=np.int64)
    out = []
    for c in range(channels):
        r = c % local
        order = []
        for h in range(hosts):
            lr = (r + k) % local if h % 2 == 0 else (r + local - 1 - k) % local
            order.append(h * local + lr)
        ring_c = np.concatenate(order) if hosts > 1 else (r + k) % local
        if c >= local and c // local % 2:
            ring_c = ring_c[::-1].copy()  # duplicated channels run the other way round
        out.append(ring_c.astype(np.int64))
    if any(len(x) != n for x in out):  # every channel visits every rank once
        raise InvariantError(f"a ring channel does not cover all {n} ranks")
    return out


def _btree_parents(m: int) -> IntArray:
    """Parent of every rank in NCCL's binary tree (trees.cc ncclGetBtree): rank 0 is the
    root with a single child; a rank's parent flips its lowest set bit up one level."""
    parent = np.full(m, -1, np.int64)
    for rank in range(1, m):
        bit = 1
        while bit < m and not bit & rank:
            bit <<= 1
        up = (rank ^ bit) | (bit << 1)
        if up >= m:
            up = rank ^ bit
        parent[rank] = up
    return parent


def _dbt(m: int) -> tuple[tuple[IntArray, IntArray], tuple[IntArray, IntArray]]:
    """NCCL's double binary tree over m nodes (ncclGetDtree): the btree, and the btree
    mirrored (even m) or shifted by one (odd m), so a node interior in one is a leaf in the
    other. Returns the (child, parent) edges of each tree."""
    if m == 1:
        e = np.zeros(0, np.int64)
        return (e, e), (e, e)
    parent = _btree_parents(m)
    child1 = np.arange(1, m, dtype=np.int64)
    parent1 = parent[1:]
    if m % 2 == 0:
        child2, parent2 = m - 1 - child1, m - 1 - parent1
    else:
        child2, parent2 = (child1 + 1) % m, (parent1 + 1) % m
    return (child1, parent1), (child2, parent2)


def tree_depth(nodes: int) -> int:
    """Levels of a binary tree over `nodes` nodes (NCCL's log2i rounds down; depth rounds up)."""
    return int(math.ceil(math.log2(nodes))) if nodes > 1 else 0


def _log2i(x: int) -> int:
    return int(math.floor(math.log2(x))) if x >= 1 else 0


@dataclass
class _Flows:
    src: list[IntArray]
    dst: list[IntArray]
    size: list[np.ndarray]
    qp: list[IntArray]
    half: list[IntArray]

    @classmethod
    def empty(cls) -> _Flows:
        return cls([], [], [], [], [])

    def add(self, src: IntArray, dst: IntArray, nbytes: float, qp: int, half: int = 0) -> None:
        if len(src) == 0:
            return
        self.src.append(np.asarray(src, np.int64))
        self.dst.append(np.asarray(dst, np.int64))
        self.size.append(np.full(len(src), float(nbytes)))
        self.qp.append(np.full(len(src), qp, np.int64))
        self.half.append(np.full(len(src), half, np.int64))

    def add_sized(
        self, src: IntArray, dst: IntArray, nbytes: npt.NDArray[np.float64], qp: int, half: int
    ) -> None:
        """As `add`, with each flow's own size."""
        self.src.append(np.asarray(src, np.int64))
        self.dst.append(np.asarray(dst, np.int64))
        self.size.append(np.asarray(nbytes, np.float64))
        self.qp.append(np.full(len(src), qp, np.int64))
        self.half.append(np.full(len(src), half, np.int64))

    def step(self, phase: str) -> Step:
        half = np.concatenate(self.half)
        return Step(
            np.concatenate(self.src),
            np.concatenate(self.dst),
            np.concatenate(self.size),
            np.concatenate(self.qp),
            phase,
            half=half if (half != 0).any() else None,
        )


def _nsteps(op: str, n: int) -> int:
    return 2 * (n - 1) if op == "all_reduce" else n - 1


def _notes(
    shape: NcclShape, algorithm: str, proto: str, op: str, channels: int, nbytes: float = 0.0
) -> dict[str, float]:
    """Latency terms (tuning.cc) and pipeline shape of one algorithm/protocol."""
    p = get_protocol(proto)
    n, local, nodes = shape.ranks, shape.local, shape.nodes
    intra = p.hw_us("nvlink", algorithm)
    inter = p.hw_us("net", "tree" if local == 1 else algorithm)
    base = p.base_us(algorithm)
    net_steps = nvl_steps = 0.0
    fill_nvl = fill_net = 0.0  # pipeline stages a chunk crosses before the last one leaves
    depth = tree_depth(nodes)
    lat = base
    if algorithm == "ring":
        nsteps = _nsteps(op, n)
        n_inter = 0 if nodes == 1 else (2 * (nodes - 1) if op == "all_reduce" else nodes - 1)
        if nodes > 1:
            overhead = NET_OVERHEAD_US * (3.0 if proto == "Simple" else 1.0)
            intra = max(intra, overhead)
        lat += (nsteps - n_inter) * intra + n_inter * inter
        net_steps, nvl_steps = float(n_inter), float(nsteps - n_inter)
    elif algorithm == "tree":
        lat += 2 * ((local - 1) * intra + _log2i(nodes) * inter)
        net_steps, nvl_steps = 2.0 * depth, 2.0 * (local - 1)
        fill_nvl, fill_net = 2.0 * (local - 1), max(2.0 * depth - 1.0, 0.0)
    elif algorithm == "nvls":
        lat = intra
        nvl_steps, fill_nvl = 2.0, 1.0
    elif algorithm == "nvls_tree":
        lat += intra + 2 * _log2i(nodes) * inter
        net_steps, nvl_steps = 2.0 * depth, 2.0
        fill_nvl, fill_net = 2.0, max(2.0 * depth - 1.0, 0.0)
    elif algorithm == "collnet_direct":
        lat += 2 * (min(1, local - 1) * intra + (local - 1) * 0.4) + inter
        net_steps, nvl_steps, fill_nvl, fill_net = 2.0, 2.0, 2.0, 1.0
    elif algorithm == "collnet_chain":
        lat += 2 * (local - 1) * intra + inter
        net_steps, nvl_steps = 2.0, 2.0 * (local - 1)
        fill_nvl, fill_net = 2.0 * (local - 1), 1.0
    return {
        "latency_s": lat * 1e-6,
        "lat_net_steps": net_steps,
        "lat_nvl_steps": nvl_steps,
        "hw_net_us": inter,
        "hw_nvl_us": intra,
        "fill_nvl_stages": fill_nvl,
        "fill_net_stages": fill_net,
        "chunk_bytes": float(shape.chunk_bytes(algorithm, proto, nbytes)),
        "channels": float(channels),
        # NVLS: a GPU's NVLink flow interleaves one chunk stream per shard owner (head)
        "nvl_streams": float(nvls_heads(shape)) if algorithm in ("nvls", "nvls_tree") else 1.0,
        "proto_bw": p.bw_fraction,
        "nvlink_scale": NVLINK_EFF
        * (NVLS_EFFICIENCY.get(shape.generation, 0.0) if algorithm.startswith("nvls") else 1.0),
        "net_scale": nic_eff(shape.nic_port_gbs or shape.nic_gbs),
    }


def _one_step_plan(
    shape: NcclShape,
    f: _Flows,
    op: str,
    algorithm: str,
    proto: str,
    ch: int,
    size: float,
    step: str | None = None,
) -> Plan:
    """A plan of one pipelined step of flows `f`, with NCCL's notes for (algorithm, protocol)
    and the op's bus-bandwidth factor."""
    notes = _notes(shape, algorithm, proto, op, ch, size)
    n = shape.ranks
    return Plan(op, algorithm, n, size, (f.step(step or algorithm),), busbw_factor(op, n), notes)


def nccl_ring(op: str, shape: NcclShape, size: float, proto: str = "Simple") -> Plan:
    """Multi-channel rail-matched rings, pipelined: every ring edge carries its total bytes."""
    ch = shape.channels("ring")
    n = shape.ranks
    per_edge = _nsteps(op, n) * size / n / ch
    f = _Flows.empty()
    for c, rc in enumerate(_rail_rings(shape, ch)):
        f.add(rc, np.roll(rc, -1), per_edge, c)
    return _one_step_plan(shape, f, op, "ring", proto, ch, size)


def _chain(shape: NcclShape, r: int) -> IntArray:
    """Local ranks of a host's chain for the channel on rail r: the rail GPU (NIC) first."""
    return (r + np.arange(shape.local, dtype=np.int64)) % shape.local


def _chain_flows(f: _Flows, base: IntArray, chain: IntArray, share: float, c: int) -> None:
    """Channel c's chain through every host (hosts start at `base`, ranks in `chain` order):
    reduce up the chain and broadcast back down, `share` bytes each way per link."""
    if len(chain) > 1:
        a = (base[:, None] + chain[None, 1:]).ravel()
        b = (base[:, None] + chain[None, :-1]).ravel()
        f.add(a, b, share, c)  # reduce up the chain
        f.add(b, a, share, c)  # broadcast down


def _require_sharp(shape: NcclShape, algo: str) -> None:
    """CollNet needs a fabric with in-network reduction (SHARP)."""
    if not shape.sharp:
        raise ConfigError(
            f"{algo}: the fabric has no in-network reduction",
            fix="set in_network_reduction: true in the cluster, or use another --algo",
        )


def nccl_tree(shape: NcclShape, size: float, proto: str = "Simple") -> Plan:
    """NCCL's tree all-reduce: a chain through each host and a double binary tree of hosts.

    Channel c uses rail c mod local to leave the host and tree (c // local) mod 2 of the
    double binary tree; reduce goes up (chain to the rail GPU, child host to parent host),
    broadcast comes back down, both pipelined, each carrying the channel's share S / channels.
    """
    ch = shape.channels("tree")
    local, hosts = shape.local, shape.nodes
    share = size / ch
    trees = _dbt(hosts)
    f = _Flows.empty()
    base = np.arange(hosts, dtype=np.int64) * local
    for c in range(ch):
        r = c % local
        chain = _chain(shape, r)
        _chain_flows(f, base, chain, share, c)
        child, parent = trees[(c // local) % 2 if ch >= 2 * local else c % 2]
        if len(child):
            f.add(child * local + r, parent * local + r, share, c)
            f.add(parent * local + r, child * local + r, share, c)
    if not f.src:
        raise ConfigError("tree: nothing to do for one GPU", fix="use --gpus >= 2")
    return _one_step_plan(shape, f, "all_reduce", "tree", proto, ch, size)


NCCL_MAX_NVLS_ARITY = 32
"""NCCL_MAX_NVLS_ARITY (device.h): the NVLS search keeps at most min(32, GPUs) channels of its
graph (search.cc), and each is a head, a GPU that reduces and multicasts one shard and, between
domains, sends it over its NIC (connect.cc connectNvls). An NVL72 domain has 32 heads, not 72;
NVLS for all_gather / reduce_scatter needs every GPU a head (enqueue.cc: <= 32 local ranks)."""


def nvls_heads(shape: NcclShape) -> int:
    """Heads per NVLink domain: the GPUs that own a shard (the first ones of each domain)."""
    return min(NCCL_MAX_NVLS_ARITY, shape.local)


def _nvls_flows(f: _Flows, shape: NcclShape, up: FloatArray, down: FloatArray, ch: int) -> None:
    """Each GPU's NVLink to its NVSwitch: `up[g]` bytes in, `down[g]` bytes out (half paths)."""
    n, local = shape.ranks, shape.local
    g = np.arange(n, dtype=np.int64)
    peer = (g // local) * local + (g % local + 1) % local  # any GPU of the domain: same link
    for c in range(ch):
        f.add_sized(g, peer, up / ch, c, half=1)
        f.add_sized(peer, g, down / ch, c, half=2)


def _nvls_allreduce_bytes(shape: NcclShape, size: float) -> npt.NDArray[np.float64]:
    """Bytes each GPU's NVLink carries each way in an NVLS all-reduce of `size`: the switch reads
    its whole buffer (multimem.ld_reduce of every shard) and multicasts every reduced shard back;
    a head also stores its reduced shard (up) and receives it from the reduction (down)."""
    heads = nvls_heads(shape)
    is_head = np.arange(shape.ranks) % shape.local < heads
    return np.where(is_head, size * (heads + 1) / heads, float(size))


def nvls(op: str, shape: NcclShape, size: float) -> Plan:
    """NVLink SHARP inside one NVLink domain: the switch reduces (multimem.ld_reduce) and
    multicasts (multimem.st). For an all-reduce a head's link carries S(1 + 1/heads) each way,
    another GPU's S; all_gather / reduce_scatter (every GPU a head) carry S/n one way and
    S(n-1)/n the other."""
    if shape.nodes != 1 or shape.local < 2:
        raise ConfigError("nvls: needs one NVLink domain of >= 2 GPUs", fix="use nvls_tree")
    ch = shape.channels("nvls")
    n = shape.ranks
    f = _Flows.empty()
    if op == "all_reduce":
        both = _nvls_allreduce_bytes(shape, size)
        _nvls_flows(f, shape, both, both, ch)
    elif op in ("all_gather", "reduce_scatter") and n > NCCL_MAX_NVLS_ARITY:
        raise ConfigError(
            f"nvls: {op} needs every GPU a head (<= {NCCL_MAX_NVLS_ARITY} GPUs), not {n}",
            fix="use --algo ring",
        )
    elif op in ("all_gather", "reduce_scatter"):
        small, big = np.full(n, size / n), np.full(n, size * (n - 1) / n)
        _nvls_flows(f, shape, *((small, big) if op == "all_gather" else (big, small)), ch)
    else:
        raise ConfigError(f"nvls: op {op!r}", fix="use all_reduce, all_gather or reduce_scatter")
    return _one_step_plan(shape, f, op, "nvls", "Simple", ch, size)


def nvls_tree(shape: NcclShape, size: float) -> Plan:
    """NVLS inside each domain, a double binary tree of domains per head between them.

    The NVLS reduce leaves each head with its domain's sum of one shard S/heads; the heads of
    the same index reduce and broadcast it over the network tree (each through its own NIC);
    NVLS multicasts it back.
    """
    if shape.nodes < 2:
        raise ConfigError("nvls_tree: needs >= 2 NVLink domains", fix="use nvls")
    ch = shape.channels("nvls_tree")
    local, hosts = shape.local, shape.nodes
    heads = nvls_heads(shape)
    f = _Flows.empty()
    both = _nvls_allreduce_bytes(shape, size)
    _nvls_flows(f, shape, both, both, ch)
    shard = size / heads
    trees = _dbt(hosts)
    rails = np.arange(heads, dtype=np.int64)
    for c in range(ch):  # channel c runs tree c mod 2 for every head, shard / ch each
        child, parent = trees[c % 2]
        a = (child[:, None] * local + rails[None, :]).ravel()
        b = (parent[:, None] * local + rails[None, :]).ravel()
        f.add(a, b, shard / ch, c)
        f.add(b, a, shard / ch, c)
    return _one_step_plan(shape, f, "all_reduce", "nvls_tree", "Simple", ch, size)


def collnet_direct(shape: NcclShape, size: float) -> Plan:
    """CollNet (SHARP): each GPU's NIC sends its reduce-scattered shard into the switches and
    receives the reduced shard back (one copy per link each way); NVLink does the intra-node
    reduce-scatter and all-gather directly between the domain's GPUs."""
    _require_sharp(shape, "collnet_direct")
    ch = shape.channels("collnet_direct")
    n, local = shape.ranks, shape.local
    f = _Flows.empty()
    g = np.arange(n, dtype=np.int64)
    shard = size / local
    far = (g + local) % n  # a GPU of another domain on the same rail: the route's NIC hop
    f.add(g, far, shard, 0, half=1)
    f.add(far, g, shard, 0, half=2)
    for k in range(1, local):
        peer = (g // local) * local + (g % local + k) % local
        f.add(g, peer, 2 * shard, k % ch)  # reduce-scatter + all-gather over NVLink
    return _one_step_plan(shape, f, "all_reduce", "collnet_direct", "Simple", ch, size, "collnet")


def collnet_chain(shape: NcclShape, size: float) -> Plan:
    """CollNet chain (SHARP; all_reduce.h COLLNET_CHAIN, connect.cc collnetChain): channel c
    chains the node's GPUs from the one on rail c mod local, whose NIC sends the chain's sum
    into the switches and receives the reduced result; reduce goes up the chain and broadcast
    comes back down it over NVLink, each carrying the channel's share S / channels."""
    _require_sharp(shape, "collnet_chain")
    if shape.nodes < 2:
        raise ConfigError("collnet_chain: needs >= 2 hosts", fix="use ring or nvls in one host")
    ch = shape.channels("collnet_chain")
    n, local, hosts = shape.ranks, shape.local, shape.nodes
    share = size / ch
    f = _Flows.empty()
    base = np.arange(hosts, dtype=np.int64) * local
    for c in range(ch):
        chain = _chain(shape, c % local)
        _chain_flows(f, base, chain, share, c)
        head = base + chain[0]
        far = (head + local) % n  # a GPU of another host on the same rail: the NIC hop
        f.add(head, far, share, c, half=1)
        f.add(far, head, share, c, half=2)
    return _one_step_plan(shape, f, "all_reduce", "collnet_chain", "Simple", ch, size, "collnet")


def enabled(op: str, shape: NcclShape) -> list[tuple[str, str]]:
    """(algorithm, protocol) pairs NCCL would consider for `op` on `shape` (tuning.cc rules)."""
    if op == "alltoall":
        return [("pxn" if shape.nodes > 1 and shape.local > 1 else "direct", "Simple")]
    out: list[tuple[str, str]] = []
    protos = list(PROTOCOLS)
    if shape.nodes > 1 and shape.nic_via_c2c and not shape.ll128_c2c:
        # tuning.cc: LL128 needs the graph's GPU-NIC path <= PXN (2.26) or, from 2.27, P2C
        # with NCCL_LL128_C2C=1; a CPU-attached NIC is PHB before 2.27, P2C after
        protos.remove("LL128")
    nvls_ok = (
        shape.nvls_enable
        and shape.nvswitch
        and NVLS_EFFICIENCY.get(shape.generation, 0.0) > 0
        and shape.local > 1
    )
    for p in protos:
        out.append(("ring", p))
        if op == "all_reduce" and shape.nodes > 1:
            out.append(("tree", p))
    every_gpu_a_head = shape.local <= NCCL_MAX_NVLS_ARITY
    if (
        nvls_ok
        and shape.nodes == 1
        and (op == "all_reduce" or (op in ("all_gather", "reduce_scatter") and every_gpu_a_head))
    ):
        out.append(("nvls", "Simple"))
    if nvls_ok and shape.nodes > 1 and op == "all_reduce":
        out.append(("nvls_tree", "Simple"))
    collnet_ok = shape.sharp and shape.collnet_enable and shape.nvswitch
    if collnet_ok and shape.nodes > 1 and op == "all_reduce":
        out.append(("collnet_direct", "Simple"))
    if op == "broadcast":
        out = [(a, p) for a, p in out if a == "ring"]
    return out


@dataclass(frozen=True)
class SearchGraph:
    """One of NCCL's search graphs as the tuner reads it: channels, bwIntra, bwInter (GB/s per
    channel; search.cc quantizes them to its speed arrays and duplicates channels only while
    bwIntra >= 50 on sm80+ or the graph has <= 4 channels, ncclTopoDupChannels)."""

    channels: int
    bw_intra: float
    bw_inter: float


def tuner_time_s(
    op: str,
    algorithm: str,
    proto: str,
    nbytes: float,
    shape: NcclShape,
    graph: SearchGraph | None = None,
) -> float:
    """NCCL's own cost model (tuning.cc ncclTopoTuneModel + ncclTopoGetAlgoTime), in seconds.

    Per-channel bandwidths come from the shape the way NCCL's search reports them: NVLink per
    GPU over the channels (bwIntra), the host's NICs over the channels (bwInter), unless
    `graph` gives the search graph itself (what `auto` uses is the shape's approximation).
    """
    n, nodes, local = shape.ranks, shape.nodes, shape.local
    gen = shape.generation
    idx2 = min(nodes, 3) - 1
    ch = shape.channels(algorithm) if graph is None else graph.channels
    bw_intra = shape.nvlink_gbs / ch if graph is None else graph.bw_intra
    bw_inter = shape.nic_gbs * local / ch if graph is None else graph.bw_inter
    nsteps = _nsteps(op, n) if op != "broadcast" else n
    bw = bw_intra if nodes <= 2 or algorithm == "collnet_direct" else bw_inter
    if nodes > 1 and algorithm == "ring":
        bw = min(bw_intra, bw_inter)
    if algorithm == "tree" and nodes == 2:
        bw = min(bw_intra, bw_inter * 2)
    if algorithm in ("nvls", "nvls_tree"):
        intra = bw_intra * NVLS_EFFICIENCY.get(gen, 0.0) * (ch - 1) / ch
        intra *= 2.0 if op == "all_reduce" else (local - 1) / local
        inter = bw_inter * (2 if nodes <= 2 and algorithm == "nvls_tree" else 1)
        cap = PER_CH_MAX_NVLS_TREE_BW_GBS[gen][idx2] if algorithm == "nvls_tree" else math.inf
        # tuning.cc takes bwInter in one node too; the shape's bwInter stands for NICs that
        # a one-node communicator does not have (ncclTopoTrimSystem removes them), so only a
        # search graph's own bwInter counts there
        bw = min(intra, inter if nodes > 1 or graph is not None else math.inf, cap)
    bus = ch * bw
    if algorithm == "ring" and proto == "LL":
        ll = LL_MAX_BW_GBS[gen] if nodes == 1 else LL_MAX_BW_MULTI_GBS[min(idx2, 2) // 2]
        bus = min(ll, bus * 0.5)
    if algorithm == "ring" and proto == "LL128":
        bus = min(bus * 0.92, ch * PER_CH_MAX_RING_LL128_BW_GBS[gen])
    if algorithm == "tree":
        bus = min(bus * TREE_BW_RATIO, ch * PER_CH_MAX_TREE_BW_GBS[gen][idx2])
        if proto == "LL":
            bus = min(bus / 3.8, LL_MAX_BW_MULTI_GBS[min(idx2, 2) // 2])
        if proto == "LL128":
            bus *= 7.0 / 9.0 if nodes == 1 else 120.0 / 128.0
    if algorithm == "collnet_direct":
        bus *= 0.85 if gen in ("hopper", "blackwell") else 1.0
    if algorithm in ("ring", "nvls", "nvls_tree"):
        bus *= n / nsteps
    elif op == "all_reduce":
        bus *= 0.5
    notes = _notes(shape, algorithm, proto, op, ch)
    lat_us = notes["latency_s"] * 1e6
    if algorithm == "ring" and proto == "Simple" and nodes > 1 and op == "all_reduce":
        lat_us *= 1.4  # "plateau effect of ring" (ncclTopoGetAlgoTime)
    if bus <= 0:
        return math.inf
    return lat_us * 1e-6 + nbytes / (bus * 1e9)


def choose(op: str, shape: NcclShape, nbytes: float) -> tuple[str, str]:
    """What NCCL's tuner picks for `op` of `nbytes` on `shape`: the (algorithm, protocol) of
    least modelled time among the enabled ones."""
    cands = enabled(op, shape)
    if op == "alltoall":
        return cands[0]
    best = min(cands, key=lambda ap: tuner_time_s(op, ap[0], ap[1], nbytes, shape))
    return best


def nccl_collective(
    op: str,
    shape: NcclShape,
    size: float,
    algorithm: str = "auto",
    proto: str = "auto",
) -> Plan:
    """The plan of `op` as NCCL would run it: `auto` takes the tuner's choice (see `choose`)."""
    if size <= 0:
        raise ConfigError(f"collective: size = {size}; must be positive", fix="use e.g. 1GiB")
    if algorithm == "auto":
        algorithm, p = choose(op, shape, size)
        proto = p if proto == "auto" else proto
    proto = "Simple" if proto == "auto" else get_protocol(proto).name
    if algorithm not in ALGOS:
        raise ConfigError(f"--algo {algorithm!r}", fix=f"use auto or one of {', '.join(ALGOS)}")
    if op == "alltoall":
        if algorithm not in ("pxn", "direct"):
            raise ConfigError(f"--algo {algorithm} does not apply to alltoall", fix="use pxn")
        plan = alltoall(shape.ranks, size, local=shape.local, pxn=algorithm == "pxn")
        notes = dict(plan.notes)
        # NVLink copy efficiency as for every plan; the network keeps its line rate, as the
        # PXN all-to-all was checked against SimAI's ns-3 at line rate (issue 21)
        notes.update({"nvlink_scale": NVLINK_EFF})
        return Plan(plan.op, plan.algorithm, plan.ranks, size, plan.steps, plan.bus_factor, notes)
    if op == "broadcast":
        return ring(op, shape.ranks, size)
    if algorithm == "ring":
        return nccl_ring(op, shape, size, proto)
    if op != "all_reduce" and algorithm != "nvls":
        raise ConfigError(f"--algo {algorithm} does not apply to {op}", fix="use ring or nvls")
    if algorithm == "tree":
        if shape.nodes < 2:
            raise ConfigError("tree: needs >= 2 hosts", fix="use ring or nvls in one host")
        return nccl_tree(shape, size, proto)
    if algorithm == "nvls":
        return nvls(op, shape, size)
    if algorithm == "nvls_tree":
        return nvls_tree(shape, size)
    if algorithm == "collnet_direct":
        return collnet_direct(shape, size)
    if algorithm == "collnet_chain":
        return collnet_chain(shape, size)
    raise ConfigError(f"--algo {algorithm} does not apply to {op}", fix="use auto")


NCCL_ENV_KEYS = {
    "NCCL_NVLS_ENABLE": "nvls_enable",
    "NCCL_COLLNET_ENABLE": "collnet_enable",
    "NCCL_LL128_C2C": "ll128_c2c",
    "NCCL_NVLS_NCHANNELS": "nvls_nchannels",
    "NCCL_NVLSTREE_MAX_CHUNKSIZE": "nvlstree_max_chunk",
}
"""NCCL environment variables the tuner model honours (NCCL env.html): 0 takes the algorithm
out of NCCL's choice (NVLS and NVLS-tree; CollNet), as `enabled` lists it; NCCL_LL128_C2C=0
takes LL128 off between nodes whose NICs hang off the CPU (tuning.cc from 2.27; NCCL 2.26 and
older behave so always, their GPU-NIC path there being PHB). NCCL_NVLS_NCHANNELS and
NCCL_NVLSTREE_MAX_CHUNKSIZE (positive integers) set NVLS's channel count and NVLS-tree's
largest chunk, which NCCL 2.25/2.26 chose differently from 2.27+ (see `_nvls_default_tuning`)."""

_NCCL_ENV_INTS = frozenset({"nvls_nchannels", "nvlstree_max_chunk"})


def nccl_env_fields(env: Mapping[str, object], where: str = "--nccl-env") -> dict[str, bool | int]:
    """The NcclShape fields these NCCL environment variables set (ConfigError, naming `where`,
    for a variable or value the model does not know)."""
    changes: dict[str, bool | int] = {}
    for key, value in env.items():
        field_name = NCCL_ENV_KEYS.get(str(key).upper())
        if field_name is None:
            raise ConfigError(
                f"{where}: {key} is not an NCCL variable the model honours",
                fix=f"use one of {', '.join(NCCL_ENV_KEYS)}",
            )
        text = str(value).strip()
        if field_name in _NCCL_ENV_INTS:
            if not text.isdigit() or int(text) < 1:
                raise ConfigError(f"{where}: {key}={value}", fix=f"use {key}=<positive integer>")
            changes[field_name] = int(text)
            continue
        if text not in ("0", "1"):
            raise ConfigError(f"{where}: {key}={value}", fix=f"use {key}=0 or {key}=1")
        changes[field_name] = text == "1"
    return changes


def with_nccl_env(
    shape: NcclShape, env: Mapping[str, object], where: str = "--nccl-env"
) -> NcclShape:
    """`shape` as a job run with these NCCL environment variables sees it."""
    return replace(shape, **nccl_env_fields(env, where))  # type: ignore[arg-type]


def shape_of(topo: Topology, ranks: int) -> NcclShape:
    """The NcclShape of the first `ranks` GPUs of a built cluster (its GPU, NVLink, NICs)."""
    from starfabric.astral.collectives.protocols import gpu_generation

    local = topo.structure.gpus_per_host if topo.structure is not None else 1
    if ranks % local:
        local = 1
    params = topo.params
    meta = topo.meta
    ports = int(meta.get("nic_ports", 1))  # a 2x200G NIC gives its GPU 400G
    gpu_name = str(params.get("gpu", "H100"))
    try:
        via_c2c = get_gpu(gpu_name).nic_attach == "cpu"
    except ConfigError:
        via_c2c = False  # a GPU outside the catalog: NIC on a PCIe switch, as on HGX
    nic_bps = float(meta.get("nic_bps", meta.get("port_bps", 400e9))) * ports
    return NcclShape(
        ranks=ranks,
        local=local,
        generation=gpu_generation(gpu_name),
        nvlink_gbs=float(meta.get("nvlink_bps", 0.0)) / 8e9,
        nic_gbs=nic_bps / 8e9,
        nvswitch=local > 1,
        sharp=bool(params.get("in_network_reduction", False)),
        nic_port_gbs=nic_bps / ports / 8e9,
        nic_via_c2c=via_c2c,
    )
