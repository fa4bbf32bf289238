"""`starfabric astral …`: topology, network simulation, Seer, monitor."""

from __future__ import annotations

from typing import Any

import typer
from rich.markup import escape

from starfabric.cli._console import console
from starfabric.cli._options import MAX_SEEDS, at_least, between, excludes, seed_option
from starfabric.outputs import output_dir, output_file, write_json, write_text

astral_app = typer.Typer(
    help="Astral: LLM-training datacenter network, power, Seer and monitor.", no_args_is_help=True
)

# --- sim: collectives on a topology, design comparison, DeepEP, nccl-tests fit (issue 5) -----
from starfabric.cli.astral_sim import sim_app  # noqa: E402

astral_app.add_typer(sim_app, name="sim")

# --- power: job power timeline, plant over a year, provisioning (issue 31) ------------------
from starfabric.cli.astral_power import power_app  # noqa: E402

astral_app.add_typer(power_app, name="power")

MAX_PAIRS = 10_000_000
"""Assumption: GPU pairs `topo compare --pairs` samples for hop counts at most; hop counts
settle within 1% by 20,000 (the default) and each pair costs ~100 bytes of routing arrays."""


# --- seer: operator-level training performance prediction (issue 7) -------------------------

seer_app = typer.Typer(
    help="Seer: predict a training job's iteration timeline.", no_args_is_help=True
)
astral_app.add_typer(seer_app, name="seer")


@seer_app.command("predict")
def seer_predict(
    job: str = typer.Argument(
        ..., help="Job YAML {model, execution, system}, or a Megatron-LM launch script."
    ),
    as_json: bool = typer.Option(False, "--json", help="Print the prediction as JSON."),
    gpu: str = typer.Option("", "--gpu", help="GPU type (overrides the job's system.gpu)."),
    gpus: int | None = typer.Option(
        None, "--gpus", help="GPU count (overrides system.gpus).", callback=at_least("--gpus")
    ),
    trace: str = typer.Option(
        "",
        "--trace",
        help="Write a Chrome-trace JSON of one iteration.",
        callback=output_file("--trace"),
    ),
    profile: str = typer.Option("", "--profile", help="Calibrated profile from 'seer calibrate'."),
    cudnn: str = typer.Option(
        "",
        "--cudnn",
        help="The run's cuDNN release (e.g. 9.4 or 9.19.1; overrides execution.cudnn_release): "
        "on Hopper, cuDNN's fused attention at that release's measured rate (seer.cudnn_release).",
    ),
    production: bool = typer.Option(
        False,
        "--production",
        help="Also print the run's expected goodput (ETTR: restarts after failures, lost work) "
        "and the whole-run average iteration time (seer.goodput).",
    ),
    train_tokens: float | None = typer.Option(
        None,
        "--train-tokens",
        help="Tokens of the whole pre-training: print its wall-clock days (implies --production).",
        callback=at_least("--train-tokens", 1),
    ),
) -> None:
    """Predict one iteration: time, breakdown, TFLOP/s, MFU, memory and OOM verdict, and how far
    off Seer has been on measured runs of the same classes (seer.trust)."""
    import json

    from rich.table import Table

    from starfabric.astral.seer import load_job, predict, write_trace
    from starfabric.astral.seer.calibrate import apply_profile
    from starfabric.astral.seer.goodput import production_summary
    from starfabric.astral.seer.hf_config import check_seq_len
    from starfabric.astral.seer.predict import cudnn_release_note, with_cudnn_release

    overrides: dict[str, object] = {}
    if gpu:
        overrides["gpu"] = gpu
    if gpus is not None:
        overrides["gpus"] = gpus
    the_job = load_job(job, overrides or None)
    if cudnn:
        the_job = with_cudnn_release(the_job, cudnn)
    check_seq_len(the_job.model, the_job.execution.seq_len, "execution.seq_len")
    if profile:
        the_job = apply_profile(the_job, profile)
    pred = predict(the_job)
    out = pred.summary()
    # Choices Seer made that the user's options did not move (--cudnn off Hopper or off cuDNN).
    out["notes"] = [n for n in (cudnn_release_note(the_job),) if n]
    if trace:
        write_trace(pred, trace)
        out["trace"] = trace
    if production or train_tokens is not None:
        out["production"] = production_summary(
            pred.iteration_s, out["tokens_per_s"], the_job.system.gpus, str(out["gpu"]),
            the_job.system.gpus_per_node, train_tokens,
        )  # fmt: skip
    trust_lines = _trust(pred, out)
    if as_json:
        typer.echo(json.dumps(out, indent=2))
        return
    con = console()
    lay = out["layout"]
    con.print(
        f"[bold]{escape(str(out['model']))}[/] ({out['params'] / 1e9:.1f}B params) on {out['gpus']} x "
        f"{out['gpu']}: tp={lay['tp']} pp={lay['pp']} vpp={lay['vpp']} dp={lay['dp']} "
        f"cp={lay['cp']} ep={lay['ep']} micro-batches={lay['micro_batches']}"
    )
    tab = Table("component", "seconds", "share")
    for key, val in out["breakdown_s"].items():
        tab.add_row(key, f"{val:.4f}", f"{val / out['iteration_s']:.1%}")
    tab.add_row("[bold]iteration[/]", f"{out['iteration_s']:.4f}", "100%")
    con.print(tab)
    for line in trust_lines:
        con.print(escape(line), soft_wrap=True)
    tf = out["tflops_per_gpu"]
    con.print(
        f"tokens/s {out['tokens_per_s']:,.0f}  MFU {out['mfu']:.1%}  HFU {out['hfu']:.1%}  "
        f"TFLOP/s/GPU model {tf['model']:.1f} hardware {tf['hardware']:.1f}"
    )
    mem = out["memory_gib"]
    verdict = "[red]OOM[/]" if out["oom"] else "fits"
    con.print(
        f"memory/GPU (stage {mem['stage']}): {mem['total']:.1f} of {mem['capacity']:.0f} GiB "
        f"(weights {mem['weights']:.1f}, grads {mem['grads']:.1f}, optimizer "
        f"{mem['optimizer']:.1f}, activations {mem['activations']:.1f}) — {verdict}"
    )
    if mem["offloaded"]:
        con.print(f"offloaded to the second memory tier: {mem['offloaded']:.1f} GiB")
    if mem.get("host_optimizer"):
        con.print(f"optimizer offloaded to host memory (CPU Adam): {mem['host_optimizer']:.1f} GiB")
    if "production" in out:
        prod = out["production"]
        days = (
            f"; {prod['train_tokens']:.3g} tokens in {prod['training_days']:.1f} days"
            if "training_days" in prod else ""
        )  # fmt: skip
        con.print(
            f"production: ETTR {prod['ettr']:.1%} (MTTF {prod['mttf_h']:.1f} h, "
            f"{prod['lost_h_per_interruption']:.2f} h lost per interruption); whole-run "
            f"average iteration {prod['iteration_s']:.4f} s{days}"
        )
    for note in out["notes"]:
        con.print(f"[yellow]{escape(note)}[/]")
    if str(out["efficiency_basis"]).startswith("estimate"):
        con.print(f"[yellow]{out['gpu']} kernel efficiency: {escape(out['efficiency_basis'])}[/]")
    if trace:
        con.print(f"trace: {trace}")


