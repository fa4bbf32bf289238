"""OVS's dynamic datapath flow limit, as udpif_revalidator() adjusts it after every dump
(ofproto-dpif-upcall.c) [fact]; the dump duration comes from the simulated clock."""

from __future__ import annotations

from starfabric.fornax.baselines.config import FlowLimitConfig


class DynamicFlowLimit:
    """The current limit and what a revalidator pass must do about it."""

    def __init__(self, config: FlowLimitConfig) -> None:
        self.config = config
        self.limit = config.start
        self.history: list[tuple[int, int, int]] = []  # (flows, duration_ms, new limit)

    def dump_duration_ms(self, n_flows: int) -> int:
        """Simulated duration of a dump of n_flows (at least 1 ms, as OVS)."""
        return max(int(n_flows * self.config.dump_ns_per_flow // 1_000_000), 1)

    def after_dump(self, n_flows: int, duration_ms: int) -> int:
        """OVS: >2 s: limit /= duration in s; >1.3 s: limit *= 3/4; <1 s and the limit below
        the dump rate (flows/s): limit += 1000; then clamp to [1000, flow-limit]."""
        c = self.config
        lim = self.limit
        if duration_ms > c.slow_dump_s * 1000:
            lim //= max(duration_ms // 1000, 1)
        elif duration_ms > c.shrink_dump_s * 1000:
            lim = lim * 3 // 4
        elif duration_ms < c.fast_dump_s * 1000 and lim < n_flows * 1000 // duration_ms:
            lim += c.grow
        self.limit = min(c.maximum, max(lim, c.minimum))
        self.history.append((n_flows, duration_ms, self.limit))
        return self.limit

    def idle_timeout_s(self, n_flows: int, normal_s: float) -> float:
        """OVS: max_idle drops to 100 ms while flows exceed the limit."""
        return self.config.idle_above_limit_s if n_flows > self.limit else normal_s

    def must_flush(self, n_flows: int) -> bool:
        """OVS kill_them_all: flows above 2x the limit are all deleted."""
        return n_flows > self.config.flush_factor * self.limit

    def room(self, n_flows: int) -> int:
        """New flows the handlers may still install (none at or above the limit)."""
        return max(self.limit - n_flows, 0)


__all__ = ["DynamicFlowLimit"]
