"""TransformerEngine's four context-parallel implementations (Megatron `--cp-comm-type`), checked
against what TE v2.8's context_parallel.py does (seer/cp_comm.py cites the lines)."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from starfabric.astral.seer.comm import layout_groups
from starfabric.astral.seer.cp_comm import (
    a2a_heads_error,
    cp_levels,
    host_a2a_size,
    ring_exposed,
    stated_a2a_size,
    stated_cp_comm_type,
)
from starfabric.astral.seer.megatron_cli import parse_megatron_command
from starfabric.astral.seer.model import ModelSpec
from starfabric.astral.seer.ops import COMM, FLASH, backward_of, layer_ops
from starfabric.astral.seer.parallel import resolve_layout
from starfabric.astral.seer.predict import make_job, predict
from starfabric.errors import ConfigError, InfeasibleError

CMD = """torchrun --nproc_per_node 8 --nnodes 4 pretrain_gpt.py \\
  --tensor-model-parallel-size 2 --context-parallel-size 8 --sequence-parallel \\
  --num-layers 32 --hidden-size 4096 --ffn-hidden-size 11008 --num-attention-heads 32 \\
  --seq-length 65536 --micro-batch-size 1 --global-batch-size 16 --swiglu \\
  --normalization RMSNorm --disable-bias-linear --untie-embeddings-and-output-weights \\
  --position-embedding-type rope --bf16 --use-distributed-optimizer --attention-dropout 0.0