def _trust(pred: Any, out: dict[str, Any]) -> list[str]:
    """Seer's error on measured runs of the prediction's classes (seer.trust): put in `out`
    under "trust", returned as the lines to print; an unreadable bundled table, or a job with
    its own efficiency parameters, is one line."""
    from starfabric.astral.seer.trust import lines, trust_for
    from starfabric.errors import DataError

    if pred.job.system.efficiency:
        # The table holds Seer's errors at its own efficiency parameters; a calibrated profile
        # or a job's system.efficiency makes another predictor, whose errors it does not hold.
        why = ("the job overrides Seer's efficiency parameters (--profile or system.efficiency); "
               "the ranges hold for Seer's own")  # fmt: skip
        out["trust"] = {"unavailable": why}
        return [f"Runs like this one: error ranges not stated ({why})"]
    try:
        t = trust_for(pred)
    except DataError as exc:
        out["trust"] = {"unavailable": exc.one_line()}
        return [f"Runs like this one: error ranges unavailable ({exc.one_line()})"]
    out["trust"] = t.summary(pred.iteration_s)
    return lines(t, pred.iteration_s)


@seer_app.command("validate")
def seer_validate(
    ctx: typer.Context,
    csv: str = typer.Option(
        "", "--csv", help="Published-runs CSV (default: bundled Megatron table)."
    ),
    json_path: str = typer.Option(
        "",
        "--json",
        help="Write each row's prediction and error here.",
        callback=output_file("--json"),
    ),
    max_mean: float | None = typer.Option(
        None,
        "--max-mean",
        help="Fail if mean |error| exceeds this (default 0.05 on the bundled table; none on --csv).",
        callback=at_least("--max-mean", 0),
    ),
    max_row: float | None = typer.Option(
        None,
        "--max-row",
        help="Fail if any row's |error| exceeds this (default 0.10 on the bundled table).",
        callback=at_least("--max-row", 0),
    ),
    plot: str = typer.Option(
        "",
        "--plot",
        help="Write a predicted-vs-published PNG here.",
        callback=output_file("--plot"),
    ),
    spread: bool = typer.Option(
        False,
        "--spread",
        help="Also report how far the settings each row leaves unstated could move it: the "
        "range of errors over their memory-feasible values, and whether the published figure "
        "lies inside (seer.spread; the headline error stays Seer's choice).",
    ),
    spread_cap: int | None = typer.Option(
        None,
        "--spread-cap",
        help="Combinations a row's spread compares at most; above it, one setting at a time "
        "(default seer.spread.SPREAD_MAX_CANDIDATES).",
        callback=at_least("--spread-cap", 1),
    ),
) -> None:
    """Predict published measured runs and compare iteration time and TFLOP/s per GPU."""
    from rich.progress import Progress
    from rich.table import Table

    from starfabric.cli._options import needs

    needs(ctx, "spread_cap", requires="spread", because="it bounds the spread")

    from starfabric.astral.seer.validate import (
        EXCLUDED_PREFIX,
        UNDEFINED,
        bundled_csv,
        excluded_reason,
        read_rows,
        summary,
        validate_row,
    )
    from starfabric.errors import StarfabricError

    rows = read_rows(csv or bundled_csv())
    results, failed = [], []
    with Progress(transient=True) as prog:
        task = prog.add_task("predicting published runs", total=len(rows))
        for row in rows:
            why = excluded_reason(row)
            if why is not None:
                failed.append((row.get("row_id", "?"), EXCLUDED_PREFIX + why))
                prog.advance(task)
                continue
            try:
                results.append(validate_row(row, alternatives=spread))
            except StarfabricError as exc:
                failed.append((row.get("row_id", "?"), exc.one_line()))
            prog.advance(task)
    con = console()
    tab = Table("row", "model", "GPUs", "published s", "predicted s", "error",
                "TFLOP/s pub/pred", "FLOPs")  # fmt: skip
    for r in results:
        tab.add_row(
            r.row_id, r.model, str(r.gpus), f"{r.published_iter_s:.3f}",
            f"{r.predicted_iter_s:.3f}", f"{r.error:+.1%}",
            f"{r.published_tflops:.1f}/{r.predicted_tflops:.1f}", r.convention,
        )  # fmt: skip
    con.print(tab)
    con.print("Settings the sources leave UNVERIFIED, chosen as a tuning Megatron user would:")
    for r in results:
        chosen = ", ".join(f"{k}={v}" for k, v in r.choices.items())
        con.print(f"  {r.row_id}: {chosen}", soft_wrap=True)
    for rid, why in failed:
        if why.startswith(EXCLUDED_PREFIX):
            con.print(f"  [yellow]{escape(str(rid))}: EXCLUDED[/] from comparison: "
                      f"{escape(why.removeprefix(EXCLUDED_PREFIX))}", soft_wrap=True)  # fmt: skip
        else:
            con.print(f"  [red]{escape(str(rid))}: not predicted[/]: {escape(why)}", soft_wrap=True)
    s = summary(results, failed)
    by_src = Table("source", "rows", "mean |error|", "max |error|", title="error per source")
    for src, st in s["per_source"].items():
        by_src.add_row(src, str(st["rows"]), f"{st['mean_abs_error']:.1%}",
                       f"{st['max_abs_error']:.1%}")  # fmt: skip
    con.print(by_src)
    from starfabric.astral.seer.classes import class_rows

    by_cls = Table("dimension", "class", "rows", "mean |error|", "max |error|",
                   title="error per mechanism class")  # fmt: skip
    for dim, cls, st in class_rows(s["per_class"]):
        by_cls.add_row(dim, cls, str(st["rows"]), f"{st['mean_abs_error']:.1%}",
                       f"{st['max_abs_error']:.1%}")  # fmt: skip
    con.print(by_cls)
    n_ex = len(s["excluded"])
    excl = f" ({n_ex} EXCLUDED from comparison, listed above with their reasons)" if n_ex else ""
    con.print(f"predicted {len(results)} of {len(rows)} rows{excl}")
    con.print(f"mean |error| {s['mean_abs_error']:.2%}   max |error| {s['max_abs_error']:.2%}")
    if spread:
        _print_spread(results, s, spread_cap)
    if json_path:
        write_json(json_path, s)
    if plot and results:
        from starfabric.astral.seer.validate import plot_validation

        plot_validation(results, plot)
        con.print(f"plot: {plot}")
    broken = [  # undefined and excluded runs: reported, not failures
        rid for rid, why in failed if UNDEFINED not in why and not why.startswith(EXCLUDED_PREFIX)
    ]
    if not csv:  # the bundled table's published accuracy bar; a user's CSV has none unless given
        max_mean = 0.05 if max_mean is None else max_mean
        max_row = 0.10 if max_row is None else max_row
    over = (max_mean is not None and s["mean_abs_error"] > max_mean) or (
        max_row is not None and s["max_abs_error"] > max_row
    )
    if broken or over:
        limits = ", ".join(
            f"{k} {v:.0%}" for k, v in (("mean", max_mean), ("max", max_row)) if v is not None
        )
        con.print(f"[red]FAIL[/]: {len(broken)} rows not predicted; limits: {limits or 'none'}")
        raise typer.Exit(1)


