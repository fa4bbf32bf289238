"""Hardware catalog: lookups, aliases, errors, YAML extension, cross-check with llm-analysis."""

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from starfabric.astral import hardware
from starfabric.astral.hardware import GPUSpec, get_gpu, list_gpus, load_catalog
from starfabric.errors import ConfigError

DATA = Path(__file__).parent / "data"


def test_every_required_gpu_is_catalogued() -> None:
    names = {g.name for g in list_gpus()}
    assert {"A100-SXM-80GB", "H100-SXM", "H800", "H20", "H200", "B200"} <= names


@pytest.mark.parametrize(
    ("alias", "name"),
    [("h100", "H100-SXM"), ("H100-SXM", "H100-SXM"), ("a100", "A100-SXM-80GB"), ("h800", "H800")],
)
def test_names_are_case_insensitive_with_aliases(alias: str, name: str) -> None:
    assert get_gpu(alias).name == name


def test_unknown_gpu_lists_known_names() -> None:
    with pytest.raises(ConfigError) as exc:
        get_gpu("V900")
    msg = exc.value.one_line()
    assert "V900" in msg and "H100-SXM" in msg and "\n" not in msg


def test_gpu_spec_is_frozen_and_has_sources() -> None:
    for g in list_gpus():
        assert isinstance(g, GPUSpec)
        assert g.source
        assert g.dense_tflops["bf16"] >= g.dense_tflops["tf32"] > g.dense_tflops["fp32"] > 0
    with pytest.raises(ValidationError):
        get_gpu("H100").tdp_w = 1.0  # type: ignore[misc]


def test_facts_from_the_brief() -> None:
    h100, h800 = get_gpu("H100"), get_gpu("H800")
    assert h800.dense_tflops == h100.dense_tflops
    assert h800.nvlink_gbps == 200.0 and h100.nvlink_gbps == 450.0
    assert get_gpu("H20").dense_tflops["bf16"] == pytest.approx(148.0)
    assert get_gpu("A100").dense_tflops.get("fp8", 0.0) == 0.0
    with pytest.raises(ConfigError, match="fp8"):
        get_gpu("A100").tflops("fp8")


@pytest.mark.parametrize(
    ("file", "name"),
    [("llm-analysis_a100-sxm-80gb.json", "A100"), ("llm-analysis_h100-sxm-80gb.json", "H100")],
)
def test_cross_check_with_llm_analysis(file: str, name: str) -> None:
    sheet = json.loads((DATA / file).read_text())
    g = get_gpu(name)
    assert g.hbm_gbps == pytest.approx(sheet["hbm_bandwidth_in_GB_per_sec"])
    assert g.dense_tflops["fp16"] == pytest.approx(sheet["peak_fp16_TFLOPS"], rel=0.01)
    assert g.hbm_gib == pytest.approx(sheet["mem_per_GPU_in_GB"])
    assert g.nvlink_gbps == pytest.approx(sheet["intra_node_bandwidth_in_GB_per_sec"])


def test_catalog_extends_from_yaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hardware.GPUS, "_items", dict(hardware.GPUS._items))
    monkeypatch.setattr(hardware.GPUS, "_index", dict(hardware.GPUS._index))
    p = tmp_path / "extra.yaml"
    p.write_text(
        "gpus:\n  - name: X1\n    aliases: [x-one]\n    dense_tflops: {bf16: 10}\n"
        "    hbm_gib: 8\n    hbm_gbps: 100\n    nvlink_gbps: 0\n    tdp_w: 50\n"
        "    source: 'assumption: test part'\n"
    )
    load_catalog(p)
    assert get_gpu("X-ONE").tdp_w == 50
    with pytest.raises(ConfigError, match="already"):
        load_catalog(p)
    bad = tmp_path / "bad.yaml"
    bad.write_text("gpus:\n  - name: X2\n    dense_tflops: {int3: 1}\n")
    with pytest.raises(ConfigError, match="dense_tflops"):
        load_catalog(bad)
    wrong = tmp_path / "wrong.yaml"
    wrong.write_text("gpuz: []\n")
    with pytest.raises(ConfigError, match="gpuz"):
        load_catalog(wrong)


def test_network_parts() -> None:
    from starfabric.astral.hardware import get_nic, get_optic, get_switch, list_optics

    th5 = get_switch("51.2t")
    assert th5.radix(200) == 256 and th5.radix(400) == 128 and th5.radix(800) == 64
    assert get_switch("TH4").radix(200) == 128
    for sw in ("25.6T", "51.2T"):
        s = get_switch(sw)
        assert all(speed * radix == s.capacity_gbps for speed, radix in s.port_modes.items())
    with pytest.raises(ConfigError, match="use one of: 100G, 200G, 400G"):
        get_switch("25.6T").radix(800)
    nic = get_nic("2x200G")
    assert nic.ports == 2 and nic.total_gbps == 400
    assert get_optic("400G-DR4").per_link == 2 and get_optic("DAC-200G").per_link == 1
    for o in list_optics():
        assert o.source and (
            ("assumption" in o.source) or ("IEEE" in o.source) or "MSA" in o.source
        )
