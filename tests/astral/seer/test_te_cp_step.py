"""TransformerEngine's p2p CP ring: the merge work around each step (seer/te_cp_step.py),
checked against TE's source (the local mirror when present) and a step-by-step transcription
of its branches."""

import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from starfabric.astral.seer import te_cp_step
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.ops import CP_STEP_WORK, backward_of, layer_ops
from starfabric.astral.seer.parallel import ExecutionSpec, SystemSpec, resolve_layout
from starfabric.astral.seer.validate import read_rows, row_job_options

MIRROR = Path("/work/.mirror/NVIDIA+TransformerEngine/repo")
OLD = "transformer_engine/pytorch/attention.py"
NEW = "transformer_engine/pytorch/attention/dot_product_attention/context_parallel.py"
DEV1 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs.csv"
DEV2 = Path(__file__).parents[2] / "data" / "published_runs" / "development_runs_2.csv"


def _te(tag: str, path: str) -> str:
    if not MIRROR.exists():
        pytest.skip("TransformerEngine mirror not present")
    out = subprocess.run(["git", "-C", str(MIRROR), "show", f"{tag}:{path}"],
                         capture_output=True, text=True, check=False)  # fmt: skip
    if out.returncode:
        pytest.skip(f"{tag}:{path} not in the mirror")
    return out.stdout


def _simulate(cp, q, o, kv, lse, rel):
    """TE's p2p ring rank by rank and step by step, as its branches read (v1.11 forward
    L2079-2158 after the join, backward L2736-2860; the same branches at v2.8 L1613-1660,
    L2245-2406): (forward, backward) bytes per rank."""
    out = []
    for r in range(cp):
        fwd = 2 * kv + (3 * lse if rel < (2, 4) else 0.0)
        for i in range(cp):
            if i == 0:
                fwd += (2 * o if rel >= (2, 2) else 3 * o) + 2 * lse
            elif i <= r:
                fwd += 3 * o + 2 * lse
            else:
                fwd += 1.5 * o + lse
        bwd = 2 * kv
        for i in range(cp):
            diag = i == cp - 1
            lower = not diag and i >= cp - r - 1
            if i > cp - r - 1:
                bwd += 3 * q
            elif i == cp - r - 1:
                bwd += 2 * q if r == cp - 1 else 2.5 * q
            else:
                bwd += q if i == 0 else 1.5 * q
            if diag:
                bwd += 2.5 * kv if r == 0 else 3 * kv
            elif lower:
                bwd += kv if (i == 0 and r == cp - 1) else 1.5 * kv
            else:
                bwd += 2 * kv if i == 0 else 3 * kv
            if rel < (1, 12):
                bwd += kv if lower else 2 * kv
        out.append((fwd, bwd))
    return out