def _print_spread(results: list[Any], s: dict[str, Any], cap: int | None) -> None:
    """`seer validate --spread`: each row's range of errors over its unstated settings, the
    rows whose range contains the published figure per source; adds the JSON fields."""
    from rich.table import Table

    from starfabric.astral.seer.spread import (
        ONE_AWAY,
        SPREAD_MAX_CANDIDATES,
        row_spread,
        spread_summary,
    )

    cap = SPREAD_MAX_CANDIDATES if cap is None else cap
    spreads = [row_spread(r, cap) for r in results]
    for doc, sp in zip(s["rows"], spreads, strict=True):
        doc["spread"] = sp.as_dict()
    s["spread"] = spread_summary(spreads, cap)
    con = console()
    tab = Table("row", "error", "low", "high", "published inside", "compared",
                "settings varied", title="spread over the settings each row leaves unstated")  # fmt: skip
    for sp in spreads:
        lo, hi = sp.low, sp.high
        tab.add_row(
            sp.row_id, f"{sp.error:+.1%}", "-" if lo is None else f"{lo.error:+.1%}",
            "-" if hi is None else f"{hi.error:+.1%}", "yes" if sp.contains_published else "no",
            f"{len(sp.compared)} of {sp.feasible}" if sp.feasible else sp.enumeration,
            ", ".join(sp.varied) or "none",
        )  # fmt: skip
    con.print(tab)
    by_src = Table("source", "rows", "published inside", "all slower", "all faster",
                   "none fits", title="spread per source")  # fmt: skip
    for src, c in [*s["spread"]["per_source"].items(), ("all", s["spread"]["all"])]:
        by_src.add_row(src, str(c["rows"]), str(c["contains_published"]), str(c["all_slower"]),
                       str(c["all_faster"]), str(c["none_fits"]))  # fmt: skip
    con.print(by_src)
    cut = [sp.row_id for sp in spreads if sp.enumeration == ONE_AWAY]
    if cut:
        con.print(f"one setting at a time (more than {cap} combinations): {', '.join(cut)}",
                  soft_wrap=True)  # fmt: skip


