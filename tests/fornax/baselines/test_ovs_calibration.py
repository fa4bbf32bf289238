"""The OVS-like preset's calibration from a file (issue 29): `benchmarks/ovs_real.py
--calibrate FILE` writes what it fitted with the machine it ran on, `fornax experiment
--ovs-calibration FILE` runs the OVS-like model with it and says so; without the option the
built-in calibration runs and the report says whose it is; a malformed file is one line, exit 2."""

from __future__ import annotations

import json
import platform
from pathlib import Path

import numpy as np
import pytest
from typer.testing import CliRunner

from starfabric.cli import app
from starfabric.errors import ConfigError
from starfabric.fornax.baselines import (
    BUILTIN_CALIBRATION,
    BUILTIN_OVS_CONSTANTS,
    OVS_DUMP_NS_PER_FLOW,
    OVS_HOST_BASE_BYTES,
    OVS_HOST_BYTES_PER_FLOW,
    OVS_REVALIDATE_NS_PER_FLOW,
    OvsConstants,
    load_ovs_calibration,
    ovs_cost,
    ovs_like,
)
from starfabric.fornax.baselines.ovs_calibration import calibration_document, from_fit
from starfabric.fornax.baselines.ovs_real.instance import unavailable_reason
from starfabric.fornax.engine import EngineConfig
from starfabric.fornax.experiments.contenders import default_contenders
from starfabric.fornax.experiments.traffic import vpc_spec
from starfabric.fornax.vpc import compile_policy

runner = CliRunner()


def _affine_fit(ns: float = 2408.0) -> ovs_cost.Calibration:
    """ovs_cost.fit over levels made from known constants (the benchmark's own fit path)."""
    base, per, dump_ns = 2e8, 6000.0, 1800.0
    levels = []
    for conns in (10_000, 50_000, 100_000):
        mflows = 2 * conns
        dump_ms = mflows * dump_ns / 1e6
        cpu = mflows * ns / 1e9 / max(0.5, dump_ms / 1e3)
        levels.append(ovs_cost.LevelFigures(conns, 2 * mflows, int(base + per * mflows), cpu,
                                            dump_ms))  # fmt: skip
    return ovs_cost.fit(levels, dp_flows_per_model_flow=2)


def _write(cal_doc: dict, path: Path) -> Path:  # type: ignore[type-arg]
    path.write_text(json.dumps(cal_doc, indent=1))
    return path


def test_the_builtin_calibration_is_config_constants_and_says_whose() -> None:
    c = BUILTIN_CALIBRATION.constants
    assert (c.host_base_bytes, c.host_bytes_per_flow, c.revalidate_ns_per_flow,
            c.dump_ns_per_flow) == (OVS_HOST_BASE_BYTES, OVS_HOST_BYTES_PER_FLOW,
                                    OVS_REVALIDATE_NS_PER_FLOW, OVS_DUMP_NS_PER_FLOW)  # fmt: skip
    assert ovs_like() == ovs_like(constants=BUILTIN_OVS_CONSTANTS)
    line = BUILTIN_CALIBRATION.describe()
    assert line.startswith("built-in calibration: measured on the project's shared 2-core VM")
    assert "Open vSwitch 3.1.0" in line


def test_a_fit_round_trips_through_the_file(tmp_path: Path) -> None:
    fit = _affine_fit()
    cal = from_fit(fit, "ovs-vswitchd (Open vSwitch) 3.1.0")
    f = _write(calibration_document(cal), tmp_path / "cal.json")
    back = load_ovs_calibration(f)
    assert back.constants == cal.constants
    assert back.constants.revalidate_ns_per_flow == pytest.approx(2408.0, rel=1e-9)
    assert back.machine.hostname == (platform.node() or "unknown host")
    assert back.levels == (10_000, 50_000, 100_000)
    assert back.source == str(f) and back.describe().startswith(f"calibration {f}: measured on")


