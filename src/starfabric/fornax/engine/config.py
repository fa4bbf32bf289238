"""EngineConfig: the emulated NIC's geometry, timeouts, tracking and fault-detection knobs.

Timeouts and tracking settings carry Linux nf_conntrack's sysctl names (without the
net.netfilter.nf_conntrack_ prefix where a field is named after one) and defaults
(net/netfilter/nf_conntrack_proto_{tcp,udp,icmp,generic}.c, checked on kernel 6.18, see
docs/fornax.md "Conformance"); everything else is an assumption of ours and says so.
"""

from __future__ import annotations

from typing import Any, Literal

import numpy as np
from pydantic import Field, model_validator

from starfabric.config import Spec, parse_spec

#: Largest table the emulator accepts (issue 2 asks for at least 32M entries).
MAX_CAPACITY = 1 << 27


class EngineConfig(Spec):
    """Parameters of one emulated session engine."""

    capacity: int = Field(1 << 20, ge=16, le=MAX_CAPACITY, description="table slots")
    bucket_size: Literal[4, 8, 16] = Field(
        8, description="slots per bucket; assumption: 8 x 2-byte tags fill 16 bytes"
    )
    max_displacement: int = Field(
        128, ge=0, le=4096, description="cuckoo displacement bound per insert (assumption)"
    )
    ring_capacity: int = Field(65536, ge=4, le=1 << 24, description="event ring records")
    n_ports: int = Field(8, ge=1, le=4096, description="ingress ports (assumption)")
    eni_scopes: int = Field(65536, ge=1, le=1 << 24, description="ENI version scopes")
    vpc_scopes: int = Field(4096, ge=1, le=1 << 24, description="VPC version scopes")
    drop_action: int = Field(
        0xFFFF_FFFF, ge=0, le=0xFFFF_FFFF, description="action handle meaning drop (assumption)"
    )
    hash_seed: int = Field(0x5EED_F0A7_C0DE_0001, ge=0, le=(1 << 64) - 1)
    tcp_syn_sent_s: float = Field(120.0, ge=0)
    tcp_syn_recv_s: float = Field(60.0, ge=0)
    tcp_established_s: float = Field(432000.0, ge=0)
    tcp_fin_wait_s: float = Field(120.0, ge=0)
    tcp_close_wait_s: float = Field(60.0, ge=0)
    tcp_last_ack_s: float = Field(30.0, ge=0)
    tcp_time_wait_s: float = Field(120.0, ge=0)
    tcp_close_s: float = Field(10.0, ge=0)
    tcp_syn_sent2_s: float = Field(120.0, ge=0)
    tcp_none_s: float = Field(
        120.0, ge=0, description="state NONE (inserted without a state); assumption: as SYN_SENT"
    )
    tcp_max_retrans_s: float = Field(
        300.0, ge=0, description="tcp_timeout_max_retrans: after tcp_max_retrans retransmissions"
    )
    tcp_unacknowledged_s: float = Field(
        300.0, ge=0, description="tcp_timeout_unacknowledged: cap while data is unacknowledged"
    )
    tcp_loose: int = Field(1, ge=0, le=1, description="pick up connections seen mid-stream")
    tcp_be_liberal: int = Field(
        0, ge=0, le=1, description="accept out-of-window segments (only RST checks remain)"
    )
    tcp_max_retrans: int = Field(
        3, ge=0, le=255, description="retransmissions before the max_retrans timeout"
    )
    tcp_ignore_invalid_rst: int = Field(
        0, ge=0, le=1, description="a RST below the peer's max ACK is not INVALID"
    )
    invalid_policy: Literal["forward", "drop"] = Field(
        "forward",
        description="INVALID packets on a hardware entry: forward and count (tracking only), or "
        "drop as `ct state invalid drop` does (what a Linux security group does)",
    )
    udp_unreplied_s: float = Field(30.0, ge=0, description="udp_timeout")
    udp_assured_s: float = Field(120.0, ge=0, description="udp_timeout_stream")
    udp_stream_delay_s: float = Field(
        2.0, ge=0, description="a replied UDP entry older than this is a stream (kernel: 2 s)"
    )
    icmp_s: float = Field(30.0, ge=0)
    generic_s: float = Field(600.0, ge=0, description="other protocols (nf_conntrack_generic)")
    watchdog_timeout_s: float = Field(
        0.01, gt=0, description="a stalled port with waiting packets hangs after this (assumption)"
    )
    scrub_slots_per_tick: int = Field(
        65536, ge=1, description="slots the aging scrubber visits per tick (assumption)"
    )

    @model_validator(mode="after")
    def _geometry(self) -> EngineConfig:
        if self.capacity % self.bucket_size or self.capacity < 2 * self.bucket_size:
            raise ValueError(
                f"capacity {self.capacity} must be a multiple of bucket_size "
                f"{self.bucket_size} and hold at least two buckets"
            )
        return self

    @classmethod
    def small(cls, capacity: int = 1024, **overrides: Any) -> EngineConfig:
        """A small-table engine (tests, tracking-only use, a few thousand sessions): a few
        hundred KB instead of the default table's ~190 MB, scrubbed whole every tick."""
        base: dict[str, Any] = {"capacity": capacity, "ring_capacity": 4096, "eni_scopes": 64,
                                "vpc_scopes": 64, "scrub_slots_per_tick": capacity}  # fmt: skip
        return make_config(None, **{**base, **overrides})

    @property
    def n_buckets(self) -> int:
        return self.capacity // self.bucket_size

    def timeouts_ns(self) -> np.ndarray:
        """Timeouts by timeout class (TcpState 0..9, then UDP unreplied/assured, ICMP, other)."""
        s = [
            self.tcp_none_s,
            self.tcp_syn_sent_s,
            self.tcp_syn_recv_s,
            self.tcp_established_s,
            self.tcp_fin_wait_s,
            self.tcp_close_wait_s,
            self.tcp_last_ack_s,
            self.tcp_time_wait_s,
            self.tcp_close_s,
            self.tcp_syn_sent2_s,
            self.udp_unreplied_s,
            self.udp_assured_s,
            self.icmp_s,
            self.generic_s,
        ]
        return np.array([round(x * 1e9) for x in s], dtype=np.int64)

    def tracker_params(self) -> np.ndarray:
        """The settings array of the shared tracker (conntrack.C_*), int64, times in ns."""
        from starfabric.fornax.engine import conntrack as ct

        out = np.zeros(ct.N_CFG, dtype=np.int64)
        out[ct.C_LOOSE] = self.tcp_loose
        out[ct.C_BE_LIBERAL] = self.tcp_be_liberal
        out[ct.C_MAX_RETRANS] = self.tcp_max_retrans
        out[ct.C_IGNORE_INVALID_RST] = self.tcp_ignore_invalid_rst
        t = self.timeouts_ns()
        out[ct.C_TO : ct.C_TO + 10] = t[:10]
        for idx, sec in (
            (ct.TO_RETRANS, self.tcp_max_retrans_s),
            (ct.TO_UNACK, self.tcp_unacknowledged_s),
            (ct.TO_UDP_UNREPLIED, self.udp_unreplied_s),
            (ct.TO_UDP_STREAM, self.udp_assured_s),
            (ct.TO_ICMP, self.icmp_s),
            (ct.TO_GENERIC, self.generic_s),
        ):
            out[ct.C_TO + idx] = round(sec * 1e9)
        out[ct.C_UDP_STREAM_DELAY] = round(self.udp_stream_delay_s * 1e9)
        return out


TO_UDP_UNREPLIED = 10
TO_UDP_ASSURED = 11
TO_ICMP = 12
TO_GENERIC = 13


def make_config(config: EngineConfig | None = None, **overrides: Any) -> EngineConfig:
    """A validated config: `config` (or the defaults) with `overrides`; errors are one line."""
    base = config.model_dump() if config is not None else {}
    base.update(overrides)
    return parse_spec(EngineConfig, base, source="engine config")


__all__ = ["MAX_CAPACITY", "EngineConfig", "make_config"]