# --- topo: hardware catalog, topology builders, routing, power and cost (issue 3) -----------

topo_app = typer.Typer(
    help="Build Astral and competing cluster networks; inventory, power, cost, comparison.",
    no_args_is_help=True,
)
astral_app.add_typer(topo_app, name="topo")


@topo_app.command("build")
def topo_build(
    cluster: str = typer.Argument(..., help="Cluster YAML (see examples/cluster-*.yaml)."),
    json_path: str = typer.Option(
        "", "--json", help="Write inventory + power JSON here.", callback=output_file("--json")
    ),
    csv_dir: str = typer.Option(
        "",
        "--csv",
        help="Write nodes.csv and links.csv to this folder.",
        callback=output_dir("--csv"),
    ),
    graphml: str = typer.Option(
        "",
        "--graphml",
        help="Write GraphML (small topologies only).",
        callback=output_file("--graphml"),
    ),
) -> None:
    """Build CLUSTER.yaml and print its inventory: switches, ports, links, optics, power, cost.

    Topologies: astral (same-rail 3-tier), fat-tree, rail-only, dual-plane.
    """
    import time

    from rich.table import Table

    from starfabric.astral.power import power_report
    from starfabric.astral.topology import ClusterSpec, build
    from starfabric.astral.topology.export import write_csv, write_graphml, write_json
    from starfabric.astral.topology.inventory import inventory
    from starfabric.config import load_spec

    spec = load_spec(ClusterSpec, cluster)
    t0 = time.perf_counter()
    topo = build(spec)
    inv = inventory(topo, spec)
    pr = power_report(inv, spec.power)
    build_s = time.perf_counter() - t0
    con = console()
    con.print(
        f"[bold]{escape(spec.name)}[/]: {spec.topology}, {inv.gpus:,} {spec.gpu} GPUs in {inv.hosts:,} "
        f"hosts, {inv.pods} pod(s), {spec.switch} switches at {spec.port_speed / 1e9:g}G "
        f"(radix {inv.radix}), built in {build_s:.2f} s"
    )
    tab = Table("item", "count", "detail")
    for tier, count in inv.switches.items():
        tab.add_row(f"{tier} switches", f"{count:,}", f"{inv.ports_used[tier]:,} ports used")
    for kind, count in inv.links.items():
        tab.add_row(f"{kind} links", f"{count:,}", inv.media.get(kind, "internal"))
    for name, count in inv.optics.items():
        tab.add_row(f"optics {name}", f"{count:,}", "")
    tab.add_row("NICs", f"{inv.nics:,}", spec.nic)
    over = ", ".join(f"{k} {v:.2f}:1" for k, v in inv.oversubscription.items()) or "none"
    tab.add_row("oversubscription", over, "down:up capacity")
    tab.add_row("bisection", f"{inv.bisection_bps / 1e12:,.1f} Tb/s",
                f"switch fabric only {inv.network_bisection_bps / 1e12:,.1f} Tb/s")  # fmt: skip
    tab.add_row("largest cluster", f"{inv.max_gpus:,} GPUs", "with these parts, 1:1")
    tab.add_row("IT power", f"{pr.it_w / 1e6:,.2f} MW", f"network {pr.network_w / 1e6:,.2f} MW")
    tab.add_row("facility power", f"{pr.facility_w / 1e6:,.2f} MW",
                f"PUE {pr.pue:.3f} ({spec.power.cooling}, {spec.power.power_chain})")  # fmt: skip
    tab.add_row("racks", f"{pr.server_racks:,} server + {pr.network_racks:,} network",
                f"{pr.rack_density_kw:.1f} of {pr.rack_kw:g} kW per rack, "
                f"{pr.host_kw:.1f} kW per host")  # fmt: skip
    tab.add_row("cost", f"${pr.total_cost_usd / 1e9:,.2f} B",
                f"network ${pr.network_cost_usd / 1e6:,.1f} M")  # fmt: skip
    con.print(tab)
    if json_path:
        doc = {"inventory": inv.as_dict(), "power": pr.as_dict(), "build_s": build_s}
        con.print(f"json: {write_json(doc, json_path)}")
    if csv_dir:
        nodes, links = write_csv(topo, csv_dir)
        con.print(f"csv: {nodes}, {links}")
    if graphml:
        con.print(f"graphml: {write_graphml(topo, graphml)}")


