"""Fornax's integer fields refuse the same out-of-range values with the same words from the
CLI, the YAML loaders and the Python API (issue 29: `fornax trace --vni -1` was an
OverflowError traceback): "FIELD=VALUE is outside LO..HI (DOMAIN)", exit code 2, one line."""

from __future__ import annotations

import copy
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from starfabric.cli import app
from starfabric.config import load_spec, read_mapping
from starfabric.errors import ConfigError
from starfabric.fornax import ranges as R
from starfabric.fornax.engine import FlowKeys
from starfabric.fornax.engine.interface import ENTRY_DTYPE
from starfabric.fornax.explain import DEFAULT_SCENARIO, Scenario, build_engine, explain_packet
from starfabric.fornax.packets import COLUMN_DTYPES, COLUMN_RANGES, PacketBatch
from starfabric.fornax.run.chaos_spec import load_chaos
from starfabric.fornax.run.scenario import load_scenario
from starfabric.fornax.vpc import compile_policy, load_vpc_spec
from starfabric.fornax.vpc.report import explain as explain_policy
from starfabric.ranges import IntRange

EX = Path(__file__).resolve().parents[2] / "examples"
TRACE = ["fornax", "trace", "--src", "10.0.0.1:1234", "--dst", "10.0.0.2:80"]
EXPLAIN = ["fornax", "policy", "check", str(EX / "vpc.yaml"), "--explain", "10.0.1.10"]
runner = CliRunner()


def refused(args: list[str]) -> str:
    """Run the CLI; assert exit 2, one `error:` line, no traceback; return the line."""
    res = runner.invoke(app, args)
    out = res.output.strip()
    assert res.exit_code == 2, f"{args}: exit {res.exit_code}: {out[-600:]} {res.exception!r}"
    assert "Traceback" not in res.output
    lines = out.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "(fix: " in lines[0], out
    return lines[0]


