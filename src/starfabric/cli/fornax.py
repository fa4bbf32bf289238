"""`starfabric fornax …`: the SmartNIC session engine, manager, experiments."""

from __future__ import annotations

import typer

from starfabric.cli._console import console as make_console
from starfabric.cli._options import given, needs
from starfabric.fornax import ranges as R
from starfabric.outputs import output_dir, output_file, write_bytes, write_json
from starfabric.ranges import check_int, option

fornax_app = typer.Typer(
    help="Fornax: hardware-centric SmartNIC session management.", no_args_is_help=True
)


# --- policy: the VPC model (fornax/vpc) -------------------------------------------------------
policy_app = typer.Typer(help="Tenant network policy: validate and inspect VPC files.")
fornax_app.add_typer(policy_app, name="policy")


@policy_app.command("check")
def policy_check(
    ctx: typer.Context,
    vpc_file: str = typer.Argument(..., metavar="VPC.yaml", help="Tenant network (YAML/JSON)."),
    explain: tuple[str, str, str, int] | None = typer.Option(
        None,
        "--explain",
        metavar="SRC DST PROTO DPORT",
        help="Decide one first packet and show the rules that did (ICMP: DPORT = type).",
    ),
    vni: int | None = typer.Option(
        None,
        "--vni",
        help="VNI of the explained packet (default: its source ENI's VPC).",
        callback=option("--vni", R.VNI),
    ),
    sport: int = typer.Option(
        40000,
        "--sport",
        help="Source port (ICMP: echo id) to explain.",
        callback=option("--sport", R.L4_PORT),
    ),
    json_out: str | None = typer.Option(
        None, "--json", help="Also write the result as JSON.", callback=output_file("--json")
    ),
) -> None:
    """Validate VPC.yaml and show what it compiles to."""

    needs(ctx, "vni", requires="explain", because="it sets the explained packet's VNI")
    needs(ctx, "sport", requires="explain", because="it sets the explained packet's port")

    from rich.table import Table

    from starfabric.fornax.vpc import compile_policy, load_vpc_spec
    from starfabric.fornax.vpc.report import compiled_bytes, summary
    from starfabric.fornax.vpc.report import explain as explain_packet
    from starfabric.units import format_bytes

    console = make_console()
    compiled = compile_policy(load_vpc_spec(vpc_file))
    rows = summary(compiled)
    ex = None
    if explain is not None:  # decided first, so a bad packet fails before any output
        src, dst, proto, dport = explain
        ex = explain_packet(compiled, src, dst, proto, dport, sport=sport, vni=vni)
    table = Table(title=f"{vpc_file}: valid", title_justify="left")
    for title in ("VPC", "VNI", "subnets", "ENIs", "SGs (rules)", "ACL rules", "prefixes",
                  "NAT IPs/EIPs", "actions"):  # fmt: skip
        table.add_column(title, justify="left" if title == "VPC" else "right")

    def cells(r: dict[str, int | str]) -> list[str]:
        return [
            str(r["subnets"]),
            str(r["enis"]),
            f"{r['security_groups']} ({r['sg_rules']})",
            str(r["acl_rules"]),
            str(r["prefixes"]),
            f"{r['nat_public_ips']}/{r['eips']}",
            str(r["actions"]),
        ]

    for r in rows:
        table.add_row(str(r["vpc"]), str(r["vni"]), *cells(r))
    keys = ("subnets", "enis", "security_groups", "sg_rules", "acl_rules", "prefixes",
            "nat_public_ips", "eips", "actions")  # fmt: skip
    totals: dict[str, int | str] = {k: sum(int(r[k]) for r in rows) for k in keys}
    table.add_row("total", "", *cells(totals), style="bold")
    console.print(table)
    console.print(
        f"{len(compiled.actions)} action rows, {len(compiled.route_names)} prefixes in "
        f"{compiled.n_tables} tables, {len(compiled.host_names)} hosts, "
        f"{len(compiled.peering_names)} peerings; compiled arrays "
        f"{format_bytes(compiled_bytes(compiled))}"
    )
    result: dict[str, object] = {"file": vpc_file, "vpcs": rows, "actions": len(compiled.actions)}
    if ex is not None:
        result["explain"] = ex
        pk = ex["packet"]
        verdict = "ALLOW" if ex["reason"] == "ALLOW" else f"DROP ({ex['reason']})"
        steps = Table(
            title=f"vni {pk['vni']} {pk['src']}:{pk['sport']} -> {pk['dst']}:{pk['dport']} "
            f"proto {pk['proto']}: {verdict}",
            title_justify="left",
        )
        steps.add_column("stage")
        steps.add_column("decided by")
        blame = {
            "NO_ENI": "eni", "NO_ROUTE": "route", "SG_DENY_OUT": "sg_out",
            "ACL_DENY_OUT": "acl_out", "ACL_DENY_IN": "acl_in", "SG_DENY_IN": "sg_in",
        }  # fmt: skip
        for stage, key in (
            ("session ENI", "eni"),
            ("route", "route"),
            ("SG egress", "sg_out"),
            ("ACL egress", "acl_out"),
            ("ACL ingress", "acl_in"),
            ("SG ingress", "sg_in"),
        ):
            shown = ex[key]
            if shown is None:
                shown = "no match: default deny" if blame.get(ex["reason"]) == key else "-"
            steps.add_row(stage, str(shown))
        steps.add_row("forward action", f"#{ex['handles']['fwd']} {ex['fwd']}")
        steps.add_row("reply", f"{ex['rev_reason']}: #{ex['handles']['rev']} {ex['rev']}")
        steps.add_row("NAT", f"{ex['nat_kind']} {ex['nat_pool'] or ''}".strip())
        steps.add_row("scopes", f"eni {ex['eni']}, vpc {ex['vpc']}; reply vni {ex['rev_vni']}")
        console.print(steps)
    if json_out:
        write_json(json_out, result, default=str)


