"""A private Open vSwitch instance for measurement: its own ovsdb-server and ovs-vswitchd
with database, run and log directories under one temporary folder (never the system's), a
`datapath_type=netdev` bridge (the userspace datapath: no kernel module) and one veth pair
into each of two network namespaces. Everything it creates is removed by `close()`, which the
context manager and a SIGINT/SIGTERM handler both call.

Binaries are found on PATH and in /usr/sbin (Debian's openvswitch-switch); nothing is
installed here (README: `apt-get install openvswitch-switch`).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, TracebackType
from typing import Any

from starfabric.errors import InfeasibleError

#: Namespace and interface names start with this (issue 20's prefix, GUIDE.md).
PREFIX = "sf20"
_TOOLS = ("ovsdb-server", "ovs-vswitchd", "ovsdb-tool", "ovs-vsctl", "ovs-ofctl", "ovs-appctl")
_SCHEMAS = (
    "/usr/share/openvswitch/vswitch.ovsschema",
    "/usr/local/share/openvswitch/vswitch.ovsschema",
)
#: OpenFlow port numbers of the two veth ends on the bridge (client side, server side).
PORT_CLIENT = 1
PORT_SERVER = 2
#: nice(1) level of both daemons: ovs-ctl's defaults (--ovsdb-server-priority and
#: --ovs-vswitchd-priority, ovs-ctl(8)) [fact]; on the shared cores it is also what keeps the
#: datapath thread from being starved by other work.
DAEMON_NICE = -10
#: ... and the nice of the daemons' scheduler autogroup (/proc/PID/autogroup, sched(7)): with
#: CONFIG_SCHED_AUTOGROUP each session is one group and a process's nice weighs only inside
#: its group, so the daemons (a session of their own after --detach) would get one group's
#: share of the cores however niced. Measured on the shared 2-core VM at load ~7: the main
#: thread, which polls the netdev ports, waited 0.78 s of every second runnable, and its port
#: sockets dropped 30-45% of 31k keep-alive frames/s. The autogroup at DAEMON_NICE gives the
#: daemons the priority ovs-ctl asks for, as a vSwitch host's dedicated cores would.
AUTOGROUP_NICE = DAEMON_NICE
#: Receive buffer of ovs-vswitchd's port sockets, 8 MiB (assumption: a vSwitch host's tuning).
#: OVS's netdev-linux sets none on its AF_PACKET sockets (netdev_linux_rxq_construct), so they
#: get the kernel's net.core.rmem_default (212992 B, ~270 small frames); the main thread, which
#: polls these non-PMD ports one batch per port per main-loop iteration, then loses every frame
#: that arrives during a stall of ~10 ms (measured: 8-34% of 25k keep-alive frames/s lost on the
#: shared 2-core VM at load 3). It is set only while the ports are added (sockets keep the
#: buffer they were created with) and restored at once.
RX_SOCKET_BUFFER_BYTES = 8 << 20
_RMEM_DEFAULT = Path("/proc/sys/net/core/rmem_default")
INSTALL_HINT = "apt-get install openvswitch-switch iproute2 (see README, 'Real Open vSwitch')"


def find_tool(name: str) -> str | None:
    """Path of an OVS/iproute2 tool on PATH or in /usr/sbin, /usr/local/sbin; None if absent."""
    path = shutil.which(name)
    if path:
        return path
    for d in ("/usr/sbin", "/usr/local/sbin", "/sbin"):
        p = Path(d) / name
        if p.is_file() and os.access(p, os.X_OK):
            return str(p)
    return None


def unavailable_reason() -> str | None:
    """Why a private OVS instance cannot run here (missing tool, schema, not root); None: it can."""
    missing = [t for t in (*_TOOLS, "ip") if find_tool(t) is None]
    if missing:
        return f"not installed: {', '.join(missing)} (install: {INSTALL_HINT})"
    if not any(Path(s).is_file() for s in _SCHEMAS):
        return f"vswitch.ovsschema not found in {', '.join(_SCHEMAS)} (install: {INSTALL_HINT})"
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, raw sockets)"
    return None


def ovs_version() -> str:
    """`ovs-vswitchd --version` first line, e.g. 'ovs-vswitchd (Open vSwitch) 3.1.0'."""
    tool = find_tool("ovs-vswitchd")
    if tool is None:
        raise InfeasibleError("ovs-vswitchd not found", fix=INSTALL_HINT)
    out = subprocess.run([tool, "--version"], capture_output=True, text=True, check=True)
    return out.stdout.splitlines()[0].strip()


def leftovers() -> dict[str, list[str]]:
    """What of ours is still on the machine: sf20- namespaces and links, ovs processes whose
    command line points into an sf20 temporary folder, and those folders."""
    ns = [
        n.split()[0]
        for n in _run_ok(["ip", "netns", "list"]).splitlines()
        if n.startswith(PREFIX + "-")
    ]
    links = [ln.split(":")[1].strip().split("@")[0] for ln in _run_ok(["ip", "-o", "link"]).splitlines()
             if ln.count(":") >= 2 and ln.split(":")[1].strip().startswith(PREFIX + "-")]  # fmt: skip
    procs: list[str] = []
    for p in Path("/proc").iterdir():
        if not p.name.isdigit():
            continue
        try:
            cmd = (p / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "ovs" in cmd and f"{PREFIX}-ovs." in cmd:
            procs.append(f"{p.name} {cmd.strip()}")
    tmp = Path(tempfile.gettempdir())
    dirs = [str(d) for d in tmp.glob(f"{PREFIX}-ovs.*")]
    return {"namespaces": ns, "links": links, "processes": procs, "dirs": dirs}


def _run_ok(cmd: list[str]) -> str:
    tool = find_tool(cmd[0]) or cmd[0]
    r = subprocess.run([tool, *cmd[1:]], capture_output=True, text=True, check=False)
    return r.stdout


@dataclass
class OvsInstance:
    """One private OVS with a netdev bridge `br0`, ports PORT_CLIENT (veth into namespace
    `<tag>-c`) and PORT_SERVER (into `<tag>-s`); `appctl`, `vsctl`, `ofctl` talk to it only."""

    tag: str = f"{PREFIX}-a"
    megaflows: bool = True
    flow_limit: int | None = None
    #: receive buffer of OVS's port sockets (RX_SOCKET_BUFFER_BYTES); None: the kernel default
    rx_buffer_bytes: int | None = None
    other_config: dict[str, str] = field(default_factory=dict)
    dir: Path | None = None
    pids: dict[str, int] = field(default_factory=dict)
    _made: list[tuple[str, str]] = field(default_factory=list)
    _old_handlers: dict[int, Any] = field(default_factory=dict)

    # ---- names --------------------------------------------------------------------------
    @property
    def ns_client(self) -> str:
        return f"{self.tag}-c"

    @property
    def ns_server(self) -> str:
        return f"{self.tag}-s"

    def _if(self, side: str, end: int) -> str:
        return f"{self.tag}-{side}{end}"  # e.g. sf20-a-c0 (bridge end), sf20-a-c1 (namespace end)

    @property
    def if_client(self) -> str:
        """The client namespace's end of its veth (where the driver sends)."""
        return self._if("c", 1)

    @property
    def if_server(self) -> str:
        return self._if("s", 1)

    @property
    def vswitchd_pid(self) -> int:
        return self.pids["ovs-vswitchd"]

    # ---- lifecycle ----------------------------------------------------------------------
    def __enter__(self) -> OvsInstance:
        self.start()
        return self

    def __exit__(self, et: type[BaseException] | None, e: BaseException | None,
                 tb: TracebackType | None) -> None:  # fmt: skip
        self.close()

    def start(self) -> None:
        """Start ovsdb-server and ovs-vswitchd, build the bridge, namespaces and ports."""
        if self.pids:  # already running (start() or the context manager, once)
            return
        reason = unavailable_reason()
        if reason is not None:
            raise InfeasibleError(f"a private Open vSwitch cannot run here: {reason}",
                                  fix=INSTALL_HINT)  # fmt: skip
        self._install_signal_handlers()
        try:
            self._start()
        except BaseException:
            self.close()
            raise

    def _start(self) -> None:
        self.dir = Path(tempfile.mkdtemp(prefix=f"{PREFIX}-ovs."))
        d = self.dir
        schema = next(s for s in _SCHEMAS if Path(s).is_file())
        self._tool("ovsdb-tool", "create", str(d / "conf.db"), schema)
        self._tool("ovsdb-server", str(d / "conf.db"), f"--remote=punix:{d}/db.sock",
                   f"--pidfile={d}/ovsdb-server.pid", f"--log-file={d}/ovsdb-server.log",
                   f"--unixctl={d}/ovsdb-server.ctl", "--detach", "--no-chdir")  # fmt: skip
        self.pids["ovsdb-server"] = self._read_pid("ovsdb-server")
        self.vsctl("--no-wait", "init")
        cfg = dict(self.other_config)
        if self.flow_limit is not None:
            cfg["flow-limit"] = str(self.flow_limit)
        if cfg:
            self.vsctl("--no-wait", "set", "Open_vSwitch", ".",
                       *[f"other_config:{k}={v}" for k, v in cfg.items()])  # fmt: skip
        self._tool("ovs-vswitchd", f"unix:{d}/db.sock", f"--pidfile={d}/ovs-vswitchd.pid",
                   f"--log-file={d}/ovs-vswitchd.log", f"--unixctl={d}/ovs-vswitchd.ctl",
                   "--detach", "--no-chdir", "--disable-system")  # fmt: skip
        self.pids["ovs-vswitchd"] = self._read_pid("ovs-vswitchd")
        for pid in self.pids.values():
            _set_autogroup_nice(pid, AUTOGROUP_NICE)
        self.vsctl("add-br", "br0", "--", "set", "bridge", "br0", "datapath_type=netdev",
                   "fail_mode=secure")  # fmt: skip
        for side in ("c", "s"):
            ns = f"{self.tag}-{side}"
            self._ip("netns", "add", ns)
            self._made.append(("netns", ns))
            a, b = self._if(side, 0), self._if(side, 1)
            self._ip("link", "add", a, "type", "veth", "peer", "name", b, "netns", ns)
            self._made.append(("link", a))
            self._no_ipv6(None, a)
            self._no_ipv6(ns, b)
            for dev in (a, b):
                args = ["-n", ns] if dev == b else []
                self._ip(*args, "link", "set", dev, "up")
                # no offloads: the frames are complete, and OVS reads them through AF_PACKET
                with contextlib.suppress(subprocess.CalledProcessError):
                    self._ip(*args, "link", "set", dev, "txqueuelen", "10000")
            self._ip("-n", ns, "link", "set", "lo", "up")
        with _rmem_default(self.rx_buffer_bytes):
            for side, ofport in (("c", PORT_CLIENT), ("s", PORT_SERVER)):
                a = self._if(side, 0)
                self.vsctl("add-port", "br0", a, "--", "set", "Interface", a,
                           f"ofport_request={ofport}")  # fmt: skip
            self._wait_ports()  # the ports' receive sockets exist
        if not self.megaflows:
            self.appctl("upcall/disable-megaflows")
        if self.flow_limit is not None:
            self.appctl("upcall/set-flow-limit", str(self.flow_limit))

    def _wait_ports(self, timeout_s: float = 10.0) -> None:
        t_end = time.monotonic() + timeout_s
        while time.monotonic() < t_end:
            out = self.appctl("dpctl/show")
            if self._if("c", 0) in out and self._if("s", 0) in out:
                return
            time.sleep(0.1)
        raise InfeasibleError(f"OVS did not add the veth ports within {timeout_s} s: "
                              f"{self.appctl('dpctl/show')}",
                              fix=f"see {self.dir}/ovs-vswitchd.log")  # fmt: skip

    def close(self) -> None:
        """Stop both daemons, delete the namespaces and links, remove the folder (idempotent)."""
        for name in ("ovs-vswitchd", "ovsdb-server"):
            pid = self.pids.pop(name, None)
            if pid is not None:
                _terminate(pid)
        for kind, name in reversed(self._made):
            if kind == "netns":
                subprocess.run([find_tool("ip") or "ip", "netns", "del", name],
                               capture_output=True, check=False)  # fmt: skip
            else:
                subprocess.run([find_tool("ip") or "ip", "link", "del", name],
                               capture_output=True, check=False)  # fmt: skip
        self._made.clear()
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None
        self._restore_signal_handlers()

    def _install_signal_handlers(self) -> None:
        def handler(signum: int, frame: FrameType | None) -> None:
            self.close()
            raise KeyboardInterrupt(f"signal {signum}")

        for s in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(ValueError):  # not the main thread: the caller cleans up
                self._old_handlers[s] = signal.signal(s, handler)

    def _restore_signal_handlers(self) -> None:
        for s, h in self._old_handlers.items():
            with contextlib.suppress(ValueError, TypeError):
                signal.signal(s, h)
        self._old_handlers.clear()

    # ---- control ------------------------------------------------------------------------
    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        d = str(self.dir)
        env.update(OVS_RUNDIR=d, OVS_LOGDIR=d, OVS_DBDIR=d, OVS_SYSCONFDIR=d, OVS_PKGDATADIR=d)
        return env

    def _tool(self, name: str, *args: str, timeout: float = 120.0) -> str:
        tool = find_tool(name)
        if tool is None:
            raise InfeasibleError(f"{name} not found", fix=INSTALL_HINT)
        cmd = [tool, *args]
        nice = shutil.which("nice")
        if name in ("ovsdb-server", "ovs-vswitchd") and nice is not None:
            cmd = [nice, "-n", str(DAEMON_NICE), *cmd]
        r = subprocess.run(cmd, capture_output=True, text=True, env=self._env(),
                           timeout=timeout, check=False)  # fmt: skip
        if r.returncode != 0:
            raise InfeasibleError(f"{name} {' '.join(args[:3])} failed ({r.returncode}): "
                                  f"{r.stderr.strip()[:300]}",
                                  fix=f"see the logs in {self.dir}")  # fmt: skip
        return r.stdout

    def _ip(self, *args: str) -> str:
        return self._tool("ip", *args)

    def _no_ipv6(self, ns: str | None, dev: str) -> None:
        """No IPv6 on a veth end: its router/neighbour solicitations would count as traffic."""
        path = f"/proc/sys/net/ipv6/conf/{dev}/disable_ipv6"
        with contextlib.suppress(InfeasibleError, OSError):
            if ns:  # /proc/sys/net is the opening task's namespace's
                self._tool("ip", "netns", "exec", ns, "sh", "-c", f"echo 1 > {path}")
            else:
                Path(path).write_text("1")

    def _read_pid(self, name: str) -> int:
        return int((Path(str(self.dir)) / f"{name}.pid").read_text().strip())

    def vsctl(self, *args: str) -> str:
        return self._tool("ovs-vsctl", f"--db=unix:{self.dir}/db.sock", *args)

    def ofctl(self, *args: str) -> str:
        return self._tool("ovs-ofctl", "-O", "OpenFlow13", *args)

    def appctl(self, *args: str, timeout: float = 120.0) -> str:
        return self._tool("ovs-appctl", "-T", str(int(timeout)), "-t",
                          f"{self.dir}/ovs-vswitchd.ctl", *args, timeout=timeout + 5)  # fmt: skip

    def add_flows(self, flows: str) -> None:
        """Replace br0's OpenFlow table with `flows` (ovs-ofctl text, one flow a line)."""
        path = Path(str(self.dir)) / "flows.txt"
        path.write_text(flows)
        self.ofctl("replace-flows", f"unix:{self.dir}/br0.mgmt", str(path))

    def mac(self, ns: str, dev: str) -> bytes:
        out = self._ip("-n", ns, "-o", "link", "show", dev)
        word = out.split("link/ether")[1].split()[0]
        return bytes.fromhex(word.replace(":", ""))

    def rx_packets(self, ns: str, dev: str) -> int:
        """Packets a namespace's veth end received (what OVS delivered to that side)."""
        out = json.loads(self._ip("-n", ns, "-j", "-s", "link", "show", dev))
        return int(out[0]["stats64"]["rx"]["packets"])


