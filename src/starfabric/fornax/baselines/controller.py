"""One controller family for Fornax and the software-centric baselines: `SoftwareCentric` is
the Fornax Manager with the knobs of SoftwareCentricConfig (config.py) applied, so Fornax,
the OVS-like and DOCA-like baselines and the ablations run the same code for everything
they share (miss path, policy decision, NAT, software datapath, setup budget, metrics).

What the knobs change:
- entries=per_direction: the engine is wrapped in PerDirectionEngine (two entries per
  connection, engines.py); aging a connection deletes both (it is idle when both are).
- aging=poll|revalidate: hardware does not age (the scrub tick expires nothing); every
  `period_s` a software pass dumps EVERY hardware entry in chunks and deletes the idle ones
  (poll: the DOCA-like aging thread; revalidate: OVS revalidators, which also look each flow
  up in the mirror, refresh its stats, sweep ukeys whose flow is gone and run the dynamic
  flow limit). Idle means: now - last use visible to software > the idle timeout.
- stats_lag_s: hardware counters reach the mirror only at each multiple of the lag (the
  first tick at or after it syncs them; the sync is the driver's work, not charged to
  management), so a revalidator judges a flow by counters up to a lag old.
- policy=rescan: no version bumps; software finds every flow of the affected scopes (the
  mirror, or the engine's scope-filtered dump without one), decides each again and issues
  modify / delete / delete+insert. The re-evaluation proceeds over simulated time at
  `rescan_flows_per_s()` (OVS revalidator threads; DOCA-style software re-evaluation), in
  chunks of `rescan_chunk` flows as tick()/process() advance the clock: an entry not reached
  yet keeps forwarding with its old actions (the stale window); each chunk re-reads its
  entries (query) so aged or changed ones are judged as they are now. An infinite rate
  re-evaluates at once. Software-resident sessions keep the software datapath's lazy
  versions in every mode. Rescan ops take setup tokens but are never deferred.
- mirror=full: MirroredEngine keeps one udpif_key-like record per hardware entry.
- flow_limit: inserts above OVS's dynamic limit are refused by software; those sessions
  stay in the software datapath (as any session hardware cannot take).
Management CPU of these passes is charged to the activities "poll", "revalidate", "rescan".
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import numpy.typing as npt

from starfabric._jit import frozen_each
from starfabric.fornax.baselines import _kernels as kernels
from starfabric.fornax.baselines.config import SoftwareCentricConfig, software_centric_config
from starfabric.fornax.baselines.engines import (
    REPLY_MARK,
    DelegatingEngine,
    PerDirectionEngine,
    to_original,
)
from starfabric.fornax.baselines.flowlimit import DynamicFlowLimit
from starfabric.fornax.baselines.mirror import OVS_UKEY_BYTES, FlowMirror, MirroredEngine
from starfabric.fornax.baselines.ovs_cost import host_bytes, pass_interval_s
from starfabric.fornax.engine.config import TO_GENERIC, TO_ICMP, TO_UDP_ASSURED, TO_UDP_UNREPLIED
from starfabric.fornax.engine.interface import (
    ENTRY_DTYPE,
    ENTRY_FLAG_SEEN_REPLY,
    Scope,
    SessionEngine,
    Status,
)
from starfabric.fornax.manager import Fate, Manager, ManagerConfig
from starfabric.fornax.manager.decide import is_icmp, original_from_entries
from starfabric.fornax.manager.parts import Part
from starfabric.fornax.packets import PROTO_TCP, PROTO_UDP, PacketBatch
from starfabric.fornax.softpath import SoftPath, SoftPathConfig
from starfabric.fornax.vpc import CompiledPolicy, VpcSpec

BASELINE_ACTIVITIES = ("poll", "revalidate", "rescan")
_KEY_FIELDS = ("vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport")


#: Connections deleted per engine call of an aging pass, and re-evaluated per step of a
#: rescan (bounds the temporaries when a pass ages most of a large table, e.g. OVS's flush
#: above twice the flow limit, or a rescan is finished at once).
DELETE_CHUNK = 1 << 20
#: What an aging pass keeps of an idle entry until it deletes it: its key and aux.
LEAN_DTYPE = np.dtype([(f, ENTRY_DTYPE.fields[f][0]) for f in (  # type: ignore[index]
    "vni", "proto", "src_hi", "src_lo", "dst_hi", "dst_lo", "sport", "dport", "aux")])  # fmt: skip


def _lean(raw: np.ndarray) -> np.ndarray:
    """The LEAN_DTYPE fields of raw entries (a compact copy)."""
    out = np.empty(len(raw), LEAN_DTYPE)
    for f in LEAN_DTYPE.names or ():
        out[f] = raw[f]
    return out


class _Knobs(Part):
    """The software-centric knobs as one manager part: the flow limit (room), the rescan's
    time cuts (front, before_tick) and software aging (after_tick)."""

    def __init__(self, c: SoftwareCentric) -> None:
        self.c = c

    def room(self, n: int) -> int | None:
        return self.c._room(n)

    def front(self, batch: PacketBatch, inner: Callable[[PacketBatch], Fate]) -> Fate:
        return self.c._front(batch, inner)

    def before_tick(self, now_ns: int) -> None:
        self.c._advance_rescan(now_ns)

    def after_tick(self, now_ns: int) -> None:
        self.c._after_tick(now_ns)

    def hardware_sessions(self) -> int:
        return self.c._hw_connections()

    def state_bytes(self) -> int:
        """With mirror=full, the live udpif_key records and their index as measured, or
        ovs_cost.host_bytes of the live flows when calibrated to a real ovs-vswitchd."""
        mirror = self.c.mirror
        if mirror is None:
            return 0
        host = host_bytes(self.c.baseline, mirror.count)
        return int(host if host is not None else mirror.live_nbytes)

    def recover(self, between_chunks: Callable[[], None] | None) -> None:
        """With a mirror, one udpif_key per hardware entry from one more full dump (as OVS's
        revalidators after a restart)."""
        if self.c.mirror is not None:
            for recs in self.c._dump_chunks(between_chunks):
                self.c.adopt(recs)

    def summary(self, out: dict[str, Any]) -> None:
        c = self.c
        out.update(
            {
                "baseline": c.baseline.model_dump(),
                "hardware_flows": c.flows(),
                "mirror_bytes": c.mirror.live_nbytes if c.mirror else 0,
                "mirror_allocated_bytes": c.mirror.allocated_nbytes if c.mirror else 0,
                "ovs_ukey_model_bytes": c.ovs_ukey_model_bytes,
                "flow_limit": c.flow_limit.limit if c.flow_limit else None,
                "aging_passes": c.passes,
            }
        )


class SoftwareCentric(Manager):
    """The Fornax manager with software-centric knobs (see the module docstring)."""

    def __init__(
        self,
        engine: SessionEngine,
        policy: CompiledPolicy,
        baseline: SoftwareCentricConfig | dict[str, Any] | None = None,
        config: ManagerConfig | None = None,
        *,
        softpath: SoftPath | None = None,
        softpath_config: SoftPathConfig | None = None,
    ) -> None:
        b = (
            software_centric_config(baseline)
            if isinstance(baseline, dict)
            else baseline or SoftwareCentricConfig()
        )
        self.baseline = b
        self.hw = engine
        hw_aging = b.aging == "events"
        self.mirror = FlowMirror(engine.config.capacity) if b.mirror == "full" else None
        per_dir = b.entries == "per_direction"
        lower: DelegatingEngine
        if self.mirror is not None:
            lower = MirroredEngine(engine, self.mirror, hardware_aging=hw_aging or per_dir)
        else:
            lower = DelegatingEngine(engine, hardware_aging=hw_aging or per_dir)
        top = PerDirectionEngine(lower, hardware_aging=hw_aging) if per_dir else lower
        self._wrappers = [top, lower] if per_dir else [lower]
        super().__init__(top, policy, config, softpath=softpath, softpath_config=softpath_config)
        for w in self._wrappers:
            w.metrics = self.metrics
        for a in BASELINE_ACTIVITIES:
            self.metrics.cpu_s.setdefault(a, 0.0)
        self.flow_limit = DynamicFlowLimit(b.flow_limit) if b.flow_limit is not None else None
        self._period_ns = round(b.period_s() * 1e9)
        self._next_pass_ns: int | None = None
        self._lag_ns = round(b.stats_lag_s * 1e9)
        self._sync_epoch = -1
        self.passes = 0
        # the rescan in progress: connections queued, how many done, when it started
        self._rescan_conn_s = b.rescan_flows_per_s() / b.entries_per_connection
        self._rescan_step = max(1, b.rescan_chunk // b.entries_per_connection)
        self._rq: np.ndarray | None = None
        self._rq_done = 0
        self._rq_t0 = 0
        self.rescan_end_ns: int | None = None
        """Simulated time the last chunk of the latest rescan is (or was) applied."""
        self.add_part(_Knobs(self))
        if b.policy != "versions":
            self.update_policy = self.rescan_policy

    # ---- hardware view -----------------------------------------------------------------
    @property
    def per_direction(self) -> bool:
        return self.baseline.entries == "per_direction"

    def flows(self) -> int:
        """Hardware entries (datapath flows): two per connection with per_direction."""
        return int(self.hw.occupancy())

    def _hw_connections(self) -> int:
        top = self._wrappers[0]
        if isinstance(top, PerDirectionEngine):
            return top.connections()
        return self.flows()

    def _dump_chunks(
        self, between_chunks: Callable[[], None] | None = None, **filters: Any
    ) -> Iterator[np.ndarray]:
        """Raw hardware entries (matching `filters`), chunk by chunk as read;
        `between_chunks` runs between two chunks (traffic during a recovery)."""
        cursor, cap = 0, self.hw.config.capacity
        while cursor < cap:
            recs, cursor = self.driver.call("dump", self.hw.dump, cursor, self.baseline.chunk,
                                            **filters)  # fmt: skip
            self.metrics.ops["dump_entries"] += len(recs)
            yield recs
            if between_chunks is not None and cursor < cap:
                between_chunks()

    def _dump_all(
        self, between_chunks: Callable[[], None] | None = None, **filters: Any
    ) -> np.ndarray:
        """Every raw hardware entry (matching `filters`), read in chunks."""
        out = list(self._dump_chunks(between_chunks, **filters))
        return np.concatenate(out) if out else np.zeros(0, ENTRY_DTYPE)

    def _connections_of(self, raw: np.ndarray) -> np.ndarray:
        """Raw entries -> one record per connection in ORIGINAL orientation: its ORIGINAL
        entry, or its REPLY entry turned around when that is all hardware holds."""
        if not self.per_direction:
            return raw
        rep = (raw["aux"] & REPLY_MARK) != 0
        ch = self._conn_hash(raw)
        lone = rep & ~np.isin(ch, ch[~rep])
        conns, _ = to_original(raw[~rep | lone])
        return conns

    def adopt(self, raw: np.ndarray) -> int:
        """Create mirror records for raw hardware entries that have none (OVS: a ukey from
        the dumped flow, ukey_create_from_dpif_flow); returns how many were created."""
        if self.mirror is None or not len(raw):
            return 0
        raw = raw[self.mirror.lookup(raw) < 0]
        seq = next((w.reval_seq for w in self._wrappers if isinstance(w, MirroredEngine)), 0)
        self.mirror.add(
            original_from_entries(raw), action_orig=raw["action_orig"],
            action_reply=raw["action_reply"], eni_scope=raw["eni_scope"],
            vpc_scope=raw["vpc_scope"], aux=raw["aux"], reval_seq=seq,
            now_ns=np.maximum(raw["last_seen_ns"], self.now_ns),  # created now (or later)
        )  # fmt: skip
        self.metrics.count("ukeys_adopted", len(raw))
        return len(raw)

    # ---- setup (flow limit) ------------------------------------------------------------
    def _room(self, n: int) -> int | None:
        """How many of n sessions the flow limit lets into hardware now (Part.room)."""
        if self.flow_limit is not None and n:
            room = self.flow_limit.room(self.flows()) // self.baseline.entries_per_connection
            if room < n:
                self.metrics.count("flow_limit_refused", n - room)
                return room
        return n

    # ---- the packet path: a rescan in progress advances with packet time ----------------
    def _front(self, batch: PacketBatch, inner: Callable[[PacketBatch], Fate]) -> Fate:
        """While a rescan is in progress the batch is cut at the times its chunks come due,
        so each packet meets the entries as revalidated by then (Part.front)."""
        if self._rq is None or not len(batch):
            return inner(batch)
        t = batch.time_ns
        if bool(np.any(t[1:] < t[:-1])):  # not time-ordered: revalidate up to its start
            self._advance_rescan(int(t.min()))
            return inner(batch)
        parts: list[Fate] = []
        start, n = 0, len(batch)
        while start < n:
            self._advance_rescan(int(t[start]))
            end = n
            if self._rq is not None:
                due = self._rescan_due_ns(self._rq_done)
                end = max(start + 1, int(np.searchsorted(t, due, "left")))
            whole = start == 0 and end == n
            parts.append(inner(batch if whole else batch.take(np.arange(start, end))))
            start = end
        if len(parts) == 1:
            return parts[0]
        return Fate(np.concatenate([f.final for f in parts]),
                    np.concatenate([f.action for f in parts]),
                    np.concatenate([f.reason for f in parts]))  # fmt: skip

    # ---- time: software aging ----------------------------------------------------------
    def _after_tick(self, now_ns: int) -> None:
        """After the Manager's tick (hardware aging only with aging=events): stats sync and
        the software aging pass when its period has come (rescan chunks due by now ran
        before the tick: Part.before_tick)."""
        if self.baseline.aging == "events":
            return
        if self._lag_ns:
            epoch = self.now_ns // self._lag_ns
            if epoch > self._sync_epoch:
                self._sync_epoch = epoch
                self.driver.call("datapath", self._sync_stats, n=0)
        if self._next_pass_ns is None:
            self._next_pass_ns = self.now_ns + self._period_ns
        elif self.now_ns >= self._next_pass_ns:
            # OVS: the next dump starts a period after this one started, or at once when
            # this one took longer (ovs_cost.pass_interval_s)
            flows = self.flows()
            self._next_pass_ns = self.now_ns + round(pass_interval_s(self.baseline, flows) * 1e9)
            self.aging_pass()

    def _sync_stats(self) -> None:
        """Hardware counters reach the mirror (the driver's periodic stats sync)."""
        if self.mirror is None:
            return
        cursor, cap = 0, self.hw.config.capacity
        while cursor < cap:
            raw, cursor = self.hw.dump(cursor, self.baseline.chunk)
            rows = self.mirror.lookup(raw)
            ok = rows >= 0
            self.mirror.rows["hw_used_ns"][rows[ok]] = raw["last_seen_ns"][ok]

    def _class_timeouts_ns(self, raw: np.ndarray) -> npt.NDArray[np.int64]:
        """Per-entry idle timeout: idle_timeout_s, or the engine's timeout classes."""
        if self.baseline.idle_timeout_s is not None:
            return np.full(len(raw), round(self.baseline.idle_timeout_s * 1e9), np.int64)
        cls = np.full(len(raw), TO_GENERIC, np.int64)
        tcp = raw["proto"] == PROTO_TCP
        cls[tcp] = raw["tcp_state"][tcp]
        udp = raw["proto"] == PROTO_UDP
        seen = (raw["flags"] & ENTRY_FLAG_SEEN_REPLY) != 0
        cls[udp] = np.where(seen[udp], TO_UDP_ASSURED, TO_UDP_UNREPLIED)
        cls[is_icmp(raw["proto"])] = TO_ICMP
        return np.asarray(self.hw.config.timeouts_ns()[cls], np.int64)

    def aging_pass(self) -> dict[str, int]:
        """One software pass over every hardware entry, chunk by chunk as dumped: refresh
        the mirror, then delete the connections whose entries are all idle (see the module
        docstring); returns what it did. As OVS, the flow count before the dump decides the
        100 ms idle timeout and the flush, the entries dumped the dump's duration."""
        name = "revalidate" if self.baseline.aging == "revalidate" else "poll"
        cpu_before = self.metrics.cpu_s[name]
        with self.metrics.activity(name):
            self.passes += 1
            self.metrics.count(f"{name}_passes")
            fl = self.flow_limit
            n_before = self.flows()
            flush = fl is not None and fl.must_flush(n_before)
            cap_ns: int | None = None
            if fl is not None and n_before > fl.limit:
                cap_ns = round(fl.config.idle_above_limit_s * 1e9)
            idle_parts: list[np.ndarray] = []
            idle_ch: list[np.ndarray] = []
            busy_ch: list[np.ndarray] = []
            n_flows, cursor, cap = 0, 0, self.hw.config.capacity
            while cursor < cap:
                raw, cursor = self.driver.call("dump", self.hw.dump, cursor, self.baseline.chunk)
                self.metrics.ops["dump_entries"] += len(raw)
                n_flows += len(raw)
                timeout = self._class_timeouts_ns(raw)
                if cap_ns is not None:
                    timeout = np.minimum(timeout, cap_ns)
                idle = (self.now_ns - self._visible_used(raw) > timeout) | flush
                idle_parts.append(_lean(raw[idle]))
                if self.per_direction:
                    ch = self._conn_hash(raw)
                    idle_ch.append(ch[idle])
                    busy_ch.append(ch[~idle])
            dead = np.concatenate(idle_parts) if idle_parts else np.zeros(0, LEAN_DTYPE)
            del idle_parts
            if self.per_direction and len(dead):
                dead = self._whole_connections(
                    dead, np.concatenate(idle_ch), np.concatenate(busy_ch)
                )
            for s in range(0, len(dead), DELETE_CHUNK):  # bounded temporaries (a flush)
                part = dead[s : s + DELETE_CHUNK]
                keys = original_from_entries(part)
                self.driver.delete(keys)
                self.release(part["aux"])
            self.metrics.count(f"{name}_aged", len(dead))
            if flush:
                self.metrics.count("flow_limit_flushes")
            if self.mirror is not None:  # sweep ukeys whose flow hardware no longer holds
                live = self.mirror.live_rows()
                gone = live[self.mirror.rows["dump_seq"][live] != self.mirror.dump_seq]
                self.mirror.remove_rows(gone)
                self.mirror.dump_seq += np.uint64(1)
            if fl is not None:
                fl.after_dump(n_flows, fl.dump_duration_ms(n_flows))
        if self.baseline.revalidate_ns_per_flow is not None:  # calibrated: charged per flow
            self.metrics.cpu_s[name] = (
                cpu_before + n_flows * self.baseline.revalidate_ns_per_flow / 1e9
            )
        return {"flows": n_flows, "aged": len(dead), "flushed": int(flush)}

    def _visible_used(self, raw: np.ndarray) -> npt.NDArray[np.int64]:
        """Last use of each dumped entry as software sees it; with a mirror, the ukey's stats
        are refreshed (lagged: the last synced counters) and missing ukeys are created."""
        used = raw["last_seen_ns"].astype(np.int64)
        if self.mirror is None:
            return used
        rows = self.mirror.lookup(raw)
        known = rows >= 0
        r = self.mirror.rows
        kr = rows[known]
        if self._lag_ns:
            vis = np.maximum(r["created_ns"][kr], r["hw_used_ns"][kr])
        else:
            vis = used[known]
            r["pkts"][kr] = raw["pkts_orig"][known] + raw["pkts_reply"][known]
            r["bytes"][kr] = raw["bytes_orig"][known] + raw["bytes_reply"][known]
        r["used_ns"][kr] = vis
        r["dump_seq"][kr] = self.mirror.dump_seq
        used[known] = vis
        unknown = ~known
        if unknown.any():  # OVS creates the ukey of a dumped flow it has none for
            self.adopt(raw[unknown])
            used[unknown] = self.now_ns
        return used

    @staticmethod
    def _conn_hash(raw: np.ndarray) -> npt.NDArray[np.uint64]:
        """Connection id of raw entries (ICMP by its identifier: both entries carry it)."""
        ch = np.empty(len(raw), np.uint64)
        dport = np.where(is_icmp(raw["proto"]), raw["sport"], raw["dport"])
        cols = (raw["vni"], raw["proto"], raw["src_hi"], raw["src_lo"], raw["dst_hi"],
                raw["dst_lo"], raw["sport"], dport)  # fmt: skip
        kernels.conn_hash(*frozen_each(cols), ch)
        return ch

    @staticmethod
    def _whole_connections(
        idle: np.ndarray, idle_ch: npt.NDArray[np.uint64], busy_ch: npt.NDArray[np.uint64]
    ) -> np.ndarray:
        """Idle per-direction entries -> one record (ORIGINAL orientation) per connection
        none of whose entries is busy (an entry's connection id: `_conn_hash`)."""
        keep = ~np.isin(idle_ch, busy_ch)
        idle, ch = idle[keep], idle_ch[keep]
        rep = (idle["aux"] & REPLY_MARK) != 0
        order = np.lexsort((rep, ch))  # per connection, the ORIGINAL entry first
        _, first = np.unique(ch[order], return_index=True)
        dead, _ = to_original(idle[order[first]])
        return dead

    # ---- policy: rescan --------------------------------------------------------------
    def rescan_policy(self, spec: VpcSpec) -> dict[str, int]:
        """policy=rescan (the manager's `update_policy`): re-evaluate every flow of the
        affected scopes instead of bumping their versions."""
        with self.metrics.activity("rescan"):
            new, affected = self.set_policy(spec)
            for scope, ids in ((Scope.ENI, affected.eni), (Scope.VPC, affected.vpc)):
                for s in ids:  # software-resident sessions: the softpath's lazy versions
                    self.soft.bump_version(scope, int(s))
            self.policy = new
            self.nat.set_policy(new)
            self.metrics.count("policy_changes")
            for w in self._wrappers:
                if isinstance(w, MirroredEngine):
                    w.reval_seq += 1
            eni = np.asarray(sorted(int(s) for s in affected.eni), np.uint32)
            vpc = np.asarray(sorted(int(s) for s in affected.vpc), np.uint32)
            raw = self._flows_in_scope(eni, vpc)
            self.metrics.count("rescanned_flows", len(raw))
            conns = self._connections_of(raw)
            if math.isinf(self._rescan_conn_s):
                done = self._reevaluate(conns)
                self.rescan_end_ns = self.now_ns
            else:
                done = self._start_rescan(conns)
        return {"eni_scopes": len(eni), "vpc_scopes": len(vpc), "rescanned_flows": len(raw),
                **done}  # fmt: skip

    def _start_rescan(self, conns: np.ndarray) -> dict[str, int]:
        """Queue `conns` (behind what a rescan in progress has left) from now on and apply
        the first chunk; returns what that chunk did and how many connections wait."""
        if self._rq is not None:
            conns = np.concatenate([self._rq[self._rq_done :], conns])
        self._rq, self._rq_done, self._rq_t0 = conns, 0, self.now_ns
        self.rescan_end_ns = self._rescan_due_ns(max(0, len(conns) - 1))
        done = self._advance_rescan(self.now_ns)
        return {**done, "pending": len(self._rq) - self._rq_done if self._rq is not None else 0}

    def _rescan_due_ns(self, i: int) -> int:
        """Simulated time the chunk holding queued connection i is applied (its start)."""
        first = (i // self._rescan_step) * self._rescan_step
        return self._rq_t0 + math.ceil(first / self._rescan_conn_s * 1e9)

    def _advance_rescan(self, now_ns: int) -> dict[str, int]:
        """Re-evaluate every queued chunk due by `now_ns` (one vectorized call), re-reading
        the entries first: aged ones are skipped, changed ones judged as they are now."""
        zero = {"modified": 0, "deleted": 0, "moved": 0}
        if self._rq is None:
            return zero
        reached = math.floor((now_ns - self._rq_t0) * self._rescan_conn_s / 1e9 + 1e-9)
        k = min(len(self._rq), (reached // self._rescan_step + 1) * self._rescan_step)
        out = dict(zero)
        if k > self._rq_done:
            start, self._rq_done = self._rq_done, k
            with self.metrics.activity("rescan"):
                for s in range(start, k, DELETE_CHUNK):  # bounded temporaries
                    chunk = self._rq[s : min(k, s + DELETE_CHUNK)]
                    st, rec = self.driver.query(original_from_entries(chunk))
                    ok = st == Status.OK
                    cur = chunk[ok].copy()
                    for f in ("action_orig", "action_reply", "aux", "eni_scope", "vpc_scope"):
                        cur[f] = rec[f][ok]
                    for key, v in self._reevaluate(cur).items():
                        out[key] += v
        if self._rq_done >= len(self._rq):
            self._rq = None
            self.metrics.count("rescans_completed")
        return out

    def rescan_pending(self) -> int:
        """Connections a rescan in progress has not re-evaluated yet."""
        return 0 if self._rq is None else len(self._rq) - self._rq_done

    def finish_rescan(self) -> None:
        """Apply every chunk still queued now (for a caller that wants the whole rescan's
        CPU without simulating the time it takes; the clock does not move)."""
        if self._rq is not None:
            self._advance_rescan(self._rq_t0 + math.ceil(len(self._rq) / self._rescan_conn_s
                                                         * 1e9))  # fmt: skip

    def _flows_in_scope(self, eni: np.ndarray, vpc: np.ndarray) -> np.ndarray:
        """Raw entries of the scopes: from the mirror, or the engine's filtered dumps."""
        if self.mirror is not None:
            live = self.mirror.live_rows()
            r = self.mirror.rows
            sel = live[np.isin(r["eni_scope"][live], eni) | np.isin(r["vpc_scope"][live], vpc)]
            out = np.zeros(len(sel), ENTRY_DTYPE)
            for f in (*_KEY_FIELDS, "eni_scope", "vpc_scope", "action_orig", "action_reply",
                      "aux"):  # fmt: skip
                out[f] = r[f][sel]
            out["slot"] = -1
            out["last_seen_ns"] = r["used_ns"][sel]
            return out
        parts = [self._dump_all(eni_scope=int(s)) for s in eni]
        parts += [self._dump_all(vpc_scope=int(s)) for s in vpc]
        if not parts:
            return np.zeros(0, ENTRY_DTYPE)
        raw = np.concatenate(parts)
        _, first = np.unique(raw["slot"], return_index=True)
        return raw[np.sort(first)]

    def _reevaluate(self, conns: np.ndarray) -> dict[str, int]:
        """Decide connections again under the current policy and fix their entries."""
        if not len(conns):
            return {"modified": 0, "deleted": 0, "moved": 0}
        orig = original_from_entries(conns)
        d = self.decide(orig, conns["aux"])
        same = d.session & (d.eni_scope == conns["eni_scope"]) & (d.vpc_scope == conns["vpc_scope"])
        changed = same & (
            (d.action_orig != conns["action_orig"])
            | (d.action_reply != conns["action_reply"])
            | (d.aux != conns["aux"])
        )
        moved = d.session & ~same
        gone = ~d.session
        self.budget.take(int(changed.sum() + 2 * moved.sum() + gone.sum()))  # shares setup
        if changed.any():
            self.driver.modify(
                orig.take(changed), action_orig=d.action_orig[changed],
                action_reply=d.action_reply[changed], aux=d.aux[changed],
            )  # fmt: skip
        if gone.any():
            self.driver.delete(orig.take(gone))
            self.release(d.aux[gone])
            self.metrics.count("sessions_refused_after_change", int(gone.sum()))
        if moved.any():  # scopes changed: re-create the entry, keeping TCP state and time
            mk = orig.take(moved)
            st, rec = self.driver.query(mk)
            self.driver.delete(mk)
            ok = st == Status.OK
            idx = np.flatnonzero(moved)[ok]
            if len(idx):
                self.driver.insert(
                    orig.take(idx), action_orig=d.action_orig[idx],
                    action_reply=d.action_reply[idx], eni_scope=d.eni_scope[idx],
                    vpc_scope=d.vpc_scope[idx],
                    eni_version=self.driver.versions(Scope.ENI, d.eni_scope[idx]),
                    vpc_version=self.driver.versions(Scope.VPC, d.vpc_scope[idx]),
                    now_ns=rec["last_seen_ns"][ok], tcp_state=rec["tcp_state"][ok],
                    aux=d.aux[idx],
                )  # fmt: skip
        out = {"modified": int(changed.sum()), "deleted": int(gone.sum()),
               "moved": int(moved.sum())}  # fmt: skip
        for k, v in out.items():
            self.metrics.count(f"rescan_{k}", v)
        return out

    # ---- state -------------------------------------------------------------------------
    @property
    def ovs_ukey_model_bytes(self) -> int:
        """Model figure: hardware flows x sizeof(udpif_key) (~1.5 KB, reference/fornax.md)."""
        return self.flows() * OVS_UKEY_BYTES


def make_control_plane(
    engine: SessionEngine,
    policy: CompiledPolicy,
    baseline: SoftwareCentricConfig | dict[str, Any] | None = None,
    config: ManagerConfig | None = None,
    **kw: Any,
) -> SoftwareCentric:
    """A controller of the family over `engine` (Fornax when `baseline` is None)."""
    return SoftwareCentric(engine, policy, baseline, config, **kw)


__all__ = ["BASELINE_ACTIVITIES", "SoftwareCentric", "make_control_plane"]