# --- engine: the emulated SmartNIC session engine (fornax/engine) -----------------------------
@fornax_app.command("trace")
def engine_trace(
    ctx: typer.Context,
    src: str = typer.Option(..., "--src", help="Source ADDRESS:PORT (ICMP: PORT = echo id)."),
    dst: str = typer.Option(
        ..., "--dst", help="Destination ADDRESS:PORT (IPv6: \\[2001:db8::2]:443)."
    ),
    proto: str = typer.Option("tcp", "--proto", help="tcp, udp, icmp or icmpv6."),
    flags: str = typer.Option("", "--flags", help="TCP flags as letters: S, SA, A, FA, R, ."),
    vni: int = typer.Option(
        7, "--vni", help="Overlay VNI of the packet.", callback=option("--vni", R.VNI)
    ),
    port: int = typer.Option(
        0, "--port", help="Ingress port.", callback=option("--port", R.INGRESS_PORT)
    ),
    at: str = typer.Option("1s", "--time", help="Packet time on the engine clock (e.g. 1s)."),
    length: int = typer.Option(
        64, "--length", help="Packet length in bytes.", callback=option("--length", R.LENGTH)
    ),
    icmp_type: int = typer.Option(
        8,
        "--icmp-type",
        help="ICMP type (8 echo request, 0 reply).",
        callback=option("--icmp-type", R.ICMP_TYPE),
    ),
    scenario: str | None = typer.Option(
        None, "--scenario", help="YAML of sessions/bumps/flips/stalls to preload (else a demo set)."
    ),
) -> None:
    """Explain one packet's path through the session engine, stage by stage."""
    import ipaddress
    import sys

    from starfabric.errors import ConfigError
    from starfabric.fornax.explain import parse_endpoint

    p = proto.lower()
    if flags and p != "tcp":
        raise ConfigError(f"--flags {flags!r} with --proto {proto}: only TCP has flags",
                          fix="drop --flags, or use --proto tcp")  # fmt: skip
    if given(ctx, "icmp_type") and p not in ("icmp", "icmpv6"):
        raise ConfigError(f"--icmp-type with --proto {proto}: only ICMP has a type",
                          fix="drop --icmp-type, or use --proto icmp/icmpv6")  # fmt: skip
    fam = {ipaddress.ip_address(parse_endpoint(a, n)[0]).version
           for a, n in ((src, "--src"), (dst, "--dst"))}  # fmt: skip
    if len(fam) > 1:
        raise ConfigError(f"--src {src} and --dst {dst} mix IPv4 and IPv6",
                          fix="give two addresses of one family")  # fmt: skip
    if (p, fam.pop()) in (("icmp", 6), ("icmpv6", 4)):
        raise ConfigError(f"--proto {proto} does not match the addresses' IP version",
                          fix="use icmp for IPv4 and icmpv6 for IPv6")  # fmt: skip

    from starfabric.config import load_spec
    from starfabric.fornax.explain import (
        DEFAULT_SCENARIO,
        Scenario,
        build_engine,
        engine_ports,
        explain_packet,
    )
    from starfabric.units import parse_duration

    time_ns = check_int(
        "--time (ns)",
        round(parse_duration(at, "--time") * 1e9),
        R.TIME_NS,
        fix=f"give --time at most {R.TIME_NS.hi / 1e9:.4g}s (about 292 years)",
    )
    sc = load_spec(Scenario, scenario) if scenario else DEFAULT_SCENARIO
    eng = build_engine(sc)
    check_int("--port", port, engine_ports(eng.config))
    text = explain_packet(
        eng,
        vni=vni,
        proto=proto,
        src=src,
        dst=dst,
        flags=flags,
        port=port,
        time_ns=time_ns,
        length=length,
        icmp_type=icmp_type,
    )
    sys.stdout.write(text)


