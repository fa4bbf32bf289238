"""How Seer reads a cuDNN release (seer/cudnn_release.py) from what a row or a user writes:
each case here was misread or crashed before its fix (session 18 review).

cuDNN's own numbering bounds what a release can be: cudnn_version.h defines
CUDNN_VERSION = MAJOR * 10000 + MINOR * 100 + PATCHLEVEL from cuDNN 9 on (MAJOR * 1000 +
MINOR * 100 + PATCHLEVEL for 7.x/8.x), so a minor has at most two digits, and the releases are
7.x, 8.x and 9.x; "cuDNN 12.4" is a CUDA version written in the wrong place, not a release.
"""

from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.astral.seer import make_job, predict
from starfabric.astral.seer.cudnn_release import (
    MEASURED_HOPPER,
    container_release,
    parse_release,
    row_release,
    stated_release,
)
from starfabric.cli import app
from starfabric.errors import ConfigError

JOB = Path(__file__).parents[3] / "examples" / "jobs" / "llama31_70b_dense.yaml"


@pytest.mark.parametrize(
    ("text", "release"),
    [
        ("cuDNN 9.11.0", (9, 11)),
        ("cudnn9.10", (9, 10)),
        ("CUDA 12.9 cuDNN9.10.2", (9, 10)),
        ("TE 2.4, cuDNN 9.10", (9, 10)),
        # cudnn_version.h's encoding, as an environment dump prints it
        ("CUDNN_VERSION=91002", (9, 10)),
        ("torch.backends.cudnn.version() = 91900", (9, 19)),
        ("CUDNN_VERSION: 8907", (8, 9)),
        # as PyTorch's environment line prints it (cudnn-frontend's B200 log: "cudnn 90900")
        ("torch 2.7.0a0+79aa17489c.nv25.04, cudnn 90900", (9, 9)),
        # the pip wheel of the cuDNN library names its release
        ("nvidia-cudnn-cu12==9.10.2.21", (9, 10)),
        ("cuDNN/9.4", (9, 4)),
        # a frontend version ahead of the backend's release is skipped, not the end of the cell
        ("cuDNN v1.13 (frontend); cuDNN 9.4", (9, 4)),
        ("cuDNN frontend 1.13", None),
        ("cudnn-frontend 1.13.0", None),
        # not a cuDNN release: the numbering has no cuDNN 10-12 and no three-digit minor
        ("cuDNN 12.4", None),
        ("cuDNN 10.1", None),
        ("cuDNN 9.100", None),
        ("CUDNN_VERSION=120400", None),
        # negated, compared or planned: not what the run used
        ("without cuDNN 9.4", None),
        ("TE 2.4 (not cuDNN 9.13)", None),
        ("compared with cuDNN 9.19", None),
        ("will move to cuDNN 9.19 next", None),
        ("compared with cuDNN 9.19; this run cuDNN 9.10", (9, 10)),
        # the words and separators a transcriber puts between the name and the release
        ("cuDNN backend 9.10", (9, 10)),
        ("cuDNN version: 9.10", (9, 10)),
        ("cuDNN: 9.10.2", (9, 10)),
        ("cuDNN=9.10", (9, 10)),
        ("cuDNN release 9.10", (9, 10)),
        ("cudnn_version 9.10", (9, 10)),
        ("CUDNN_VERSION = 9.10.2", (9, 10)),
        ("cuDNN (9.10)", (9, 10)),
        ("cuDNN library v9.10.2", (9, 10)),
        # a speed-up or a share after the name is no release
        ("cuDNN (8.5% faster)", None),
        ("cuDNN: 9.1x the FA2 rate", None),
    ],
)
def test_stated_release(text: str, release: tuple[int, int] | None) -> None:
    assert stated_release(text) == release


@pytest.mark.parametrize(
    ("text", "tag"),
    [
        ("NeMo 25.09", "25.09"),
        ("nemo:25.09.01", "25.09"),
        ("nvcr.io/nvidia/nemo:25.11", "25.11"),
        ("not the NeMo 25.09 container", None),
        ("without NeMo 26.04", None),
        ("planned upgrade to NeMo 26.04", None),
        ("we plan to move to the NeMo 26.04 image", None),
        ("compared with NeMo 25.09", None),
        ("NeMo 25.11 (instead of nemo:25.09)", "25.11"),
        ("rather than NeMo 25.09: NeMo 25.11 container", "25.11"),
        # a day.month.year date after the name is no container tag
        ("NeMo run of 25.09.2025", None),
        ("NeMo 25.09.2025 snapshot", None),
    ],
)
def test_container_named_for_the_run(text: str, tag: str | None) -> None:
    got = container_release(text)
    assert (got[0] if got else None) == tag


