"""The lab a Linux datapath runs in: three network namespaces joined by veth pairs.

    client (c0) <-veth-> (n0) nic (n1) <-veth-> (s0) server

The "nic" namespace is the SmartNIC: packets entering on n0 leave on n1 and the other way
round, whatever their addresses (policy routing by input interface, onlink default routes to
permanent neighbours, IPv4 and IPv6), so the tenant networks' overlapping address spaces need
no routes of their own; nf_conntrack and the nftables ruleset (nft.py) act there. The client
and server namespaces only hold the ends the sender (sender.py) writes frames into and
captures them from; their own stacks never answer (no addresses in the tenants' ranges, no
forwarding).

Everything is created with pyroute2 (no `ip` per object); sysctls are written from a thread
that setns(2)'d into the nic namespace (`NsWorker`), the same thread that must open any socket
meant to live there (ctnetlink, libnftables). `Lab` removes every namespace and link it made
on exit, on an exception and on SIGINT/SIGTERM; `cleanup_stale(prefix)` removes leftovers of a
killed run.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import ctypes.util
import os
import queue
import signal
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, TypeVar

from starfabric.errors import ConfigError, InfeasibleError

if TYPE_CHECKING:
    from starfabric.fornax.engine.config import EngineConfig

T = TypeVar("T")

_CLONE_NEWNET = 0x40000000
NETNS_DIR = "/run/netns"
#: Link-local next hops of the nic namespace's onlink default routes (RFC 3927 / RFC 4291
#: link-local ranges: never a tenant address, never routed beyond the veth).
GW4 = {"n0": "169.254.0.1", "n1": "169.254.1.1"}
GW6 = {"n0": "fe80::1", "n1": "fe80::2"}
#: Policy-routing tables of the nic namespace: input n0 -> table 100 (out n1), n1 -> 101.
TABLES = {"n0": 100, "n1": 101}
#: Fixed MACs of the lab's ends (locally administered, unicast).
MACS = {"c0": "02:5f:00:00:00:c0", "n0": "02:5f:00:00:00:a0", "n1": "02:5f:00:00:00:a1",
        "s0": "02:5f:00:00:00:50"}  # fmt: skip
#: Conntrack sysctls (under net.netfilter.) set from an EngineConfig: sysctl leaf -> field.
ENGINE_SYSCTLS = {
    "nf_conntrack_tcp_timeout_syn_sent": "tcp_syn_sent_s",
    "nf_conntrack_tcp_timeout_syn_recv": "tcp_syn_recv_s",
    "nf_conntrack_tcp_timeout_established": "tcp_established_s",
    "nf_conntrack_tcp_timeout_fin_wait": "tcp_fin_wait_s",
    "nf_conntrack_tcp_timeout_close_wait": "tcp_close_wait_s",
    "nf_conntrack_tcp_timeout_last_ack": "tcp_last_ack_s",
    "nf_conntrack_tcp_timeout_time_wait": "tcp_time_wait_s",
    "nf_conntrack_tcp_timeout_close": "tcp_close_s",
    "nf_conntrack_tcp_timeout_max_retrans": "tcp_max_retrans_s",
    "nf_conntrack_tcp_timeout_unacknowledged": "tcp_unacknowledged_s",
    "nf_conntrack_udp_timeout": "udp_unreplied_s",
    "nf_conntrack_udp_timeout_stream": "udp_assured_s",
    "nf_conntrack_icmp_timeout": "icmp_s",
    "nf_conntrack_icmpv6_timeout": "icmp_s",
    "nf_conntrack_generic_timeout": "generic_s",
    "nf_conntrack_tcp_loose": "tcp_loose",
    "nf_conntrack_tcp_be_liberal": "tcp_be_liberal",
    "nf_conntrack_tcp_max_retrans": "tcp_max_retrans",
    "nf_conntrack_tcp_ignore_invalid_rst": "tcp_ignore_invalid_rst",
}

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)


def linux_support() -> str | None:
    """None when a Lab can run here; else one line saying what is missing and how to get it."""
    if os.geteuid() != 0:
        return "needs root (network namespaces, veth pairs, raw sockets, nftables)"
    try:
        import pyroute2  # noqa: F401
    except ImportError:
        return "pyroute2 is not installed (pip install 'starfabric[linux]')"
    if ctypes.util.find_library("nftables") is None and not os.path.exists(
        "/usr/lib/x86_64-linux-gnu/libnftables.so.1"
    ):
        return "libnftables is not installed (apt-get install nftables libnftables1)"
    if not os.path.exists("/proc/sys/net/netfilter/nf_conntrack_max") and not os.path.exists(
        "/proc/net/nf_conntrack"
    ):
        return "the kernel has no nf_conntrack (CONFIG_NF_CONNTRACK or modprobe nf_conntrack)"
    if not os.path.exists("/proc/self/ns/net"):
        return "the kernel has no network namespaces (CONFIG_NET_NS)"
    return None


def kernel_has(option: str) -> bool | None:
    """Whether the running kernel was built with CONFIG_`option` (y or m); None if unknown."""
    import gzip

    try:
        with gzip.open("/proc/config.gz", "rt") as f:
            text = f.read()
    except OSError:
        return None
    return f"\nCONFIG_{option}=y" in text or f"\nCONFIG_{option}=m" in text


#: Kernel parts the datapath uses: module name -> (CONFIG_ option, what is lost without it).
MODULES = {
    "nf_conntrack": ("NF_CONNTRACK", "no session table: the Linux datapath cannot run"),
    "nf_conntrack_netlink": ("NF_CT_NETLINK", "no ctnetlink: entries cannot be managed"),
    "nf_tables": ("NF_TABLES", "no nftables: no policy ruleset or verdict pipeline"),
    "nf_flow_table": ("NF_FLOW_TABLE", "no flowtable: the fast path is conntrack + one chain"),
}
_modules_checked: list[str] | None = None


def kernel_modules() -> list[str]:
    """Load the datapath's kernel modules where the kernel is modular (one `modprobe` per
    module, once per process); returns one line per part that is missing, saying what is
    lost (built-in parts count as present)."""
    global _modules_checked
    if _modules_checked is not None:
        return _modules_checked
    import shutil
    import subprocess

    modprobe = shutil.which("modprobe")
    missing = []
    for mod, (opt, loss) in MODULES.items():
        present = os.path.exists(f"/sys/module/{mod}") or bool(kernel_has(opt))
        if modprobe and os.path.exists("/proc/modules"):  # a modular kernel: load it now
            ok = subprocess.run([modprobe, "-q", mod], check=False, capture_output=True)
            present = present or ok.returncode == 0
        if not present:
            missing.append(f"{mod}: not in this kernel (CONFIG_{opt}): {loss}")
    _modules_checked = missing
    return missing


def setns(path: str) -> None:
    """Move the calling thread into the network namespace at `path`."""
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, _CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise InfeasibleError(f"setns({path}) failed: {os.strerror(err)}", fix="run as root")
    finally:
        os.close(fd)


class NsWorker:
    """A thread living in one network namespace: `call(fn, ...)` runs fn there and returns its
    result (exceptions re-raised in the caller). Sockets it creates belong to that namespace."""

    def __init__(self, ns: str) -> None:
        self.ns = ns
        self._q: queue.Queue[tuple[Callable[..., Any], tuple[Any, ...], Future[Any]] | None] = (
            queue.Queue()
        )
        ready: Future[None] = Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"netns-{ns}", daemon=True
        )
        self._thread.start()
        ready.result()

    def _run(self, ready: Future[None]) -> None:
        try:
            setns(f"{NETNS_DIR}/{self.ns}")
        except BaseException as exc:  # reported to the constructor
            ready.set_exception(exc)
            return
        ready.set_result(None)
        while (item := self._q.get()) is not None:
            fn, args, fut = item
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # re-raised in the caller
                fut.set_exception(exc)

    def call(self, fn: Callable[..., T], *args: Any) -> T:
        fut: Future[T] = Future()
        self._q.put((fn, args, fut))
        return fut.result()

    def close(self) -> None:
        if self._thread.is_alive():
            self._q.put(None)
            self._thread.join(timeout=5)


def write_sysctl(name: str, value: int | str) -> None:
    """Write sysctl `name` (dotted) in the calling thread's network namespace."""
    path = "/proc/sys/" + name.replace(".", "/")
    try:
        with open(path, "w") as f:
            f.write(str(value))
    except OSError as exc:
        raise InfeasibleError(f"cannot set sysctl {name}={value}: {exc.strerror}") from None


