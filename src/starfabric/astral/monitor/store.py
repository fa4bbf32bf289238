"""TelemetryStore: one embedded DuckDB file per job holding the four layers' tables.

Writes take column arrays (numpy) and go through Arrow, never row by row; reads return numpy
columns. Parquet export, retention (keep the last K iterations) and downsampling of the
millisecond QP series live here too.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import TracebackType
from typing import Any

import duckdb
import numpy as np
import numpy.typing as npt
import pyarrow as pa

from starfabric.astral.monitor.schema import TABLES, ddl
from starfabric.errors import ConfigError, DataError

Columns = dict[str, npt.NDArray[Any]]


class _Checked:
    """The DuckDB connection, its errors turned into DataErrors naming the file: a truncated or
    corrupt database file fails on the first read that reaches the broken block (IOException),
    which is the user's file, not a bug."""

    def __init__(self, con: duckdb.DuckDBPyConnection, path: str, name: str) -> None:
        self._con, self._path, self._name = con, path, name

    def execute(self, sql: str, params: Any = None) -> duckdb.DuckDBPyConnection:
        try:
            return self._con.execute(sql, params) if params is not None else self._con.execute(sql)
        except (duckdb.IOException, duckdb.SerializationException, duckdb.InternalException) as e:
            msg = str(e).replace(self._path, self._name).splitlines()[0][:200]
            raise DataError(
                f"{self._name}: the telemetry database cannot be read ({msg})",
                fix="the file is truncated or corrupt: write it again with monitor synth/ingest",
            ) from None

    def register(self, name: str, obj: Any) -> None:
        self._con.register(name, obj)

    def unregister(self, name: str) -> None:
        self._con.unregister(name)

    def close(self) -> None:
        self._con.close()


class TelemetryStore:
    """A DuckDB telemetry database (file path, or ':memory:')."""

    def __init__(
        self, path: str | Path = ":memory:", *, read_only: bool = False, label: str | None = None
    ) -> None:
        """`label`: the name errors give the file (the user's path when `path` is a working
        copy of it)."""
        self.path = str(path)
        name = label or self.path
        if read_only and self.path != ":memory:" and not Path(self.path).is_file():
            raise DataError(f"{self.path}: no such telemetry database", fix="run monitor synth")
        try:
            self.con = _Checked(duckdb.connect(self.path, read_only=read_only), self.path, name)
        except duckdb.Error as e:
            msg = str(e).replace(self.path, name).splitlines()[0][:200]
            raise DataError(
                f"{name}: not a DuckDB telemetry database ({msg})",
                fix="give a database monitor synth/ingest wrote (this one is truncated or corrupt)",
            ) from None
        if not read_only:
            for t in TABLES:
                self.con.execute(ddl(t))
        else:
            have = {
                r[0] for r in self.con.execute("SELECT table_name FROM duckdb_tables()").fetchall()
            }
            missing = sorted(set(TABLES) - have)
            if missing:
                raise DataError(
                    f"{self.path}: telemetry tables missing: {', '.join(missing)}",
                    fix="write the database with monitor synth or monitor ingest",
                )

    def __enter__(self) -> TelemetryStore:
        return self

    def __exit__(
        self, et: type[BaseException] | None, ev: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the connection (the file stays)."""
        self.con.close()

    def write(self, table: str, cols: Columns) -> int:
        """Append rows given as equal-length column arrays; returns the row count."""
        if table not in TABLES:
            raise ConfigError(f"table {table!r} is not in the schema", fix=f"use {sorted(TABLES)}")
        names = [c for c, _ in TABLES[table]]
        if set(cols) != set(names):
            raise ConfigError(
                f"table {table}: columns {sorted(cols)} differ from the schema {names}",
                fix="give exactly the schema's columns",
            )
        n = {len(np.asarray(cols[c])) for c in names}
        if len(n) > 1:
            raise ConfigError(f"table {table}: columns have different lengths {sorted(n)}")
        tbl = pa.table({c: np.asarray(cols[c]) for c in names})
        self.con.register("_incoming", tbl)
        try:
            self.con.execute(f"INSERT INTO {table} SELECT * FROM _incoming")
        finally:
            self.con.unregister("_incoming")
        return int(tbl.num_rows)

    def query(self, sql: str, params: list[Any] | None = None) -> Columns:
        """Run SQL, return numpy columns."""
        res = self.con.execute(sql, params or []).fetchnumpy()
        return {k: np.asarray(v) for k, v in res.items()}

    def count(self, table: str) -> int:
        """Rows in one table."""
        row = self.con.execute(f"SELECT count(*) FROM {table}").fetchone()
        return int(row[0]) if row else 0

    def set_meta(self, key: str, value: Any) -> None:
        """Store a JSON value under a key (job description, cluster spec, Seer prediction)."""
        self.con.execute("DELETE FROM meta WHERE key = ?", [key])
        self.con.execute("INSERT INTO meta VALUES (?, ?)", [key, json.dumps(value)])

    def meta(self, key: str) -> Any:
        """Read a JSON value stored with `set_meta`."""
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        if row is None:
            raise DataError(f"{self.path}: meta key {key!r} is missing", fix="re-run synth/ingest")
        return json.loads(row[0])

    def has_meta(self, key: str) -> bool:
        """Whether a meta key exists."""
        return self.con.execute("SELECT 1 FROM meta WHERE key = ?", [key]).fetchone() is not None

    def export_parquet(self, out_dir: str | Path) -> list[Path]:
        """Write every table as OUT_DIR/<table>.parquet (zstd); returns the files."""
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        files = []
        for t in TABLES:
            p = out / f"{t}.parquet"
            self.con.execute(f"COPY {t} TO '{p.as_posix()}' (FORMAT PARQUET, COMPRESSION ZSTD)")
            files.append(p)
        return files

    def apply_retention(self, keep_last_iters: int) -> int:
        """Drop rows of iterations older than the newest `keep_last_iters`; returns rows dropped."""
        if keep_last_iters < 1:
            raise ConfigError(f"keep_last_iters = {keep_last_iters}", fix="keep at least 1")
        row = self.con.execute("SELECT max(iter) FROM app_iteration").fetchone()
        newest = row[0] if row else None
        if newest is None:
            return 0
        cut = int(newest) - keep_last_iters + 1
        dropped = 0
        for t, cols in TABLES.items():
            if cols[0][0] == "iter":
                before = self.count(t)
                self.con.execute(f"DELETE FROM {t} WHERE iter < ?", [cut])
                dropped += before - self.count(t)
        return dropped

    def downsample_qp_ms(self, bucket_ms: int) -> int:
        """Replace the millisecond QP series by `bucket_ms` averages; returns rows after."""
        if bucket_ms < 2:
            raise ConfigError(f"bucket_ms = {bucket_ms}", fix="use 2 ms or more")
        self.con.execute(
            "CREATE TEMP TABLE _ds AS SELECT iter, qp, (t_ms // ?) * ? AS t_ms, "
            "CAST(avg(gbps) AS FLOAT) AS gbps FROM transport_qp_ms GROUP BY ALL",
            [bucket_ms, bucket_ms],
        )
        self.con.execute("DELETE FROM transport_qp_ms")
        self.con.execute("INSERT INTO transport_qp_ms SELECT iter, qp, t_ms, gbps FROM _ds")
        self.con.execute("DROP TABLE _ds")
        return self.count("transport_qp_ms")