"""


def _model(kv_heads: int = 32) -> ModelSpec:
    return ModelSpec(name="llama-2-7b-shape", layers=32, hidden=4096, ffn_hidden=11008, heads=32,
                     kv_heads=kv_heads, head_dim=128, vocab=32000, max_seq_len=2**20,
                     activation="swiglu", norm="rmsnorm")  # fmt: skip


def _job(seq: int = 65536, cp: int = 8, tp: int = 2, gpus: int = 32, kv_heads: int = 32, **ex):
    execution = {"global_batch": 2 * gpus // (tp * cp), "seq_len": seq, "precision": "bf16",
                 "tp": tp, "cp": cp, "micro_batch": 1, "recompute": "none", **ex}  # fmt: skip
    return make_job(_model(kv_heads), execution, {"gpu": "H100", "gpus": gpus})


# ---- the launch line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flags", "algorithm", "a2a"),
    [
        ("", "ring", 1),  # Megatron's default --cp-comm-type ["p2p"]
        ("--cp-comm-type p2p", "ring", 1),
        ("--cp-comm-type all_gather", "all_gather", 1),
        ("--cp-comm-type a2a", "ulysses", 1),
        ("--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 4 2", "hierarchical", 4),
        ("--cp-comm-type=a2a+p2p --hierarchical-context-parallel-sizes 2 4", "hierarchical", 2),
        (f"--cp-comm-type {' '.join(['p2p'] * 32)}", "ring", 1),  # one value per layer, all p2p
    ],
)
def test_cp_comm_type_flag_sets_the_implementation(flags: str, algorithm: str, a2a: int) -> None:
    ex = parse_megatron_command(CMD + " " + flags)["execution"]
    assert ex["cp_algorithm"] == algorithm
    assert ex.get("cp_a2a_size", 1) == a2a


@pytest.mark.parametrize(
    ("flags", "why"),
    [
        ("--cp-comm-type allgather", "not one of p2p, all_gather, a2a, a2a\\+p2p"),
        ("--cp-comm-type ring", "not one of"),
        ("--cp-comm-type a2a+p2p", "without --hierarchical-context-parallel-sizes"),
        ("--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2", "product"),
        ("--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 2 2", "two levels"),
        (f"--cp-comm-type {' '.join(['p2p'] * 16 + ['a2a'] * 16)}", "one CP implementation"),
    ],
)
def test_cp_comm_type_errors_name_the_flag(flags: str, why: str) -> None:
    with pytest.raises(ConfigError, match=why):
        parse_megatron_command(CMD + " " + flags)


@pytest.mark.parametrize(("kind", "ok"), [("p2p", True), ("a2a", False), ("all_gather", False)])
def test_mla_runs_cp_only_on_the_ring(kind: str, ok: bool) -> None:
    """TE v2.8 L3748-3751: "Context parallelism does not support MLA" with a2a / all_gather
    (Megatron builds MLA only with --multi-latent-attention; the rank flags alone do nothing)."""
    cmd = (
        CMD
        + " --multi-latent-attention --q-lora-rank 1536 --kv-lora-rank 512"
        + f" --cp-comm-type {kind}"
    )
    if ok:
        assert parse_megatron_command(cmd)["execution"]["cp_algorithm"] == "ring"
    else:
        with pytest.raises(ConfigError, match="multi-latent attention"):
            parse_megatron_command(cmd)


def test_a_launch_line_with_each_type_predicts() -> None:
    """A user's launch line is never refused for naming a CP implementation, and each one is
    timed as what it moves. CP 8 on TP 2 spans two hosts: the ring's boundary pairs send each
    KV block over one NIC (TE's isend/irecv between two ranks), so the ring is exposed there
    and the hierarchical split, whose ring has 2 ranks, exposes the least."""
    times = {}
    for kind, extra in (("p2p", ""), ("all_gather", ""), ("a2a", ""),
                        ("a2a+p2p", " --hierarchical-context-parallel-sizes 4 2")):  # fmt: skip
        spec = parse_megatron_command(CMD + f" --cp-comm-type {kind}{extra}")
        job = make_job(spec["model"], spec["execution"], {"gpu": "H100", **spec["system"]})
        times[kind] = predict(job)
    cp = {k: p.breakdown["cp"] for k, p in times.items()}
    assert all(v > 0 for v in cp.values())
    assert cp["a2a+p2p"] == min(cp.values()) and cp["p2p"] == max(cp.values())


# ---- what each implementation moves, and where ---------------------------------------------


def _tables(job):
    lay = resolve_layout(job.model, job.execution, job.system)
    fwd = layer_ops(job.model, job.execution, lay, moe=False)
    return lay, fwd, backward_of(fwd)


def _comm(t, group_prefix: str = "cp"):
    a = t.arrays()
    return {t.name[i]: (t.coll[i], t.group[i], float(a["nbytes"][i]))
            for i in range(len(t)) if t.kind[i] == COMM and t.group[i].startswith(group_prefix)}  # fmt: skip


def _flash_k(t) -> float:
    a = t.arrays()
    return float(next(a["k"][i] for i in range(len(t)) if t.kind[i] == FLASH))


def test_ring_moves_cp_minus_one_kv_blocks_forward_and_twice_that_backward() -> None:
    """p2p: cp-1 KV exchanges forward; backward KV (step 0), KV+dKV (steps 1..cp-2), dKV
    (last step), all BF16: 2(cp-1) KV sizes. One ring step's kernel meets c = s/(2cp) keys
    per query (the lower-triangle and diagonal blocks)."""
    job = _job()
    _lay, fwd, bwd = _tables(job)
    kv = 2.0 * (65536 / 8) * (32 / 2) * 256  # bytes of one rank's K and V
    assert _comm(fwd) == {"attn.cp_kv_ring": ("p2p", "cp", pytest.approx(7 * kv))}
    assert _comm(bwd) == {"attn.cp_kv_ring.bwd": ("p2p", "cp", pytest.approx(14 * kv))}
    assert _flash_k(fwd) == pytest.approx(65536 / (2 * 8))


def test_all_gather_gathers_kv_twice_and_reduce_scatters_dkv_exposed() -> None:
    """all_gather: K, V gathered before the kernels and again in the backward, dK, dV
    reduce-scattered (TE L2660, L2849, L3009); the two local chunks meet s/2 keys on
    average, as without CP; every rank receives the same (cp-1) KV blocks as on the ring."""
    job = _job(cp_algorithm="all_gather")
    _lay, fwd, bwd = _tables(job)
    kv = 2.0 * (65536 / 8) * (32 / 2) * 256
    assert _comm(fwd) == {"attn.cp_kv_all_gather": ("all_gather", "cp", pytest.approx(8 * kv))}
    assert _comm(bwd) == {
        "attn.cp_kv_all_gather.bwd": ("all_gather", "cp", pytest.approx(8 * kv)),
        "attn.cp_kv_all_gather.dkv_reduce_scatter": ("reduce_scatter", "cp", pytest.approx(8 * kv)),
    }  # fmt: skip
    assert _flash_k(fwd) == pytest.approx(65536 / 2)


def test_a2a_sends_q_k_v_and_o_at_their_own_head_counts() -> None:
    """a2a (Ulysses): Q, K, V to heads / cp and O back; K/V not repeated (TE sends them at the
    GQA group count); the kernel sees the whole sequence."""
    job = _job(kv_heads=8, tp=1, cp=8, gpus=8, cp_algorithm="ulysses")
    _lay, fwd, _ = _tables(job)
    tok = 65536 / 8
    got = _comm(fwd)
    assert got["attn.ulysses_qkv_all_to_all"][2] == pytest.approx(2.0 * tok * (32 + 2 * 8) * 128)
    assert got["attn.ulysses_out_all_to_all"][2] == pytest.approx(2.0 * tok * 32 * 128)
    assert _flash_k(fwd) == pytest.approx(65536 / 2)


def test_hierarchical_cp_runs_a2a_inside_the_host_and_the_ring_across_hosts() -> None:
    """a2a+p2p with sizes (4, 2) on TP 2: the all-to-all over 4 adjacent CP ranks (one host of
    8 GPUs), the ring over 2 ranks 8 GPUs apart; the ring's KV blocks hold a2a x the tokens on
    heads / a2a: the same bytes per block as the flat ring's; a ring step meets s/(2*2) keys."""
    job = _job(cp_algorithm="hierarchical", cp_a2a_size=4)
    lay, fwd, _ = _tables(job)
    groups = layout_groups(job.execution, lay)
    assert (groups["cp_a2a"].size, groups["cp_a2a"].nodes) == (4, 1)
    assert (groups["cp_p2p"].size, groups["cp_p2p"].nodes) == (2, 2)
    kv = 2.0 * (65536 / 8) * (32 / 2) * 256
    got = _comm(fwd)
    assert got["attn.cp_kv_ring"] == ("p2p", "cp_p2p", pytest.approx(1 * kv))
    assert got["attn.ulysses_qkv_all_to_all"][1] == "cp_a2a"
    assert _flash_k(fwd) == pytest.approx(65536 / 4)


@pytest.mark.parametrize(("a2a", "same_as"), [(1, {}), (8, {"cp_algorithm": "ulysses"})])
def test_hierarchical_degenerates_as_te_does(a2a: int, same_as: dict) -> None:
    """TE L3702-3717: a2a+p2p with a 1-rank a2a group runs p2p, with a 1-rank p2p group a2a."""
    hier = predict(_job(cp_algorithm="hierarchical", cp_a2a_size=a2a)).iteration_s
    assert hier == pytest.approx(predict(_job(**same_as)).iteration_s, rel=1e-12)


def test_a2a_needs_kv_heads_divisible_by_cp() -> None:
    """TE asserts heads and K/V heads per TP rank divide by the a2a ranks (L3135-3137): a
    Qwen3-235B-like 4 K/V heads on TP 4 (one per rank) cannot split over CP 2 with a2a; the
    ring runs; XTuner's repeated K/V need only the query heads to divide."""
    with pytest.raises(InfeasibleError, match="K/V heads"):
        predict(_job(kv_heads=4, tp=4, cp=2, gpus=8, cp_algorithm="ulysses"))
    assert predict(_job(kv_heads=4, tp=4, cp=2, gpus=8)).iteration_s > 0
    assert a2a_heads_error(8, 1, 2, repeat_kv=True) is None
    assert a2a_heads_error(8, 1, 2, repeat_kv=False) is not None


def test_hierarchical_a2a_size_must_divide_cp() -> None:
    with pytest.raises(InfeasibleError, match="does not divide"):
        predict(_job(cp_algorithm="hierarchical", cp_a2a_size=3))


# ---- the ring's overlap as TE schedules it ---------------------------------------------------


def test_backward_ring_exchanges_hide_one_per_step() -> None:
    """CP 2 backward: two exchanges of one KV size (KV at step 0, dKV at step 1), each behind
    its own step's kernel; a step kernel longer than one KV exchange hides both, though it is
    shorter than the two together (the pre-TE reading, one exchange of 2 KV sizes behind one
    step, left 2u - a exposed)."""
    unit, step = 1.0, 1.5
    assert ring_exposed(2 * unit, step, 2, backward=True) == 0.0
    assert ring_exposed(2 * unit, 0.5, 2, backward=True) == pytest.approx(2 * 0.5)
    # CP 4: exchanges 1, 2, 2, 1 KV sizes; a step of 1.5 exposes 0.5 on each middle one
    assert ring_exposed(6 * unit, step, 4, backward=True) == pytest.approx(2 * 0.5)
    assert ring_exposed(3 * unit, step, 4, backward=False) == 0.0
    assert ring_exposed(3 * unit, 0.25, 4, backward=False) == pytest.approx(3 * 0.75)


@settings(max_examples=60, deadline=None)
@given(
    dur=st.floats(1e-6, 10.0),
    step=st.floats(0.0, 10.0),
    ring=st.integers(2, 64),
    backward=st.booleans(),
)
def test_ring_exposure_is_bounded_by_the_exchange_and_falls_with_the_kernel(
    dur: float, step: float, ring: int, backward: bool
) -> None:
    e = ring_exposed(dur, step, ring, backward)
    assert 0.0 <= e <= dur * (1 + 1e-12)
    assert ring_exposed(dur, step * 1.5 + 1e-9, ring, backward) <= e + 1e-12
    assert ring_exposed(dur, 0.0, ring, backward) == pytest.approx(dur)


@pytest.mark.parametrize(("seq", "cp"), [(16384, 2), (65536, 4), (262144, 4)])
def test_inside_a_host_all_gather_is_never_faster_than_the_ring(seq: int, cp: int) -> None:
    """On NVLink both move (cp-1) KV blocks into each rank forward; the ring hides them behind
    the step kernels, TE's all_gather does not (Megatron-Core: "The all-gather is not async,
    and cannot be overlapped"); its longer kernels (s/2 keys against s/(2cp)) gain only the
    keys_half curve's margin."""
    ring = predict(_job(seq=seq, cp=cp, gpus=2 * cp))
    ag = predict(_job(seq=seq, cp=cp, gpus=2 * cp, cp_algorithm="all_gather"))
    assert ag.breakdown["cp"] > ring.breakdown["cp"]
    assert ag.breakdown["compute"] < ring.breakdown["compute"]
    assert ag.iteration_s > ring.iteration_s * 0.95


# ---- a row's cells ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cell", "kind"),
    [
        ("--cp-comm-type a2a+p2p --hierarchical-context-parallel-sizes 2 4", "a2a+p2p"),
        ("cp_comm_type: all_gather", "all_gather"),
        ("CP 8 via all-to-all (Ulysses-like)", "a2a"),
        ("hierarchical CP over NVLink and IB", "a2a+p2p"),
        ("all-gather CP (Llama 3 style)", "all_gather"),
        ("cp-comm-type p2p", "p2p"),
        ("hierarchical context parallelism (a2a in the host)", "a2a+p2p"),
        ("all-gather context parallelism", "all_gather"),
        ("no hierarchical context parallelism", None),
        # not statements of a TE CP type:
        ("cp rotation method (allgather vs alltoall) not stated", None),
        ("CP communication type (p2p ring assumed)", None),
        ("CP 4 (Megatron-Core ring attention, TransformerEngine)", None),
        ("not cp_comm_type a2a", None),
        ("", None),
    ],
)
def test_cells_stating_the_cp_comm_type(cell: str, kind: str | None) -> None:
    assert stated_cp_comm_type(cell) == kind


