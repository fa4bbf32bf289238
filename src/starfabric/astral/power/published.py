"""Published measurements of training power, site swings, facility PUE and water, reproduced.

Each case builds what the source describes (the job, the hardware, the plant's design, the
climate) and lets the mechanisms produce the number: the Seer prediction and the power model
for node and site power, the plant over the bundled weather year for PUE and water, the
timeline and the store for smoothing, the hierarchy for GPUs per MW. The model's constants
are global (`GpuPowerModel`, `PlantSpec` defaults); no case carries a constant of its own.
`docs/astral.md` lists the sources and the results.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from starfabric.astral.power.plant import preset, simulate_year
from starfabric.astral.power.timeline import ClusterShape, cluster_shape, job_timeline
from starfabric.astral.power.weather import load_weather

LLAMA2_13B = {
    "name": "llama-2-13b",
    "layers": 40,
    "hidden": 5120,
    "ffn_hidden": 13824,
    "heads": 40,
    "kv_heads": 40,
    "head_dim": 128,
    "vocab": 32000,
    "max_seq_len": 4096,
}
"""Llama 2 13B (Touvron et al. 2023, Table 1 and its config.json)."""


ROLES = {
    "calibration": "a model constant was chosen with this figure in view: not a check",
    "shared": "shares its measurement campaign and constants with a calibration case",
    "independent": "nothing in the model was set from it",
    "held-out": "added after the model was fixed, run once, not tuned since",
}
"""What each case is worth as evidence (docs/astral.md says which data calibrates what)."""


@dataclass(frozen=True)
class Case:
    name: str
    kind: str
    source: str
    published: float
    low: float
    high: float
    unit: str
    run: Callable[[], float]
    role: str = "independent"


@dataclass(frozen=True)
class Result:
    case: Case
    model: float

    @property
    def ok(self) -> bool:
        return self.case.low <= self.model <= self.case.high

    def as_dict(self) -> dict[str, Any]:
        c = self.case
        return {
            "case": c.name,
            "kind": c.kind,
            "published": c.published,
            "band": [c.low, c.high],
            "model": self.model,
            "unit": c.unit,
            "ok": self.ok,
            "role": c.role,
            "source": c.source,
        }


def _dgx_h100(gpus: int, stages: int) -> ClusterShape:
    # DGX/HGX H100: 8 GPUs, the catalog's 4 kW of host per 8 GPUs (PowerSpec), CX7 NICs
    return cluster_shape(gpus, stages, "H100", 8, 4000.0, 25.0, 50.0)


def _node_13b() -> Any:
    from starfabric.astral.seer import make_job, predict

    job = make_job(
        LLAMA2_13B,
        {
            "global_batch": 64,
            "micro_batch": 2,
            "seq_len": 4096,
            "tp": 1,
            "pp": 1,
            "zero": 3,
            "recompute": "none",
            "attention": "flash",
            "overlap_grad_reduce": True,
        },
        {"gpu": "H100", "gpus": 8, "gpus_per_node": 8},
    )
    pred = predict(job)
    return job_timeline(pred, _dgx_h100(8, 1))


def node_peak_kw() -> float:
    return float(_node_13b().summary()["node_peak_w"] / 1e3)


def node_mean_kw() -> float:
    return float(_node_13b().summary()["node_mean_w"] / 1e3)


def _llama3_16k() -> Any:
    """Llama 3 405B on 16,384 H100s (TP8 CP1 PP16 DP128, the paper's Table 4 layout)."""
    from starfabric.astral.seer import load_model, make_job, predict

    job = make_job(
        load_model("llama-3.1-405b"),
        {
            "global_batch": 2048,
            "micro_batch": 1,
            "seq_len": 8192,
            "tp": 8,
            "sp": True,
            "pp": 16,
            "pipeline_layers": [7] + [8] * 14 + [7],
            "recompute": "none",
            "zero": 1,
            "tp_comm_overlap": True,
            "overlap_grad_reduce": True,
        },
        {"gpu": "H100", "gpus": 16384, "gpus_per_node": 8},
    )
    return job_timeline(predict(job), _dgx_h100(16384, 16))


def llama3_site_step_mw() -> float:
    """Llama 3 405B on 16,384 H100s: the step from every GPU idle (a checkpoint, a restart)
    to every GPU computing, at the feed."""
    s = _llama3_16k().summary()
    step_it = s["site"]["peak_w"] - s["site_idle_w"]
    plant = preset("air-econ")  # a conventional chain at the feed
    from starfabric.astral.power.chain import chain_input

    ch = chain_input(plant.chain, np.array([s["site"]["peak_w"], s["site_idle_w"]]), np.zeros(2),
                     float(s["site"]["peak_w"]))  # fmt: skip
    del step_it
    return float((ch.input_w[0] - ch.input_w[1]) / 1e6)


def survey_pue() -> float:
    """A legacy site (chillers all year, constant-volume CRAHs at 18 °C, 2N double-conversion
    UPS) in a mid-Atlantic climate at 60 % of its design IT load."""
    return simulate_year(preset("legacy"), load_weather("sterling"), 6e6, 10e6).pue


ESIF_HEAT_REUSE = 0.5
"""NREL ESIF's design: 'half of the annual energy consumed by the data center will be re-used
to heat ventilation air and for building heating' (Soladay and Woodman, 'Designing the Most
Efficient Data Center in North America', Labs21 2011): a description of the plant, like its
supply temperatures, not the water figure the case checks."""


def _esif() -> Any:
    """NREL ESIF's HPC data center as published: chiller-less, warm-water liquid cooling
    (24 °C supply, 35 °C return) on evaporative towers, about 1 MW of IT, fan walls for the
    air-cooled remainder, the facility water's heat reused for the campus's heating in the
    cold hours (`ESIF_HEAT_REUSE`); its PUE excludes the electrical chain (metered at the IT
    input)."""
    spec = preset(
        "liquid",
        name="NREL ESIF",
        liquid={
            "fraction": 0.9,
            "facility_supply_c": 24.0,
            "facility_delta_t_k": 11.0,
            "liquid_class": "W27",
        },
        heat_reuse={"annual_fraction": ESIF_HEAT_REUSE},
        chain={"kind": "hvdc"},
    )
    return simulate_year(spec, load_weather("golden"), 0.9e6, 1.0e6)


def esif_pue() -> float:
    r = _esif()
    fac = r.facility_w - r.parts_w["chain"]
    return float(fac.sum() / r.it_w.sum())


def esif_wue() -> float:
    return _esif().wue_l_per_kwh


def gb300_storage_peak_cut() -> float:
    """GB300 NVL72 racks training a 70B model: the grid peak cut by a store that holds one
    iteration's swing (NVIDIA's PSU energy storage)."""
    from starfabric.astral.power.smoothing import StorageSpec, storage
    from starfabric.astral.seer import load_model, make_job, predict

    job = make_job(
        load_model("llama-3.1-70b"),
        {
            "global_batch": 576,
            "micro_batch": 1,
            "seq_len": 8192,
            "tp": 4,
            "sp": True,
            "pp": 4,
            "recompute": "selective",
            "zero": 1,
            "overlap_grad_reduce": True,
            "tp_comm_overlap": True,
        },
        {"gpu": "GB300", "gpus": 576, "gpus_per_node": 4},
    )
    pred = predict(job)
    sh = cluster_shape(576, pred.layout.pp, "GB300", 4, 2000.0, 25.0, 150.0)
    tl = job_timeline(pred, sh)
    rack = tl.rack_w[0]
    need = float(((rack - rack.mean()).clip(min=0).sum()) * tl.dt_s / 3.6e6)
    grid, _ = storage(
        rack, StorageSpec(kwh=max(need * 2, 1e-3), kw=float(rack.max() - rack.mean()) + 1), tl.dt_s
    )
    return float(1.0 - grid.max() / rack.max())


def gb200_gpus_per_mw() -> float:
    """A GB200 NVL72 site of 150 MW (the hierarchy's defaults, racks of 140 kW) with the budgets
    of a 70B training job's timeline and the liquid plant's design-day peak PUE."""
    from starfabric.astral.power.provision import HierarchySpec, provision
    from starfabric.astral.seer import load_model, make_job, predict

    job = make_job(
        load_model("llama-3.1-70b"),
        {
            "global_batch": 1152,
            "micro_batch": 1,
            "seq_len": 8192,
            "tp": 8,
            "sp": True,
            "pp": 4,
            "recompute": "selective",
            "zero": 1,
            "overlap_grad_reduce": True,
            "tp_comm_overlap": True,
        },
        {"gpu": "GB200", "gpus": 2304, "gpus_per_node": 4},
    )
    pred = predict(job)
    sh = cluster_shape(2304, pred.layout.pp, "GB200", 4, 2000.0, 25.0, 140.0)
    tl = job_timeline(pred, sh)
    plant = preset("liquid")
    yr = simulate_year(
        plant, load_weather("sterling"), float(tl.site_w.mean()), float(tl.site_w.max())
    )
    pr = provision(tl, HierarchySpec(site_mw=150.0), yr.design_day()["peak_pue"])
    return pr.gpus_per_mw


US_CLIMATES = ("chicago", "san-francisco", "golden", "sterling", "tampa")
"""The bundled TMY3 years: five US climates, cold to hot-humid."""


def us_legacy_water_per_facility_kwh() -> float:
    """On-site water per kWh the site consumes (facility energy, the LBNL report's basis) of
    the legacy tower-and-chiller plant at 60 % of its design load, averaged over the five
    bundled US climates."""
    out = []
    for city in US_CLIMATES:
        r = simulate_year(preset("legacy"), load_weather(city), 6e6, 10e6)
        out.append(r.water_m3.sum() * 1000.0 / (r.facility_w.sum() / 1000.0))
    return float(np.mean(out))


def h100_decode_batch128_w() -> float:
    """One H100 decoding at batch 128: weight streaming at 80 % of HBM peak, the tensor cores
    at the roofline's 128-token share (`timeline.decode_check_w`)."""
    from starfabric.astral.power.timeline import GpuPowerModel, decode_check_w

    return decode_check_w(GpuPowerModel(), 128)


def llama3_swing_over_trough() -> float:
    """The Llama 3 405B job on 16K H100 (as `llama3_site_step_mw`): (peak - trough) / trough of
    the site's power inside one iteration."""
    st = _llama3_16k().stats()
    return float(st["swing_w"] / st["trough_w"])


CASES: tuple[Case, ...] = (
    Case(
        "8xH100 node, Llama 2 13B training: peak", "node power",
        "Latif et al., 'Empirical Measurements of AI Training Power Demand on a GPU-Accelerated "
        "Node', arXiv 2412.08602 (IEEE Access 2025): max 8.4 kW, 18% below the rated 10.2 kW",
        8.4, 7.6, 9.2, "kW", node_peak_kw, "calibration",
    ),
    Case(
        "8xH100 node, compute-intensive training: mean", "node power",
        "Newkirk et al., 'Empirically-Calibrated H100 Node Power Models', arXiv 2506.14551 (2025): "
        "even compute-intensive training runs at 76% of the 10.2 kW rating (7.75 kW)",
        7.75, 6.8, 8.5, "kW", node_mean_kw, "shared",
    ),
    Case(
        "H100 LLM decode at batch 128: GPU power", "GPU power (kernel mix)",
        "ML.ENERGY Benchmark v3.0, H100-SXM5 decode: about 600 W per GPU at batch 128 (quoted by "
        "the vLLM Semantic Router fleet-sim power-model reference); its batch-1 reading (300 W) "
        "set w_m, this one sets nothing",
        600.0, 510.0, 690.0, "W", h100_decode_batch128_w, "shared",
    ),
    Case(
        "Llama 3 405B on 16K H100: site step", "site swing",
        "Llama Team, 'The Llama 3 Herd of Models', arXiv 2407.21783 (2024), section 3.3.4: GPUs "
        "waiting together 'can result in instant fluctuations of power consumption across the "
        "data center on the order of tens of megawatts'",
        20.0, 10.0, 60.0, "MW", llama3_site_step_mw,
    ),
    Case(
        "industry average PUE (legacy sites)", "facility PUE",
        "Uptime Institute Global Data Center Survey 2023: average PUE 1.58 (1.55-1.59 since 2020), "
        "held up by older, less efficient facilities",
        1.58, 1.50, 1.70, "", survey_pue,
    ),
    Case(
        "NREL ESIF HPC data center: annual PUE", "facility PUE (liquid)",
        "NREL, 'High-Performance Computing Data Center Power Usage Effectiveness': annualized PUE "
        "1.036 (goal 1.06), chiller-less warm-water liquid cooling, Golden CO",
        1.036, 1.02, 1.07, "", esif_pue,
    ),
    Case(
        "NREL ESIF: tower water per IT energy", "water (WUE)",
        "NREL, 'Data Center Water-Savings Win Wins' (2018): the towers used about 2.5 million "
        "gallons a year for an IT load near 1 MW on average (9,460 m3 / 8,760 MWh = 1.08 L/kWh); "
        "NREL's 'HPC Data Center Water Usage Efficiency' page: about 2 million (0.86 L/kWh)",
        1.08, 0.7, 1.6, "L/kWh", esif_wue,
    ),
    Case(
        "GB300 NVL72 PSU energy storage: peak grid demand", "smoothing",
        "NVIDIA, 'How New GB300 NVL72 Features Provide Steady Power for AI' (2025): energy "
        "storage in the power supplies 'can ... reduce peak grid demand by up to 30%'",
        0.30, 0.10, 0.35, "fraction", gb300_storage_peak_cut,
    ),
    Case(
        "83K GB200 in a 150 MW datacenter", "provisioning",
        "Ardestani et al. (Meta), 'Provisioning to Runtime Optimization of a 100 MW-Scale AI "
        "Cluster', arXiv 2605.24461 (2026): a 150 MW datacenter hosting 83K GB200 GPUs (553/MW)",
        553.0, 450.0, 700.0, "GPUs/MW", gb200_gpus_per_mw,
    ),
    Case(
        "US data centers: on-site water per kWh", "water (national survey)",
        "Shehabi et al., 'United States Data Center Energy Usage Report', LBNL-1005775 (2016): an "
        "average data center uses 1.8 liters of water on site for every kWh it consumes",
        1.8, 1.2, 2.4, "L/kWh", us_legacy_water_per_facility_kwh, "held-out",
    ),
    Case(
        "AI training: low-to-high swing within an iteration", "iteration swing",
        "Uptime Institute Intelligence, 'Electrical considerations with large AI compute' (UII "
        "Update 382, June 2025): in worst cases the difference between the low and the high "
        "points of power draw during training can exceed 100 %",
        1.0, 1.0, 4.0, "x trough", llama3_swing_over_trough, "held-out",
    ),
)  # fmt: skip


def reproduce(names: list[str] | None = None) -> list[Result]:
    return [Result(c, float(c.run())) for c in CASES if names is None or c.name in names]