@topo_app.command("compare")
def topo_compare(
    cluster: str = typer.Argument(..., help="Cluster YAML; its GPU count is the common size."),
    png: str = typer.Option(
        "", "--png", help="Write a bar-chart PNG here.", callback=output_file("--png")
    ),
    json_path: str = typer.Option(
        "", "--json", help="Write the rows as JSON here.", callback=output_file("--json")
    ),
    pairs: int = typer.Option(
        20_000,
        "--pairs",
        help="Random GPU pairs for hop counts.",
        callback=between("--pairs", 1, MAX_PAIRS, "MAX_PAIRS: a sample, ~100 bytes per pair"),
    ),
) -> None:
    """The designs side by side at equal GPU count: switches, optics, cost, power, hops."""
    from rich.table import Column, Table

    from starfabric.astral.topology import ClusterSpec
    from starfabric.astral.topology.compare import compare, plot_compare
    from starfabric.astral.topology.export import write_json
    from starfabric.config import load_spec

    spec = load_spec(ClusterSpec, cluster)
    rows = compare(spec, sample_pairs=pairs)
    con = console()

    def _n(x: float) -> str:
        return f"{x / 1e6:.2f}M" if x >= 1e6 else (f"{x / 1e3:.1f}K" if x >= 1e4 else f"{x:,.0f}")

    tab = Table(Column("design", no_wrap=True, min_width=10), "switches", "optics", "net M$",
                "net MW", "bisect Pb/s", "hops", "rail hops", "PUE", "swing MW",
                "GPUs/MW")  # fmt: skip
    notes = []
    for r in rows:
        if not r.feasible:
            tab.add_row(r.design, "-", "-", "-", "-", "-", "-", "-", "-", "-", "-")
            notes.append(f"{r.design}: infeasible: {r.note}")
            continue
        tab.add_row(
            r.design, _n(r.switches), _n(r.optics_units), f"{r.network_cost_usd / 1e6:,.0f}",
            f"{r.network_w / 1e6:,.1f}", f"{r.network_bisection_bps / 1e15:,.1f}",
            f"{r.mean_switch_hops:.2f}", f"{r.same_rail_switch_hops:.2f}", f"{r.annual_pue:.3f}",
            f"{r.swing_mw:,.1f}", f"{r.gpus_per_mw:,.0f}",
        )  # fmt: skip
    con.print(f"[bold]{escape(spec.name)}[/]: designs at {rows[0].gpus:,} GPUs (same switch, NIC, GPU);"
              " hops = switches on random / same-rail pairs; PUE: a year in Chicago; swing: job start "
              "at the feed")  # fmt: skip
    con.print(tab)
    for note in notes:
        con.print(note, markup=False)
    if png:
        con.print(f"png: {plot_compare(rows, png)}")
    if json_path:
        con.print(f"json: {write_json({'rows': [r.as_dict() for r in rows]}, json_path)}")


