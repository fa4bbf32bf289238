"""Shared fixtures: a healthy and a faulty 1K-GPU telemetry store (built once per session)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from starfabric.astral.monitor import Fault, SynthSpec, TelemetryStore, synth_to_file

DATA = Path(__file__).resolve().parents[2] / "data"


@pytest.fixture(scope="session")
def healthy_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("mon") / "healthy.duckdb"
    synth_to_file(SynthSpec(gpus=1024, seed=11, placement_seed=11), [], db)
    return db


@pytest.fixture()
def healthy(healthy_db: Path) -> Iterator[TelemetryStore]:
    with TelemetryStore(healthy_db, read_only=True) as st:
        yield st


@pytest.fixture(scope="session")
def crc_db(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Fault]:
    import numpy as np

    from starfabric.astral.monitor.evaluate import job_targets, random_fault

    t = job_targets(1024, 5)
    f = random_fault("link_crc", np.random.default_rng(1), t, set())
    db = tmp_path_factory.mktemp("mon") / "crc.duckdb"
    synth_to_file(SynthSpec(gpus=1024, seed=5, placement_seed=5), [f], db)
    return db, f
