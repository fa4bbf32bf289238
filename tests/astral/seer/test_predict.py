import json
from pathlib import Path

import pytest

from starfabric.astral.seer import load_job, make_job, predict, write_trace

EXAMPLES = Path(__file__).parents[3] / "examples" / "jobs"


def _moe(ep: int, tp: int = 1, gpus: int = 1024):
    return make_job(
        "deepseek-v3",
        {"global_batch": 1024, "seq_len": 4096, "tp": tp, "pp": 16, "ep": ep, "precision": "fp8",
         "recompute": "full", "pipeline_layers": [3] + [4] * 14 + [2]},
        {"gpu": "H800", "gpus": gpus},
    )  # fmt: skip


def test_moe_tp1_ep64_predicts_sanely() -> None:
    pred = predict(_moe(64))
    lay = pred.layout
    assert (lay.tp, lay.ep, lay.etp, lay.pp, lay.dp, lay.edp) == (1, 64, 1, 16, 64, 1)
    b = pred.breakdown
    assert b["ep"] > 0 and b["tp"] == 0
    assert 0.05 < pred.mfu < 0.6
    # Active parameters drive model FLOPs: 37.5B active, not 671B.
    assert pred.model_flops < 6 * 40e9 * 1024 * 4096 * 1.2
    assert not pred.memory.oom


def test_expert_all_to_all_inside_a_node_is_cheaper_than_across_rails() -> None:
    local = predict(_moe(8)).breakdown["ep"]
    spread = predict(_moe(64)).breakdown["ep"]
    assert local < spread


def test_memory_grows_without_recompute_and_reports_oom() -> None:
    base = {"global_batch": 64, "seq_len": 8192, "tp": 8, "pp": 1}
    sys = {"gpu": "H100", "gpus": 8}
    full = predict(make_job("llama-3.1-70b", {**base, "recompute": "full", "zero": 1}, sys))
    none = predict(make_job("llama-3.1-70b", {**base, "recompute": "none", "zero": 0}, sys))
    assert none.memory.activations > 10 * full.memory.activations
    assert none.memory.oom  # 70B on one node with full optimizer states cannot fit
    assert none.summary()["oom"] is True


def test_examples_predict(tmp_path: Path) -> None:
    for name in ("llama31_70b_dense.yaml", "deepseek_v3_moe.yaml"):
        pred = predict(load_job(EXAMPLES / name))
        assert pred.iteration_s > 0 and not pred.memory.oom
        json.dumps(pred.summary())


def test_trace_json_is_well_formed(tmp_path: Path) -> None:
    pred = predict(load_job(EXAMPLES / "llama31_70b_dense.yaml"))
    path = write_trace(pred, tmp_path / "t.json")
    data = json.loads(path.read_text())
    events = data["traceEvents"]
    names = {(e["pid"], e["tid"]) for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    procs = {e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {f"PP stage {s}" for s in range(pred.layout.pp)}
    slices = [e for e in events if e["ph"] == "X"]
    assert slices
    for e in slices:
        assert e["dur"] >= 0 and e["ts"] >= 0 and (e["pid"], e["tid"]) in names
    # Op slices nest inside their pass and the last slice ends at the iteration's end.
    end_us = max(e["ts"] + e["dur"] for e in slices)
    assert end_us == pytest.approx((pred.iteration_s - pred.breakdown["overhead"]) * 1e6, rel=0.05)
    assert any(e.get("cat") == "forward" and "attn.qkv" in e["name"] for e in slices)
    assert any(e.get("cat") == "dp" for e in slices)


def test_moe_all_to_all_on_the_topology() -> None:
    job = load_job(EXAMPLES / "deepseek_v3_moe.yaml")
    on_topo = predict(job)
    formula = predict(make_job(job.model, job.execution,
                               job.system.model_copy(update={"topology": None})))  # fmt: skip
    t_topo = on_topo.timeline.pieces["moe"].fwd_costs
    t_form = formula.timeline.pieces["moe"].fwd_costs
    names = on_topo.timeline.pieces["moe"].fwd_table.name
    i = names.index("moe.ep_dispatch")
    # DeepEP sends each FP8 token once per destination node (<= 4 nodes) and forwards over
    # NVLink: less than the bus-bandwidth formula's 16-bit copy to every top-8 expert.
    assert 0 < t_topo.time[i] < t_form.time[i]
    # ...but it is still bounded below by the bytes leaving a GPU over its 400G rail.
    fp8_token = job.model.hidden * (1 + 4 / 128)
    assert t_topo.time[i] > 4096 * fp8_token / 50e9
    assert on_topo.breakdown["ep"] > 0


def test_zero3_shards_memory_and_exposes_gathers_on_a_slow_network() -> None:
    ex = {"global_batch": 128, "seq_len": 4096, "recompute": "full"}
    fast = {"gpu": "H100", "gpus": 64}
    z1 = predict(make_job("llama-3.1-8b", {**ex, "zero": 1}, fast))
    z3 = predict(make_job("llama-3.1-8b", {**ex, "zero": 3}, fast))
    assert z3.memory.weights < z1.memory.weights / 32 and z3.memory.grads < z1.memory.grads / 32
    # On 400G the gathers hide behind compute except FSDP_OVERLAP_RESIDUAL of them.
    assert z1.iteration_s < z3.iteration_s < 1.10 * z1.iteration_s
    slow = {**fast, "nic_bandwidth": "10G"}
    z3_slow = predict(make_job("llama-3.1-8b", {**ex, "zero": 3}, slow))
    assert z3_slow.breakdown["dp"] > 0.1 * z3_slow.iteration_s


def test_expert_comm_overlap_hides_all_to_all() -> None:
    # Megatron-Core runs its combined 1F1B schedule only with interleaving when PP > 1, and
    # refuses full recompute with it (transformer_config.py, core_v0.14-0.17): VPP 2, none;
    # and 64 micro-batches, since with 16 on PP 16 every pass is a warm-up or cool-down one.
    job = _moe(64)
    ex = job.execution.model_copy(
        update={"vpp": 2, "recompute": "none", "pipeline_layers": [1] + [2] * 30 + [0],
                "global_batch": 4096}
    )  # fmt: skip
    base = make_job(job.model, ex, job.system)
    plain = predict(base)
    overlapped = predict(
        make_job(
            base.model, base.execution.model_copy(update={"ep_comm_overlap": True}), base.system
        )
    )
    # the warm-up and cool-down passes (47 + 47 of 128 on stage 0) keep their all-to-all, and
    # the paired ones hide 0.6 of what the stream replay hides (`ep_overlap_hidden`, PR #6311)
    assert 0.3 * plain.breakdown["ep"] < overlapped.breakdown["ep"] < 0.8 * plain.breakdown["ep"]
    assert overlapped.iteration_s < plain.iteration_s


def test_an_inline_model_error_names_the_job_file(tmp_path: Path) -> None:
    """A job file's own model mapping refused (here past model.MAX_LAYERS) names the file,
    as its execution and system errors do."""
    from starfabric.errors import ConfigError

    job = tmp_path / "job.yaml"
    job.write_text(
        "model: {name: x, layers: 100000, hidden: 4096, heads: 32, kv_heads: 8, head_dim: 128,\n"
        "        vocab: 128256, ffn_hidden: 14336, max_seq_len: 4096}\n"
        "execution: {global_batch: 64, seq_len: 4096, tp: 8}\n"
        "system: {gpu: H100, gpus: 64}\n"
    )
    with pytest.raises(ConfigError) as exc:
        load_job(job)
    text = exc.value.one_line()
    assert text.startswith(f"{job}: model: layers=100000 is outside 1..16384"), text
