"""`starfabric astral sim …`: collectives on a topology, design comparison, DeepEP, nccl-tests fit."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.markup import escape
from rich.table import Table

from starfabric.cli._console import console
from starfabric.cli._options import MAX_SEEDS, at_least, between, needs, seed_option
from starfabric.errors import ConfigError
from starfabric.outputs import output_file, save_figure, write_json

sim_app = typer.Typer(
    help="Network simulation: collectives, design comparison, DeepEP, nccl-tests fit.",
    no_args_is_help=True,
)

ALGOS = (
    "auto",
    "ring",
    "tree",
    "nvls",
    "nvls_tree",
    "collnet_direct",
    "collnet_chain",
    "flat-ring",
    "hierarchical-ring",
    "hierarchical-tree",
    "direct",
    "pxn",
)
"""auto = NCCL's tuner choice; ring/tree/nvls/nvls_tree/collnet_direct/collnet_chain = NCCL's algorithms
(multi-channel, pipelined); flat-ring and hierarchical-* = the step-by-step decompositions."""
PROTOS = ("auto", "LL", "LL128", "Simple")
OPS = ("all_reduce", "all_gather", "reduce_scatter", "alltoall", "broadcast")


def _nccl_env(pairs: list[str]) -> dict[str, str]:
    """--nccl-env KEY=VALUE pairs as a dict (ConfigError naming the bad pair)."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--nccl-env {pair!r}", fix="use KEY=VALUE, e.g. NCCL_NVLS_ENABLE=0")
        out[key.strip()] = value.strip()
    return out


def _plan(
    op: str,
    algo: str,
    n: int,
    size: float,
    topo,
    proto: str = "auto",
    nccl_env: dict[str, str] | None = None,
):
    from starfabric.astral.collectives import alltoall, hierarchical, ring
    from starfabric.astral.collectives.nccl import nccl_collective, shape_of, with_nccl_env

    if op not in OPS:
        raise ConfigError(f"--op {op!r} is not a collective", fix=f"use one of {', '.join(OPS)}")
    if algo not in ALGOS:
        raise ConfigError(f"--algo {algo!r}", fix=f"use one of {', '.join(ALGOS)}")
    if proto not in PROTOS:
        raise ConfigError(f"--proto {proto!r}", fix=f"use one of {', '.join(PROTOS)}")
    local = topo.structure.gpus_per_host if topo.structure is not None else 1
    loc = local if n % local == 0 else 1
    if op == "alltoall" and algo in ("direct",):
        return alltoall(n, size, local=loc, pxn=False)
    if op == "alltoall" and algo not in ("auto", "pxn"):
        raise ConfigError(
            f"--algo {algo} does not apply to alltoall", fix="use auto, direct or pxn"
        )
    if algo == "flat-ring":
        return ring(op, n, size)
    if algo.startswith("hierarchical"):
        return hierarchical(op, n, size, loc, inter=algo.split("-")[1])
    shape = with_nccl_env(shape_of(topo, n), nccl_env or {})
    return nccl_collective(op, shape, size, algo, proto)