def test_ovs_like_runs_with_the_files_constants() -> None:
    c = OvsConstants(host_base_bytes=1e8, host_bytes_per_flow=9000.0,
                     revalidate_ns_per_flow=2408.0, dump_ns_per_flow=3000.0)  # fmt: skip
    cfg = ovs_like(constants=c)
    assert cfg.flow_limit is not None
    assert (cfg.host_base_bytes, cfg.host_bytes_per_flow, cfg.revalidate_ns_per_flow,
            cfg.flow_limit.dump_ns_per_flow) == (1e8, 9000.0, 2408.0, 3000.0)  # fmt: skip
    # the closed form follows: revalidator CPU scales with ns per flow and pass
    flows = 100_000
    ratio = ovs_cost.revalidator_cpu_per_s(cfg, flows) / ovs_cost.revalidator_cpu_per_s(
        ovs_like(), flows
    )
    assert ratio == pytest.approx(2408.0 / OVS_REVALIDATE_NS_PER_FLOW, rel=1e-9)
    with pytest.raises(ConfigError, match="calibrated=False"):
        ovs_like(calibrated=False, constants=c)


def test_the_experiments_ovs_contender_gets_the_calibration() -> None:
    fit = from_fit(_affine_fit(), "ovs-vswitchd (Open vSwitch) 3.1.0")
    ecfg = EngineConfig(capacity=4096)
    policy = compile_policy(vpc_spec(64))
    for cal, ns in ((None, OVS_REVALIDATE_NS_PER_FLOW), (fit, 2408.0)):
        (ovs,) = [c for c in default_contenders(cal) if c.name == "ovs_like"]
        cp = ovs.build(ecfg, policy, None)
        assert cp.baseline.revalidate_ns_per_flow == pytest.approx(ns, rel=1e-9)


def _good(tmp_path: Path) -> dict:  # type: ignore[type-arg]
    return calibration_document(from_fit(_affine_fit(), "ovs-vswitchd (Open vSwitch) 3.1.0"))