def accepted(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, f"{args}: {res.output[-600:]} {res.exception!r}"


def api_error(call: Callable[[], object]) -> str:
    with pytest.raises(ConfigError) as e:
        call()
    return e.value.one_line()


def core(v: int, r: IntRange) -> str:
    """The words every boundary uses after the field's name."""
    return f"={v} is outside {r}"


# --- the table ---------------------------------------------------------------------------------
def test_ranges_come_from_the_column_dtypes() -> None:
    for name, dt in COLUMN_DTYPES.items():
        full = IntRange.of_dtype(dt)
        r = COLUMN_RANGES[name]
        assert full.lo <= r.lo <= r.hi <= full.hi, name
    assert COLUMN_RANGES["vni"] == R.VNI and (R.VNI.lo, R.VNI.hi) == (0, 2**24 - 1)
    assert (R.L4_PORT.hi, R.PROTOCOL.hi, R.ICMP_TYPE.hi) == (65535, 255, 255)
    # the session fields' ranges are the entry record's dtypes
    for field, r in (("action_orig", R.ACTION), ("eni_scope", R.SCOPE_ID),
                     ("vpc_version", R.VERSION), ("aux", R.AUX)):  # fmt: skip
        full = IntRange.of_dtype(ENTRY_DTYPE[field])
        assert (r.lo, r.hi) == (full.lo, full.hi), field


@pytest.mark.parametrize("name", sorted(COLUMN_RANGES))
def test_from_columns_takes_the_bounds_and_refuses_beyond(name: str) -> None:
    r = COLUMN_RANGES[name]
    b = PacketBatch.from_columns(**{name: [r.lo, r.hi]})
    assert [int(x) for x in getattr(b, name)] == [r.lo, r.hi]
    for v in (r.lo - 1, r.hi + 1):
        msg = api_error(lambda v=v: PacketBatch.from_columns(**{name: [v]}))
        assert msg.startswith(f"{name}{core(v, r)}"), msg
        msg = api_error(lambda v=v: PacketBatch.from_columns(**{name: [r.lo, v]}))
        assert msg.startswith(f"{name}[1]{core(v, r)}"), msg


def test_flow_keys_refuse_like_batches() -> None:
    assert api_error(lambda: FlowKeys.from_columns(vni=[-1])).startswith("vni" + core(-1, R.VNI))
    msg = api_error(lambda: FlowKeys.single(1 << 24, 6, "10.0.0.1", "10.0.0.2", 1, 2))
    assert msg.startswith("vni" + core(1 << 24, R.VNI))


# --- one field, three boundaries ---------------------------------------------------------------
def _yaml(tmp: Path, name: str, data: dict[str, Any]) -> Path:
    p = tmp / name
    p.write_text(yaml.safe_dump(data))
    return p


def _trace_scenario(tmp: Path, **session: Any) -> Path:
    d = DEFAULT_SCENARIO.model_dump()
    d["sessions"][0].update(session)
    return _yaml(tmp, "sc.yaml", d)


def _vpc(tmp: Path, edit: Callable[[dict[str, Any]], None]) -> Path:
    d = read_mapping(EX / "vpc-small.yaml")
    edit(d)
    return _yaml(tmp, "vpc.yaml", d)


def _rule(**kw: Any) -> Callable[[dict[str, Any]], None]:
    def edit(d: dict[str, Any]) -> None:
        d["tenants"][0]["vpcs"][0]["security_groups"][0]["rules"][0].update(kw)

    return edit


def _scenario(tmp: Path, workload: dict[str, Any] | None = None, **edits: Any) -> Path:
    """examples/scenario.yaml with `edits` to its workload (or another `workload`)."""
    d = read_mapping(EX / "scenario.yaml")
    d["vpc"] = str(EX / "vpc.yaml")
    d["workload"].pop("policy_changes")
    d["workload"] = workload or {**d["workload"], **edits}
    return _yaml(tmp, "run.yaml", d)


def _engine() -> Any:
    return build_engine(DEFAULT_SCENARIO)


_policy = None


def _compiled() -> Any:
    global _policy
    if _policy is None:
        _policy = compile_policy(load_vpc_spec(EX / "vpc.yaml"))
    return _policy


#: field -> (its range, {boundary: a function of (value, tmp) giving the error line})
CASES: dict[str, tuple[IntRange, dict[str, Callable[[int, Path], str]]]] = {
    "vni": (R.VNI, {
        "cli trace": lambda v, t: refused([*TRACE, "--vni", str(v)]),
        "cli policy": lambda v, t: refused([*EXPLAIN, "10.0.2.10", "tcp", "80", "--vni", str(v)]),
        "yaml trace": lambda v, t: refused([*TRACE, "--scenario",
                                            str(_trace_scenario(t, vni=v))]),
        "yaml vpc": lambda v, t: api_error(lambda: load_vpc_spec(
            _vpc(t, lambda d: d.update(gateway_vni=v)))),
        "yaml pcap": lambda v, t: api_error(lambda: load_scenario(_scenario(
            t, {"kind": "pcap", "path": "x.pcap", "default_vni": v}))),
        "api batch": lambda v, t: api_error(lambda: PacketBatch.from_columns(vni=[v])),
        "api explain": lambda v, t: api_error(lambda: explain_packet(
            _engine(), vni=v, proto="tcp", src="10.0.0.1:1", dst="10.0.0.2:2")),
        "api policy": lambda v, t: api_error(lambda: explain_policy(
            _compiled(), "10.0.1.10", "10.0.2.10", "tcp", 80, vni=v)),
    }),
    "l4 port": (R.L4_PORT, {
        "cli policy": lambda v, t: refused([*EXPLAIN, "10.0.2.10", "tcp", "80", "--sport", str(v)]),
        "cli policy dport": lambda v, t: refused([*EXPLAIN, "10.0.2.10", "tcp", str(v)]),
        "yaml rule": lambda v, t: api_error(lambda: load_vpc_spec(_vpc(t, _rule(ports=v)))),
        "yaml rule range": lambda v, t: api_error(lambda: load_vpc_spec(
            _vpc(t, _rule(ports=[0, v] if v > 0 else [v, 10])))),
        "yaml workload": lambda v, t: api_error(lambda: load_scenario(_scenario(t, tcp_ports=[80, v]))),
        "api batch": lambda v, t: api_error(lambda: PacketBatch.from_columns(sport=[v])),
    }),
    "protocol": (R.PROTOCOL, {
        "yaml rule": lambda v, t: api_error(lambda: load_vpc_spec(_vpc(t, _rule(protocol=v, ports=None)))),
        "api batch": lambda v, t: api_error(lambda: PacketBatch.from_columns(proto=[v])),
    }),
    "icmp type": (R.ICMP_TYPE, {
        "cli trace": lambda v, t: refused([*TRACE[:2], "--src", "10.0.0.1:1", "--dst", "10.0.0.2:0",
                                           "--proto", "icmp", "--icmp-type", str(v)]),
        "cli policy": lambda v, t: refused([*EXPLAIN, "10.0.2.10", "icmp", str(v)]),
        "yaml rule": lambda v, t: api_error(lambda: load_vpc_spec(
            _vpc(t, _rule(protocol="icmp", ports=None, icmp_type=v)))),
        "api explain": lambda v, t: api_error(lambda: explain_packet(
            _engine(), vni=7, proto="icmp", src="10.0.0.1:1", dst="10.0.0.2:0", icmp_type=v)),
    }),
    "ingress port": (R.INGRESS_PORT, {
        "cli trace": lambda v, t: refused([*TRACE, "--port", str(v)]),
        "api batch": lambda v, t: api_error(lambda: PacketBatch.from_columns(port=[v])),
    }),
    "length": (R.LENGTH, {
        "cli trace": lambda v, t: refused([*TRACE, "--length", str(v)]),
        "api batch": lambda v, t: api_error(lambda: PacketBatch.from_columns(length=[v])),
        "api explain": lambda v, t: api_error(lambda: explain_packet(
            _engine(), vni=7, proto="tcp", src="10.0.0.1:1", dst="10.0.0.2:2", length=v)),
    }),
    "eni scope": (R.SCOPE_ID, {
        "yaml trace": lambda v, t: refused([*TRACE, "--scenario", str(_trace_scenario(t, eni_scope=v))]),
        "yaml api": lambda v, t: api_error(lambda: load_spec(Scenario, _trace_scenario(t, eni_scope=v))),
    }),
    "action": (R.ACTION, {
        "yaml trace": lambda v, t: refused([*TRACE, "--scenario", str(_trace_scenario(t, action_orig=v))]),
    }),
    "version": (R.VERSION, {
        "yaml trace": lambda v, t: refused([*TRACE, "--scenario", str(_trace_scenario(t, vpc_version=v))]),
    }),
    "aux": (R.AUX, {
        "yaml trace": lambda v, t: refused([*TRACE, "--scenario", str(_trace_scenario(t, aux=v))]),
    }),
    "seed": (R.SEED, {
        "yaml workload": lambda v, t: api_error(lambda: load_scenario(_scenario(t, seed=v))),
    }),
}  # fmt: skip
PAIRS = [(f, b) for f, (_, bs) in CASES.items() for b in bs]


@pytest.mark.parametrize(("field", "boundary"), PAIRS, ids=[f"{f}-{b}" for f, b in PAIRS])
@pytest.mark.parametrize("side", ["below", "above"])
def test_each_boundary_refuses_beyond_the_range_alike(
    field: str, boundary: str, side: str, tmp_path: Path
) -> None:
    r, boundaries = CASES[field]
    v = r.lo - 1 if side == "below" else r.hi + 1
    line = boundaries[boundary](v, tmp_path)
    assert core(v, r) in line, line
    assert f"a whole number in {r.lo}..{r.hi})" in line, line


def test_the_same_value_reads_the_same_everywhere(tmp_path: Path) -> None:
    """The words after the field's name are identical at every boundary of one field."""
    for field, (r, boundaries) in CASES.items():
        v = r.hi + 1
        tails = {
            b: re.sub(
                r"give .+? a whole", "give FIELD a whole", fn(v, tmp_path).split(core(v, r))[1]
            )
            for b, fn in boundaries.items()
        }
        assert len(set(tails.values())) == 1, (field, tails)


def test_yaml_names_the_file_and_the_field(tmp_path: Path) -> None:
    p = _trace_scenario(tmp_path, vni=-1)
    assert refused([*TRACE, "--scenario", str(p)]) == (
        f"error: {p}: sessions[0].vni=-1 is outside 0..16777215 (24-bit VXLAN/Geneve VNI, "
        "RFC 7348) (fix: give sessions[0].vni a whole number in 0..16777215)"
    )
    msg = api_error(lambda: load_vpc_spec(_vpc(tmp_path, _rule(ports=70000))))
    assert ".security_groups[0].rules[0].ports=70000 is outside 0..65535" in msg, msg


def test_a_vpc_vni_starts_at_one(tmp_path: Path) -> None:
    def vni(v: int) -> Callable[[dict[str, Any]], None]:
        return lambda d: d["tenants"][0]["vpcs"][0].update(vni=v)

    msg = api_error(lambda: load_vpc_spec(_vpc(tmp_path, vni(0))))
    assert "tenants[0].vpcs[0].vni=0 is outside 1..16777215" in msg, msg
    assert load_vpc_spec(_vpc(tmp_path, vni(2**24 - 1)))


def test_chaos_stall_port_and_seed(tmp_path: Path) -> None:
    d = read_mapping(EX / "chaos-mixed.yaml")
    d["vpc"] = str(EX / "vpc.yaml")
    d["workload"].pop("policy_changes")
    for edit, words in (
        (lambda c: c["faults"]["stalls"][0].update(port=-1), "faults.stalls[0].port=-1 is outside"),
        (lambda c: c.update(seed=-1), "seed=-1 is outside 0..18446744073709551615"),
    ):
        c = copy.deepcopy(d)
        edit(c)
        assert words in api_error(lambda c=c: load_chaos(_yaml(tmp_path, "chaos.yaml", c)))


# --- the bounds themselves are accepted --------------------------------------------------------
@pytest.mark.parametrize(
    "extra",
    [
        ["--vni", "0"],
        ["--vni", str(2**24 - 1)],
        ["--port", "0"],
        ["--port", "3"],  # the default scenario's engine has 4 ports
        ["--length", "0"],
        ["--length", str(2**32 - 1)],
        ["--proto", "udp"],
    ],
)
def test_trace_accepts_the_bounds(extra: list[str]) -> None:
    accepted([*TRACE, *extra])


@pytest.mark.parametrize("icmp_type", ["0", "255"])
def test_trace_accepts_icmp_type_bounds(icmp_type: str) -> None:
    accepted([*TRACE[:2], "--src", "10.0.0.1:1", "--dst", "10.0.0.2:0", "--proto", "icmp",
              "--icmp-type", icmp_type])  # fmt: skip


@pytest.mark.parametrize(
    "extra",
    [
        ["tcp", "0", "--sport", "0"],
        ["tcp", "65535", "--sport", "65535"],
        ["icmp", "0"],
        ["icmp", "255"],
        ["255", "0"],
        ["tcp", "80", "--vni", "0"],
        ["tcp", "80", "--vni", str(2**24 - 1)],
    ],
)
def test_policy_explain_accepts_the_bounds(extra: list[str], tmp_path: Path) -> None:
    vni = [] if "--vni" in extra else ["--vni", "1001"]  # 10.0.1.10 is an ENI in 3 VPCs
    accepted([*EXPLAIN, "10.0.2.10", *extra, *vni])


@pytest.mark.parametrize("proto", ["0", "256", "-1"])
def test_policy_explain_protocol_number(proto: str) -> None:
    """A packet's protocol is 1..255 (0 means "any protocol" only in a rule)."""
    line = refused([*EXPLAIN, "10.0.2.10", proto, "80", "--vni", "1001"])
    assert line.startswith(f"error: --explain PROTO={int(proto)} is outside 1..255 (IP protocol")


def test_engine_ports_beyond_n_ports_named_with_the_engine() -> None:
    line = refused([*TRACE, "--port", "4"])
    assert line.startswith("error: --port=4 is outside 0..3 (the engine's ports: n_ports = 4)")


def test_time_beyond_the_clock_refused_in_seconds() -> None:
    line = refused([*TRACE, "--time", "1e30s"])
    assert "is outside 0..9223372036854775807" in line and "--time at most 9.223e+09s" in line


# --- fuzz: any integer on any option of `fornax trace` ---------------------------------------
_INT = st.one_of(
    st.sampled_from([-1, 0, 3, 4, 255, 256, 65535, 65536, 2**24 - 1, 2**24, 2**32, 2**64]),
    st.integers(min_value=-(2**70), max_value=2**70),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    option=st.sampled_from(["--vni", "--port", "--length", "--icmp-type", "src", "dst"]),
    value=_INT,
    proto=st.sampled_from(["tcp", "icmp"]),
)
def test_fuzz_trace_integer_options(option: str, value: int, proto: str) -> None:
    src, dst = "10.0.0.1:1234", "10.0.0.2:80"
    args = ["fornax", "trace", "--proto", proto]
    if option == "src":
        src = f"10.0.0.1:{value}"
    elif option == "dst":
        dst = f"10.0.0.2:{value}"
    elif option == "--icmp-type" and proto != "icmp":
        args += ["--proto", "icmp", "--icmp-type", str(value)]
    else:
        args += [option, str(value)]
    res = runner.invoke(app, [*args, "--src", src, "--dst", dst])
    assert res.exit_code in (0, 2), (args, res.output, res.exception)
    assert res.exception is None or isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in res.output
    if res.exit_code == 2:
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), res.output


def test_numpy_ints_pass_through_spec_fields() -> None:
    assert PacketBatch.from_columns(vni=np.uint32(5)).vni[0] == 5
