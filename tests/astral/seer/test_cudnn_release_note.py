"""`seer predict --cudnn X` says when the release is not applied (session 18 review): the
multiplier (seer/cudnn_release.py) is measured on Hopper only, and it is cuDNN's kernel's, so
on Blackwell or with FlashAttention-2 it changes nothing; the output says so in one line (and
in the JSON's `notes`), exit 0, instead of silently ignoring the option."""

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.cudnn_release import not_applied
from starfabric.astral.seer.predict import cudnn_release_note
from starfabric.cli import app

JOB = Path(__file__).parents[3] / "examples" / "jobs" / "llama31_70b_dense.yaml"


def _job(tmp_path: Path, kernel: str) -> Path:
    text = JOB.read_text().replace("execution:\n", f"execution:\n  flash_kernel: {kernel}\n", 1)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


def _run(*args: str) -> tuple[int, str]:
    res = CliRunner().invoke(app, ["astral", "seer", "predict", *args])
    return res.exit_code, res.output


@pytest.mark.parametrize(
    ("gpu", "kernel", "says"),
    [
        ("B200", "cudnn", "measured on Hopper only"),
        ("GB300", "cudnn", "measured on Hopper only"),
        ("A100", "cudnn", "measured on Hopper only"),
        ("H100", "fa2", "FlashAttention-2 is not cuDNN"),
        ("B200", "fa2", "FlashAttention-2 is not cuDNN"),
    ],
)
def test_predict_prints_why_the_release_is_not_applied(
    tmp_path: Path, gpu: str, kernel: str, says: str
) -> None:
    code, out = _run(str(_job(tmp_path, kernel)), "--gpu", gpu, "--cudnn", "9.4")
    assert code == 0, out
    lines = [ln for ln in out.splitlines() if "cuDNN 9.4 release not applied" in ln]
    assert len(lines) == 1 and says in lines[0], out
    code, out = _run(str(_job(tmp_path, kernel)), "--gpu", gpu, "--cudnn", "9.4", "--json")
    assert code == 0
    notes = json.loads(out)["notes"]
    assert len(notes) == 1 and says in notes[0]


def test_predict_on_hopper_with_cudnn_prints_no_note(tmp_path: Path) -> None:
    code, out = _run(str(_job(tmp_path, "cudnn")), "--cudnn", "9.4")
    assert code == 0 and "not applied" not in out
    code, out = _run(str(_job(tmp_path, "cudnn")), "--cudnn", "9.4", "--json")
    assert code == 0 and json.loads(out)["notes"] == []


def test_the_note_is_given_exactly_when_the_multiplier_is_one() -> None:
    """The note and cost.attention_rates read the same condition: where the note is silent
    the release moves the rate (9.19 is measured 1.14x both ways on Hopper), where it speaks
    the rate is the unknown release's."""
    base = {"global_batch": 8, "seq_len": 8192, "tp": 1, "pp": 1}
    for gpu in ("H100", "H200", "B200", "GB200", "A100"):
        for kernel in ("cudnn", "fa2", "fa1"):
            ex = {**base, "flash_kernel": kernel}
            off = predict(make_job("llama-3.1-8b", ex, {"gpu": gpu, "gpus": 8})).iteration_s
            job = make_job("llama-3.1-8b", {**ex, "cudnn_release": "9.19"}, {"gpu": gpu, "gpus": 8})
            on = predict(job).iteration_s
            note = cudnn_release_note(job)
            assert (note is None) == (on != off), (gpu, kernel, note)


def test_no_release_no_note() -> None:
    assert not_applied(None, "fa2", hopper=False, gpu="B200") is None
    assert not_applied("9.4", "cudnn", hopper=True, gpu="H100") is None
