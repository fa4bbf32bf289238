"""The four-layer telemetry schema (DuckDB DDL): application, transport, network, physical.

Granularity follows real collectors: per-rank, per-iteration timings (NCCL/CUDA timelines; the
data-loader wait as trainers log it); per-GPU NVLink send throughput while transmitting (NCCL
profiler-plugin step timings);
per-QP throughput statistics per iteration plus a millisecond series (RDMA counters polled at
1 ms); INT-style per-hop latency samples that also reconstruct each flow's route; per-port
switch/NIC counters polled once per iteration (SNMP/gNMI), optical DDM, GPU and host health.
"""

from __future__ import annotations

TABLES: dict[str, list[tuple[str, str]]] = {
    "meta": [("key", "VARCHAR"), ("value", "VARCHAR")],
    # application layer
    "app_iteration": [
        ("iter", "INTEGER"),
        ("rank", "INTEGER"),
        ("start_ms", "DOUBLE"),
        ("data_ms", "DOUBLE"),
        ("compute_ms", "DOUBLE"),
        ("tp_ms", "DOUBLE"),
        ("dp_ms", "DOUBLE"),
        ("iter_ms", "DOUBLE"),
    ],
    "app_nccl_error": [
        ("iter", "INTEGER"),
        ("rank", "INTEGER"),
        ("peer", "INTEGER"),
        ("error", "VARCHAR"),
    ],
    # transport layer
    "transport_qp": [
        ("iter", "INTEGER"),
        ("qp", "INTEGER"),
        ("rank", "INTEGER"),
        ("src_ip", "UINTEGER"),
        ("dst_ip", "UINTEGER"),
        ("src_port", "USMALLINT"),
        ("dst_port", "USMALLINT"),
        ("proto", "UTINYINT"),
        ("dst_rank", "INTEGER"),
        ("gbps_mean", "DOUBLE"),
        ("gbps_min", "DOUBLE"),
        ("gbps_max", "DOUBLE"),
        ("bytes", "DOUBLE"),
        ("retrans", "BIGINT"),
        ("cnp_rx", "BIGINT"),
    ],
    "transport_nvlink": [
        ("iter", "INTEGER"),
        ("gpu", "INTEGER"),
        ("gbps", "FLOAT"),
    ],
    "transport_qp_ms": [
        ("iter", "INTEGER"),
        ("qp", "INTEGER"),
        ("t_ms", "INTEGER"),
        ("gbps", "FLOAT"),
    ],
    # network layer
    "network_hop": [
        ("iter", "INTEGER"),
        ("qp", "INTEGER"),
        ("hop", "TINYINT"),
        ("link", "INTEGER"),
        ("node", "INTEGER"),
        ("latency_us", "FLOAT"),
    ],
    # physical layer
    "phys_port": [
        ("iter", "INTEGER"),
        ("link", "INTEGER"),
        ("tx_bytes", "DOUBLE"),
        ("ecn_marked", "BIGINT"),
        ("cnp_sent", "BIGINT"),
        ("pfc_pause_rx", "BIGINT"),
        ("crc_errors", "BIGINT"),
        ("symbol_errors", "BIGINT"),
        ("link_downed", "INTEGER"),
        ("state_up", "BOOLEAN"),
    ],
    "phys_optics": [
        ("iter", "INTEGER"),
        ("cable", "INTEGER"),
        ("cable_end", "TINYINT"),
        ("tx_power_dbm", "FLOAT"),
        ("rx_power_dbm", "FLOAT"),
        ("temperature_c", "FLOAT"),
        ("bias_ma", "FLOAT"),
    ],
    "phys_gpu": [
        ("iter", "INTEGER"),
        ("gpu", "INTEGER"),
        ("temperature_c", "FLOAT"),
        ("power_w", "FLOAT"),
        ("sm_clock_mhz", "FLOAT"),
        ("throttle_reasons", "INTEGER"),
        ("ecc_corrected", "BIGINT"),
        ("ecc_uncorrected", "BIGINT"),
        ("nvlink_replay", "BIGINT"),
        ("nvlink_crc", "BIGINT"),
    ],
    "phys_xid": [
        ("ts_ms", "DOUBLE"),
        ("gpu", "INTEGER"),
        ("pci", "VARCHAR"),
        ("xid", "INTEGER"),
        ("message", "VARCHAR"),
    ],
    "phys_host": [("iter", "INTEGER"), ("host", "INTEGER"), ("cpu_util_pct", "FLOAT")],
    "config_nic": [
        ("gpu", "INTEGER"),
        ("mtu", "INTEGER"),
        ("dcqcn_enabled", "BOOLEAN"),
        ("dcqcn_rpg_ai_rate_mbps", "INTEGER"),
        ("dcqcn_rpg_time_reset_us", "INTEGER"),
    ],
    # ingested real formats (identifiers as the source names them)
    "app_collective": [
        ("source", "VARCHAR"),
        ("rank", "INTEGER"),
        ("seq", "INTEGER"),
        ("collective", "VARCHAR"),
        ("kernel", "VARCHAR"),
        ("ts_us", "DOUBLE"),
        ("dur_us", "DOUBLE"),
        ("nelems", "BIGINT"),
        ("group_size", "INTEGER"),
    ],
    "app_nccltest": [
        ("source", "VARCHAR"),
        ("collective", "VARCHAR"),
        ("ranks", "INTEGER"),
        ("size_bytes", "BIGINT"),
        ("time_us", "DOUBLE"),
        ("algbw_gbps", "DOUBLE"),
        ("busbw_gbps", "DOUBLE"),
    ],
    "phys_ib_counter": [
        ("source", "VARCHAR"),
        ("device", "VARCHAR"),
        ("port", "INTEGER"),
        ("counter", "VARCHAR"),
        ("value", "DOUBLE"),
    ],
    "phys_ib_port": [
        ("source", "VARCHAR"),
        ("device", "VARCHAR"),
        ("port", "INTEGER"),
        ("state", "VARCHAR"),
        ("phys_state", "VARCHAR"),
        ("rate_gbps", "DOUBLE"),
        ("link_layer", "VARCHAR"),
    ],
    "phys_node_check": [
        ("source", "VARCHAR"),
        ("node", "VARCHAR"),
        ("category", "VARCHAR"),
        ("metric", "VARCHAR"),
        ("device", "INTEGER"),
        ("baseline", "DOUBLE"),
        ("value", "DOUBLE"),
        ("deviation", "DOUBLE"),
        ("rule", "VARCHAR"),
    ],
    "phys_node_sample": [
        ("source", "VARCHAR"),
        ("ts", "VARCHAR"),
        ("metric", "VARCHAR"),
        ("device", "VARCHAR"),
        ("value", "DOUBLE"),
    ],
    "phys_ddm": [
        ("source", "VARCHAR"),
        ("device", "VARCHAR"),
        ("tx_power_dbm", "FLOAT"),
        ("rx_power_dbm", "FLOAT"),
        ("temperature_c", "FLOAT"),
        ("bias_ma", "FLOAT"),
    ],
}
"""Table → ordered (column, DuckDB type). Every layer's table name starts with its layer."""

LAYER_OF: dict[str, str] = {
    "app_iteration": "application",
    "app_nccl_error": "application",
    "transport_qp": "transport",
    "transport_qp_ms": "transport",
    "transport_nvlink": "transport",
    "network_hop": "network",
    "phys_port": "physical",
    "phys_optics": "physical",
    "phys_gpu": "physical",
    "phys_xid": "physical",
    "phys_host": "physical",
    "config_nic": "physical",
    "app_collective": "application",
    "app_nccltest": "application",
    "phys_ib_counter": "physical",
    "phys_ib_port": "physical",
    "phys_ddm": "physical",
    "phys_node_check": "physical",
    "phys_node_sample": "physical",
}

THROTTLE_SW_POWER_CAP = 0x4
THROTTLE_HW_SLOWDOWN = 0x8
THROTTLE_SW_THERMAL = 0x20
THROTTLE_HW_THERMAL = 0x40
"""NVML clocks-throttle-reason bits (nvmlClocksThrottleReasons, NVML API reference)."""


def ddl(table: str) -> str:
    """CREATE TABLE statement of one table."""
    cols = ", ".join(f"{c} {t}" for c, t in TABLES[table])
    return f"CREATE TABLE IF NOT EXISTS {table} ({cols})"
