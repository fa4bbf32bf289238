"""Which session engine `fornax run --datapath NAME` replays through: the emulated NIC
(FastEngine) or the Linux kernel (datapaths/linux: LinuxEngine in a lab of namespaces, real
packets). A context manager: the Linux engine's lab is removed on exit, also on errors."""

from __future__ import annotations

from collections.abc import Callable
from types import TracebackType
from typing import Any

from starfabric.errors import ConfigError, InfeasibleError
from starfabric.fornax.engine import EngineConfig, FastEngine, SessionEngine

DATAPATHS = ("emulated", "linux")
#: Bytes a ctnetlink DESTROY message takes in the event socket's buffer (assumption: tuples,
#: zone, status, mark, counters and timestamps are ~200 bytes; the kernel charges the skb's
#: truesize, more): a chaos run's ring of N records becomes a buffer of N times this.
EVENT_MSG_BYTES = 256
#: Chaos faults with no twin in the kernel, and why.
NO_KERNEL_TWIN = {
    "bit_flips": "nf_conntrack entries are not ECC-protected records",
    "stalls": "the kernel datapath has no ingress ports to stall",
    "engine_failures": "the kernel pipeline cannot be stopped and resumed",
}

EngineFactory = Callable[[EngineConfig], SessionEngine]


class DatapathFactory:
    """`with datapath_factory(name) as make:` gives the engine factory run_scenario takes."""

    def __init__(self, name: str, pace: bool = True) -> None:
        """`pace`: the Linux engine sends each batch at its time on the packets' clock (the
        kernel then ages on about that clock; see LinuxEngine)."""
        self.name = name
        self.pace = pace
        self.engines: list[SessionEngine] = []

    def _make(self, cfg: EngineConfig) -> SessionEngine:
        if self.name == "emulated":
            engine: SessionEngine = FastEngine(cfg)
        else:
            from starfabric.fornax.datapaths.linux import LinuxEngine

            engine = LinuxEngine(cfg, event_rcvbuf=cfg.ring_capacity * EVENT_MSG_BYTES,
                                 pace=self.pace)  # fmt: skip
        self.engines.append(engine)
        return engine

    def __enter__(self) -> EngineFactory:
        return self._make

    def __exit__(self, typ: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        for e in self.engines:
            close = getattr(e, "close", None)
            if close is not None:
                close()

    def report(self) -> dict[str, Any]:
        """What the summary adds for this datapath: its name and, on Linux, what the wire
        showed (frames the kernel never logged, HITs not seen on the far side, frames seen
        there that the pipeline did not forward)."""
        out: dict[str, Any] = {"datapath": self.name}
        for e in self.engines:
            wire = getattr(e, "wire", None)
            if wire is not None:
                out["wire"] = dict(wire)
        return out


def check_kernel_twins(spec: Any, source: str) -> None:
    """A chaos spec for the Linux datapath may hold only faults the kernel can have."""
    bad = [k for k in NO_KERNEL_TWIN if getattr(spec.faults, k)]
    if bad:
        raise ConfigError(
            f"{source}: faults.{bad[0]} has no kernel twin ({NO_KERNEL_TWIN[bad[0]]})",
            fix="drop it for --datapath linux (ring_overflows and crashes run there) or run "
            "on the emulated NIC",
        )


def datapath_factory(name: str, pace: bool = True) -> DatapathFactory:
    """The factory for `--datapath NAME`; a Linux datapath this host cannot run fails here
    with one line naming what is missing."""
    if name not in DATAPATHS:
        raise ConfigError(f"--datapath {name!r} is not one of {', '.join(DATAPATHS)}",
                          fix="use --datapath emulated or --datapath linux")  # fmt: skip
    if name == "linux":
        from starfabric.fornax.datapaths.linux import netns

        why = netns.linux_support()
        if why is not None:
            raise InfeasibleError(f"--datapath linux cannot run here: {why}")
    return DatapathFactory(name, pace)


__all__ = [
    "DATAPATHS",
    "NO_KERNEL_TWIN",
    "DatapathFactory",
    "check_kernel_twins",
    "datapath_factory",
]