@sim_app.command("collective")
def sim_collective(
    ctx: typer.Context,
    topo: Path = typer.Option(..., "--topo", help="Cluster YAML (see examples/cluster-*.yaml)."),
    op: str = typer.Option("all_reduce", "--op", help=f"One of: {', '.join(OPS)}."),
    size: str = typer.Option("1GiB", "--size", help="Buffer size as nccl-tests counts it."),
    gpus: int = typer.Option(..., "--gpus", help="Ranks (GPU ids 0..N-1 of the topology)."),
    backend: str = typer.Option(
        "flow", "--backend", help="flow (max-min, congestion-aware) or analytical."
    ),
    algo: str = typer.Option(
        "auto", "--algo", help=f"One of: {', '.join(ALGOS)} (auto: NCCL's tuner choice)."
    ),
    proto: str = typer.Option("auto", "--proto", help=f"NCCL protocol: {', '.join(PROTOS)}."),
    transport: str = typer.Option(
        "", "--transport", help="roce, ib, efa, tcpxo or tcpx (default: the cluster's)."
    ),
    nccl_env: list[str] = typer.Option(
        [],
        "--nccl-env",
        help="NCCL variable the job sets, KEY=VALUE, repeatable (NCCL_NVLS_ENABLE, "
        "NCCL_COLLNET_ENABLE, NCCL_LL128_C2C: what the tuner may pick; NCCL_NVLS_NCHANNELS, "
        "NCCL_NVLSTREE_MAX_CHUNKSIZE: NVLS channels and NVLS-tree chunk).",
    ),
    sweep: bool = typer.Option(False, "--sweep", help="nccl-tests-style table over sizes."),
    min_size: str = typer.Option("1MiB", "--min-size", help="Smallest size of --sweep."),
    max_size: str = typer.Option(
        "", "--max-size", help="Largest size of --sweep (default --size)."
    ),
    polarized: bool = typer.Option(False, "--polarized", help="Same ECMP hash at every tier."),
    step_latency_us: float = typer.Option(
        5.0,
        "--step-latency-us",
        help="Per-step NCCL latency (assumption).",
        callback=at_least("--step-latency-us", 0),
    ),
    seed: int = typer.Option(0, "--seed", help="ECMP hash seed.", callback=seed_option("--seed")),
    json_path: Path | None = typer.Option(
        None, "--json", help="Write results as JSON.", callback=output_file("--json")
    ),
) -> None:
    """Simulate one collective (or a size sweep) on a topology and report algbw/busbw."""
    from starfabric.astral.collectives.run import run_plan
    from starfabric.astral.topology import ClusterSpec, build
    from starfabric.config import load_spec
    from starfabric.units import parse_bytes

    needs(ctx, "min_size", requires="sweep", because="it bounds the size sweep")
    needs(ctx, "max_size", requires="sweep", because="it bounds the size sweep")
    if backend not in ("flow", "analytical"):
        raise ConfigError(f"--backend {backend!r}", fix="use flow or analytical")
    from starfabric.astral.netsim.transport import check_transport

    spec = load_spec(ClusterSpec, topo)
    tr = check_transport(transport or spec.transport)
    from starfabric.astral.collectives.nccl import nccl_env_fields

    env = _nccl_env(nccl_env)
    nccl_env_fields(env)  # a bad variable fails before the topology is built
    t = build(spec)
    if not 2 <= gpus <= t.n_gpus:
        raise ConfigError(
            f"--gpus {gpus}: the topology has {t.n_gpus:,} GPUs", fix=f"use 2..{t.n_gpus}"
        )
    from starfabric.astral.bounds import duration, message_bytes

    buf = message_bytes()  # a collective's buffer lives in one GPU's memory
    sizes = [int(buf.check(parse_bytes(size, "--size"), "--size", "size", "give a smaller --size"))]
    top = parse_bytes(max_size, "--max-size") if max_size else sizes[0]
    buf.check(top, "--max-size", "size", "give a smaller --max-size")
    duration("us", 1e6).check(step_latency_us, "--step-latency-us", "step latency",
                              "give e.g. --step-latency-us 5")  # fmt: skip
    if sweep:
        lo = parse_bytes(min_size, "--min-size")
        if lo <= 0 or lo > top:
            raise ConfigError(f"--min-size {min_size} must be in 1..{top}", fix="lower --min-size")
        sizes = []
        s = lo
        while s <= top:
            sizes.append(s)
            s *= 2
    con = console()
    rows = []
    for s in sizes:
        plan = _plan(op, algo, gpus, float(s), t, proto, env)
        res = run_plan(
            t,
            plan,
            backend=backend,
            polarized=polarized,
            seed=seed,
            step_latency_s=step_latency_us * 1e-6,
            rel_tol=0.02 if len(plan.steps[0]) > 50_000 else 0.0,
            transport=tr,
        )
        pname = plan.notes.get("proto_bw")
        proto_name = {0.5: "LL", 120.0 / 128.0: "LL128", 1.0: "Simple"}.get(pname or 0.0, "")
        rows.append(
            {
                "size_bytes": s,
                "algorithm": plan.algorithm,
                "protocol": proto_name,
                "time_us": res.time_s * 1e6,
                "algbw_gbps": res.algbw_gbps,
                "busbw_gbps": res.busbw_gbps,
                "steps": [
                    {
                        "phase": st.phase,
                        "flows": st.flows,
                        "time_us": st.time_s * 1e6,
                        "repeat": st.repeat,
                        "imbalance": st.imbalance,
                        "max_link_util": st.max_link_util,
                    }
                    for st in res.steps
                ],
            }
        )
    tab = Table(title=f"{op} on {gpus:,} GPUs of {t.name} ({backend}, {tr})")
    for col in ("size (B)", "algorithm", "time (us)", "algbw (GB/s)", "busbw (GB/s)"):
        tab.add_column(col, justify="right")
    for r in rows:
        chosen = f"{r['algorithm']}/{r['protocol']}" if r["protocol"] else str(r["algorithm"])
        tab.add_row(
            f"{r['size_bytes']:,}",
            chosen,
            f"{r['time_us']:.1f}",
            f"{r['algbw_gbps']:.2f}",
            f"{r['busbw_gbps']:.2f}",
        )
    con.print(tab)
    if not sweep:
        st = Table(title="steps")
        for col in ("phase", "flows", "time (us)", "repeat", "imbalance", "max link util"):
            st.add_column(col, justify="right")
        for s in rows[0]["steps"]:
            st.add_row(
                s["phase"],
                f"{s['flows']:,}",
                f"{s['time_us']:.2f}",
                str(s["repeat"]),
                f"{s['imbalance']:.2f}",
                f"{s['max_link_util']:.2f}",
            )
        con.print(st)
    if json_path:
        write_json(
            json_path,
            {
                "topology": t.name,
                "op": op,
                "gpus": gpus,
                "backend": backend,
                "transport": tr,
                "rows": rows,
            },
        )