def _bad_docs(tmp_path: Path) -> dict[str, tuple[str, str]]:
    """name: (file text, words the one line must hold)."""
    good = _good(tmp_path)

    def edit(path: tuple[str, ...], value: object) -> str:
        d = json.loads(json.dumps(good))
        node = d
        for k in path[:-1]:
            node = node[k]
        if value is KeyError:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return json.dumps(d)

    text = json.dumps(good)
    return {
        "truncated": (text[: len(text) // 2], "not valid YAML/JSON"),
        "a list": (json.dumps([good]), "cal.json"),
        "negative ns": (edit(("constants", "revalidate_ns_per_flow"), -1432.0),
                        "revalidate_ns_per_flow"),
        "zero bytes": (edit(("constants", "host_bytes_per_flow"), 0), "host_bytes_per_flow"),
        "nan": (edit(("constants", "dump_ns_per_flow"), ".nan"), "dump_ns_per_flow"),
        "text": (edit(("constants", "dump_ns_per_flow"), "abc"), "dump_ns_per_flow"),
        "1e308": (edit(("constants", "revalidate_ns_per_flow"), 1e308), "revalidate_ns_per_flow"),
        "missing constant": (edit(("constants", "host_base_bytes"), KeyError), "host_base_bytes"),
        "other format": (edit(("format",), "starfabric-ovs-calibration/9"), "format"),
        "unknown key": (edit(("revalidator_threads",), 2), "revalidator_threads"),
        "no machine": (edit(("machine",), KeyError), "machine"),
        "zero cpus": (edit(("machine", "cpus"), 0), "cpus"),
        "one level": (edit(("levels",), [10000]), "levels"),
    }  # fmt: skip


@pytest.mark.parametrize(
    "case",
    ["truncated", "a list", "negative ns", "zero bytes", "nan", "text", "1e308",
     "missing constant", "other format", "unknown key", "no machine", "zero cpus", "one level"],
)  # fmt: skip
def test_a_malformed_calibration_is_one_line_exit_2(case: str, tmp_path: Path) -> None:
    text, words = _bad_docs(tmp_path)[case]
    f = tmp_path / "cal.json"
    f.write_text(text)
    out = tmp_path / "out.json"
    res = runner.invoke(app, ["fornax", "experiment", "E1", "--scale", "ci", "--json", str(out),
                              "--out", str(tmp_path / "plots"), "--ovs-calibration", str(f)])  # fmt: skip
    lines = res.output.strip().splitlines()
    assert res.exit_code == 2, res.output
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.output
    assert str(f) in lines[0] and words in lines[0], lines[0]
    assert not out.exists()  # refused before anything ran


def test_a_missing_calibration_file_is_one_line(tmp_path: Path) -> None:
    res = runner.invoke(app, ["fornax", "experiment", "E1", "--scale", "ci",
                              "--ovs-calibration", str(tmp_path / "none.json")])  # fmt: skip
    assert res.exit_code == 2 and res.output.count("\n") == 1, res.output


def test_a_fit_that_is_not_positive_is_refused() -> None:
    fit = _affine_fit()
    bad = ovs_cost.Calibration(fit.host_base_bytes, -5.0, fit.revalidate_ns_per_flow,
                               fit.dump_ns_per_flow, fit.levels, fit.worst_residual)  # fmt: skip
    with pytest.raises(ConfigError, match="host_bytes_per_flow"):
        from_fit(bad, "ovs-vswitchd (Open vSwitch) 3.1.0")


REASON = unavailable_reason()


@pytest.mark.skipif(REASON is not None, reason=f"real OVS cannot run: {REASON}")
def test_a_real_ovs_run_gives_a_calibration_file(tmp_path: Path) -> None:
    """Two small levels of a private ovs-vswitchd, fitted and written as --calibrate does."""
    from starfabric.fornax.baselines import OVS_DP_FLOWS_PER_MODEL_FLOW
    from starfabric.fornax.baselines.ovs_real import scenario

    cfg = scenario.RunConfig(levels=(1000, 3000), cps=500.0, megaflows=False, window_s=1.0,
                             settle_s=3.0, warmup=0)  # fmt: skip
    res = scenario.run(cfg)
    figs = [ovs_cost.LevelFigures(lv.connections_held, lv.flows, lv.rss_growth_bytes,
                                  lv.cpu_per_s.get("revalidator", 0.0), lv.dump_ms_median)
            for lv in res.levels]  # fmt: skip
    fit = ovs_cost.fit(figs, OVS_DP_FLOWS_PER_MODEL_FLOW)
    cal = from_fit(fit, res.version)
    f = _write(calibration_document(cal), tmp_path / "cal.json")
    back = load_ovs_calibration(f)
    assert "Open vSwitch" in back.ovs_version
    c = back.constants
    assert np.isfinite([c.host_bytes_per_flow, c.revalidate_ns_per_flow]).all()
    # per model flow, a real OVS keeps kilobytes and spends 0.1-100 us per revalidator pass
    assert 100 < c.host_bytes_per_flow < 1e6 and 100 < c.revalidate_ns_per_flow < 1e5


BENCH = Path(__file__).resolve().parents[3] / "benchmarks" / "ovs_real.py"


@pytest.mark.parametrize(
    ("args", "words"),
    [(["--calibrate", "/proc/nope/cal.json"], "cannot write in /proc"),
     (["--calibrate", "/tmp"], "is a folder"),
     (["--calibrate", "cal.json", "--mode", "megaflow"], "fits the exact mode"),
     (["--levels", "abc"], "--levels 'abc'"),
     (["--levels", "0,5000"], "1..1,000,000"),
     (["--window", "nan"], "--window nan"),
     (["--cps", "-1"], "--cps -1.0")],
)  # fmt: skip
def test_the_benchmark_refuses_bad_options_before_any_ovs(
    args: list[str], words: str, tmp_path: Path
) -> None:
    """Checked before OVS is looked for, so these hold on machines without it too (a bad
    --calibrate path was found only after the whole run, as a FileNotFoundError)."""
    import subprocess
    import sys

    res = subprocess.run([sys.executable, str(BENCH), *args], capture_output=True, text=True,
                         cwd=tmp_path, timeout=120)  # fmt: skip
    out = (res.stdout + res.stderr).strip().splitlines()
    assert res.returncode == 2, res.stdout + res.stderr
    assert len(out) == 1 and out[0].startswith("error: ") and words in out[0], out