def test_a_negated_container_leaves_the_release_unknown() -> None:
    rel, how = row_release("Megatron-Core 0.14, not the NeMo 25.09 container")
    assert rel is None and how.startswith("unknown (not stated)")


@pytest.mark.parametrize("text", ["12.4", "10.0", "9.100", "6.5", "v12.8.1"])
def test_parse_release_refuses_what_is_no_cudnn_release(text: str) -> None:
    with pytest.raises(ValueError, match="cuDNN"):
        parse_release(text)


@pytest.mark.parametrize("value", ["9.10", "9.19.1", "8.9.7", "7.6"])
def test_parse_release_keeps_real_releases(value: str) -> None:
    assert parse_release(value) == tuple(int(x) for x in value.split(".")[:2])


@pytest.mark.parametrize("value", ["12.4", "9.100"])
def test_cli_refuses_a_release_cudnn_never_had(value: str) -> None:
    """`--cudnn 12.4` (a CUDA version) used to take 9.19.1's multiplier silently."""
    res = CliRunner().invoke(app, ["astral", "seer", "predict", str(JOB), "--cudnn", value])
    assert res.exit_code == 2, res.output
    assert f"--cudnn {value!r}" in res.output and "fix:" in res.output
    assert "Traceback" not in res.output


def _job_yaml(tmp_path: Path, line: str) -> Path:
    text = JOB.read_text().replace("execution:\n", f"execution:\n  {line}\n", 1)
    path = tmp_path / "job.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("line", "says"),
    [
        # YAML reads an unquoted 9.10 as the number 9.1: refuse, naming the quoting fix
        ("cudnn_release: 9.10", "quote it"),
        ("cudnn_release: '12.4'", "12.4"),
    ],
)
def test_job_yaml_release_is_refused_in_one_line(tmp_path: Path, line: str, says: str) -> None:
    res = CliRunner().invoke(app, ["astral", "seer", "predict", str(_job_yaml(tmp_path, line))])
    assert res.exit_code == 2, res.output
    assert "cudnn_release" in res.output and says in res.output
    assert "Traceback" not in res.output


def test_execution_spec_refuses_no_cudnn_release() -> None:
    with pytest.raises((ConfigError, ValueError), match="cuDNN"):
        make_job("llama-3.1-8b", {"global_batch": 8, "seq_len": 4096, "cudnn_release": "12.4"},
                 {"gpu": "H100", "gpus": 8})  # fmt: skip


def test_quoted_yaml_release_is_the_release_written(tmp_path: Path) -> None:
    """'9.10' in quotes is cuDNN 9.10 (interpolated between 9.4 and 9.19), not 9.1."""
    base = {"global_batch": 8, "seq_len": 8192, "tp": 1, "pp": 1}
    sys = {"gpu": "H100", "gpus": 8}
    t = {r: predict(make_job("llama-3.1-8b", {**base, "cudnn_release": r}, sys)).iteration_s
         for r in (None, "9.1", "9.10", "9.19")}  # fmt: skip
    assert t["9.1"] == t[None]
    assert t["9.19"] < t["9.10"] < t["9.1"]
    assert MEASURED_HOPPER[(9, 19)][1] > 1.0


def test_search_prices_the_release_as_predict_does() -> None:
    """A stack's cudnn_release reaches every searched layout (cost.attention_rates through
    make_context) and execution(i) hands it to predict: on H100 every layout's time changes and
    the top 10 agree with predict within 1%; on B200 (no per-release data) nothing changes.
    (Not every H100 layout gets faster: a CP + ZeRO-3 layout loses more CP-ring and DP hiding
    window than attention time, in predict as in search; reported, not changed here.)"""
    from starfabric.astral.seer.model import load_model
    from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec
    from starfabric.astral.seer.search import search

    model = load_model("llama-3.1-8b")
    stack = ExecutionSpec(global_batch=64, seq_len=8192, cudnn_release="9.19.1")
    h100, b200 = SystemSpec(gpu="H100", gpus=16), SystemSpec(gpu="B200", gpus=16)
    res = search(model, h100, 64, 8192, limit=200, stack=stack)
    plain = search(model, h100, 64, 8192, limit=200)
    assert (res.iteration_s != plain.iteration_s).all()
    assert (res.iteration_s < plain.iteration_s).mean() > 0.9
    for i in res.ranked()[:10]:
        ex = res.execution(int(i))
        assert ex["cudnn_release"] == "9.19.1"
        it = predict(make_job(model, ex, h100)).iteration_s
        assert it == pytest.approx(res.iteration_s[i], rel=0.01)
    bw = search(model, b200, 64, 8192, limit=200, stack=stack)
    assert (bw.iteration_s == search(model, b200, 64, 8192, limit=200).iteration_s).all()
