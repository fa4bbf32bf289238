import numpy as np
import pytest

from starfabric.astral.seer import load_model, make_job, predict, resolve_layout
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, uneven_pipeline_layers
from starfabric.astral.seer.search import COLUMNS, RECOMPUTE, enumerate_configs, search
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
        row = {c: int(res.configs[c][i]) for c in COLUMNS}
        full = predict(make_job(model, _ex(row, 512, 8192, model.layers), system))
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
    ("name", "gpus", "gb", "seq"),
    [("llama-3.1-8b", 64, 256, 4096), ("llama-3.1-70b", 256, 256, 8192)],
)
def test_search_top20_agree_with_predict(name: str, gpus: int, gb: int, seq: int) -> None:
    """The vectorized evaluator and predict() are the same model: the 20 layouts search ranks
    first get (within 1%) the time predict gives each of them."""
    from starfabric.astral.seer import make_job, predict

    model = load_model(name)
    system = SystemSpec(gpu="H100", gpus=gpus)
    res = search(model, system, gb, seq)
    for row in res.top(20):
        ex = {"global_batch": gb, "seq_len": seq, "tp": row["tp"], "pp": row["pp"],
              "vpp": row["vpp"], "dp": row["dp"], "cp": row["cp"], "micro_batch": row["mb"],
              "recompute": row["recompute"]}  # fmt: skip
        it = predict(make_job(model, ex, system)).iteration_s
        assert it == pytest.approx(row["iteration_s"], rel=0.01), row
