"""A collective as flows between ranks, in steps: what NCCL would put on the wire.

A `Step` is a set of concurrent rank-to-rank transfers (arrays, not objects). Steps run one
after another; a step may stand for `repeat` identical steps (the 2(n−1) steps of a ring are
one permutation repeated), and a sampled step stands for a larger one through `scale` (an
all-to-all among 64K ranks is simulated on a sample of its shifts). Ranks are positions in the
communicator; placement maps them to GPUs and routing maps GPU pairs to links.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from starfabric.errors import ConfigError

IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


@dataclass(frozen=True)
class Step:
    """Concurrent transfers: rank `src[i]` sends `size_bytes[i]` to rank `dst[i]` on QP `qp[i]`.

    `via[i]` ≥ 0 names a rank of the sender's host that forwards over NVLink before the
    network hop (PXN / DeepEP forwarding); −1 means the sender's own NIC. `half[i]` = 1 keeps
    only the first link of the route (into a reducing switch: NVLS, SHARP), 2 only the last
    (the switch's result back out), 0 the whole route.
    """

    src: IntArray
    dst: IntArray
    size_bytes: FloatArray
    qp: IntArray
    phase: str
    repeat: int = 1
    scale: float = 1.0
    via: IntArray | None = None
    half: IntArray | None = None

    def __post_init__(self) -> None:
        n = len(self.src)
        for name in ("dst", "size_bytes", "qp"):
            if len(getattr(self, name)) != n:
                raise ConfigError(
                    f"step {self.phase}: {name} has the wrong length", fix="report a bug"
                )
        if self.repeat < 1 or self.scale <= 0:
            raise ConfigError(
                f"step {self.phase}: repeat/scale must be positive", fix="report a bug"
            )

    def __len__(self) -> int:
        return int(self.src.shape[0])

    @property
    def total_bytes(self) -> float:
        """Bytes this step stands for: its flows × repeat × scale."""
        return float(self.size_bytes.sum()) * self.repeat * self.scale


@dataclass(frozen=True)
class Plan:
    """A collective decomposed into steps, with the nccl-tests accounting of its size."""

    op: str
    algorithm: str
    ranks: int
    size_bytes: float  # as nccl-tests reports `size` for this op
    steps: tuple[Step, ...]
    bus_factor: float  # busbw / algbw (nccl-tests PERFORMANCE.md)
    notes: dict[str, float] = field(default_factory=dict)

    def bytes_sent_per_rank(self) -> FloatArray:
        """Total bytes each rank injects (network + NVLink), for conservation checks."""
        out = np.zeros(self.ranks)
        for s in self.steps:
            np.add.at(out, s.src, s.size_bytes * s.repeat * s.scale)
        return out

    def n_steps(self) -> int:
        """Sequential steps this plan stands for (each pays the per-step latency once)."""
        return int(sum(s.repeat for s in self.steps))
