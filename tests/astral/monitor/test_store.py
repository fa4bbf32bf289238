"""TelemetryStore: schema validation, round trip, Parquet export, retention, downsampling."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

from starfabric.astral.monitor import TABLES, TelemetryStore
from starfabric.errors import ConfigError, DataError


def _host_rows(n: int, it: int = 0) -> dict[str, np.ndarray]:
    return {
        "iter": np.full(n, it, dtype=np.int32),
        "host": np.arange(n, dtype=np.int32),
        "cpu_util_pct": np.linspace(1, 99, n).astype(np.float32),
    }


def test_round_trip_file(tmp_path: Path) -> None:
    db = tmp_path / "t.duckdb"
    with TelemetryStore(db) as st:
        assert st.write("phys_host", _host_rows(5)) == 5
        st.set_meta("job", {"gpus": 8, "name": "x"})
    with TelemetryStore(db, read_only=True) as st:
        got = st.query("SELECT * FROM phys_host ORDER BY host")
        np.testing.assert_allclose(got["cpu_util_pct"], np.linspace(1, 99, 5), rtol=1e-6)
        assert st.meta("job") == {"gpus": 8, "name": "x"}
        assert not st.has_meta("nothing")
        with pytest.raises(DataError, match="meta key 'nothing'"):
            st.meta("nothing")


def test_write_rejects_wrong_columns_and_tables() -> None:
    with TelemetryStore() as st:
        bad = _host_rows(3)
        del bad["host"]
        with pytest.raises(ConfigError, match="phys_host: columns"):
            st.write("phys_host", bad)
        with pytest.raises(ConfigError, match="not in the schema"):
            st.write("nope", _host_rows(3))
        rows = _host_rows(3)
        rows["host"] = np.arange(4, dtype=np.int32)
        with pytest.raises(ConfigError, match="different lengths"):
            st.write("phys_host", rows)


def test_missing_or_foreign_database(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="no such telemetry database"):
        TelemetryStore(tmp_path / "absent.duckdb", read_only=True)
    junk = tmp_path / "junk.duckdb"
    junk.write_text("not a database")
    with pytest.raises(DataError, match=r"junk\.duckdb"):
        TelemetryStore(junk, read_only=True)


def test_parquet_export_reads_back(tmp_path: Path) -> None:
    with TelemetryStore() as st:
        st.write("phys_host", _host_rows(7))
        files = st.export_parquet(tmp_path / "pq")
    assert {f.stem for f in files} == set(TABLES)
    t = pq.read_table(tmp_path / "pq" / "phys_host.parquet")
    assert t.num_rows == 7
    assert t.column_names == [c for c, _ in TABLES["phys_host"]]


def test_retention_keeps_newest_iterations() -> None:
    with TelemetryStore() as st:
        for it in range(5):
            st.write("phys_host", _host_rows(4, it))
            st.write(
                "app_iteration",
                {
                    "iter": np.array([it], dtype=np.int32),
                    "rank": np.array([0], dtype=np.int32),
                    **{
                        k: np.array([1.0])
                        for k in ("start_ms", "data_ms", "compute_ms", "tp_ms", "dp_ms")
                    },
                    "iter_ms": np.array([1.0]),
                },
            )
        dropped = st.apply_retention(2)
        assert dropped == 3 * 4 + 3
        assert sorted(set(st.query("SELECT iter FROM phys_host")["iter"].tolist())) == [3, 4]
        with pytest.raises(ConfigError, match="keep_last_iters"):
            st.apply_retention(0)


def test_downsample_qp_series_averages_buckets() -> None:
    with TelemetryStore() as st:
        t = np.arange(10, dtype=np.int32)
        st.write(
            "transport_qp_ms",
            {
                "iter": np.zeros(10, dtype=np.int32),
                "qp": np.zeros(10, dtype=np.int32),
                "t_ms": t,
                "gbps": t.astype(np.float32),
            },
        )
        assert st.downsample_qp_ms(5) == 2
        got = st.query("SELECT t_ms, gbps FROM transport_qp_ms ORDER BY t_ms")
        assert got["t_ms"].tolist() == [0, 5]
        np.testing.assert_allclose(got["gbps"], [2.0, 7.0])