@seer_app.command("search")
def seer_search(
    model: str = typer.Argument(..., help="Bundled model name or config.json path."),
    gpus: int = typer.Option(..., "--gpus", help="Number of GPUs.", callback=at_least("--gpus")),
    gpu: str = typer.Option("H100", "--gpu", help="GPU type from the hardware catalog."),
    global_batch: int = typer.Option(
        ...,
        "--global-batch",
        help="Sequences per iteration.",
        callback=at_least("--global-batch"),
    ),
    seq_len: int = typer.Option(
        ..., "--seq-len", help="Sequence length.", callback=at_least("--seq-len")
    ),
    precision: str = typer.Option("bf16", "--precision", help="bf16, fp16 or fp8."),
    nic: str = typer.Option("400G", "--nic", help="Scale-out bandwidth per GPU."),
    top: int = typer.Option(
        10, "--top", help="How many layouts to show.", callback=at_least("--top")
    ),
    json_path: str = typer.Option(
        "", "--json", help="Write the ranked layouts here.", callback=output_file("--json")
    ),
    ray: str = typer.Option(
        "", "--ray", help="Spread the sweep over Ray: 'local' or a cluster ADDRESS (host:port)."
    ),
    stack: str = typer.Option(
        "",
        "--stack",
        help="Job YAML/JSON: every layout is priced with its "
        "execution's software stack (dispatcher, attention kernel, CP algorithm, fusions, ...); "
        "its layout fields are what the search varies.",
    ),
) -> None:
    """Rank every valid parallel layout by predicted throughput (memory-feasible only)."""
    import time

    from rich.table import Table

    from starfabric.astral.seer import load_model
    from starfabric.astral.seer.hf_config import check_seq_len
    from starfabric.astral.seer.parallel import MAX_GLOBAL_BATCH, SystemSpec
    from starfabric.astral.seer.search import search
    from starfabric.astral.seer.search_stack import load_stack, stack_settings
    from starfabric.config import parse_spec
    from starfabric.errors import ConfigError

    between("--global-batch", 1, MAX_GLOBAL_BATCH, "seer.parallel.MAX_GLOBAL_BATCH")(global_batch)
    if precision not in ("bf16", "fp16", "fp8"):
        raise ConfigError(
            f"--precision {precision!r} is not supported", fix="use bf16, fp16 or fp8"
        )
    system = parse_spec(SystemSpec, {"gpu": gpu, "gpus": gpus, "nic_bandwidth": nic}, "options")
    the_model = load_model(model)
    check_seq_len(the_model, seq_len, "--seq-len")
    base = load_stack(stack, global_batch, seq_len, precision) if stack else None
    t0 = time.perf_counter()
    res = search(
        the_model, system, global_batch, seq_len, precision,  # type: ignore[arg-type]
        ray=ray or None, stack=base,
    )  # fmt: skip
    dt = time.perf_counter() - t0
    rows = res.top(top)
    con = console()
    con.print(
        f"{len(res)} layouts ({int(res.feasible.sum())} fit in memory) in {dt:.2f}s "
        f"({len(res) / dt:,.0f} configs/s)"
    )
    tab = Table("#", "tp", "cp", "pp", "vpp", "dp", "ep", "mb", "recompute", "zero", "tp ov",
                "dp ov", "offload", "iter s", "tokens/s", "GiB")  # fmt: skip
    yes = {True: "yes", False: "no"}
    for i, r in enumerate(rows, 1):
        tab.add_row(
            str(i), *(str(r[k]) for k in ("tp", "cp", "pp", "vpp", "dp", "ep", "mb")),
            r["recompute"], str(r["zero"]), yes[r["tp_comm_overlap"]], yes[r["dp_overlap"]],
            r["offload"], f"{r['iteration_s']:.3f}", f"{r['tokens_per_s']:,.0f}",
            f"{r['memory_gib']:.1f}",
        )  # fmt: skip
    settings = stack_settings(res.base) if res.base is not None else {}
    if settings:
        con.print("stack: " + ", ".join(f"{k}={v}" for k, v in settings.items()), markup=False)
    con.print(tab)
    if json_path:
        write_json(json_path, {"layouts": len(res), "stack": settings, "top": rows})


@seer_app.command("calibrate")
def seer_calibrate(
    gpu: str = typer.Option(..., "--gpu", help="GPU type the measurements come from."),
    nccl_tests: list[str] = typer.Option([], "--nccl-tests", help="nccl-tests logs (repeat)."),
    kineto: list[str] = typer.Option([], "--kineto", help="Kineto traces with shapes (repeat)."),
    nic: str = typer.Option("400G", "--nic", help="Scale-out bandwidth per GPU, e.g. 400G."),
    gpus_per_node: int = typer.Option(8, "--gpus-per-node", help="GPUs per node in the logs."),
    out: str = typer.Option(
        "", "--out", help="Write the profile (YAML) here.", callback=output_file("--out")
    ),
) -> None:
    """Fit collective latency/bandwidth per tier (nccl-tests) and GEMM efficiency (Kineto);
    report the error before and after; write a profile `seer predict --profile` applies."""
    from pathlib import Path

    import yaml
    from rich.table import Table

    from starfabric.astral.seer.calibrate import calibrate_kineto, calibrate_nccl
    from starfabric.errors import ConfigError

    if not nccl_tests and not kineto:
        raise ConfigError("nothing to calibrate from", fix="give --nccl-tests and/or --kineto")
    # every input read and fitted before anything is printed: a bad trace is one line
    cal = calibrate_nccl(nccl_tests, gpu, nic, gpus_per_node) if nccl_tests else None
    fits = [(trace, calibrate_kineto(trace, gpu)) for trace in kineto]
    con = console()
    profile: dict = {"gpu": gpu, "efficiency": {}, "fitted_from": []}
    if cal is not None:
        tab = Table("log", "collective", "ranks", "tier", "rows", "error before", "error after")
        for f in cal.logs:
            tab.add_row(Path(f.path).name, f.collective, str(f.ranks), f.tier, str(f.rows),
                        f"{f.error_before:.1%}", f"{f.error_after:.1%}")  # fmt: skip
        con.print(tab)
        con.print(f"collectives on {cal.gpu}: {cal.fractions}", soft_wrap=True)
        prof = cal.profile()
        profile["gpu"] = prof["gpu"]
        profile["efficiency"].update(prof["efficiency"])
        profile["fitted_from"] += prof["fitted_from"]
    for trace, fit in fits:
        con.print(
            f"{Path(trace).name}: {fit.gemms} {fit.dtype} GEMMs, gemm_peak_fraction "
            f"{fit.gemm_peak_fraction_before:.3f} -> {fit.gemm_peak_fraction:.3f}, error "
            f"{fit.error_before:.1%} -> {fit.error_after:.1%}",
            soft_wrap=True,
        )
        if fit.dtype in ("bf16", "fp16"):
            profile["efficiency"]["gemm_peak_fraction"] = round(fit.gemm_peak_fraction, 4)
            profile["fitted_from"].append(trace)
        else:
            con.print(f"  ({fit.dtype} GEMMs: reported only; the profile sets 16-bit GEMMs)")
    if out:
        write_text(out, yaml.safe_dump(profile, sort_keys=False))
        con.print(f"profile: {out}", markup=False)


