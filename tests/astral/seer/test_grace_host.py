"""The recorded Grace-host measurements (tests/data/published_runs/grace_host_overhead.csv, session
21g): each line's arithmetic against the figures its source prints. No per-host launch factor was
built from it (docs/astral.md: fewer than two independent Grace / x86 ratios state their
binding); nothing in Seer is fitted to this file."""

import csv
from collections.abc import Iterator
from pathlib import Path

import pytest

DATA = Path(__file__).parents[2] / "data" / "published_runs"
CSV = DATA / "grace_host_overhead.csv"
NOTES = DATA / "grace_host_overhead.md"

COLUMNS = [
    "source",
    "cpu",
    "gpu",
    "binding",
    "what",
    "value",
    "unit",
    "reference_cpu",
    "reference_value",
]


@pytest.fixture(scope="module")
def rows() -> list[dict[str, str]]:
    with CSV.open() as f:
        return list(csv.DictReader(f))


def _lines(rows: list[dict[str, str]], source: str) -> Iterator[dict[str, str]]:
    return (r for r in rows if r["source"] == source)


def _ratio(r: dict[str, str]) -> float:
    return float(r["value"]) / float(r["reference_value"])


def test_header_and_every_source_is_described(rows) -> None:
    with CSV.open() as f:
        assert next(csv.reader(f)) == COLUMNS
    notes = NOTES.read_text()
    assert rows
    for r in rows:
        assert f"| {r['source']} |" in notes, r["source"]
        assert r["binding"] and r["what"] and r["unit"], r["source"]
        float(r["value"])
        assert bool(r["reference_cpu"]) == bool(r["reference_value"]), r["source"]


def test_te2053_torch_linear_ratios(rows) -> None:
    """TE issue #2053's table: torch.nn.Linear forward CPU time, Grace against the H100 DGX's
    Xeon 8480C -- the 2.75x / 2.46x docs/astral.md quotes."""
    torch_lines = [r for r in _lines(rows, "TE2053") if r["what"].startswith("torch.nn.Linear")]
    by_cpu = {r["cpu"].split("(")[1].split()[0]: r for r in torch_lines}
    assert set(by_cpu) == {"GB200", "GH200"}
    assert _ratio(by_cpu["GB200"]) == pytest.approx(2.75, abs=0.005)
    assert _ratio(by_cpu["GH200"]) == pytest.approx(2.46, abs=0.005)
    assert {r["reference_value"] for r in torch_lines} == {"13.48"}
    te = {
        r["cpu"].split("(")[1].split()[0]: float(r["value"])
        for r in _lines(rows, "TE2053")
        if r["what"].startswith("te.Linear")
    }
    # TE's module costs ~2.7x torch's on the same Grace host (the point)
    assert te["GB200"] / float(by_cpu["GB200"]["value"]) == pytest.approx(2.69, abs=0.005)
    assert te["GH200"] / float(by_cpu["GH200"]["value"]) == pytest.approx(2.73, abs=0.005)


def test_binding_gains_as_the_sources_print_them(rows) -> None:
    (guide,) = _lines(rows, "DSV3_GB200_128G")
    assert _ratio(guide) - 1 == pytest.approx(-0.026, abs=0.001)  # the guide's "-3%"
    (bridge,) = _lines(rows, "MBRIDGE_PR6055")
    assert _ratio(bridge) == pytest.approx(1.088, abs=0.001)
    unpinned = float(bridge["reference_value"])
    assert unpinned / 739 - 1 == pytest.approx(-0.073, abs=0.002)  # PR: "~7.3%" vs 26.06.01's 739
    (srt,) = _lines(rows, "SRTSLURM_PR332")
    assert 1 / _ratio(srt) == pytest.approx(5.0, abs=0.05)  # "5.0x"
    (ladder,) = _lines(rows, "MCORE_DSV3_GB200")
    assert _ratio(ladder) - 1 == pytest.approx(0.10, abs=0.005)  # the ladder's bindpcie step
    assert ladder["what"].startswith("EXCLUDED")
