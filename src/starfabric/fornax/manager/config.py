"""ManagerConfig (a frozen Spec) and the setup budget: a token bucket on the simulated clock
shared by session inserts and re-decided modifies (SONiC-DASH: resimulation shares the CPS
budget)."""

from __future__ import annotations

from pydantic import Field

from starfabric.config import Spec


class ManagerConfig(Spec):
    """Knobs of the light-weight manager; every default is an assumption of ours."""

    setup_rate: float = Field(
        4.0e6,
        gt=0,
        description="inserts+modifies per simulated second (assumption: SONiC-DASH 200G card "
        "3M CPS order)",
    )
    setup_burst: int = Field(
        65536, ge=1, description="token-bucket depth of the setup budget (assumption)"
    )
    install_drop_sessions: bool = Field(
        True, description="denied first packets install a drop session so floods stay in HW"
    )
    nat_port_min: int = Field(1024, ge=1, le=65535, description="lowest SNAT source port")
    nat_port_max: int = Field(65535, ge=1, le=65535, description="highest SNAT source port")
    event_poll_max: int = Field(65536, ge=1, description="events read per poll (assumption)")
    patrol_chunk: int = Field(
        65536, ge=1, description="entries per dump chunk of a patrol pass (assumption)"
    )
    patrol_max_entries: int = Field(
        1 << 22, ge=1, description="bound on entries one patrol pass reads (assumption)"
    )
    recover_chunk: int = Field(65536, ge=1, description="entries per dump chunk in recovery")
    promote_per_tick: int = Field(
        4096, ge=0, description="software sessions moved back to hardware per tick (assumption)"
    )


class TokenBucket:
    """`rate` tokens per simulated second, at most `burst` banked."""

    def __init__(self, rate: float, burst: int) -> None:
        self.rate = rate
        self.burst = float(burst)
        self.tokens = float(burst)
        self._last_ns: int | None = None

    def refill(self, now_ns: int) -> None:
        if self._last_ns is not None and now_ns > self._last_ns:
            self.tokens = min(self.burst, self.tokens + (now_ns - self._last_ns) * 1e-9 * self.rate)
        if self._last_ns is None or now_ns > self._last_ns:
            self._last_ns = now_ns

    def take(self, n: int) -> int:
        """Grant up to n tokens; returns how many were granted."""
        got = min(n, int(self.tokens))
        self.tokens -= got
        return got


__all__ = ["ManagerConfig", "TokenBucket"]
