"""The Lab builds its three namespaces with the engine's conntrack settings and removes every
one of them on exit, on an exception and on SIGTERM/SIGINT; cleanup_stale removes what a
killed run left (skipped, with the reason, without root/pyroute2/nftables/conntrack)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from starfabric.errors import ConfigError
from starfabric.fornax.datapaths.linux.netns import (
    Lab,
    LabConfig,
    cleanup_stale,
    lab_namespaces,
    linux_support,
)
from starfabric.fornax.engine.config import EngineConfig

WHY = linux_support()
needs_kernel = pytest.mark.skipif(WHY is not None, reason=f"Linux datapath: {WHY}")
SRC = str(Path(__file__).resolve().parents[4] / "src")


def test_config_from_engine_and_bad_prefix() -> None:
    cfg = LabConfig.from_engine(
        EngineConfig.small(tcp_close_s=0.3, udp_assured_s=3.0, tcp_be_liberal=1)
    )
    assert cfg.conntrack["nf_conntrack_tcp_timeout_close"] == 1  # whole seconds, at least 1
    assert cfg.conntrack["nf_conntrack_udp_timeout_stream"] == 3
    assert cfg.conntrack["nf_conntrack_tcp_be_liberal"] == 1
    assert cfg.conntrack["nf_conntrack_tcp_timeout_established"] == 432000
    with pytest.raises(ConfigError, match="prefix"):
        LabConfig(prefix="bad-prefix!")


@needs_kernel
def test_lab_sets_sysctls_and_removes_everything() -> None:
    cfg = LabConfig.from_engine(EngineConfig.small(udp_unreplied_s=7.0), prefix="sfxt")
    mine = f"sfxt-{os.getpid()}"  # labs of another process running this test are not ours
    with Lab(cfg) as lab:
        names = lab_namespaces(mine)
        assert sorted(names) == sorted([lab.ns_client, lab.ns_nic, lab.ns_server])
        assert lab.read_sysctl("net.netfilter.nf_conntrack_udp_timeout") == "7"
        assert lab.read_sysctl("net.ipv4.ip_forward") == "1"
        out = subprocess.run(["ip", "netns", "exec", lab.ns_nic, "ip", "-6", "rule"],
                             capture_output=True, text=True, check=True).stdout  # fmt: skip
        assert "iif n0 lookup 100" in out and "iif n1 lookup 101" in out
    assert lab_namespaces(mine) == []
    with pytest.raises(RuntimeError, match="boom"), Lab(LabConfig(prefix="sfxt")):
        raise RuntimeError("boom")
    assert lab_namespaces(mine) == []


@needs_kernel
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_signal_removes_the_namespaces(sig: int) -> None:
    code = textwrap.dedent("""
        import sys, time
        from starfabric.fornax.datapaths.linux.netns import Lab, LabConfig
        with Lab(LabConfig(prefix="sfxs")) as lab:
            print(lab.ns_nic, flush=True)
            time.sleep(30)
    """)
    env = {**os.environ, "PYTHONPATH": SRC}
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert p.stdout is not None
        nic = p.stdout.readline().strip()
        assert nic in lab_namespaces("sfxs")
        p.send_signal(sig)
        p.wait(timeout=20)
    finally:
        if p.poll() is None:
            p.kill()
    assert p.returncode != 0
    assert lab_namespaces("sfxs") == []


@needs_kernel
def test_cleanup_stale_removes_only_leftovers_of_dead_processes() -> None:
    from pyroute2 import netns

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()  # fmt: skip
    left = [f"sfxc-{gone}-0-client", f"sfxc-{gone}-0-nic"]
    for n in left:
        netns.create(n)
    with Lab(LabConfig(prefix="sfxc")) as lab:  # alive: kept
        assert sorted(cleanup_stale("sfxc")) == left
        assert sorted(lab_namespaces("sfxc")) == sorted([lab.ns_client, lab.ns_nic, lab.ns_server])
    assert lab_namespaces("sfxc") == []


def test_missing_kernel_parts_are_one_line_each(monkeypatch: pytest.MonkeyPatch) -> None:
    from starfabric.fornax.datapaths.linux import netns

    monkeypatch.setattr(netns, "_modules_checked", None)
    monkeypatch.setattr(netns, "kernel_has", lambda opt: opt != "NF_FLOW_TABLE")
    monkeypatch.setattr(netns.os.path, "exists", lambda p: False)  # no /sys/module, no modprobe
    monkeypatch.setattr("shutil.which", lambda name: None)
    lines = netns.kernel_modules()
    assert lines == [
        "nf_flow_table: not in this kernel (CONFIG_NF_FLOW_TABLE): no flowtable: the fast path "
        "is conntrack + one chain"
    ]
