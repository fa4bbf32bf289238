from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.nccltests import busbw_factor, parse_nccl_tests
from starfabric.errors import DataError

DATA = Path(__file__).parent.parent / "data" / "nccl_tests"
FILES = sorted(p for p in DATA.iterdir() if p.suffix != ".md")

# (collective, ranks, rows, peak busbw GB/s) as documented in SOURCES.md
EXPECTED = {
    "aws_p4de_2node_a100_efa_all_reduce.txt": ("all_reduce", 16, 29, 78.33),
    "aws_p5_2node_h100_efa_all_reduce.txt": ("all_reduce", 16, 32, 487.09),
    "aws_p5_1node_h100_nvswitch_all_reduce_awsbatch.txt": ("all_reduce", 8, 32, 483.05),
    "coreweave_gb200_nvl72_20rack_1440gpu_all_reduce_excerpt.txt": ("all_reduce", 1440, 6, 405.74),
    "gcp_a3mega_2node_h100_tcpxo_all_gather.txt": ("all_gather", 16, 11, 188.54),
    "nebius_2node_8gpu_ib_all_reduce.txt": ("all_reduce", 16, 31, 467.54),
    "nccl-tests_issue78_8node_v100_ib100g_alltoall.txt": ("alltoall", 64, 2, 0.51),
    "superbench_1node_8xa100_40gb_nccl_reducescatter.log": ("reduce_scatter", 8, 34, 231.52),
}


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_every_real_log_parses_consistently(path: Path) -> None:
    run = parse_nccl_tests(path)
    assert len(run) >= 2
    assert (np.diff(run.size_bytes) >= 0).all()
    # algbw = size / time, as nccl-tests computes it (two printed decimals)
    big = run.algbw_gbps >= 1.0
    np.testing.assert_allclose(
        run.size_bytes[big] / (run.time_us[big] * 1e3), run.algbw_gbps[big], rtol=0.02, atol=0.01
    )


@pytest.mark.parametrize(("name", "expected"), EXPECTED.items())
def test_documented_facts(name: str, expected: tuple[str, int, int, float]) -> None:
    run = parse_nccl_tests(DATA / name)
    coll, ranks, rows, peak = expected
    assert (run.collective, run.ranks, len(run)) == (coll, ranks, rows)
    assert run.busbw_gbps.max() == pytest.approx(peak)


def test_busbw_factor_matches_logs() -> None:
    for path in FILES:
        run = parse_nccl_tests(path)
        ok = run.algbw_gbps >= 10.0
        if ok.any() and "sharp" not in path.name and "nvl72" not in path.name:
            ratio = np.median(run.busbw_gbps[ok] / run.algbw_gbps[ok])
            assert ratio == pytest.approx(busbw_factor(run.collective, run.ranks), rel=2e-3)


def test_corrupt_row_names_line(tmp_path: Path) -> None:
    src = (DATA / "aws_p5_2node_h100_efa_all_reduce.txt").read_text().splitlines()
    src[10] = src[10].replace("72.22", "7x.22", 1)
    bad = tmp_path / "all_reduce_bad.txt"
    bad.write_text("\n".join(src))
    with pytest.raises(DataError, match=r"line 11: out-of-place time '7x.22' is not a number"):
        parse_nccl_tests(bad)


def test_unknown_collective_and_empty(tmp_path: Path) -> None:
    f = tmp_path / "mystery.txt"
    f.write_text("hello\n")
    with pytest.raises(DataError, match="no nccl-tests result rows"):
        parse_nccl_tests(f, collective="all_reduce", ranks=8)
    # an all_gather table without its command line: busbw/algbw < 1 and no reduction operator
    rows = (DATA / "gcp_a3mega_2node_h100_tcpxo_all_gather.txt").read_text()
    f.write_text(rows.replace("all_gather_perf", "perf"))
    with pytest.raises(DataError, match="which collective"):
        parse_nccl_tests(f)


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_the_collective_does_not_depend_on_the_file_name(path: Path, tmp_path: Path) -> None:
    run = parse_nccl_tests(path)
    renamed = tmp_path / "log.txt"
    renamed.write_bytes(path.read_bytes())
    if run.collective in ("all_reduce", "reduce_scatter") or "_perf" in path.read_text():
        again = parse_nccl_tests(renamed, ranks=run.ranks)  # ranks may need --nodes etc.
        assert again.collective == run.collective
        np.testing.assert_array_equal(again.busbw_gbps, run.busbw_gbps)
    again = parse_nccl_tests(renamed, collective=run.collective, ranks=run.ranks)
    np.testing.assert_array_equal(again.size_bytes, run.size_bytes)
