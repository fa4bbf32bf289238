"""scripts/warm_kernels.py: the conversations it replays reach every kernel entry the suite and
the CLI compile (one per protocol, one ICMP error), so parallel workers find them cached."""

from __future__ import annotations

from astral.seer.load_script import load_script

warm = load_script("warm_kernels")


def test_warm_set_covers_each_protocol_and_an_icmp_error() -> None:
    doc = warm.load_recording(warm.RECORDING)
    names = warm.warm_set(doc)
    convs = [c for c in doc["conversations"] if c["name"] in names]
    assert {c["proto"] for c in convs} == {c["proto"] for c in doc["conversations"]}
    assert any(p.get("error") for c in convs for p in c["packets"])
    assert len(names) <= 8  # a handful: seconds of replay once the kernels are compiled


def test_warm_replays_the_warm_set_through_every_datapath(monkeypatch, capsys) -> None:
    calls: list[tuple[str, frozenset[str]]] = []
    monkeypatch.setattr(warm, "replay", lambda doc, dp, names: calls.append((dp, frozenset(names))))
    warm.main()
    want = frozenset(warm.warm_set(warm.load_recording(warm.RECORDING)))
    assert sorted(calls) == sorted((dp, want) for dp in ("fast", "reference", "softpath"))
    assert "warm_kernels:" in capsys.readouterr().out
