"""`starfabric fornax policy check`: the compiled summary, --explain, one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from starfabric.cli import app

ROOT = Path(__file__).resolve().parents[3]
VPC = str(ROOT / "examples" / "vpc.yaml")
runner = CliRunner()


def test_check_shows_counts_per_vpc(tmp_path: Path) -> None:
    out = tmp_path / "check.json"
    res = runner.invoke(app, ["fornax", "policy", "check", VPC, "--json", str(out)])
    assert res.exit_code == 0, res.output
    for name in ("acme/prod", "acme/staging", "globex/main", "platform/shared", "total"):
        assert name in res.output
    data = json.loads(out.read_text())
    prod = next(r for r in data["vpcs"] if r["vpc"] == "acme/prod")
    assert (prod["vni"], prod["enis"], prod["subnets"], prod["eips"]) == (1001, 6, 3, 3)
    assert sum(r["enis"] for r in data["vpcs"]) == 12


def test_explain_names_the_deciding_rules() -> None:
    res = runner.invoke(
        app,
        ["fornax", "policy", "check", VPC, "--explain", "10.0.1.10", "10.0.3.10", "tcp", "5432",
         "--vni", "1001"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "DROP (SG_DENY_IN)" in res.output
    assert "no match: default deny" in res.output
    assert "acme/prod/web#3: egress" in res.output  # the egress rule that let it leave


def test_ambiguous_source_and_bad_file_are_one_line_errors(tmp_path: Path) -> None:
    res = runner.invoke(
        app,
        ["fornax", "policy", "check", VPC, "--explain", "10.0.1.10", "10.0.3.10", "tcp", "5432"],
    )
    assert res.exit_code == 2
    assert res.output.strip().startswith("error: --explain source 10.0.1.10 is an ENI in 3 VPCs")
    bad = tmp_path / "bad.yaml"
    bad.write_text(
        "hosts: [{name: h}]\n"
        "tenants: [{name: t, vpcs: [{name: v, vni: 5, cidrs: [10.0.0.0/16],"
        " subnets: [{name: s, cidr: 10.9.0.0/24}]}]}]\n"
    )
    res = runner.invoke(app, ["fornax", "policy", "check", str(bad)])
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1
    assert (
        "vpc 't/v' subnet 's': cidr 10.9.0.0/24 is not inside the VPC's cidrs 10.0.0.0/16"
        in res.output
    )