def read_sysctl(name: str) -> str:
    with open("/proc/sys/" + name.replace(".", "/")) as f:
        return f.read().strip()


@dataclass(frozen=True)
class LabConfig:
    """How a Lab is built: name prefix and the nic namespace's conntrack sysctls
    (leaf under net.netfilter -> value; seconds for timeouts)."""

    prefix: str = "sfx"
    conntrack: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.prefix.isalnum() or len(self.prefix) > 6:
            raise ConfigError(
                f"LabConfig.prefix {self.prefix!r} must be 1-6 letters or digits",
                fix="use e.g. 'sfx'",
            )

    @classmethod
    def from_engine(cls, cfg: EngineConfig, prefix: str = "sfx") -> LabConfig:
        """The engine's timeouts and tracking knobs as the kernel's sysctls (seconds are whole
        in the kernel: rounded, at least 1 so a short test timeout never means 'no timeout')."""
        vals: dict[str, int] = {}
        for leaf, name in ENGINE_SYSCTLS.items():
            v = getattr(cfg, name)
            vals[leaf] = (
                int(v)
                if name.endswith(("loose", "liberal", "retrans", "rst"))
                else (max(1, round(float(v))))
            )
        return cls(prefix=prefix, conntrack=vals)


_live: dict[int, Lab] = {}
_counter = iter(range(1 << 30))
_handlers_lock = threading.Lock()
_previous: dict[int, Any] = {}