# --- monitor: four-layer telemetry, fault synthesis, cross-layer localization (issue 9) ------

monitor_app = typer.Typer(
    help="Monitor: synthesize telemetry with faults, ingest real logs, localize, evaluate.",
    no_args_is_help=True,
)
astral_app.add_typer(monitor_app, name="monitor")


@monitor_app.command("synth")
def monitor_synth(
    ctx: typer.Context,
    out: str = typer.Argument(
        ...,
        help="DuckDB file to write (replaced only when the run succeeds).",
        callback=output_file("OUT"),
    ),
    gpus: int = typer.Option(1024, "--gpus", help="Cluster GPUs: 1024 or a multiple of 16384."),
    fault: list[str] = typer.Option(
        [],
        "--fault",
        help="KIND:TARGET[:SEVERITY[:ONSET_ITER[:SIGNATURE]]], repeatable (SIGNATURE on, partial, off).",
    ),
    iterations: int = typer.Option(6, "--iterations", help="Training iterations to record."),
    seed: int = typer.Option(
        0, "--seed", help="Noise and ECMP seed.", callback=seed_option("--seed")
    ),
    placement_seed: int = typer.Option(
        0,
        "--placement-seed",
        help="DP ring host order.",
        callback=seed_option("--placement-seed"),
    ),
    parquet: str = typer.Option(
        "",
        "--parquet",
        help="Also export every table to this folder.",
        callback=output_dir("--parquet"),
    ),
    spec_file: str = typer.Option("", "--spec", help="YAML run spec (examples/monitor-*.yaml)."),
) -> None:
    """Run a training job on the cluster and write its four layers' telemetry (truth aside)."""
    excludes(
        ctx, "spec_file", others=("gpus", "iterations", "seed", "placement_seed"),
        because="the spec file sets them",
    )  # fmt: skip
    from pathlib import Path

    from rich.markup import escape

    from starfabric.astral.monitor import SynthSpec, TelemetryStore, synth_to_file
    from starfabric.astral.monitor.faults import parse_fault, truth_path
    from starfabric.config import load_spec, parse_spec
    from starfabric.outputs import atomic_path

    if spec_file:
        spec = load_spec(SynthSpec, spec_file)
    else:
        opts = {
            "gpus": gpus,
            "iterations": iterations,
            "seed": seed,
            "placement_seed": placement_seed,
        }
        spec = parse_spec(SynthSpec, opts, "options (--gpus/--iterations/--seed)")
    faults = [parse_fault(f) for f in [*spec.faults, *fault]]
    db = Path(out)
    with atomic_path(db) as tmp, atomic_path(truth_path(db)) as tmp_truth:
        summ = synth_to_file(spec, faults, tmp)  # a failed run leaves the old database
        truth_path(tmp).replace(tmp_truth)
    con = console()
    con.print(
        f"{escape(str(db))}: {summ['gpus']} GPUs, {summ['iterations']} iterations, {len(faults)} fault(s)"
        + (f", job hung at iteration {summ['stopped_at']}" if summ["stopped_at"] >= 0 else "")
    )
    con.print(f"injection record (for eval only): {truth_path(db)}", markup=False)
    if parquet:
        with TelemetryStore(db, read_only=True) as st:
            files = st.export_parquet(parquet)
        con.print(f"parquet: {len(files)} tables in {parquet}")


