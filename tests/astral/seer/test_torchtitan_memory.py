"""TorchTitan's fp32 loss and FSDP2's in-flight buffers (seer/torchtitan_memory.py) against
the byte counts read from torchtitan 9dec370 (train.py l.131-134, parallelize_llama.py
l.318-339) and the published 2024-12 peaks (tests/data/published_memory)."""

from pathlib import Path
from typing import Any

import pytest

from starfabric.astral.seer import load_model, make_job, predict, resolve_layout, torchtitan_memory
from starfabric.astral.seer.memory import RESERVED_BYTES
from starfabric.astral.seer.peak_memory import read_peaks, seer_memory
from starfabric.astral.seer.schedule import layer_params
from starfabric.astral.seer.validate import _framework

DATA = Path(__file__).parents[2] / "data"
GIB = 2**30
FRAGMENTATION_MAX = 0.25  # XTuner's published reserved/allocated (test_peak_memory.py)
LLAMA8 = load_model("llama-3.1-8b")
EX: dict[str, Any] = {"global_batch": 8, "micro_batch": 1, "seq_len": 8192, "precision": "bf16",
                      "tp": 1, "pp": 1, "zero": 3, "recompute": "full"}  # fmt: skip
SYSTEM = {"gpu": "H100", "gpus": 8, "gpus_per_node": 8}


class _Job:
    def __init__(self, **ex: Any) -> None:
        job = make_job(LLAMA8, EX | ex, SYSTEM)
        self.model, self.execution = job.model, job.execution
        self.layout = resolve_layout(job.model, job.execution, job.system)
        self.memory = predict(job).memory


def _mem(**ex: Any) -> tuple[_Job, Any]:
    job = _Job(**ex)
    return job, job.memory


def test_the_loss_adds_two_fp32_tensors_per_logit_per_vocab_shard() -> None:
    """12 bytes per logit at the loss backward, 4 of them already counted: 8 more, on the
    rank's vocabulary shard (loss parallel)."""
    for tp in (1, 2, 8):
        job, _ = _mem(tp=tp)
        got = torchtitan_memory.loss_extra_bytes(job.model, job.execution, job.layout)
        assert got == pytest.approx(8.0 * 8192 * LLAMA8.vocab / tp)


def test_fsdp2_buffers_follow_the_source() -> None:
    """Without PP: two bf16 blocks and the root gathered, one block's bf16 gradients and their
    fp32 reduce-scatter copy; with PP only the reduce-scatter (the stage stays gathered);
    nothing without FSDP."""
    job, _ = _mem()
    ex, lay = job.execution, job.layout
    block = layer_params(LLAMA8, lay, False)
    root = torchtitan_memory.root_params(LLAMA8, lay)
    assert root == pytest.approx(2 * LLAMA8.vocab * LLAMA8.hidden + LLAMA8.hidden)
    f = torchtitan_memory.fsdp2_inflight_bytes
    assert f(ex, lay, block, root, True) == pytest.approx(2 * 2 * block + 2 * root + 6 * block)
    assert f(ex, lay, block, root, False) == pytest.approx(2 * 2 * block + 6 * block)
    pp_job, _ = _mem(pp=2)
    assert f(pp_job.execution, pp_job.layout, block, root, True) == pytest.approx(6 * block)
    z1 = _Job(zero=1)
    assert f(z1.execution, z1.layout, block, root, True) == 0.0


def test_the_flag_adds_exactly_the_two_terms() -> None:
    job, off = _mem()
    _, on = _mem(torchtitan_memory=True)
    ex, lay = job.execution, job.layout
    block = layer_params(LLAMA8, lay, False)
    root = torchtitan_memory.root_params(LLAMA8, lay)
    want = torchtitan_memory.loss_extra_bytes(LLAMA8, ex, lay)
    want += torchtitan_memory.fsdp2_inflight_bytes(ex, lay, block, root, True)
    assert on.total - off.total == pytest.approx(want)
    assert on.weights == off.weights and on.grads == off.grads


def test_validate_marks_only_torchtitan_rows() -> None:
    assert _framework({"framework": "TorchTitan (PyTorch nightly 2024-12, FSDP2)"})[
        "torchtitan_memory"
    ]
    assert not _framework({"framework": "Megatron-Core 0.12"})["torchtitan_memory"]


def test_table_2_peaks_are_explained_up_to_fragmentation() -> None:
    """TorchTitan's Table 2 (Llama 3.1 8B, 32K tokens per rank, FSDP2 + CP, full AC): the
    loss dominates; with it, Seer's tensors lie within the allocator's fragmentation bound
    of each published reserved peak (they were at 0.48 of it)."""
    rows = [r for r in read_peaks(DATA / "published_memory" / "peak_memory.csv")
            if r.memory_id.startswith("TTMEM-T2-")]  # fmt: skip
    assert len(rows) == 4
    for r in rows:
        tensors = (seer_memory(r, DATA / "published_runs").total - RESERVED_BYTES) / GIB
        assert r.published_gib is not None
        assert tensors <= r.published_gib <= tensors * (1 + FRAGMENTATION_MAX)


def test_per_op_sac_keeps_the_save_list_tensors() -> None:
    """Llama 3.1 8B, TP 1: block input, wq and wv outputs, SDPA output, w1 and w2 outputs in
    bf16 plus the fp32 log-sum-exp: (4h + kv + ffn) * 2 + 4 * heads bytes per token."""
    got = torchtitan_memory.op_sac_bytes_per_token(4096, 32, 8, 128, 128, 14336, 1, 1)
    assert got == 2 * (4 * 4096 + 8 * 128 + 14336) + 4 * 32
    _, core = _mem(recompute="selective")
    _, op = _mem(recompute="selective", torchtitan_op_sac=True)
    assert op.activations < core.activations
    assert torchtitan_memory.states_op_sac(
        "TorchTitan (2024-12)", "selective (torchtitan op-level SAC)"
    )
    assert not torchtitan_memory.states_op_sac("Megatron-Core", "selective (op-level)")
