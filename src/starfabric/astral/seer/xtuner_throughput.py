"""How XTuner's published throughput figures read: one mmengine iteration, i.e. one micro-step.

XTuner's speed benchmark (docs/zh_cn/acceleration/benchmark.rst @7575f2c) prints TGS and
TFLOP/s per GPU computed by its `ThroughputHook` (xtuner/engine/hooks/throughput_hook.py
@7575f2c). What that figure measures, from the code:

- `after_train_iter` (lines 88-150) divides one data batch's tokens per GPU
  (`batch_size * sequence_len / sp`, lines 96-99, 145-146) by
  `message_hub.get_scalar('train/time').current()` (line 102): the CURRENT iteration's time,
  which mmengine's IterTimerHook records per `run_iter` (the hook's priority 55 puts it after
  the timer, lines 18-20).
- One mmengine iteration is one data batch, i.e. one micro-step: with `--deepspeed`,
  xtuner/tools/train.py @7575f2c (lines 283-332) sets DeepSpeed's
  `gradient_accumulation_steps` to the config's `accumulative_counts` and replaces the optim
  wrapper by mmengine's `DeepSpeedOptimWrapper`, whose `update_params` calls the engine's
  `backward` and `step` on every iteration; DeepSpeed's `step` takes the optimizer step only at
  the accumulation boundary (deepspeed/runtime/engine.py v0.12.3 `step`, lines 2117-2133).
- The benchmark configs log every iteration without smoothing (`log_interval = 1`, LoggerHook
  `interval=log_interval`, `log_processor = dict(by_epoch=False, window_size=log_interval)`,
  e.g. xtuner/configs/llama_speed_benchmark/llama2_70b/llama2_70b_full_alpaca_enzh_32k_sp4.py
  lines 54, 172, 212), so each printed TGS is one iteration's.

So with `accumulative_counts` = G > 1, G - 1 of every G printed lines are micro-steps without
the work done only at the accumulation boundary, and one line carries all of it; with G = 1
every line is a whole optimizer step. A row's iteration time derived as tokens per step /
(TGS x GPUs) is G x (one non-boundary micro-step). Seer predicts a whole optimizer step, so the
comparable figure is that step less the boundary-only work (`boundary_s` of the schedule: the
optimizer, the ZeRO-1/2 parameter all-gather and, under ZeRO-1 only, the exposed end-of-step
gradient reduction: ZeRO >= 2 reduce-scatters in every backward, DeepSpeed engine.py
`allreduce_gradients`, lines 1885-1887, so under ZeRO-3 only the optimizer is boundary-only).

Which printed line the benchmark's authors copied is not stated; the reader takes the common
line (a non-boundary micro-step), the one G - 1 of G lines show.
"""

from __future__ import annotations

import math
import re

from starfabric.astral.seer.statements import stated

FRAMEWORK_WORDS = ("xtuner",)
"""Words in a row's framework cell naming XTuner (whose benchmark figures come from its hook)."""
HOOK_WORDS = (
    r"\bTGS\b",
    r"throughput[\s_-]?hook",
    r"\btok(?:en)?s?\s*(?:/|per)\s*(?:s|sec|second)\s*(?:/|per)\s*GPU\b",
    r"\btok(?:en)?s?\s*(?:/|per)\s*GPU\s*(?:/|per)\s*(?:s|sec|second)\b",
)
"""Words in a row's metric or FLOP-convention cell naming the hook's figure: TGS, the hook
(`ThroughputHook`, its file throughput_hook.py), or TGS spelled out ("tokens/s/GPU",
"tokens per GPU per second"), the hook's only throughput per GPU."""
LOG_INTERVAL = 1
"""Iterations per printed line in XTuner's speed-benchmark configs (`log_interval = 1`,
`window_size=log_interval`: no averaging across iterations)."""

_FRAMEWORK = re.compile("|".join(FRAMEWORK_WORDS), re.I)
_HOOK = re.compile("|".join(HOOK_WORDS), re.I)


def reads_hook_figure(framework: str | None, metric: str | None, convention: str | None) -> bool:
    """Whether a row's published figure is XTuner's ThroughputHook per-iteration figure: the
    framework cell names XTuner and the metric or FLOP-convention cell names TGS or the hook."""
    return bool(stated(_FRAMEWORK, framework)) and bool(stated(_HOOK, metric, convention))


def logged_iteration_s(
    step_s: float, boundary_s: float, accumulation: int, at_boundary: bool
) -> float:
    """The `train/time` of one mmengine iteration inside an optimizer step of `step_s` seconds
    with `accumulation` micro-steps, `boundary_s` of which only the boundary iteration runs."""
    if accumulation < 1:
        raise ValueError(f"accumulation must be >= 1, got {accumulation}")
    if not 0.0 <= boundary_s <= step_s:
        raise ValueError(f"boundary_s {boundary_s} outside [0, step_s={step_s}]")
    micro = (step_s - boundary_s) / accumulation
    return micro + boundary_s if at_boundary or accumulation == 1 else micro


def boundary_line_share(accumulation: int, log_interval: int = LOG_INTERVAL) -> float:
    """Share of printed lines that are boundary iterations: the logger prints iteration i when
    (i + 1) % log_interval == 0 and the boundary is (i + 1) % accumulation == 0."""
    if accumulation < 1 or log_interval < 1:
        raise ValueError("accumulation and log_interval must be >= 1")
    # Over lcm(accumulation, log_interval) iterations, lcm / log_interval lines are printed
    # and exactly one of them (the lcm-th iteration) is a boundary.
    lcm = math.lcm(accumulation, log_interval)
    return log_interval / lcm


def comparable_step_s(step_s: float, boundary_s: float, accumulation: int) -> float:
    """Seer's step time as the published figure reads it: accumulation x the logged time of a
    non-boundary micro-step (the whole step when accumulation is 1)."""
    return accumulation * logged_iteration_s(step_s, boundary_s, accumulation, at_boundary=False)
