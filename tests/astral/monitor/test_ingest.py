"""Ingestion of real samples (Kineto, nccl-tests, sysfs IB, dmesg, mini-batch CSV, DDM) and
one-line errors naming file and record for malformed input."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from starfabric.astral.monitor import TelemetryStore, detect_kind, ingest_path
from starfabric.astral.monitor.findings import ingested_findings, kineto_stragglers
from starfabric.astral.monitor.ingest import ingest_kineto
from starfabric.errors import DataError

DATA = Path(__file__).resolve().parents[2] / "data"
TEL = DATA / "telemetry"
KIN = DATA / "kineto"


@pytest.fixture()
def st() -> TelemetryStore:
    return TelemetryStore()


def test_minibatch_csv_finds_worker_6(st: TelemetryStore) -> None:
    kind, n = ingest_path(st, TEL / "alibaba_v2020_minibatch_time_job_1_norm.csv")
    assert (kind, n) == ("minibatch", 3000)
    found = [f for f in ingested_findings(st) if f.layer == "application"]
    assert [f.component for f in found] == ["rank:6"]  # the README's straggler, and only it
    assert "steps 1" in found[0].what


def test_sys_infiniband_snapshot(st: TelemetryStore) -> None:
    kind, _ = ingest_path(st, TEL / "gpud_h100_sys_class_infiniband_snapshot.tsv")
    assert kind == "sys-infiniband"
    ports = st.query("SELECT device, rate_gbps, state FROM phys_ib_port ORDER BY device")
    assert ports["device"].size == 9
    assert np.sum(ports["rate_gbps"] == 400) == 8  # 8x ConnectX-7 NDR
    assert all("ACTIVE" in s for s in ports["state"])
    found = {(f.component, f.what) for f in ingested_findings(st)}
    assert ("mlx5_1/1", "link_downed = 255") in found


def test_dmesg_xids(st: TelemetryStore) -> None:
    assert ingest_path(st, TEL / "gpud_dmesg_xid119_gsp_timeout.log") == ("dmesg", 5)
    ingest_path(st, TEL / "gpud_dmesg_xid13_xid43_oom_fixture.log")
    x = st.query("SELECT pci, xid, count(*) AS n FROM phys_xid GROUP BY ALL ORDER BY xid")
    assert x["xid"].tolist() == [13, 43, 119]
    assert x["pci"].tolist() == ["0000:38:00", "0000:38:00", "0000:9b:00"]
    ts = st.query("SELECT min(ts_ms) AS t FROM phys_xid WHERE xid = 119")["t"][0]
    assert ts > 1.7e12  # Feb 2025, parsed from the bracketed date
    sev = {f.component: f.severity for f in ingested_findings(st) if "Xid 119" in f.what}
    assert sev == {"pci:0000:9b:00": "high"}


def test_kineto_pair_and_nccl_metadata(st: TelemetryStore) -> None:
    for r in (0, 1):
        assert ingest_path(st, KIN / f"hta_sampled_rank-{r}.json.gz") == ("kineto", 10)
    k = st.query(
        "SELECT rank, count(*) AS n, min(collective) AS c FROM app_collective GROUP BY rank ORDER BY rank"
    )
    assert k["rank"].tolist() == [0, 1] and k["n"].tolist() == [10, 10]
    assert ingest_kineto(st, KIN / "hta_trace_compare_base_tiny.json.gz") == 0
    # Per-rank NCCL time decides who waited; the finding is consistent with the sums.
    sums = st.query(
        "SELECT rank, sum(dur_us) AS s FROM app_collective GROUP BY rank ORDER BY rank"
    )["s"]
    found = kineto_stragglers(st)
    if sums.min() * 1.2 < np.median(sums):
        assert found and found[0].component == f"rank:{int(np.argmin(sums))}"
    else:
        assert found == []


def test_nccl_tests_and_ddm(st: TelemetryStore) -> None:
    p = DATA / "nccl_tests" / "aws_p5_2node_h100_efa_all_reduce.txt"
    kind, n = ingest_path(st, p)
    assert kind == "nccl-tests" and n > 10
    bw = st.query("SELECT max(busbw_gbps) AS b FROM app_nccltest")["b"][0]
    assert 50 < bw < 500
    assert ingest_path(st, TEL / "ethtool_m_qsfp_ddm_constructed.txt") == ("ddm", 1)
    d = st.query("SELECT * FROM phys_ddm")
    assert d["rx_power_dbm"][0] == pytest.approx(-13.0)
    assert d["temperature_c"][0] == pytest.approx(58.12)
    assert any("Rx -13.0" in f.what for f in ingested_findings(st))


def test_malformed_inputs_name_file_and_record(st: TelemetryStore, tmp_path: Path) -> None:
    bad = tmp_path / "trace.json"
    bad.write_text('{"traceEvents": [')
    with pytest.raises(DataError, match=r"trace\.json: not JSON at line 1"):
        ingest_path(st, bad, "kineto")
    ev = {
        "traceEvents": [{"cat": "kernel", "name": "ncclKernel_AllReduce_x", "ts": "soon", "dur": 1}]
    }
    bad2 = tmp_path / "t2.json.gz"
    with gzip.open(bad2, "wt") as fh:
        json.dump(ev, fh)
    with pytest.raises(DataError, match=r"t2\.json\.gz: traceEvents\[0\]"):
        ingest_path(st, bad2, "kineto")
    tsv = tmp_path / "ib.tsv"
    tsv.write_text(
        "sysfs_path\tvalue\n/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error\tlots\n"
    )
    with pytest.raises(DataError, match=r"ib\.tsv: record 2 .*symbol_error.*'lots'"):
        ingest_path(st, tsv)
    tsv.write_text("sysfs_path\tvalue\nnot a sysfs line\n")
    with pytest.raises(DataError, match=r"line 2 is not 'sysfs_path<TAB>value'"):
        ingest_path(st, tsv, "sys-infiniband")
    dm = tmp_path / "dmesg.log"
    dm.write_text("[1.0] ok\n[2.0] NVRM: Xid garbled\n")
    with pytest.raises(DataError, match=r"dmesg\.log: line 2 has 'NVRM: Xid'"):
        ingest_path(st, dm)
    csv = tmp_path / "mb.csv"
    csv.write_text(",worker,gpu,time,batch_time_norm\n0,0,25,1,476\n1,x,25,1,5\n")
    with pytest.raises(DataError, match=r"mb\.csv: line 3"):
        ingest_path(st, csv, "minibatch")
    with pytest.raises(DataError, match="cannot tell the format"):
        detect_kind(TEL / "SOURCES.md")
    with pytest.raises(DataError, match="no optical DDM"):
        ingest_path(st, TEL / "SOURCES.md", "ddm")
    with pytest.raises(DataError, match="kind 'xml' is unknown"):
        ingest_path(st, TEL / "SOURCES.md", "xml")


def test_superbench_diagnosis_nodes_are_found(st: TelemetryStore) -> None:
    kind, n = ingest_path(st, TEL / "superbench_diagnosis_summary.jsonl")
    assert kind == "superbench-diagnosis" and n > 0
    flagged = st.query("SELECT DISTINCT node, category FROM phys_node_check WHERE category <> ''")
    assert sorted(zip(flagged["node"], flagged["category"], strict=True)) == [
        ("sb-validation-01", "KernelLaunch"),
        ("sb-validation-03", "FailedTest"),
    ]
    found = {f.component: f for f in ingested_findings(st)}
    # Our own checks on the per-metric deviations agree with the source's rule verdicts:
    # GPU 0's event overhead (+1578%) on node 01, the failed mem-bw test on node 03, nothing else.
    assert set(found) == {"node:sb-validation-01/gpu0", "node:sb-validation-03"}
    assert "+1578%" in found["node:sb-validation-01/gpu0"].what
    assert "KernelLaunch" in found["node:sb-validation-01/gpu0"].what
    assert "return code 1, 16 metrics missing" in found["node:sb-validation-03"].what


def test_superbench_monitor_samples(st: TelemetryStore) -> None:
    assert ingest_path(st, TEL / "superbench_monitor_gpu_node.jsonl")[0] == "superbench-monitor"
    ts = st.query("SELECT count(DISTINCT ts) AS k FROM phys_node_sample")["k"][0]
    assert ts == 5
    ib = st.query("SELECT DISTINCT device FROM phys_node_sample WHERE metric = 'receive_bw'")
    assert {"ib0", "ib1", "ib2"} <= set(ib["device"].tolist())
    found = ingested_findings(st)
    assert all(f.severity == "low" for f in found)  # no uncorrectable ECC, nothing hot
    assert [f.component for f in found] == ["gpu0"]  # correctable ECC rose on GPU 0 only


def test_superbench_bad_lines_are_one_error(tmp_path: Path, st: TelemetryStore) -> None:
    p = tmp_path / "diag.jsonl"
    p.write_text('{"index": "n1", "Category": "X", "Defective Details": "what is this"}\n')
    with pytest.raises(DataError, match="line 1: defective detail 'what is this'"):
        ingest_path(st, p, "superbench-diagnosis")
    p.write_text("[1, 2]\n")
    with pytest.raises(DataError, match="line 1 is not a JSON object"):
        ingest_path(st, p, "superbench-monitor")
