"""16-bit tensors an FP8 run keeps beside the FP8 casts its GEMMs save for the backward.

Under FP8 (Transformer Engine) a linear layer saves its input as the FP8 cast it quantized,
not the 16-bit tensor; Seer's per-tensor activation count (activations.py) charges GEMM
inputs 1 byte then. Two 16-bit producers of GEMM inputs keep their own copy alive anyway:

* Fused attention saves its 16-bit output O for its backward. In 16-bit training O is also
  the output projection's saved input, one tensor; under FP8 the projection saves an FP8
  cast of it beside O, so the pair costs 2 + 1 bytes per element instead of 2 (Megatron-LM
  docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md
  @1d9edcf, section 2.2.2: "SDPA saves a BF16 output tensor, while Projection Linear saves
  an FP8 tensor quantized from the input tensor. These two tensors do not share memory").
* The MoE router's gating GEMM runs in high precision (fp32 router dtype) and saves its
  16-bit input, the pre-MoE norm output (Megatron-Core megatron/core/transformer/moe/
  moe_utils.py @e61c384, RouterGatingLinearFunction: `ctx.save_for_backward(inp, weight,
  bias)`), while the shared expert's fc1 saves an FP8 cast of the same tensor.

DeepSeek's own framework caches the projection input once, in a low-precision format the
attention backward also reads (DeepSeek-V3 technical report, arXiv 2412.19437, section
3.3.2), so a DualPipe row (DeepSeek's stack, validate.py) sets `fp8_16bit_copies` False.

Checked against the Megatron-Core MoE paper (Scalable Training of Mixture-of-Experts Models
with Megatron Core, arXiv 2603.07685, section "Breaking the Memory Wall"): FP8 activations
save "roughly 16 GB" per GPU on DeepSeek-V3 (PP4 x VPP4 x EP64, 256 GPUs); Seer saved 29 GB
without these two copies and 16-17 GB with them (tests/astral/seer/test_moe_memory.py).
"""

from __future__ import annotations


def attention_output_copy(e: float, g: float, elems: float, te: bool = True) -> float:
    """Bytes per token of the 16-bit attention output kept beside the projection's FP8
    input (0 when GEMM inputs are saved in 16-bit, g == e: the same tensor, or when the
    framework shares one low-precision copy, `te` False)."""
    return e * elems if g < e and te else 0.0


def router_input_copy(e: float, g: float, elems: float, te: bool = True) -> float:
    """Bytes per token of the router's saved 16-bit input under FP8 (0 in 16-bit training,
    where it is the same tensor the shared expert's fc1 saves, already counted)."""
    return e * elems if g < e and te else 0.0