def test_hierarchical_sizes_from_cells_or_the_host() -> None:
    assert stated_a2a_size("--hierarchical-context-parallel-sizes 2 4") == 2
    assert stated_a2a_size("hierarchical_context_parallel_sizes=[4, 8]") == 4
    assert stated_a2a_size("CP 8") is None
    assert stated_a2a_size("not --hierarchical-context-parallel-sizes 2 4") is None
    assert stated_a2a_size("without hierarchical_context_parallel_sizes=[2, 4]; sizes 4 2") is None
    # unstated: the CP ranks of one NVLink host run the all-to-all
    assert host_a2a_size(cp=16, tp=2, gpus_per_node=8) == 4
    assert host_a2a_size(cp=8, tp=8, gpus_per_node=8) == 1
    assert cp_levels("hierarchical", 16, 4) == (4, 4)
    assert cp_levels("ring", 16) == (1, 16)
    assert cp_levels("ulysses", 16) == (16, 1)
    assert cp_levels("all_gather", 16) == (1, 1)


def test_hierarchical_without_a_size_takes_the_host_as_validate_does() -> None:
    """A job (YAML, make_job) naming hierarchical CP without cp_a2a_size runs the all-to-all
    over the CP ranks that share a host, as validate reads a row stating a2a+p2p without
    sizes (host_a2a_size: 4 at TP 2 on 8-GPU hosts), not the flat p2p ring."""
    unset = predict(_job(cp_algorithm="hierarchical")).iteration_s
    host = predict(_job(cp_algorithm="hierarchical", cp_a2a_size=4)).iteration_s
    assert unset == pytest.approx(host, rel=1e-12)
    assert unset != pytest.approx(predict(_job()).iteration_s, rel=1e-6)


@pytest.mark.parametrize("algorithm", ["ring", "ulysses", "all_gather"])
def test_a2a_size_without_hierarchical_cp_is_refused(algorithm: str) -> None:
    """cp_a2a_size is read by hierarchical CP only: elsewhere it was silently ignored."""
    with pytest.raises(ConfigError, match="cp_a2a_size = 4 applies to hierarchical CP only"):
        _job(cp_algorithm=algorithm, cp_a2a_size=4)