# --- run: workload through engine + manager (fornax/manager) -----------------------------------
@fornax_app.command("run")
def run(
    scenario_file: str = typer.Argument(..., metavar="SCENARIO.yaml", help="Scenario (YAML/JSON)."),
    json_out: str | None = typer.Option(
        None, "--json", help="Write the run summary as JSON.", callback=output_file("--json")
    ),
    prometheus_out: str | None = typer.Option(
        None,
        "--prometheus",
        help="Write the manager's metrics as Prometheus text.",
        callback=output_file("--prometheus"),
    ),
    datapath: str = typer.Option(
        "emulated",
        "--datapath",
        help="emulated (the numba NIC) or linux (nf_conntrack + nftables in network "
        "namespaces, real packets; needs root, nftables and conntrack in the kernel).",
    ),
) -> None:
    """Replay a workload against a VPC through the emulated NIC (or the Linux kernel's session
    table, --datapath linux) and the software manager."""
    import sys

    from rich.progress import Progress

    from starfabric.fornax.guards import check_workload_memory
    from starfabric.fornax.run.datapath import datapath_factory
    from starfabric.fornax.run.report import print_summary
    from starfabric.fornax.run.scenario import load_scenario, run_scenario

    console = make_console()
    factory = datapath_factory(datapath)  # a missing kernel feature fails before any work
    scenario, base = load_scenario(scenario_file)
    check_workload_memory(scenario.workload, scenario_file)  # before any work starts
    metrics: dict[str, bytes] = {}
    with (
        factory as make,
        Progress(console=console, transient=True, disable=not sys.stdout.isatty()) as bar,
    ):
        task = bar.add_task("replaying", total=1.0)
        result = run_scenario(
            scenario, base, engine_factory=make,
            progress=lambda f: bar.update(task, completed=f), metrics_out=metrics,
        )  # fmt: skip
        result.update(factory.report())
    print_summary(console, result, title=scenario_file)
    if json_out:
        write_json(json_out, result, sort_keys=True)
        console.print(f"wrote {json_out}", markup=False)
    if prometheus_out:
        write_bytes(prometheus_out, metrics["prometheus"])
        console.print(f"wrote {prometheus_out}", markup=False)


# --- experiment: the paper's experiments against the baselines (fornax/experiments) -----------
@fornax_app.command("experiment")
def experiment(
    name: str = typer.Argument(
        ..., metavar="NAME|all", help="E1..E9, hero, all, or a comma list (E1,E2,E3)."
    ),
    scale: str = typer.Option("default", "--scale", help="ci (seconds), default or paper."),
    json_out: str | None = typer.Option(
        None,
        "--json",
        help="Write every result as JSON (rewritten after each experiment).",
        callback=output_file("--json"),
    ),
    out_dir: str = typer.Option(
        "out/experiments",
        "--out",
        help="Folder for one PNG plot per experiment.",
        callback=output_dir("--out"),
    ),
    ovs_calibration: str | None = typer.Option(
        None,
        "--ovs-calibration",
        metavar="FILE",
        help="The OVS-like model's constants from `benchmarks/ovs_real.py --calibrate FILE` "
        "on your machine (default: the built-in calibration; the report says which ran).",
    ),
) -> None:
    """Run the Fornax paper's experiments with Fornax and the software-centric baselines."""
    import sys
    from pathlib import Path

    from rich.progress import Progress

    from starfabric.fornax.experiments import get_scale
    from starfabric.fornax.experiments.output import write_json as write_doc
    from starfabric.fornax.experiments.runner import names_for, run_experiments

    names_for(name)  # a bad name, scale or calibration fails before anything runs
    get_scale(scale)
    cal = None
    if ovs_calibration is not None:
        from starfabric.fornax.baselines import load_ovs_calibration

        cal = load_ovs_calibration(ovs_calibration)
    console = make_console()
    with Progress(console=console, transient=True, disable=not sys.stdout.isatty()) as bar:
        doc = run_experiments(
            name, scale, out_dir=Path(out_dir), console=console, progress=bar,
            on_result=(lambda d: write_doc(d, Path(json_out))) if json_out else None,
            ovs_calibration=cal,
        )  # fmt: skip
    for key in ("storage_ratio", "cpu_ratio", "zero_drop_cps_ratio"):
        if key in doc:
            v = doc[key]
            console.print(f"{key} (Fornax / OVS-like): {'-' if v is None else f'{v:.4g}'}")
    console.print(f"plots in {out_dir}/")
    if json_out:
        write_doc(doc, Path(json_out))
        console.print(f"wrote {json_out}")


