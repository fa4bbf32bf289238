"""Golden tests: every example a CLI command runs, with its printed summary compared to tests/golden/.

Run `pytest tests/test_examples_golden.py --update-golden` to rewrite the golden texts after an
intended change (review the diff before committing). The comparison goes through `normalize`,
which removes only what a rerun on another machine changes: wall-clock timings, the temporary
folder, and the column padding rich adds around them.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden"
EXAMPLES = ROOT / "examples"

#: Terminal width the commands render at: wide enough that no table row wraps.
COLUMNS = 200

#: (golden name, one or more command lines). "{tmp}" is the test's temporary folder.
CASES: dict[str, list[list[str]]] = {
    "policy_vpc": [["fornax", "policy", "check", "examples/vpc.yaml"]],
    "policy_vpc_explain": [
        [
            "fornax", "policy", "check", "examples/vpc.yaml",
            "--explain", "10.0.2.10", "10.0.3.10", "tcp", "5432", "--vni", "1001",
        ]
    ],
    "policy_vpc_small": [
        [
            "fornax", "policy", "check", "examples/vpc-small.yaml",
            "--explain", "10.0.1.10", "10.0.2.10", "tcp", "5432",
        ]
    ],
    "policy_scenario_policy_v2": [["fornax", "policy", "check", "examples/scenario-policy-v2.yaml"]],
    "run_scenario": [["fornax", "run", "examples/scenario.yaml"]],
    "run_scenario_pcap": [["fornax", "run", "examples/scenario-pcap.yaml"]],
    "chaos_mixed": [["fornax", "chaos", "examples/chaos-mixed.yaml"]],
    "topo_cluster_small": [
        ["astral", "topo", "build", "examples/cluster-small.yaml"],
        ["astral", "topo", "compare", "examples/cluster-small.yaml"],
    ],
    "topo_cluster_rail_only": [["astral", "topo", "build", "examples/cluster-rail-only.yaml"]],
    "topo_cluster_512k": [["astral", "topo", "build", "examples/cluster-512k.yaml"]],
    "seer_llama31_70b_dense": [["astral", "seer", "predict", "examples/jobs/llama31_70b_dense.yaml"]],
    "seer_deepseek_v3_moe": [["astral", "seer", "predict", "examples/jobs/deepseek_v3_moe.yaml"]],
    "power_timeline_512k": [
        [
            "astral", "power", "timeline", "examples/jobs/llama31_405b_512k.yaml",
            "--cluster", "examples/cluster-512k.yaml",
            "--smooth", "floor=0.6,ramp=20000,storage=20000kWh/200000kW",
        ]
    ],
    "monitor_1k_two_faults": [
        ["astral", "monitor", "synth", "{tmp}/m.duckdb", "--spec", "examples/monitor-1k-two-faults.yaml"],
        ["astral", "monitor", "diagnose", "{tmp}/m.duckdb"],
    ],
    "monitor_16k_healthy": [
        ["astral", "monitor", "synth", "{tmp}/m.duckdb", "--spec", "examples/monitor-16k-healthy.yaml"],
        ["astral", "monitor", "diagnose", "{tmp}/m.duckdb"],
    ],
}  # fmt: skip

_WALL_S = re.compile(r"\b(localized|built) in \d+(?:\.\d+)? s")
_NUMBER = re.compile(r"\d[\d,]*(?:\.\d+)?(?![\dk])")
_SPACES = re.compile(r" {2,}")
_RULES = re.compile(r"([─━])[─━]+")


def normalize(text: str, tmp: Path | None = None) -> str:
    """Strip what differs between reruns: wall-clock timings, the temp folder, rich's padding.

    1. the temporary folder becomes `<tmp>`;
    2. `localized in X s` (monitor diagnose's run time) and `built in X s` (topo build's)
       become `... in <wall> s`;
    3. in table rows whose first cell names CPU time (fornax run's management and software
       datapath CPU, measured with a clock), every number after that cell becomes `<wall>`;
    4. runs of spaces and of rule characters collapse to one, and trailing blanks go, because
       rich pads every column to its widest value, which the timings change.
    Everything else — counts, simulated times, predictions, diagnoses — is compared exactly.
    """
    if tmp is not None:
        text = text.replace(str(tmp), "<tmp>")
    text = _WALL_S.sub(r"\1 in <wall> s", text)
    lines = []
    for line in text.splitlines():
        cells = line.split("│")
        if len(cells) > 2 and "CPU" in cells[1]:
            line = "│".join(cells[:2] + [_NUMBER.sub("<wall>", c) for c in cells[2:]])
        line = _RULES.sub(r"\1", _SPACES.sub(" ", line)).rstrip()
        lines.append(line)
    return "\n".join(lines).strip() + "\n"


def _run(argv: list[str], tmp: Path) -> str:
    env = dict(os.environ, COLUMNS=str(COLUMNS), NO_COLOR="1", TERM="dumb")
    env.pop("FORCE_COLOR", None)
    cmd = [sys.executable, "-c", "from starfabric.cli import main; main()"]
    proc = subprocess.run(
        cmd + [a.replace("{tmp}", str(tmp)) for a in argv],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    shown = " ".join(argv)
    assert proc.returncode == 0, f"starfabric {shown} exited {proc.returncode}:\n{proc.stderr}"
    return f"$ starfabric {shown}\n{proc.stdout}"


@pytest.mark.parametrize("name", sorted(CASES))
def test_example_matches_golden(name: str, tmp_path: Path, update_golden: bool) -> None:
    got = normalize("".join(_run(argv, tmp_path) for argv in CASES[name]), tmp_path)
    path = GOLDEN / f"{name}.txt"
    if update_golden:
        path.write_text(got)
        return
    assert path.is_file(), f"{path} missing: run pytest {__file__} --update-golden"
    assert got == path.read_text(), (
        f"{name}: output differs from {path.relative_to(ROOT)}; if the change is intended, "
        "rerun with --update-golden and review the diff"
    )


def test_every_runnable_example_is_covered() -> None:
    """A new file in examples/ must get a golden case (or this test names it)."""
    used = {a for argvs in CASES.values() for argv in argvs for a in argv if a.endswith(".yaml")}
    on_disk = {str(p.relative_to(ROOT)) for p in EXAMPLES.rglob("*.yaml")}
    assert on_disk - used == set(), f"examples without a golden case: {sorted(on_disk - used)}"


def test_normalize_strips_timings_only() -> None:
    raw = (
        "│ CPU miss    │  4175.0 ms (52.347 ms/1k conn) │\n"
        "│ connections │                         79,757 │\n"
        "iteration time 657 ms vs 538 ms before\n"
        "localized in 0.04 s\n"
        "astral-16k: astral, 16,384 GPUs, built in 0.01 s\n"
    )
    again = raw.replace("4175.0", "12.5").replace("52.347", "0.157").replace("0.01 s", "1.30 s")
    assert normalize(raw) == normalize(again)
    assert "79,757" in normalize(raw) and "657 ms" in normalize(raw)
    assert "ms/1k conn" in normalize(raw)
    assert normalize(raw) != normalize(raw.replace("79,757", "79,758"))


def _script(name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return sys.modules[name]


def test_cli_reference_is_current(update_golden: bool) -> None:
    """docs/cli.md is generated from the typer app; regenerate with scripts/gen_cli_docs.py."""
    gen = _script("gen_cli_docs")
    text = gen.render()
    if update_golden:
        gen.CLI_MD.write_text(text)
        return
    assert gen.CLI_MD.read_text() == text, (
        "docs/cli.md is stale: run `python scripts/gen_cli_docs.py` (or pytest --update-golden)"
    )
    for command in ("fornax run", "fornax policy check", "astral seer predict", "demo"):
        assert f"`starfabric {command}`" in text


def test_assumption_index_finds_named_parameters() -> None:
    """scripts/gen_assumptions.py names the parameter that documents each assumption."""
    keys = {key for key, _, _ in _script("gen_assumptions").collect()}
    for expected in (
        "starfabric/fornax/manager/config.py:ManagerConfig.setup_rate",
        "starfabric/astral/topology/spec.py:ClusterSpec.nic_cable_m",
        "starfabric/astral/collectives/run.py:STEP_LATENCY_S",
    ):
        assert expected in keys
    for key in keys:
        assert (ROOT / "src" / key.split(":")[0]).is_file(), key


def test_docs_links_and_paths_resolve() -> None:
    """Relative links and `examples/...` paths named in docs/*.md exist."""
    link = re.compile(r"\]\(([^)#:]+)\)")
    example = re.compile(r"(examples/[\w./-]+\.yaml)")
    for page in sorted((ROOT / "docs").glob("*.md")):
        text = page.read_text()
        for target in link.findall(text):
            assert (page.parent / target).exists(), f"{page.name}: broken link {target}"
        for path in example.findall(text):
            assert (ROOT / path).is_file(), f"{page.name}: {path} does not exist"