def _on_signal(signum: int, frame: FrameType | None) -> None:
    _close_all()
    prev = _previous.get(signum)
    if callable(prev):
        prev(signum, frame)
    elif signum == signal.SIGINT:
        raise KeyboardInterrupt
    else:
        raise SystemExit(128 + signum)


def _install_handlers() -> None:
    if threading.current_thread() is not threading.main_thread():
        return
    with _handlers_lock:
        for s in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(s) is not _on_signal:
                _previous[s] = signal.getsignal(s)
                signal.signal(s, _on_signal)


def _restore_handlers() -> None:
    if _live or threading.current_thread() is not threading.main_thread():
        return
    with _handlers_lock:
        for s, prev in list(_previous.items()):
            if signal.getsignal(s) is _on_signal:
                signal.signal(s, prev)
            del _previous[s]


def _close_all() -> None:
    for lab in list(_live.values()):
        lab.close()


atexit.register(_close_all)


class Lab:
    """client / nic / server namespaces with their veths and routing (see module doc)."""

    def __init__(self, config: LabConfig | None = None) -> None:
        self.config = config or LabConfig()
        base = f"{self.config.prefix}-{os.getpid()}-{next(_counter)}"
        self.name = base
        self.ns_client, self.ns_nic, self.ns_server = (
            f"{base}-client",
            f"{base}-nic",
            f"{base}-server",
        )
        self.macs = dict(MACS)
        self.ifindex: dict[str, int] = {}
        self.nic: NsWorker | None = None
        self._made: list[str] = []
        self._closed = False
        self.missing: list[str] = []

    # -- lifecycle ------------------------------------------------------------------------
    def __enter__(self) -> Lab:
        why = linux_support()
        if why is not None:
            raise InfeasibleError(f"the Linux datapath cannot run here: {why}")
        #: one line per kernel part that is missing (kernel_modules), e.g. the flowtable
        self.missing = kernel_modules()
        _live[id(self)] = self
        _install_handlers()
        try:
            self._build()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Remove everything this lab made (idempotent; safe from a signal handler)."""
        if self._closed:
            return
        self._closed = True
        if self.nic is not None:
            self.nic.close()
        from pyroute2 import netns

        # deleting a namespace deletes the veth ends inside it and, with them, their peers
        for ns in reversed(self._made):
            with contextlib.suppress(OSError, FileNotFoundError):
                netns.remove(ns)
        _live.pop(id(self), None)
        _restore_handlers()

    # -- construction ---------------------------------------------------------------------
    def _build(self) -> None:
        from pyroute2 import netns

        for ns in (self.ns_client, self.ns_nic, self.ns_server):
            netns.create(ns)
            self._made.append(ns)
        self.nic = NsWorker(self.ns_nic)
        # every netlink socket is opened by a thread inside the namespace it configures
        self.nic.call(self._nic_links)
        self.nic.call(self._nic_sysctls)
        for ns, end in ((self.ns_client, "c0"), (self.ns_server, "s0")):
            self.in_ns(ns, self._end, end)
        self.nic.call(self._nic_routes)

    def _nic_links(self) -> None:
        from pyroute2 import IPRoute

        with IPRoute() as ip:
            ip.link("add", ifname="n0", kind="veth",
                    peer={"ifname": "c0", "net_ns_fd": self.ns_client})  # fmt: skip
            ip.link("add", ifname="n1", kind="veth",
                    peer={"ifname": "s0", "net_ns_fd": self.ns_server})  # fmt: skip

    def _end(self, end: str) -> None:
        from pyroute2 import IPRoute

        _quiet_end()
        with IPRoute() as ip:
            self._up(ip, (end,))

    def _nic_routes(self) -> None:
        from pyroute2 import IPRoute

        with IPRoute() as ip:
            self._up(ip, ("n0", "n1"))
            self._routes(ip)

    def _nic_sysctls(self) -> None:
        for k in ("all", "default"):
            write_sysctl(f"net.ipv4.conf.{k}.rp_filter", 0)
            write_sysctl(f"net.ipv6.conf.{k}.accept_ra", 0)
            write_sysctl(f"net.ipv4.conf.{k}.send_redirects", 0)
            write_sysctl(f"net.ipv6.conf.{k}.accept_dad", 0)
        write_sysctl("net.ipv4.ip_forward", 1)
        write_sysctl("net.ipv6.conf.all.forwarding", 1)
        # no ICMP errors from the nic itself: a refused or unroutable packet just disappears
        write_sysctl("net.ipv4.icmp_ratelimit", 0)
        for leaf, v in self.config.conntrack.items():
            write_sysctl(f"net.netfilter.{leaf}", v)

    def _up(self, ip: Any, ends: tuple[str, ...]) -> None:
        lo = ip.link_lookup(ifname="lo")[0]
        ip.link("set", index=lo, state="up")
        for name in ends:
            idx = ip.link_lookup(ifname=name)[0]
            self.ifindex[name] = idx
            ip.link("set", index=idx, address=self.macs[name], mtu=1500)
            ip.link("set", index=idx, state="up")

    def _routes(self, ip: Any) -> None:
        peer_mac = {"n0": self.macs["c0"], "n1": self.macs["s0"]}
        for out, into in (("n1", "n0"), ("n0", "n1")):
            idx, table = self.ifindex[out], TABLES[into]
            for gw, fam, dst in ((GW4[out], 2, "0.0.0.0/0"), (GW6[out], 10, "::/0")):
                ip.neigh("add", dst=gw, lladdr=peer_mac[out], ifindex=idx, state="permanent",
                         family=fam)  # fmt: skip
                ip.route("add", dst=dst, gateway=gw, oif=idx, table=table, flags=4,  # ONLINK
                         family=fam)  # fmt: skip
                ip.rule("add", iifname=into, table=table, priority=1000 + table, family=fam)

    # -- helpers for the other modules ----------------------------------------------------
    @property
    def worker(self) -> NsWorker:
        """The nic namespace's worker thread; refused when the lab is not built or closed."""
        if self.nic is None:
            raise InfeasibleError("the lab is not built (use it inside `with Lab() as lab:`)")
        return self.nic

    def sysctl(self, name: str, value: int | str) -> None:
        """Write sysctl `name` in the nic namespace."""
        self.worker.call(write_sysctl, name, value)

    def read_sysctl(self, name: str) -> str:
        return self.worker.call(read_sysctl, name)

    def in_ns(self, ns: str, fn: Callable[..., T], *args: Any) -> T:
        """Run fn in namespace `ns` (one of this lab's) on a short-lived thread."""
        if ns == self.ns_nic and self.nic is not None:
            return self.nic.call(fn, *args)
        w = NsWorker(ns)
        try:
            return w.call(fn, *args)
        finally:
            w.close()