@sim_app.command("compare")
def sim_compare(
    topo: Path = typer.Option(
        ..., "--topo", help="Cluster YAML; its GPU count is kept for every design."
    ),
    png: Path | None = typer.Option(
        None, "--png", help="Write the bar chart.", callback=output_file("--png")
    ),
    json_path: Path | None = typer.Option(
        None, "--json", help="Write the rows as JSON.", callback=output_file("--json")
    ),
    seed: int = typer.Option(0, "--seed", help="ECMP hash seed.", callback=seed_option("--seed")),
) -> None:
    """Same-rail 3-tier vs fat-tree vs rail-only vs dual-plane: DP all-reduce and all-to-all,
    ECMP vs polarized."""
    from dataclasses import asdict

    from starfabric.astral.collectives.compare import compare_designs, plot_compare
    from starfabric.astral.topology import ClusterSpec
    from starfabric.config import load_spec

    rows = compare_designs(load_spec(ClusterSpec, topo), seed=seed, progress=True)
    tab = Table(title=f"designs at {rows[0].gpus:,} GPUs")
    for col in ("design", "workload", "hashing", "time (ms)", "busbw (GB/s)", "imbalance max/mean"):
        tab.add_column(col, justify="right")
    for r in rows:
        if not r.feasible:
            tab.add_row(
                r.design,
                r.workload,
                "polarized" if r.polarized else "ECMP",
                "infeasible",
                "",
                r.reason[:40],
            )
            continue
        tab.add_row(
            r.design,
            r.workload,
            "polarized" if r.polarized else "ECMP",
            f"{r.time_ms:.2f}",
            f"{r.busbw_gbps:.2f}",
            f"{r.imbalance:.2f}",
        )
    console().print(tab)
    if png:
        fig = plot_compare([r for r in rows if r.feasible])
        save_figure(fig, png, dpi=110, bbox_inches="tight")
    if json_path:
        write_json(json_path, [asdict(r) for r in rows])


@sim_app.command("deepep")
def sim_deepep(
    eps: str = typer.Option("32,64", "--eps", help="EP sizes, comma-separated."),
    qps: str = typer.Option("1,2,4,8,16", "--qps", help="QPs per peer, comma-separated."),
    seeds: int = typer.Option(
        3,
        "--seeds",
        help="ECMP seeds averaged per point.",
        callback=between("--seeds", 1, MAX_SEEDS, "MAX_SEEDS: each seed is one simulation"),
    ),
    transport: str = typer.Option(
        "ib", "--transport", help="roce, ib, efa, tcpxo or tcpx (the published runs are IB)."
    ),
    json_path: Path | None = typer.Option(
        None, "--json", help="Write the rows as JSON.", callback=output_file("--json")
    ),
) -> None:
    """DeepEP dispatch/combine bandwidth per GPU vs QPs per peer, beside the published H800
    figures and the multi-QP gain the same sweep shows on RoCE."""
    from dataclasses import asdict

    from starfabric.astral.collectives.deepep import deepep_sweep, format_gains, format_rows
    from starfabric.astral.netsim.transport import check_transport

    tr = check_transport(transport)

    def ints(text: str, name: str, hi: int) -> tuple[int, ...]:
        try:
            vals = tuple(int(x) for x in text.split(",") if x.strip())
        except ValueError:
            raise ConfigError(
                f"{name} {text!r}: not a list of integers", fix=f"write e.g. {name} 1,2,4"
            ) from None
        if not vals or min(vals) < 1 or max(vals) > hi:
            raise ConfigError(
                f"{name} {text!r}: need integers in 1..{hi}", fix=f"write e.g. {name} 1,2,4"
            )
        return vals

    from starfabric.astral.collectives.deepep import MAX_QPS_PER_PEER, h800_fabric
    from starfabric.astral.seer.parallel import MAX_GPUS

    ep_list = ints(eps, "--eps", MAX_GPUS)
    qp_list = ints(qps, "--qps", MAX_QPS_PER_PEER)
    # the published IB runs had one 400G CX7 port per GPU; RoCE is Astral's 2x200G dual-ToR
    single = tr in ("ib", "efa")
    fabric = h800_fabric("CX7-400G" if single else "2x200G", tr)
    rows = deepep_sweep(
        ep_list, qp_list, seeds=tuple(range(seeds)), progress=True, transport=tr, topo=fabric
    )
    con = console()
    con.print(f"transport: {tr}", markup=False, highlight=False)
    con.print(format_rows(rows), markup=False, highlight=False)
    ends = (min(qp_list), max(qp_list))
    roce = (
        rows
        if tr == "roce"
        else deepep_sweep(
            ep_list,
            ends,
            seeds=tuple(range(seeds)),
            progress=True,
            transport="roce",
            topo=h800_fabric("2x200G", "roce"),
        )
    )
    con.print(format_gains(rows, roce), markup=False, highlight=False, soft_wrap=True)
    if json_path:
        write_json(
            json_path,
            {
                "transport": tr,
                "rows": [asdict(r) for r in rows],
                "roce": [asdict(r) for r in roce],
            },
        )


