"""What 2021-2022 Megatron-LM and NeMo (Apex) code overlapped, read from a row's framework cell.

Seer reads a pre-2023 row (`validate._legacy`) with every TP collective and the DP gradient
all-reduce exposed. Two overlaps of that era's code are narrower than Megatron-Core's and are
credited, each only where the row's framework and date say the run had that code (the TP one,
the same code in every era since, is read by `async_grad_input` for every row; this module
holds the stack and date readers it shares and the DP rule):

- **TP, backward of a column-parallel linear** (QKV, FC1, the output layer). Megatron-LM's
  `ColumnParallelLinearWithAsyncAllreduce` (megatron/mpu/layers.py, merge 6e1bde1e0f,
  2021-09-02, on by default: `--no-async-tensor-model-parallel-allreduce` turns it off) launches
  the grad-input all-reduce with `async_op=True` and runs the weight-gradient GEMM before waiting
  on it. With sequence parallelism (`LinearWithGradAccumulationAndAsyncCommunication`, merge
  9aad9203aa, 2022-05-20) the grad-input reduce-scatter is launched the same way before the
  weight-gradient GEMM, and the input all-gather that GEMM needs runs under the grad-input GEMM
  (Seer does not price that re-gather for any stack). Apex's copy of the layers, which NeMo's
  GPT used in 2021-22, has the all-reduce from 365fdc18 (2021-10-02; NeMo v1.10.0 pins apex
  5d8c8a8e, 2022-04-29) and the sequence-parallel form from 3ff1a10f (2022-06-23). The forward
  collectives and the row-parallel linears' backward ones stay blocking in both.
- **DP gradient all-reduce under the last micro-batch's backward**: NeMo's
  `MainParamsOptimizerWrapper(async_grad_allreduce=True)` (PR #4084, de0b445162, 2022-05-17;
  first release v1.10.0, 2022-07-01; the NeMo Megatron 22.05 container's changelog lists it) with `megatron_amp_O2` and no pipeline parallelism
  (megatron_gpt_model.py: `pipeline_model_parallel_size == 1`; from v1.11.0 also without
  sequence parallelism or gradient-accumulation fusion, megatron_base_model.py). Megatron-LM's
  own local DDP all-reduces after the backward pass (`--DDP-impl local`, training.py
  `allreduce_gradients`) through 2022, and GPT-NeoX's DeeperSpeed (eb7f5cff, 2021-09-20) builds
  its ZeRO stage-1 optimizer without `overlap_comm` and reduces in the pipeline engine's
  `ReduceGrads` step after the last backward, so neither is credited.

Other stacks of the era (GPT-NeoX's mpu, which still used the blocking `copy_to_model_parallel_
region` in 2022; DeepSpeed + Megatron TP forks; Meta's stacks) are not read as having either.
The hidden time reuses Seer's existing rules: the async collective is hidden by its partner
GEMM with `cost.DP_OVERLAP_RESIDUAL` of the hidden time left (NCCL kernels beside a GEMM), and
the DP all-reduce is `ExecutionSpec.overlap_grad_reduce` (schedule.py's buckets under the last
micro-batch's backward).
"""

from __future__ import annotations

import re

from starfabric.astral.seer import mcore_release, releases

YearMonth = releases.YearMonth

NEMO_ASYNC_DP_RELEASE: tuple[int, int] = (1, 10)
"""First NeMo release whose O2 GPT training all-reduces gradients asynchronously without a
pipeline (v1.10.0, 2022-07-01; PR #4084, de0b445162, 2022-05-17; v1.9.0 still all-reduces
after the backward pass)."""
NEMO_MEGATRON_ASYNC_DP_CONTAINER: tuple[int, int] = (22, 5)
"""First NeMo Megatron (bignlp) container whose changelog lists "Asynchronous gradient all-reduce
for GPT-3, T5, mT5 models with pipeline parallel size equal to 1" (NVIDIA/NeMo-Framework-Launcher
README.md section 7 'NeMo Megatron 22.05' @b20f85d4, 2022-06-03; its support matrix names a
NeMo 1.9.0 build, and its 5b.yaml already sets grad_allreduce_chunk_size_mb, a key only that
path reads)."""

_MEGATRON_LM = re.compile(r"^\s*megatron[- ]?lm\b(?![- ]?core)", re.I)
_NEMO = re.compile(r"\bnemo\b", re.I)
_NEMO_VERSION = re.compile(r"\bnemo(?:\s*framework)?\s*v?(\d)\.(\d+)", re.I)
_NEMO_MEGATRON_CONTAINER = re.compile(r"\bnemo[\s-]*megatron\s*(\d\d)\.(\d\d)\b", re.I)
_O2 = re.compile(r"\bO2\b|megatron_amp_o2", re.I)
_GA_FUSION_ON = re.compile(
    r"gradient[_ ]accumulation[_ ]fusion\s*(?:[:=]\s*)?(?:true|on|yes)", re.I
)


def stack(framework: str | None) -> str | None:
    """The stack whose code was read: "megatron-lm" for a cell that names plain Megatron-LM
    first (not Megatron-Core, not a stack built on its layers such as GPT-NeoX), "nemo" for
    NeMo / NeMo Megatron, else None."""
    fw = framework or ""
    if _MEGATRON_LM.search(fw) and "core" not in fw.lower():
        return "megatron-lm"
    if _NEMO.search(fw):
        return "nemo"
    return None


def software_month(framework: str | None, citation: str | None) -> YearMonth | None:
    """The (year, month) a row's software dates from: a YYYY-MM date or the newest release its
    framework cell names (`releases.release_date`); else the month of the paper it cites
    (`mcore_release.published_month`) when that agrees with the cell's bare year; else the
    cell's bare year as its January (a feature shipped later that year is not assumed)."""
    fw = framework or ""
    named = releases.release_date(fw)
    if named is not None:
        return named
    year = releases.stated_year(fw)
    paper = mcore_release.published_month(citation)
    if paper is not None and (year is None or paper[0] == year):
        return paper
    return (year, 1) if year is not None else None


def nemo_release(framework: str | None) -> tuple[int, int] | None:
    """The NeMo framework release (major, minor) a cell names ("NeMo 1.10.0"); a container tag
    ("NeMo 22.06") is not one."""
    m = _NEMO_VERSION.search(framework or "")
    return (int(m.group(1)), int(m.group(2))) if m else None


def async_dp_grad_reduce(
    framework: str | None, precision: str | None, pp: int | None, sp: bool
) -> bool:
    """Whether a NeMo row all-reduced its gradients under the last micro-batch's backward: a
    NeMo release from NEMO_ASYNC_DP_RELEASE or a NeMo Megatron container from
    NEMO_MEGATRON_ASYNC_DP_CONTAINER that the cell names, O2 stated (framework or precision
    cell), a stated PP of 1, no SP and no gradient-accumulation fusion stated (v1.11.0 turns it
    off with either; SP reached NeMo's GPT in that release)."""
    if stack(framework) != "nemo" or pp != 1 or sp:
        return False
    release = nemo_release(framework)
    container = _NEMO_MEGATRON_CONTAINER.search(framework or "")
    shipped = (release is not None and release >= NEMO_ASYNC_DP_RELEASE) or (
        container is not None
        and (int(container.group(1)), int(container.group(2))) >= NEMO_MEGATRON_ASYNC_DP_CONTAINER
    )
    text = f"{framework or ''} ; {precision or ''}"
    return shipped and bool(_O2.search(text)) and not _GA_FUSION_ON.search(text)
