import numpy as np
import pytest

from starfabric.astral.seer import load_model, make_job, predict, resolve_layout
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, uneven_pipeline_layers
from starfabric.astral.seer.search import COLUMNS, OFFLOAD, RECOMPUTE, enumerate_configs, search
from starfabric.errors import ConfigError, InfeasibleError

SYS = SystemSpec(gpu="H100", gpus=64)


def _ex(row: dict, gb: int, seq: int, layers: int = 0) -> ExecutionSpec:
    uneven = layers % row["pp"] if layers else 0
    return ExecutionSpec(
        global_batch=gb, seq_len=seq, micro_batch=row["mb"], tp=row["tp"], cp=row["cp"],
        pp=row["pp"], vpp=row["vpp"], dp=row["dp"], ep=row["ep"], etp=row["etp"],
        recompute=RECOMPUTE[row["rec"]],
        pipeline_layers=uneven_pipeline_layers(layers, row["pp"]) if uneven else None,
    )  # fmt: skip


def test_every_enumerated_layout_is_valid() -> None:
    model = load_model("mixtral-8x7b-v0.1")
    cfg = enumerate_configs(model, SYS, 256, 4096)
    assert (cfg["ep"] > 1).any()
    for i in range(0, len(cfg["tp"]), 7):
        row = {c: int(cfg[c][i]) for c in COLUMNS}
        lay = resolve_layout(model, _ex(row, 256, 4096, model.layers), SYS)
        assert lay.dp == row["dp"] and lay.gpus == 64


def test_vectorized_equals_scalar_loop() -> None:
    model = load_model("llama-3.1-8b")
    vec = search(model, SYS, 256, 4096, limit=40)
    sca = search(model, SYS, 256, 4096, mode="scalar", limit=40)
    np.testing.assert_allclose(vec.iteration_s, sca.iteration_s, rtol=1e-12)
    np.testing.assert_allclose(vec.memory_bytes, sca.memory_bytes, rtol=1e-12)


def test_ranking_is_feasible_and_fastest_first() -> None:
    res = search(load_model("llama-3.1-70b"), SystemSpec(gpu="H100", gpus=256), 512, 8192)
    order = res.ranked()
    assert len(order) and res.feasible[order].all()
    assert (np.diff(res.iteration_s[order]) >= 0).all()
    assert (~res.feasible).any()  # some layouts of a 70B model do not fit
    top = res.top(3)
    assert top[0]["iteration_s"] <= top[1]["iteration_s"] and top[0]["memory_gib"] <= 80


def test_analytical_mode_tracks_the_full_timeline() -> None:
    model = load_model("llama-3.1-70b")
    system = SystemSpec(gpu="H100", gpus=256)
    res = search(model, system, 512, 8192)
    for i in res.ranked()[:5]:
        full = predict(make_job(model, res.execution(int(i)), system))
        assert res.iteration_s[i] == pytest.approx(full.iteration_s, rel=0.10)
        assert res.memory_bytes[i] == pytest.approx(full.memory.total, rel=0.05)


def test_uneven_pipelines_are_searched() -> None:
    model = load_model("deepseek-v3")  # 61 layers: only pp = 1 or 61 would divide them
    res = search(model, SystemSpec(gpu="H800", gpus=2048), 4096, 4096, "fp8", limit=400)
    assert set(np.unique(res.configs["pp"])) > {1, 2}
    uneven = 61 % res.configs["pp"] != 0
    assert uneven.any() and (res.configs["vpp"][uneven] == 1).all()


def test_search_errors() -> None:
    model = load_model("llama-3.1-8b")
    with pytest.raises(InfeasibleError, match="no valid parallel layout"):
        search(load_model("gpt2"), SystemSpec(gpu="H100", gpus=13), 3, 4096)
    with pytest.raises(ConfigError, match="unknown search mode"):
        search(model, SYS, 256, 4096, mode="fast")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "gpu", "gpus", "gb", "seq"),
    [("llama-3.1-8b", "H100", 64, 256, 4096), ("llama-3.1-70b", "H100", 256, 256, 8192),
     ("llama-3.1-8b", "GH200", 64, 256, 8192)],
)  # fmt: skip
def test_search_top20_agree_with_predict(name: str, gpu: str, gpus: int, gb: int, seq: int) -> None:
    """The vectorized evaluator and predict() are the same model: the 20 layouts search ranks
    first get (within 1%) the time predict gives each of them, overlaps, ZeRO stage and
    offload included."""
    model = load_model(name)
    system = SystemSpec(gpu=gpu, gpus=gpus)
    res = search(model, system, gb, seq)
    for i in res.ranked()[:20]:
        it = predict(make_job(model, res.execution(int(i)), system)).iteration_s
        assert it == pytest.approx(res.iteration_s[i], rel=0.01), res.row(int(i))