def _quiet_end() -> None:
    """Client/server namespaces: never answer, forward or solicit anything themselves."""
    for k in ("all", "default"):
        write_sysctl(f"net.ipv6.conf.{k}.accept_ra", 0)
        write_sysctl(f"net.ipv6.conf.{k}.accept_dad", 0)
        write_sysctl(f"net.ipv6.conf.{k}.disable_ipv6", 1)
    write_sysctl("net.ipv4.ip_forward", 0)


def lab_namespaces(prefix: str) -> list[str]:
    """Namespaces named like a Lab's with this prefix."""
    try:
        names = os.listdir(NETNS_DIR)
    except FileNotFoundError:
        return []
    return sorted(n for n in names if n.startswith(prefix + "-") and n.endswith(
        ("-client", "-nic", "-server")))  # fmt: skip


def _owner_alive(name: str, prefix: str) -> bool:
    """Whether the process a Lab namespace is named after ('<prefix>-<pid>-...') still runs."""
    pid = name[len(prefix) + 1 :].split("-", 1)[0]
    return pid.isdigit() and os.path.exists(f"/proc/{pid}")


def cleanup_stale(prefix: str = "sfx") -> list[str]:
    """Remove namespaces a killed Lab left behind (their veths go with them); returns their
    names. Namespaces of a process still running (this one's, a parallel test worker's) are
    kept."""
    from pyroute2 import netns

    removed = []
    for n in lab_namespaces(prefix):
        if _owner_alive(n, prefix):
            continue
        with contextlib.suppress(OSError, FileNotFoundError):
            netns.remove(n)
            removed.append(n)
    return removed


@contextlib.contextmanager
def lab(config: LabConfig | None = None) -> Iterator[Lab]:
    """`with lab() as l:` — the same as `with Lab(config) as l:`."""
    with Lab(config) as lb:
        yield lb
