"""The design comparison runs all four designs `astral topo compare` builds, in `sim compare`'s
table, JSON and chart (issue 19: dual-plane was left out)."""

import json
from pathlib import Path

import numpy as np
import yaml
from typer.testing import CliRunner

from starfabric.astral.collectives.compare import DESIGNS, CompareRow, plot_compare
from starfabric.astral.topology.compare import DESIGNS as TOPO_DESIGNS
from starfabric.cli import app

TINY = {"name": "tiny", "switch": "test-16x200G", "gpus_per_host": 2, "pods": 2}
"""128 GPUs: two Astral pods, or one dual-plane pod, at radix 16 (every design feasible)."""


def test_the_four_designs_are_the_topology_comparisons() -> None:
    assert DESIGNS == TOPO_DESIGNS == ("astral", "fat-tree", "rail-only", "dual-plane")


def test_sim_compare_runs_every_design_in_table_json_and_chart(tmp_path: Path) -> None:
    topo = tmp_path / "tiny.yaml"
    topo.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "cmp.json"
    png = tmp_path / "cmp.png"
    res = CliRunner().invoke(
        app,
        ["astral", "sim", "compare", "--topo", str(topo), "--json", str(out), "--png", str(png)],
    )
    assert res.exit_code == 0, res.output
    assert all(d in res.output for d in DESIGNS)
    rows = [CompareRow(**r) for r in json.loads(out.read_text())]
    got = {(r.design, r.workload, r.polarized) for r in rows}
    assert got == {
        (d, w, p) for d in DESIGNS for w in ("dp-allreduce", "alltoall") for p in (False, True)
    }
    assert all(r.feasible and r.gpus == 128 for r in rows), [r.reason for r in rows]
    assert all(np.isfinite(r.time_ms) and r.time_ms > 0 and r.busbw_gbps > 0 for r in rows)
    assert png.stat().st_size > 0
    fig = plot_compare(rows)
    for ax in fig.axes:
        assert [t.get_text() for t in ax.get_xticklabels()] == list(DESIGNS)
        heights = [b.get_height() for b in ax.patches]
        assert len(heights) == 2 * len(DESIGNS) and all(h > 0 for h in heights)
