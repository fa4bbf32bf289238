import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from starfabric.astral.seer.validate import REQUIRED
from starfabric.cli import app

runner = CliRunner()
EXAMPLES = Path(__file__).parents[3] / "examples" / "jobs"
CSV = Path(__file__).parents[2] / "data" / "published_runs" / "megatron_weak_scaling.csv"


def test_predict_json_and_trace(tmp_path: Path) -> None:
    trace = tmp_path / "t.json"
    res = runner.invoke(
        app, ["astral", "seer", "predict", str(EXAMPLES / "deepseek_v3_moe.yaml"), "--json",
              "--trace", str(trace)],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["layout"]["ep"] == 64 and out["iteration_s"] > 0
    assert json.loads(trace.read_text())["traceEvents"]


def test_predict_table() -> None:
    res = runner.invoke(
        app, ["astral", "seer", "predict", str(EXAMPLES / "llama31_70b_dense.yaml")]
    )
    assert res.exit_code == 0, res.output
    assert "iteration" in res.output and "MFU" in res.output


def test_bad_job_is_one_line_exit_2(tmp_path: Path) -> None:
    job = tmp_path / "j.yaml"
    job.write_text("model: llama-3.1-8b\nexecution: {global_batch: 8, seq_len: 128, tp: 3}\n"
                   "system: {gpu: H100, gpus: 8}\n")  # fmt: skip
    res = runner.invoke(app, ["astral", "seer", "predict", str(job)])
    assert res.exit_code == 2
    assert res.output.startswith("error: tp*pp*cp = 3*1*1 = 3 does not divide gpus = 8")
    assert res.output.count("\n") == 1


def test_validate_writes_json_and_fails_when_limits_are_exceeded(tmp_path: Path) -> None:
    out = tmp_path / "v.json"
    res = runner.invoke(app, ["astral", "seer", "validate", "--csv", str(CSV), "--json", str(out)])
    assert res.exit_code == 0, res.output
    data = json.loads(out.read_text())
    assert len(data["rows"]) == 19 and data["max_abs_error"] <= 0.10
    assert "micro_batch=" in res.output
    strict = runner.invoke(
        app, ["astral", "seer", "validate", "--csv", str(CSV), "--max-row", "0.0001"]
    )
    assert strict.exit_code == 1 and "FAIL" in strict.output


def test_validate_reports_rows_it_cannot_predict(tmp_path: Path) -> None:
    import csv

    rows = list(csv.DictReader(CSV.open()))
    bad = dict(rows[0], row_id="X-1", gpu="TPU-v5p")
    p = tmp_path / "mixed.csv"
    with p.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows([rows[0], bad])
    out = tmp_path / "v.json"
    res = runner.invoke(app, ["astral", "seer", "validate", "--csv", str(p), "--json", str(out)])
    assert res.exit_code == 1 and "X-1: not predicted" in res.output
    data = json.loads(out.read_text())
    assert (
        data["not_predicted"][0]["row_id"] == "X-1"
        and "unknown gpu" in data["not_predicted"][0]["reason"]
    )
    assert len(data["rows"]) == 1


def test_validate_plot(tmp_path: Path) -> None:
    png = tmp_path / "v.png"
    res = runner.invoke(app, ["astral", "seer", "validate", "--csv", str(CSV), "--plot", str(png)])
    assert res.exit_code == 0, res.output
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_search_bad_ray_address_is_one_line_exit_2() -> None:
    res = runner.invoke(
        app, ["astral", "seer", "search", "llama-3.1-8b", "--gpus", "8", "--global-batch", "64",
              "--seq-len", "2048", "--ray", "nowhere"],
    )  # fmt: skip
    assert res.exit_code == 2
    assert res.output.startswith("error: --ray 'nowhere' is not a Ray address")
    assert res.output.count("\n") == 1


def _stack_job(tmp_path: Path, execution: str) -> str:
    job = tmp_path / "job.yaml"
    job.write_text(
        "model: mixtral-8x7b-v0.1\nexecution:\n  global_batch: 64\n  seq_len: 2048\n"
        "  tp: 4\n  pp: 2\n" + execution + "system: {gpu: H100, gpus: 16}\n"
    )
    return str(job)


def test_search_takes_the_stack_from_a_job_file(tmp_path: Path) -> None:
    """--stack: the job's execution stack prices every layout; its layout fields (tp, pp)
    are what the search varies; the JSON names the stack."""
    out = tmp_path / "s.json"
    job = _stack_job(tmp_path, "  moe_dispatcher: deepep\n  flash_kernel: fa2\n")
    args = ["astral", "seer", "search", "mixtral-8x7b-v0.1", "--gpus", "16", "--global-batch",
            "64", "--seq-len", "2048", "--top", "3"]  # fmt: skip
    res = runner.invoke(app, [*args, "--stack", job, "--json", str(out)])
    assert res.exit_code == 0, res.output
    assert "stack: flash_kernel=fa2, moe_dispatcher=deepep" in res.output
    data = json.loads(out.read_text())
    assert data["stack"] == {"flash_kernel": "fa2", "moe_dispatcher": "deepep"}
    plain = runner.invoke(app, [*args, "--json", str(out)])
    assert plain.exit_code == 0, plain.output
    assert json.loads(out.read_text())["top"] != data["top"]


@pytest.mark.parametrize(
    ("execution", "error"),
    [("  moe_dispatcher: nccl\n", "execution: field 'moe_dispatcher' = 'nccl'"),
     ("  no_such_field: 1\n", "no_such_field"),
     ("  ep_comm_overlap: true\n", "search does not model it"),
     ("  precision: fp8\n", "execution.precision = 'fp8' but the search runs precision")],
)  # fmt: skip
def test_search_bad_stack_is_one_line_exit_2(tmp_path: Path, execution: str, error: str) -> None:
    job = _stack_job(tmp_path, execution)
    res = runner.invoke(
        app, ["astral", "seer", "search", "mixtral-8x7b-v0.1", "--gpus", "16", "--global-batch",
              "64", "--seq-len", "2048", "--stack", job],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert res.output.startswith("error: ") and error in res.output, res.output
    assert res.output.count("\n") == 1


def test_search_refuses_a_megatron_script_as_stack(tmp_path: Path) -> None:
    script = tmp_path / "run.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 pretrain_gpt.py --tensor-model-parallel-size 2 "
        "--num-layers 2 --hidden-size 256 --num-attention-heads 8 --seq-length 2048 "
        "--max-position-embeddings 2048 --micro-batch-size 1 --global-batch-size 64\n"
    )
    res = runner.invoke(
        app, ["astral", "seer", "search", "llama-3.1-8b", "--gpus", "8", "--global-batch", "64",
              "--seq-len", "2048", "--stack", str(script)],
    )  # fmt: skip
    assert res.exit_code == 2, res.output
    assert "host launches" in res.output and res.output.count("\n") == 1, res.output


def test_validate_prints_error_per_source_and_reports_undefined_runs(tmp_path: Path) -> None:
    import csv

    dev = CSV.with_name("development_runs.csv")
    keep = {"K22-ABS-01", "NEMO2407-05", "N21-T2-09", "MS-T2-01"}
    rows = [r for r in csv.DictReader(dev.open()) if r["row_id"] in keep]
    p = tmp_path / "dev.csv"
    with p.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    res = runner.invoke(
        app,
        ["astral", "seer", "validate", "--csv", str(p), "--max-mean", "0.2", "--max-row", "0.3"],
    )
    assert res.exit_code == 0, res.output
    assert "error per source" in res.output and "NEMO_2407_PERF" in res.output
    assert "predicted 3 of 4 rows" in res.output
    assert "K22-ABS-01: not predicted" in res.output and "undefined" in res.output


def test_predict_reads_a_megatron_launch_script(tmp_path: Path) -> None:
    script = tmp_path / "train.sh"
    script.write_text(
        "torchrun --nproc_per_node 8 --nnodes 1 pretrain_gpt.py --num-layers 24 "
        "--hidden-size 2048 --num-attention-heads 16 --seq-length 2048 --micro-batch-size 2 "
        "--global-batch-size 64 --bf16 --tensor-model-parallel-size 2\n"
    )
    res = runner.invoke(app, ["astral", "seer", "predict", str(script), "--gpu", "A100"])
    assert res.exit_code == 0, res.output
    assert "tp=2" in res.output and "A100" in res.output
    bad = tmp_path / "bad.sh"
    bad.write_text(script.read_text().replace("--bf16", "--bf16 --warp-speed 9"))
    res = runner.invoke(app, ["astral", "seer", "predict", str(bad)])
    assert res.exit_code == 2 and "--warp-speed" in res.output


@pytest.mark.parametrize(
    ("body", "words"),
    [
        (b"\xff\xfe\x00row_id,model\n", "not UTF-8"),
        (
            ",".join(REQUIRED).encode() + b'\nA,"' + b"x" * 200_000 + b'"\n',
            "not a readable CSV",
        ),
        (",".join(REQUIRED).encode() + b"\n", "a header and no rows"),
    ],
)
def test_validate_unreadable_csv_is_one_line_exit_2(
    tmp_path: Path, body: bytes, words: str
) -> None:
    """A --csv file that is not UTF-8 text, that the csv module cannot parse (a field over
    its size limit), or that has a header and no rows (it used to print "predicted 0 of 0
    rows" and exit 0) is a one-line error with exit code 2, not a traceback."""
    p = tmp_path / "bad.csv"
    p.write_bytes(body)
    res = runner.invoke(app, ["astral", "seer", "validate", "--csv", str(p)])
    assert res.exit_code == 2, res.output
    assert words in res.output and "Traceback" not in res.output