@sim_app.command("fit")
def sim_fit(
    all_reduce_log: Path = typer.Argument(..., help="nccl-tests all_reduce output of the fabric."),
    predict: list[Path] = typer.Option(
        [], "--predict", help="Other nccl-tests logs of the same hardware."
    ),
    min_size: str = typer.Option("64MiB", "--min-size", help="Compare sizes from this one up."),
    gpu: str | None = typer.Option(
        None, "--gpu", help="GPU (catalog name); default: the log's device list."
    ),
    nodes: int | None = typer.Option(
        None, "--nodes", help="Nodes the log ran on; default: hosts in its device list."
    ),
    gpus_per_node: int | None = typer.Option(
        None, "--gpus-per-node", help="GPUs per node; default: from the device list."
    ),
    nic: str | None = typer.Option(
        None, "--nic", help="Scale-out bandwidth per GPU, e.g. 200G (logs never print it)."
    ),
    nvlink: float | None = typer.Option(
        None, "--nvlink", help="NVLink GB/s per GPU per direction (GPUs not in the catalog)."
    ),
) -> None:
    """Fit the fabric on an all_reduce log, then predict other collectives' logs on the same
    hardware. The hardware comes from the log's device list (ranks, hosts, GPU model), or the
    options; a log spanning nodes needs --nic."""
    import numpy as np

    from starfabric.astral.collectives.fit import fit_fabric, fit_verdict, predict_run
    from starfabric.astral.nccl_hardware import fabric_of
    from starfabric.astral.nccltests import parse_nccl_tests
    from starfabric.units import parse_bytes

    lo = parse_bytes(min_size, "--min-size")
    if lo < 1:
        raise ConfigError(
            f"--min-size {min_size}: must be at least 1 B", fix="e.g. --min-size 64MiB"
        )
    if nvlink is not None and not (nvlink > 0 and np.isfinite(nvlink)):
        raise ConfigError(f"--nvlink {nvlink}: must be a positive number", fix="e.g. --nvlink 150")
    ranks = nodes * gpus_per_node if nodes and gpus_per_node else None
    run = parse_nccl_tests(all_reduce_log, ranks=ranks)
    if run.collective != "all_reduce":
        raise ConfigError(
            f"{all_reduce_log}: is a {run.collective} log", fix="fit on an all_reduce log"
        )
    spec = fabric_of(
        run, gpu=gpu, nodes=nodes, gpus_per_node=gpus_per_node, nic=nic, nvlink_gbyte_s=nvlink
    )
    # every log read before the fit; one without a device list ran on the same fabric
    others = [parse_nccl_tests(path, default_ranks=spec.gpus) for path in predict]
    largest = max(int(r.size_bytes.max()) for r in [run, *others])
    if lo > largest:
        raise ConfigError(
            f"--min-size {min_size}: no row of the logs is that large (largest {largest:,} B)",
            fix=f"give --min-size at most {largest:,} B",
        )
    fit = fit_fabric(spec, run)
    con = console()
    con.print(f"fitted {fit.spec.name}: {fit.params}", markup=False)
    tab = Table(title="predicted vs measured busbw (mean of out/in-place) at sizes >= " + min_size)
    for col in ("log", "op", "rows", "mean |err|", "max |err|", "verdict"):
        tab.add_column(col, justify="right")
    for other in [run, *others]:
        other = other.at_least(lo)
        if len(other) == 0:
            continue
        pred = predict_run(fit, other.collective, other.size_bytes)
        signed = np.array([p.busbw_gbps for p in pred]) / other.busbw_mean_gbps - 1
        err = np.abs(signed)
        tab.add_row(
            escape(Path(other.path).name[:48]),
            other.collective,
            str(len(other)),
            f"{err.mean():.1%}",
            f"{err.max():.1%}",
            fit_verdict(signed),
        )
    con.print(tab)