def test_search_space_has_calculons_axes() -> None:
    """TP overlap (tp > 1 only), DP overlap and ZeRO 0-3 (with a DP group), and offload only
    where the catalog gives the GPU a second memory tier."""
    model = load_model("llama-3.1-8b")
    h100 = enumerate_configs(model, SystemSpec(gpu="H100", gpus=64), 256, 4096)
    assert set(np.unique(h100["zero"])) == {0, 1, 2, 3}
    assert set(np.unique(h100["dpo"])) == {0, 1} and set(np.unique(h100["tpo"])) == {0, 1}
    assert (h100["tpo"][h100["tp"] == 1] == 0).all()
    # HGX H100: no second tier, only Megatron-Core's optimizer CPU offload over PCIe (bit 2)
    assert set(np.unique(h100["off"])) == {0, 4}
    gh = enumerate_configs(model, SystemSpec(gpu="GH200", gpus=64), 256, 4096)
    assert set(np.unique(gh["off"])) == set(range(len(OFFLOAD)))
    lone = (h100["dp"] * h100["cp"]) == 1
    assert (h100["zero"][lone] == 1).all() and (h100["dpo"][lone] == 1).all()


def test_offload_trades_hbm_for_the_second_tier() -> None:
    model = load_model("llama-3.1-70b")
    # (the evenly spaced sample covers six offload settings: 1.5x the four it was sized for)
    res = search(model, SystemSpec(gpu="GH200", gpus=64), 64, 8192, limit=4500)
    c = res.configs
    assert res.offloaded_bytes is not None
    base = (c["off"] == 0) & (c["rec"] == 0)
    for off in (1, 2, 3):
        sel = c["off"] == off
        assert (res.offloaded_bytes[sel] > 0).all() and (
            res.offloaded_bytes[c["off"] == 0] == 0
        ).all()
    # Same layout, activations offloaded: less HBM, never faster.
    keys = ("tp", "cp", "pp", "vpp", "dp", "mb", "rec", "tpo", "dpo", "zero")
    idx = {tuple(int(c[k][i]) for k in keys): i for i in np.flatnonzero(base)}
    pairs = [(idx[t], i) for i in np.flatnonzero((c["off"] == 1) & (c["rec"] == 0))
             if (t := tuple(int(c[k][i]) for k in keys)) in idx]  # fmt: skip
    assert pairs
    for a, b in pairs:
        assert res.memory_bytes[b] <= res.memory_bytes[a]
        assert res.iteration_s[b] >= res.iteration_s[a] - 1e-12
    ex = {"global_batch": 64, "seq_len": 8192, "tp": 8, "pp": 2, "offload_activations": True}
    with pytest.raises(InfeasibleError, match="no second memory tier"):
        predict(make_job(model, ex, {"gpu": "H100", "gpus": 64}))
    full = predict(make_job(model, ex, {"gpu": "GH200", "gpus": 64}))
    kept = predict(
        make_job(model, dict(ex, offload_activations=False), {"gpu": "GH200", "gpus": 64})
    )
    assert full.memory.activations < kept.memory.activations and full.memory.offloaded > 0


STACK = {
    "moe_dispatcher": "deepep", "cp_algorithm": "ulysses", "flash_kernel": "fa2",
    "moe_probs_all_to_all": True, "optimizer_moments": "bf16", "eager_elementwise": True,
    "moe_load_balance": "forced", "fp8_16bit_copies": False,
}  # fmt: skip
"""A non-default software stack: DeepEP, Ulysses CP, FlashAttention-2, ..."""


def _stack(gb: int, seq: int, **extra: object) -> ExecutionSpec:
    # tp/pp are layout fields: the search replaces them
    return ExecutionSpec(global_batch=gb, seq_len=seq, tp=4, pp=2, **{**STACK, **extra})


def test_search_top20_agree_with_predict_under_a_stack() -> None:
    """search(stack=...) prices every layout with the user's stack, and execution(i) hands
    predict that same job: the 20 fastest agree within 1%, CP layouts (Ulysses) included."""
    model = load_model("mixtral-8x7b-v0.1")
    system = SystemSpec(gpu="H100", gpus=64)
    res = search(model, system, 256, 8192, stack=_stack(256, 8192))
    top = res.ranked()[:20]
    assert (res.configs["cp"][top] > 1).any() and (res.configs["ep"][top] > 1).any()
    for i in top:
        ex = res.execution(int(i))
        assert {k: ex[k] for k in STACK} == STACK
        it = predict(make_job(model, ex, system)).iteration_s
        assert it == pytest.approx(res.iteration_s[i], rel=0.01), res.row(int(i))