@monitor_app.command("diagnose")
def monitor_diagnose(
    db: str = typer.Argument(
        ..., help="Telemetry DuckDB written by 'monitor synth' or 'monitor ingest'."
    ),
    json_path: str = typer.Option(
        "", "--json", help="Write the diagnosis as JSON here.", callback=output_file("--json")
    ),
    top: int = typer.Option(5, "--top", help="Causes to print.", callback=at_least("--top")),
    trace: str = typer.Option(
        "",
        "--trace",
        help="Chrome-trace of suspect vs healthy ranks.",
        callback=output_file("--trace"),
    ),
) -> None:
    """Localize root causes from the telemetry alone; print ranked causes and evidence.

    A synthesized job (its cluster and job are known) goes through cross-layer localization;
    ingested real files, which come without a topology, are diagnosed from their findings.
    """

    from starfabric.astral.monitor import TelemetryStore, diagnose
    from starfabric.astral.monitor.findings import diagnose_ingested
    from starfabric.astral.monitor.timeline import write_timeline

    with TelemetryStore(db, read_only=True) as st:
        synthesized = st.has_meta("cluster")
        d = diagnose(st) if synthesized else diagnose_ingested(st)
        if trace and synthesized:
            write_timeline(st, d, trace)
    con = console()
    for a in d.anomalies:
        con.print(f"[yellow]anomaly[/] {escape(str(a))}", soft_wrap=True)
    for dep in d.seer_departure:
        con.print(f"[cyan]seer[/] {escape(str(dep))}", soft_wrap=True)
    rep = d.reported()
    if not rep:
        con.print("[green]no root cause above the report threshold[/]")
    for i, c in enumerate(d.causes[:top], 1):
        con.print(
            f"[bold]{i}. {escape(c.title)}[/] ({escape(c.label)}) confidence {c.confidence:.2f}"
            + ("" if c.hardware else ", no hardware cause")
        )
        for e in c.evidence:
            con.print(f"     {e}", soft_wrap=True, markup=False)
    con.print(f"localized in {d.elapsed_s:.2f} s")
    if json_path:
        write_json(json_path, d.to_dict(), indent=1)


@monitor_app.command("ingest")
def monitor_ingest(
    db: str = typer.Argument(
        ...,
        help="DuckDB file to append to (created if missing; changed only when every file loads).",
        callback=output_file("DB"),
    ),
    files: list[str] = typer.Argument(
        ..., help="Kineto JSON(.gz), nccl-tests logs, sysfs TSV/dir, ethtool -m, dmesg, CSVs."
    ),
    kind: str = typer.Option("", "--kind", help="Force the format (default: detect)."),
) -> None:
    """Load real telemetry files into the store and print what they show."""
    from rich.table import Table

    from starfabric.astral.monitor import TelemetryStore, ingest_path
    from starfabric.astral.monitor.findings import ingested_findings
    from starfabric.outputs import replacing_copy

    con = console()
    loaded = []
    # a file that fails to load leaves DB as it was (the run works on a copy)
    with replacing_copy(db) as work, TelemetryStore(work, label=db) as st:
        for f in files:
            k, n = ingest_path(st, f, kind or None)
            loaded.append(f"{f}: {k}, {n} rows")
        found = ingested_findings(st)
    for line in loaded:
        con.print(line, markup=False)
    tab = Table("layer", "component", "finding", "severity")
    for x in found:
        tab.add_row(*(escape(str(v)) for v in (x.layer, x.component, x.what, x.severity)))
    con.print(tab if found else "[green]nothing abnormal found[/]")


@monitor_app.command("eval")
def monitor_eval(
    gpus: int = typer.Option(1024, "--gpus", help="Cluster GPUs: 1024 or a multiple of 16384."),
    json_path: str = typer.Option(
        "", "--json", help="Write f1, top1, fp_rate, ... here.", callback=output_file("--json")
    ),
    seeds: int = typer.Option(
        3,
        "--seeds",
        help="Seeds/placements per fault class.",
        callback=between("--seeds", 1, MAX_SEEDS, "MAX_SEEDS: each seed is one simulation"),
    ),
    seed0: int = typer.Option(
        0,
        "--seed0",
        help="First seed (another suite: another seed0).",
        callback=seed_option("--seed0", room=10 * MAX_SEEDS),
    ),
    healthy: int = typer.Option(6, "--healthy", help="Healthy runs (false positives)."),
    multi: int = typer.Option(4, "--multi", help="Multi-fault runs."),
    section: list[str] = typer.Option(
        [],
        "--section",
        help="Parts to run, repeatable: suite, silent, partial, gray, confounders (default all).",
    ),
) -> None:
    """Scenario suites, scored apart: the suite (signatures on: P/R/F1, top-1, FP on healthy
    runs), every class with its signature off and partial and the gray classes (top-1
    component), confounders (hardware false positives); localization time of each."""

    from starfabric.astral.monitor import evaluate
    from starfabric.astral.monitor.evaluate import SECTIONS

    con = console()
    summ = evaluate(
        gpus,
        seeds=seeds,
        healthy=healthy,
        multi=multi,
        seed0=seed0,
        console=con,
        sections=tuple(section) or SECTIONS,
    )
    for name, sec in summ.get("sections", {}).items():
        parts = [f"{k} {sec[k]:.3f}" for k in ("top1_component", "fp_rate", "named") if k in sec]
        con.print(f"{name}: " + ", ".join(parts) + f", max {sec['max_localize_s']:.2f} s")
    if json_path:
        write_json(json_path, summ, indent=1)
