"""Traffic on examples/vpc.yaml for the manager tests (synthetic workload, allowed ports)."""

from __future__ import annotations

from collections.abc import Iterator

from starfabric.fornax.vpc import VpcSpec, load_vpc_spec
from starfabric.fornax.workload import SyntheticWorkload, WorkloadBatch, workload_batches

EXAMPLE = "examples/vpc.yaml"


def example_spec() -> VpcSpec:
    return load_vpc_spec(EXAMPLE)


def example_traffic(
    duration: float = 0.3, cps: float = 3000, seed: int = 3, **kw: object
) -> Iterator[WorkloadBatch]:
    wl = SyntheticWorkload(
        duration=duration, cps=cps, seed=seed, outbound=0.5, east_west=0.4, inbound=0.1,
        tcp_ports=(443, 8080, 5432, 22), batch=0.002, **kw,  # type: ignore[arg-type]
    )  # fmt: skip
    return workload_batches(example_spec(), wl)
