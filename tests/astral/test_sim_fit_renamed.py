"""`sim fit` under any file name: the hardware comes from the log's device list or options.

tests/golden/sim_fit_recorded.json was recorded before this change (commit 4c427db), when the
hardware came from three bundled file-name prefixes. Every log under a new name, with options
for only what its text does not say, must give the same parameters and the same table.
"""

from __future__ import annotations

import json
import math
import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.cli import app

DATA = Path(__file__).parent.parent / "data" / "nccl_tests"
GOLDEN = json.loads((Path(__file__).parents[1] / "golden" / "sim_fit_recorded.json").read_text())

#: What each fittable log's text does not say (nccl-tests never prints NIC speeds; the V100
#: excerpt has no device list). Values from tests/data/nccl_tests/SOURCES.md.
OPTIONS = {
    "superbench_1node_8xa100_40gb_nccl_allreduce.log": [],
    "gcp_a3mega_2node_h100_tcpxo_all_reduce.txt": ["--nic", "200G"],
    "nccl-tests_issue78_8node_v100_ib100g_all_reduce.txt": [
        "--nodes", "8", "--gpus-per-node", "8", "--nvlink", "150", "--nic", "12.5G",
    ],
}  # fmt: skip


#: The fit's last digits follow the BLAS/SIMD path of the machine it runs on (least squares
#: sums in a different order); parameters agree to this relative tolerance, not bit for bit.
FIT_RTOL = 1e-6


def _same_params(got: str | None, want: str) -> bool:
    """Equal FabricParams reprs, numbers compared to FIT_RTOL and everything else exactly."""
    num = r"-?\d+(?:\.\d+)?(?:e[-+]?\d+)?"
    if got is None or re.sub(num, "#", got) != re.sub(num, "#", want):
        return False
    pairs = zip(re.findall(num, got), re.findall(num, want), strict=True)
    return all(math.isclose(float(a), float(b), rel_tol=FIT_RTOL) for a, b in pairs)


def _fit(args: list[str]) -> tuple[int, str | None, list[list[str]], str]:
    res = CliRunner().invoke(app, ["astral", "sim", "fit", *args], terminal_width=250)
    flat = " ".join(res.output.split())
    m = re.search(r"fitted [^:]+: (FabricParams\(.*?\))", flat)
    rows: list[list[str]] = []
    for line in res.output.splitlines():
        if not line.startswith("│"):
            continue
        cells = [c.strip() for c in line.split("│")[1:-1]]
        if cells[0] or not rows:  # a wrapped cell continues the row above
            rows.append(cells[1:])
        else:
            rows[-1] = [f"{a} {b}".strip() for a, b in zip(rows[-1], cells[1:], strict=True)]
    return res.exit_code, m.group(1) if m else None, rows, res.output


@pytest.mark.parametrize("main", sorted(GOLDEN["with_predict"]))
def test_renamed_logs_give_the_recorded_fit(main: str, tmp_path: Path) -> None:
    want = GOLDEN["with_predict"][main]
    fabric = tmp_path / "my-fabric.txt"  # no hint left in the name
    shutil.copy(DATA / main, fabric)
    args = [str(fabric), *OPTIONS[main]]
    for i, other in enumerate(want["predict"]):
        coll = re.search(r"(all_?gather|alltoall|reduce_?scatter)", other)
        assert coll
        dst = tmp_path / f"run{i}-{coll.group(1)}.log"  # the collective is all a name gives
        shutil.copy(DATA / other, dst)
        args += ["--predict", str(dst)]
    code, params, rows, out = _fit(args)
    assert code == 0, out
    assert _same_params(params, want["params"]), (params, want["params"])
    assert rows == want["rows"]


@pytest.mark.parametrize("name", sorted(GOLDEN["single"]))
def test_every_log_under_a_new_name(name: str, tmp_path: Path) -> None:
    """Logs that were not all_reduce are still refused, naming what they are; logs refused
    for 'no known hardware' are refused only for what their text lacks, naming the option."""
    want = GOLDEN["single"][name]
    renamed = tmp_path / "log.txt"
    shutil.copy(DATA / name, renamed)
    code, params, _, out = _fit([str(renamed), *OPTIONS.get(name, [])])
    if want["exit"] == 0:
        assert code == 0 and _same_params(params, want["params"]), (params, want["params"])
    elif "is a" in want["error"]:
        coll = re.search(r"is a (\w+) log", want["error"])
        assert coll
        assert code == 2
        # the collective of an all_gather/alltoall table is not in its numbers: either named
        # from the log's own text, or refused as unknown
        assert f"is a {coll.group(1)} log" in out or "which collective" in out, out
    else:
        assert "no known hardware" in want["error"]
        assert code == 2 and len(out.strip().splitlines()) == 1, out
        assert re.search(r"--(nic|nodes|gpu|nvlink)", out), out