def _set_autogroup_nice(pid: int, nice: int) -> None:
    """Set the nice of `pid`'s scheduler autogroup unless it is our own (never renice the
    caller's session) or autogroups are off (no /proc/PID/autogroup: nothing to do)."""
    path = Path(f"/proc/{pid}/autogroup")
    try:
        theirs = path.read_text().split()[0]
        ours = Path("/proc/self/autogroup").read_text().split()[0]
    except (OSError, IndexError):
        return
    if theirs != ours:
        with contextlib.suppress(OSError):
            path.write_text(str(nice))


@contextlib.contextmanager
def _rmem_default(nbytes: int | None) -> Iterator[None]:
    """net.core.rmem_default = nbytes inside the block (sockets created there get it), then
    the old value again, also on error; None: unchanged."""
    if nbytes is None:
        yield
        return
    old = _RMEM_DEFAULT.read_text().strip()
    try:
        _RMEM_DEFAULT.write_text(str(nbytes))
        yield
    finally:
        _RMEM_DEFAULT.write_text(old)


def _terminate(pid: int, timeout_s: float = 5.0) -> None:
    """SIGTERM, then SIGKILL after timeout_s; a pid that is gone is fine."""
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    t_end = time.monotonic() + timeout_s
    while time.monotonic() < t_end:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


__all__ = [
    "INSTALL_HINT",
    "PORT_CLIENT",
    "PORT_SERVER",
    "PREFIX",
    "RX_SOCKET_BUFFER_BYTES",
    "OvsInstance",
    "find_tool",
    "leftovers",
    "ovs_version",
    "unavailable_reason",
]
