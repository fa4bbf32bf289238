"""Replays of the kernel recording (tests/data/conntrack, Linux 6.18 nf_conntrack, recorded by
scripts/record_conntrack.py): every datapath agrees with the kernel on every packet."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from starfabric.errors import DataError
from starfabric.fornax.conformance import METRICS, kernel_rearmed, load_recording, replay

RECORDING = Path(__file__).parents[1] / "data" / "conntrack" / "kernel_recording.json"
HELDOUT = Path(__file__).parents[1] / "data" / "conntrack" / "kernel_heldout.json"
WIDE = Path(__file__).parents[1] / "data" / "conntrack" / "kernel_wide.json"
EDGES = Path(__file__).parents[1] / "data" / "conntrack" / "kernel_edges.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    return load_recording(RECORDING)


def _subset(doc: dict, n_random: int) -> set[str]:
    """Every hand-written conversation and the first n_random random ones."""
    names = [c["name"] for c in doc["conversations"]]
    rnd = [n for n in names if n.startswith("random_")]
    return {n for n in names if not n.startswith("random_")} | set(rnd[:n_random])


def test_recording_is_from_a_real_kernel(doc: dict) -> None:
    assert doc["kernel"].startswith("6.")
    n = sum(len(c["packets"]) for c in doc["conversations"])
    assert len(doc["conversations"]) >= 300 and n >= 2000
    verdicts = {s["verdict"] for c in doc["conversations"] for s in c["kernel"]}
    assert verdicts == {"new", "established", "invalid", "related"}  # nothing lost


def _errors(doc: dict) -> int:
    return sum(bool(p.get("error")) for c in doc["conversations"] for p in c["packets"])


def test_softpath_agrees_with_the_kernel_on_every_packet(doc: dict) -> None:
    r = replay(doc, "softpath")  # ICMP errors too: RELATED (or INVALID) as in the kernel
    assert _errors(doc) > 0
    assert r.packets == sum(len(c["packets"]) for c in doc["conversations"])
    assert r.mismatches == []
    assert r.percent() == {**dict.fromkeys(METRICS, 100.0), "conversations": 100.0}
    assert all(r.scored[m] > 1000 for m in METRICS)


@pytest.mark.parametrize("datapath", ["fast", "reference"])
def test_manager_on_both_engines_agrees_with_the_kernel(doc: dict, datapath: str) -> None:
    names = _subset(doc, 40 if datapath == "fast" else 15)
    r = replay(doc, datapath, names)
    assert r.conversations == len(names)
    assert r.mismatches == []
    assert r.percent()["conversations"] == 100.0


@pytest.mark.parametrize("datapath", ["softpath", "fast", "reference"])
def test_icmp_errors_are_related_as_in_the_kernel(doc: dict, datapath: str) -> None:
    """Every recorded ICMP error: RELATED to the conversation it quotes (UDP, TCP in SYN_SENT,
    ESTABLISHED, CLOSE, TIME_WAIT, an echo; from the peer or a router; either direction), or
    INVALID (no such tuple, outer destination not the quoted source, quoting an error)."""
    names = {c["name"] for c in doc["conversations"]
             if any(p.get("error") for p in c["packets"])}  # fmt: skip
    kernel = [k["verdict"] for c in doc["conversations"] if c["name"] in names
              for p, k in zip(c["packets"], c["kernel"], strict=True) if p.get("error")]  # fmt: skip
    assert kernel.count("related") >= 10 and kernel.count("invalid") >= 3
    r = replay(doc, datapath, names)
    assert r.scored["verdict"] == sum(len(c["packets"]) for c in doc["conversations"]
                                      if c["name"] in names)  # fmt: skip
    assert r.mismatches == []
    assert r.percent() == {**dict.fromkeys(METRICS, 100.0), "conversations": 100.0}


def test_a_wrong_tracker_is_caught(doc: dict) -> None:
    """The comparison can fail: the same replay with tcp_be_liberal forced on disagrees."""
    bad = json.loads(json.dumps(doc))
    for c in bad["conversations"]:
        c["settings"]["tcp_be_liberal"] = 1
    r = replay(bad, "softpath", {"seq_over_upper_bound", "ack_of_unsent_data", "first_fin"})
    assert r.agree["verdict"] < r.scored["verdict"]


def test_rearm_inference() -> None:
    assert kernel_rearmed(431999, 431999, 1.5, {432000})  # re-armed to 432000
    assert not kernel_rearmed(431999, 431997, 1.5, {432000})  # left running
    assert kernel_rearmed(432000, 431999, 1.55, {432000})  # read within a jiffy of arming
    assert kernel_rearmed(431999, 119, 1.5, {120, 432000})  # re-armed lower (FIN_WAIT)
    assert kernel_rearmed(299, 299, 1.003, {300}) is None  # re-armed or not: cannot tell
    assert kernel_rearmed(299, 298, 1.003, {300}) is False


def test_ipv6_is_recorded_and_agrees(doc: dict) -> None:
    """TCP, UDP and ICMPv6 over IPv6 (echo pairing, invalid replies, errors of type < 128
    RELATED or INVALID) are in the recording; the hand-written subsets above replay them on
    every datapath, here the software path on all of them."""
    names = {c["name"] for c in doc["conversations"] if ":" in c.get("addresses", {}).get(
        "client", "")}  # fmt: skip
    protos = {c["proto"] for c in doc["conversations"] if c["name"] in names}
    assert protos == {"tcp", "udp", "icmpv6"} and len(names) >= 30
    verdicts = {k["verdict"] for c in doc["conversations"] if c["name"] in names
                for k in c["kernel"]}  # fmt: skip
    assert verdicts == {"new", "established", "invalid", "related"}
    r = replay(doc, "softpath", names)
    assert r.mismatches == []


def test_held_out_recording_agrees() -> None:
    """The held-out random recording (never tuned on; scripts/record_conntrack.py --heldout):
    through the software path it agrees on every packet (both hosts sending echo requests
    with one identifier included: two entries, as the kernel's)."""
    held = load_recording(HELDOUT)
    assert len(held["conversations"]) >= 200
    assert {c["proto"] for c in held["conversations"]} == {"tcp", "udp", "icmp"}
    r = replay(held, "softpath")
    assert r.mismatches == []
    assert r.scored["rearm"] > 1000


@pytest.fixture(scope="module")
def wide() -> dict:
    return load_recording(WIDE)


def test_wide_recording_covers_what_it_claims(wide: dict) -> None:
    """The wider held-out recording (record_conntrack.py --wide 505,606,707,808, recorded
    before the fixes it led to): IPv4 and IPv6, every verdict class incl. untracked (ND/MLD),
    both hosts requesting with one identifier, sequence numbers across 2^32."""
    convs = wide["conversations"]
    assert len(convs) >= 350 and sum(len(c["packets"]) for c in convs) >= 2500
    verdicts = {k["verdict"] for c in convs for k in c["kernel"]}
    assert verdicts == {"new", "established", "invalid", "related", "untracked"}
    v6 = [c for c in convs if ":" in c.get("addresses", {}).get("client", "")]
    assert {c["proto"] for c in v6} == {"tcp", "udp", "icmpv6"} and len(v6) >= 80
    names = {c["name"] for c in convs}
    assert {"d_echo_both_hosts_same_id", "d_v6_echo_both_hosts_same_id", "d_seq_wrap_client",
            "d_v6_nd_neighbour_solicit", "d_wscale_15", "d_simopen_wscale"} <= names  # fmt: skip


def test_wide_recording_agrees_on_the_software_path(wide: dict) -> None:
    r = replay(wide, "softpath")
    assert r.packets == sum(len(c["packets"]) for c in wide["conversations"])
    assert r.mismatches == []
    assert r.percent() == {**dict.fromkeys(METRICS, 100.0), "conversations": 100.0}


@pytest.mark.parametrize("datapath", ["fast", "reference"])
def test_wide_recording_agrees_on_both_engines(wide: dict, datapath: str) -> None:
    """Through the Manager on each engine: every ICMP(v6) conversation and every one with an
    ICMP error (the key and RELATED paths), and the hand-written TCP/UDP ones (reference: a third)."""
    convs = wide["conversations"]
    names = {c["name"] for c in convs if c["proto"] in ("icmp", "icmpv6")
             or any(p.get("error") for p in c["packets"])}  # fmt: skip
    hand = sorted(c["name"] for c in convs if c["name"].startswith("d_") and c["name"] not in names)
    names |= set(hand[:: 1 if datapath == "fast" else 3])
    r = replay(wide, datapath, names)
    assert r.conversations == len(names)
    assert r.mismatches == []
    assert r.percent()["conversations"] == 100.0


@pytest.fixture(scope="module")
def edges() -> dict:
    return load_recording(EDGES)


def test_edges_recording_agrees_on_the_software_path(edges: dict) -> None:
    """Every tcp_in_window bound and RST check at -1/0/+1 (record_conntrack.py --edges
    909,1010), long random conversations, and the RST-direction probes (--append
    rst-direction): the kernel's verdict flips at each bound and the replay follows."""
    convs = edges["conversations"]
    kinds = {c["name"].split("_")[0] for c in convs}
    assert kinds == {"e", "long", "rd"} and len(convs) >= 200
    edge_verdicts = {k["verdict"] for c in convs if c["name"].startswith("e_")
                     for k in c["kernel"][4:5]}  # fmt: skip
    assert {"invalid", "established"} <= edge_verdicts  # both sides of the bounds
    r = replay(edges, "softpath")
    assert r.mismatches == []
    assert r.percent() == {**dict.fromkeys(METRICS, 100.0), "conversations": 100.0}


@pytest.mark.parametrize("datapath", ["fast", "reference"])
def test_edges_recording_agrees_on_both_engines(edges: dict, datapath: str) -> None:
    names = sorted(c["name"] for c in edges["conversations"] if not c["name"].startswith("long"))
    names = names[:: 1 if datapath == "fast" else 3]
    r = replay(edges, datapath, set(names))
    assert r.conversations == len(names)
    assert r.mismatches == []


def test_bad_recording_is_a_data_error(tmp_path: Path) -> None:
    p = tmp_path / "r.json"
    p.write_text(json.dumps({"format": "other"}))
    with pytest.raises(DataError, match="format"):
        load_recording(p)
