"""Session 20's execution fields (te_cp_merge / te_release, moe_atomic_unpermute,
deepspeed_bf16_pipe, param_gather_dtype) as a job file gives them: the CLI refuses a bad value
and a combination where the field would be ignored or misapplied in one line naming the field
(exit 2, no traceback), and `seer search --stack` prices each field as `seer predict` does
(a differential on every searched layout the field moves)."""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.model import load_model
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec
from starfabric.astral.seer.search import search
from starfabric.cli import app

JOB = Path(__file__).parents[3] / "examples" / "jobs" / "llama31_70b_dense.yaml"
MOE_JOB = Path(__file__).parents[3] / "examples" / "jobs" / "deepseek_v3_moe.yaml"


def _job_yaml(tmp_path: Path, lines: list[str], base: Path = JOB) -> Path:
    text = base.read_text()
    if "topology:" in text:  # the simulated all-to-all is not what these checks are about
        text = text[: text.index("  topology:")]
    for old, new in (ln.split(" -> ") for ln in lines if " -> " in ln):
        text = text.replace(old, new)
    add = "".join(f"  {ln}\n" for ln in lines if " -> " not in ln)
    path = tmp_path / "job.yaml"
    path.write_text(text.replace("execution:\n", f"execution:\n{add}", 1))
    return path


CASES = [
    # bad values
    (["te_release: 1.10"], JOB, "te_release", "quote it"),
    (["te_release: 'x1'"], JOB, "te_release", "MAJOR.MINOR"),
    (["te_cp_merge: maybe"], JOB, "te_cp_merge", "true or false"),
    (["deepspeed_bf16_pipe: 3"], JOB, "deepspeed_bf16_pipe", "true or false"),
    (["param_gather_dtype: fp32"], JOB, "param_gather_dtype", "'param' or 'grad'"),
    (["moe_atomic_unpermute: often"], MOE_JOB, "moe_atomic_unpermute", "true or false"),
    # combinations where the field would be ignored or misapplied
    (["te_release: '1.11'", "te_cp_merge: false"], JOB, "te_release", "drop one of them"),
    (["te_release: '1.11'", "flash_kernel: fa2"], JOB, "te_release", "flash_kernel: cudnn"),
    (["deepspeed_bf16_pipe: true", "precision: bf16 -> precision: fp16"], JOB,
     "deepspeed_bf16_pipe", "precision: bf16"),
    (["moe_atomic_unpermute: true"], MOE_JOB, "moe_atomic_unpermute", "moe_dispatcher: deepep"),
    (["moe_atomic_unpermute: true", "moe_dispatcher: deepep", "moe_flex_backend: hybridep"],
     MOE_JOB, "moe_atomic_unpermute", "hybridep"),
    (["moe_atomic_unpermute: true", "moe_dispatcher: deepep"], JOB, "moe_atomic_unpermute",
     "dense model"),
]  # fmt: skip


@pytest.mark.parametrize(("lines", "base", "field", "says"), CASES)
def test_predict_refuses_in_one_line(
    tmp_path: Path, lines: list[str], base: Path, field: str, says: str
) -> None:
    res = CliRunner().invoke(
        app, ["astral", "seer", "predict", str(_job_yaml(tmp_path, lines, base))]
    )
    assert res.exit_code == 2, res.output
    out = res.output.strip()
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert field in out and says in out and "fix:" in out


@pytest.mark.parametrize(("lines", "field"), [
    (["te_release: '1.11'", "te_cp_merge: false"], "te_release"),
    (["deepspeed_bf16_pipe: true"], "deepspeed_bf16_pipe"),  # the search runs fp16 below
    (["param_gather_dtype: fp32"], "param_gather_dtype"),
])  # fmt: skip
def test_search_stack_refuses_in_one_line(tmp_path: Path, lines: list[str], field: str) -> None:
    path = _job_yaml(tmp_path, [*lines, "precision: bf16 -> precision: fp16"])
    res = CliRunner().invoke(app, [
        "astral", "seer", "search", "llama-3.1-70b", "--gpus", "64", "--global-batch", "1024",
        "--seq-len", "8192", "--precision", "fp16", "--stack", str(path),
    ])  # fmt: skip
    assert res.exit_code == 2, res.output
    out = res.output.strip()
    assert "Traceback" not in out and len(out.splitlines()) == 1, out
    assert field in out and "fix:" in out


@pytest.mark.parametrize(
    ("field", "value", "unset", "gpus", "seq", "moves"),
    [
        # TE's CP ring merges: the CP layouts move
        ("te_cp_merge", False, True, 16, 32768, lambda c: c["cp"] > 1),
        ("te_release", "1.11", None, 16, 32768, lambda c: c["cp"] > 1),
        # the pre-57bfa7ca FP32 parameter gather: sharded layouts whose gradients are reduced
        # over more than one rank (DP x CP: Megatron's dp_cp group)
        ("param_gather_dtype", "grad", "param", 64, 4096,
         lambda c: (c["dp"] * c["cp"] > 1) & (c["zero"] >= 1)),
        # DeepSpeed's BF16 pipeline all-reduce: pipelined, sharded layouts, the same group
        ("deepspeed_bf16_pipe", True, False, 64, 4096,
         lambda c: (c["pp"] > 1) & (c["dp"] * c["cp"] > 1) & (c["zero"] >= 1)),
    ],
)  # fmt: skip
def test_search_prices_the_field_as_predict_does(field, value, unset, gpus, seq, moves) -> None:  # type: ignore[no-untyped-def]
    """search(stack=...) moves each layout by the ratio predict moves it: the field reaches the
    search's layer costs (te_*) or its closed-form DP traffic (evaluate.py) as predict's
    schedule. Layouts the field cannot touch keep their time exactly."""
    model, system = load_model("llama-3.1-8b"), SystemSpec(gpu="H100", gpus=gpus)
    res = search(model, system, 256, seq, limit=400,
                 # the grad-input collective stated as the reference's, so the field alone
                 # moves a layout (a DeepSpeed setting makes it blocking by default)
                 stack=ExecutionSpec(global_batch=256, seq_len=seq, tp_async_backward=True,
                                     **{field: value}))  # fmt: skip
    ref = search(model, system, 256, seq, limit=400)
    assert all((res.configs[c] == ref.configs[c]).all() for c in res.configs)
    hit = moves(res.configs)
    assert hit.any() and (~hit).any()
    assert (res.iteration_s[~hit] == ref.iteration_s[~hit]).all()
    assert (res.iteration_s[hit] != ref.iteration_s[hit]).any()
    ranked = [int(i) for i in res.ranked() if hit[i]][:6]
    assert ranked
    for i in ranked:
        ex = res.execution(i)
        assert ex[field] == value
        p_new = predict(make_job(model, ex, system)).iteration_s
        p_ref = predict(make_job(model, {**ex, field: unset}, system)).iteration_s
        want = p_new / p_ref
        assert res.iteration_s[i] / ref.iteration_s[i] == pytest.approx(want, rel=0.01), i
