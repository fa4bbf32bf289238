"""Resource guards run before a Fornax run starts: a synthetic workload whose packets in
flight would not fit in memory is refused with the estimate, instead of growing for minutes.

The synthetic generator (fornax/workload.py) streams batch windows but keeps every packet of
the connections still alive (`_Pending`): its peak is about cps x (mean flow duration + one
window) connections, each with its data packets plus the handshake and teardown.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from starfabric.errors import ConfigError
from starfabric.fornax.packets import _DTYPES
from starfabric.fornax.workload import PcapWorkload, SyntheticWorkload

BYTES_PER_PACKET = sum(np.dtype(t).itemsize for t in _DTYPES.values())
"""One packet row of a PacketBatch (its column dtypes), bytes."""

SETUP_PACKETS = 6.0
"""Assumption: packets per connection besides its data packets (TCP SYN, SYN-ACK, ACK and a
FIN/ACK exchange; UDP/ICMP have fewer, so this errs high)."""

PACKET_COPIES = 3.0
"""Assumption: copies of the in-flight packets alive at once (pending chunks, their merge,
the window's batch)."""

MEMORY_SHARE = 0.8
"""Share of MemAvailable a run may plan to use."""


def synthetic_peak_bytes(wl: SyntheticWorkload) -> float:
    """Estimated peak bytes of the generator's in-flight packets."""
    alive = wl.cps * (wl.flow_duration.mean + wl.batch)
    return alive * (wl.data_packets.mean + SETUP_PACKETS) * BYTES_PER_PACKET * PACKET_COPIES


def available_bytes(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """MemAvailable, or None where the kernel does not say."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_workload_memory(
    wl: SyntheticWorkload | PcapWorkload, source: str, *, available: int | None = None
) -> None:
    """ConfigError when the workload's estimated peak exceeds MEMORY_SHARE of MemAvailable."""
    if not isinstance(wl, SyntheticWorkload):
        return
    avail = available if available is not None else available_bytes()
    if avail is None:
        return
    need = synthetic_peak_bytes(wl)
    if need > MEMORY_SHARE * avail:
        raise ConfigError(
            f"{source}: workload cps {wl.cps:,.0f} with flows of {wl.flow_duration.mean:g} s "
            f"keeps about {need / 2**30:,.1f} GiB of packets in flight; "
            f"{avail / 2**30:,.1f} GiB of memory is available",
            fix="lower workload.cps or workload.flow_duration (the run's length does not "
            "change the peak)",
        )