def test_stack_changes_the_prices_and_the_valid_layouts() -> None:
    """Differential: the same EP layouts cost another time under DeepEP; Ulysses drops the
    layouts whose TP rank has fewer K/V heads than the CP all-to-all splits; every layout
    enumerated under the stack resolves with it."""
    model = load_model("mixtral-8x7b-v0.1")  # 8 K/V heads: tp 8 leaves 1 per rank
    plain = enumerate_configs(model, SYS, 256, 8192)
    base = _stack(256, 8192)
    uly = enumerate_configs(model, SYS, 256, 8192, base)
    assert ((plain["tp"] == 8) & (plain["cp"] > 1)).any()
    assert not ((uly["tp"] == 8) & (uly["cp"] > 1)).any()
    assert not (uly["off"] & 4).any()  # the CPU optimizer keeps fp32 moments (resolve_layout)
    for i in range(0, len(uly["tp"]), 97):
        row = {c: int(uly[c][i]) for c in COLUMNS}
        ex = _ex(row, 256, 8192, model.layers).model_copy(update=STACK)
        resolve_layout(model, ex, SYS)
    a = search(model, SYS, 256, 8192, limit=300)
    b = search(model, SYS, 256, 8192, limit=300, stack=ExecutionSpec(
        global_batch=256, seq_len=8192, moe_dispatcher="deepep"))  # fmt: skip
    assert (a.configs["ep"] == b.configs["ep"]).all()
    assert (a.iteration_s != b.iteration_s)[a.configs["ep"] > 1].any()


def test_stack_vectorized_equals_scalar_loop() -> None:
    model = load_model("mixtral-8x7b-v0.1")
    base = _stack(256, 4096)
    vec = search(model, SYS, 256, 4096, limit=30, stack=base)
    sca = search(model, SYS, 256, 4096, mode="scalar", limit=30, stack=base)
    np.testing.assert_allclose(vec.iteration_s, sca.iteration_s, rtol=1e-12)
    np.testing.assert_allclose(vec.memory_bytes, sca.memory_bytes, rtol=1e-12)


@pytest.mark.parametrize(
    ("extra", "match"),
    [({"ep_comm_overlap": True}, "execution.ep_comm_overlap = True: search does not model"),
     ({"pipeline_schedule": "dualpipe"}, "pipeline_schedule = 'dualpipe': search does not"),
     ({"host_launches": True}, "host_launches = True: search does not model"),
     ({"zero_shard_ranks": 8}, "zero_shard_ranks = 8: search does not model"),
     ({"torchtitan_memory": True}, "torchtitan_memory = True: search does not model"),
     ({"torchtitan_op_sac": True}, "torchtitan_op_sac = True: search does not model"),
     ({"offload_modules": ("expert_fc1",)}, "offload_modules = \\('expert_fc1',\\): search"),
     ({"seq_len": 2048}, "execution.seq_len = 2048 but the search runs seq_len = 4096"),
     ({"precision": "fp8"}, "execution.precision = 'fp8' but the search runs precision")],
)  # fmt: skip
def test_stack_the_search_cannot_price_is_refused(extra: dict, match: str) -> None:
    model = load_model("mixtral-8x7b-v0.1")
    stack = _stack(256, 4096).model_copy(update=extra)
    with pytest.raises(ConfigError, match=match) as err:
        search(model, SYS, 256, 4096, limit=10, stack=stack)
    assert "\n" not in str(err.value)


def test_schedule_level_stack_fields_are_priced() -> None:
    """The closed form reads the stack's CPU-optimizer overlap/threads and gradient dtype:
    the optimizer-offload layouts cost more without the overlap, and agree with predict."""
    model = load_model("llama-3.1-8b")
    slow = {"overlap_cpu_optimizer": False, "cpu_optimizer_threads": 2, "grad_reduce_fp32": False}
    plain = search(model, SYS, 256, 8192)
    res = search(model, SYS, 256, 8192, stack=ExecutionSpec(global_batch=256, seq_len=8192, **slow))
    off = (res.configs["off"] & 4) > 0
    assert (res.iteration_s[off] > plain.iteration_s[off]).all()
    rank = res.ranked()
    for i in [*rank[off[rank]][:3], *rank[:3]]:
        it = predict(make_job(model, res.execution(int(i)), SYS)).iteration_s
        assert it == pytest.approx(res.iteration_s[i], rel=0.01), res.row(int(i))