@settings(max_examples=200, deadline=None)
@given(
    cp=st.integers(2, 64), tokens=st.sampled_from([1024, 2048, 4096, 8192]),
    heads=st.integers(1, 64), group=st.sampled_from([1, 2, 4, 8]),
    dq=st.sampled_from([64, 128, 192]), dv=st.sampled_from([64, 128]),
    rel=st.sampled_from([(1, 10), (1, 11), (1, 12), (2, 1), (2, 2), (2, 3), (2, 4), (2, 8)]),
)  # fmt: skip
def test_closed_form_equals_the_step_by_step_transcription(cp, tokens, heads, group, dq, dv, rel):
    kvh = max(1, heads // group)
    fwd, bwd = te_cp_step.step_bytes(tokens, heads, kvh, dq, dv, cp, rel)
    q, o = tokens * heads * dq * 2.0, tokens * heads * dv * 2.0
    kv, lse = tokens * kvh * (dq + dv) * 2.0, tokens * heads * 4.0
    ranks = _simulate(cp, q, o, kv, lse, rel)
    totals = sorted(f + b for f, b in ranks)
    assert fwd + bwd == pytest.approx(totals[-1], rel=1e-12)
    if len(totals) == 1 or totals[-1] - totals[-2] > 1e-9 * totals[-1]:
        assert (fwd, bwd) == pytest.approx(max(ranks, key=lambda x: x[0] + x[1]), rel=1e-12)


def test_mixtral_shape_bytes_by_hand() -> None:
    """MPF-T5-01's rank (16K / CP 4, TP 2: 4,096 tokens, 24 of 48 heads, 4 of 8 K/V heads, dim
    128): rank 3 merges a full-size output every step. Forward: K,V pack 2KV, step 0 init 2O,
    three merges 3O each, LSEs; backward: K,V copy 2KV, dQ copy 2Q + three adds 3Q, dK/dV
    half copy KV + two half adds 1.5KV + the diagonal's add 3KV."""
    t, h, g, d = 4096, 24, 4, 128
    q = o = t * h * d * 2.0
    kv, lse = t * g * 2 * d * 2.0, t * h * 4.0
    fwd, bwd = te_cp_step.step_bytes(t, h, g, d, d, 4)
    assert fwd == pytest.approx(2 * kv + 2 * o + 2 * lse + 3 * (3 * o + 2 * lse))
    assert bwd == pytest.approx(2 * kv + 2 * q + 3 * 3 * q + kv + 2 * 1.5 * kv + 3 * kv)
    # TE 1.11: zero-filled output merged at step 0 (+O), float64 LSE cast (+3 LSE), and
    # torch.cat of dK, dV per step (lower steps half size, diagonal full).
    f11, b11 = te_cp_step.step_bytes(t, h, g, d, d, 4, (1, 11))
    assert f11 - fwd == pytest.approx(o + 3 * lse)
    assert b11 - bwd == pytest.approx(3 * kv + 2 * kv)
    # ~3 output sizes per step forward against 8c^2 h d FLOPs: about 15% of the forward
    # kernel at c = 2,048 at Hopper's HBM rate (3.35 TB/s x 0.75) and 0.537 of 989 TFLOP/s.
    c = t / 2
    kernel_s = 4 * 8 * c * c * h * d / (0.537 * 989e12)
    assert 0.12 < (fwd / (3.35e12 * 0.75)) / kernel_s < 0.20


def test_no_ring_no_work() -> None:
    assert te_cp_step.step_bytes(4096, 32, 8, 128, 128, 1) == (0.0, 0.0)


def test_release_increments_are_small_against_the_common_work() -> None:
    """Every release from 1.10 to 2.8 does the same merges; at Mixtral's GQA shape the
    release-specific work is under 10% of it."""
    new = sum(te_cp_step.step_bytes(4096, 24, 4, 128, 128, 8))
    old = sum(te_cp_step.step_bytes(4096, 24, 4, 128, 128, 8, (1, 10)))
    assert 1.0 < old / new < 1.10


@pytest.mark.parametrize(
    ("sm", "release", "fused"),
    [((9, 0), (1, 10), True), ((9, 0), (1, 11), True), ((9, 0), (1, 13), True),
     ((9, 0), (2, 8), True), ((10, 0), (1, 13), False), ((10, 0), (2, 0), True),
     ((8, 0), (1, 11), False), ((8, 0), (2, 8), False)],
)  # fmt: skip
def test_backend_preference(sm, release, fused) -> None:
    assert te_cp_step.prefers_fused_attention(sm, release) is fused


def test_backend_preference_before_the_read_releases_is_refused() -> None:
    with pytest.raises(ValueError, match="not read"):
        te_cp_step.prefers_fused_attention((9, 0), (1, 8))


@pytest.mark.parametrize(
    ("tag", "path", "check"),
    [("v1.13", OLD, "if device_compute_capability == (9, 0):"),
     ("v2.0", OLD, "if device_compute_capability >= (9, 0):")],
)  # fmt: skip
def test_backend_preference_against_the_source(tag, path, check) -> None:
    src = _te(tag, path)
    at = src.index("give FusedAttention preference on Hopper")
    assert check in src[at - 400 : at]


def test_late_2024_te_runs_cudnn_with_cp_on_hopper() -> None:
    """v1.11: FA3 is dropped for CP, FusedAttention is dropped for CP only for bottom-right
    causal masks, causal cross-attention, other biases, THD bias or MLA head dims."""
    src = _te("v1.11", OLD)
    assert "Disabling FlashAttention 3 for context parallelism" in src
    cp_block = src[src.index("if context_parallel and use_fused_attention:") :]
    cp_block = cp_block[: cp_block.index("# Filter: Attention mask")]
    assert cp_block.count("use_fused_attention = False") == 5
    assert "head_dim_qk != head_dim_v" in cp_block


@pytest.mark.parametrize(
    ("tag", "path", "text", "present"),
    [("v1.11", OLD, "dkv_ = torch.cat((dk_.unsqueeze(0), dv_.unsqueeze(0)), dim=0)", True),
     ("v1.12", OLD, "dkv_ = torch.cat((dk_.unsqueeze(0), dv_.unsqueeze(0)), dim=0)", False),
     ("v2.1", OLD, "def flash_attn_fwd_out_correction_init", False),
     ("v2.3", NEW, ".to(torch.double)", True),
     ("v2.4", NEW, ".to(torch.double)", False),
     ("v2.8", NEW, "def flash_attn_fwd_out_correction_init", True),
     ("v2.8", NEW, "p2p_comm_buffers[0][0].copy_(kv)", True),
     ("v1.11", OLD, "p2p_comm_buffers[0][0].copy_(kv)", True)],
)  # fmt: skip
def test_release_boundaries_against_the_source(tag, path, text, present) -> None:
    assert (text in _te(tag, path)) is present


@pytest.mark.parametrize(("tag", "path"), [("v1.11", OLD), ("v2.8", NEW)])
def test_output_merges_run_after_the_streams_join(tag, path) -> None:
    """The output merges wait for both streams: nothing hides them."""
    src = _te(tag, path)
    cls = src[src.index("class AttnFuncWithCPAndKVP2P") :]
    join = cls.index("torch.cuda.current_stream().wait_stream(flash_attn_streams[1])")
    assert cls.index("flash_attn_fwd_out_correction(", join) > join
    assert "flash_attn_fwd_out_correction(" not in cls[:join].split("def forward", 1)[1]


@pytest.mark.parametrize(
    ("cell", "release"),
    [("Megatron-Core v0.9 (2024; PyTorch 24.09 container, TE 1.11)", (1, 11)),
     ("Megatron-Core 0.13+ (2025; Transformer Engine 2.3+, cuDNN 9.11)", (2, 3)),
     ("Transformer Engine 2.9-based @7dd3914", (2, 9)),
     ("not TE 1.11", None), ("Megatron-Core (2025; DeepEP)", None)],
)  # fmt: skip
def test_stated_release(cell, release) -> None:
    assert te_cp_step.stated_release(cell) == release


def test_te_release_field_is_checked() -> None:
    assert ExecutionSpec(global_batch=8, seq_len=4096, te_release="1.11").te_release == "1.11"
    for bad in ("12.1", 1.1):
        with pytest.raises(ValidationError):
            ExecutionSpec(global_batch=8, seq_len=4096, te_release=bad)


def _tables(**ex):
    model = ModelSpec(name="mixtral-shape", layers=4, hidden=6144, ffn_hidden=16384, heads=48,
                      kv_heads=8, head_dim=128, vocab=32768, max_seq_len=65536,
                      activation="swiglu", norm="rmsnorm")  # fmt: skip
    spec = ExecutionSpec(global_batch=8, seq_len=16384, tp=2, cp=4, **ex)
    lay = resolve_layout(model, spec, SystemSpec(gpus=64))
    fwd = layer_ops(model, spec, lay, moe=False)
    return fwd, backward_of(fwd)


def test_the_layer_table_carries_the_merges_on_a_te_ring_only() -> None:
    fwd, bwd = _tables()
    i = fwd.name.index(CP_STEP_WORK)
    expect = te_cp_step.step_bytes(16384 / 4, 24, 4, 128, 128, 4)
    assert fwd.nbytes[i] == pytest.approx(expect[0])
    assert bwd.nbytes[bwd.name.index(CP_STEP_WORK + ".bwd")] == pytest.approx(expect[1])
    for other in ({"flash_kernel": "fa2"}, {"te_cp_merge": False}, {"cp_algorithm": "ulysses"}):
        assert CP_STEP_WORK not in _tables(**other)[0].name


def test_validate_reads_te_stacks_and_leaves_others() -> None:
    rows = {r["row_id"]: r for r in read_rows(DEV1)} | {r["row_id"]: r for r in read_rows(DEV2)}
    l3 = row_job_options(rows["L3-T4-3"])[1]
    assert l3.get("te_cp_merge") is False  # Meta's own stack: not TE's ring
    mpf = row_job_options(rows["MPF-T5-01"])[1]
    assert mpf.get("te_cp_merge", True) and mpf.get("te_release") is None


def test_an_unverified_cp_degree_is_read_as_a_ring() -> None:
    """A row whose CP cell is UNVERIFIED leaves cp to the layout options, which may pick a ring:
    a non-TE stack's cuDNN ring still keeps TE's merges out, and a TE stack's stated release is
    still read (before: both skipped, as if cp were 1)."""
    rows = {r["row_id"]: r for r in read_rows(DEV1)} | {r["row_id"]: r for r in read_rows(DEV2)}
    meta = {**rows["L3-T4-3"], "cp": rows["L3-T4-3"]["cp"] + " UNVERIFIED"}
    ex = row_job_options(meta)[1]
    assert ex.get("cp") is None and ex["flash_kernel"] == "cudnn"
    assert ex["te_cp_merge"] is False
    mpf = rows["MPF-T5-01"]
    te = {**mpf, "cp": mpf["cp"] + " UNVERIFIED", "notes": (mpf.get("notes") or "") + "; TE 1.11"}
    ex = row_job_options(te)[1]
    assert ex.get("cp") is None and ex["te_release"] == "1.11"
    assert ex.get("te_cp_merge", True)