# --- chaos: faults injected under traffic (fornax/run/chaos.py) ------------------------------
@fornax_app.command("chaos")
def chaos(
    chaos_file: str = typer.Argument(..., metavar="SCENARIO.yaml", help="Chaos spec (YAML/JSON)."),
    json_out: str | None = typer.Option(
        None, "--json", help="Write the full report as JSON.", callback=output_file("--json")
    ),
    trace_out: str | None = typer.Option(
        None,
        "--trace",
        help="Write faults and failovers as a Chrome-trace/Perfetto timeline.",
        callback=output_file("--trace"),
    ),
    datapath: str = typer.Option(
        "emulated",
        "--datapath",
        help="emulated, or linux: the faults with a kernel twin (ring_overflows, crashes) "
        "over nf_conntrack in network namespaces with real packets.",
    ),
) -> None:
    """Run traffic, policy changes and injected faults together; report each fault class."""
    import sys

    from rich.progress import Progress
    from rich.table import Table

    from starfabric.fornax.guards import check_workload_memory
    from starfabric.fornax.run.chaos import run_chaos
    from starfabric.fornax.run.chaos_report import summary_rows
    from starfabric.fornax.run.chaos_spec import load_chaos
    from starfabric.fornax.run.datapath import check_kernel_twins, datapath_factory

    console = make_console()
    factory = datapath_factory(datapath)
    spec, base = load_chaos(chaos_file)
    if datapath == "linux":
        check_kernel_twins(spec, chaos_file)
    check_workload_memory(spec.workload, chaos_file)
    with (
        factory as make,
        Progress(console=console, transient=True, disable=not sys.stdout.isatty()) as bar,
    ):
        task = bar.add_task("chaos", total=1.0)
        report = run_chaos(spec, base, progress=lambda f: bar.update(task, completed=f),
                           engine_factory=make)  # fmt: skip

    def fmt(v: object) -> str:
        return "-" if v is None else f"{v * 1e3:.1f}" if isinstance(v, float) else str(v)

    table = Table(title=f"{chaos_file}: faults", title_justify="left")
    for col in ("fault", "count", "detected", "in bound", "scope", "detect ms (max)",
                "failover ms", "failback ms", "lost", "misforwarded"):  # fmt: skip
        table.add_column(col, justify="left" if col in ("fault", "scope") else "right")
    for r in summary_rows(report):
        table.add_row(
            r["fault"], str(r["count"]), str(r["detected"]), str(r["within_bound"]),
            ",".join(r["scopes"]), fmt(r["detect_s_max"]), fmt(r["failover_s_max"]),
            fmt(r["failback_s_max"]), str(r["lost"]), str(r["misforwarded"]),
        )  # fmt: skip
    console.print(table)
    p, o = report["packets"], report["oracle"]
    console.print(
        f"packets {p['offered']}: hardware {p['hw_forwarded']}, software {p['sw_forwarded']}, "
        f"policy drop {p['policy_drop']}, lost {p['named_drop']} "
        f"({', '.join(f'{k} {v}' for k, v in p['named_drop_reasons'].items() if v) or 'none'})"
    )
    console.print(
        f"against the fault-free oracle: misforwarded {o['misforwarded']}, lost {o['lost']}; "
        f"patrol period {report['patrol_period_s'] * 1e3:.1f} ms"
    )
    if json_out:
        write_json(json_out, report, sort_keys=True, default=int)
        console.print(f"wrote {json_out}", markup=False)
    if trace_out:
        from starfabric.fornax.run.chaos_report import chrome_trace

        chrome_trace(report).write(trace_out)
        console.print(f"wrote {trace_out}")
