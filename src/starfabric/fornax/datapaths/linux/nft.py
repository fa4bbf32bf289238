"""libnftables through ctypes: JSON commands in, JSON out, one transaction per call.

`Nft` wraps libnftables.so.1 (nft_ctx_new, nft_run_cmd_from_buffer; Debian's libnftables1);
it must be created and used on the thread of the namespace it manages (netns.NsWorker), so
`NicTables` holds one on the lab's nic worker and offers what the datapath needs: load a
ruleset atomically (rules.build_ruleset), read the named counters, probe whether the kernel
has a flowtable, and bump scope versions — swapping an ENI scope's mark in set `fresh` and in
the address->mark maps in one transaction, walking no session.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import json
from typing import TYPE_CHECKING, Any

import numpy as np

from starfabric.errors import InfeasibleError
from starfabric.fornax.datapaths.linux.rules import (
    FAMILY,
    TABLE,
    ScopeVersions,
    build_ruleset,
)
from starfabric.fornax.packets import halves_to_ip
from starfabric.fornax.vpc.diff import AffectedScopes, recompile

if TYPE_CHECKING:
    from starfabric.fornax.datapaths.linux.netns import Lab
    from starfabric.fornax.vpc.compile import CompiledPolicy
    from starfabric.fornax.vpc.spec import VpcSpec

#: libnftables.h: NFT_CTX_OUTPUT_JSON, NFT_CTX_OUTPUT_HANDLE, NFT_CTX_INPUT_JSON.
_OUTPUT_JSON = 1 << 4
_OUTPUT_HANDLE = 1 << 3
_INPUT_JSON = 1 << 1
LIBRARY = "libnftables.so.1"


def _lib() -> ctypes.CDLL:
    try:
        lib = ctypes.CDLL(ctypes.util.find_library("nftables") or LIBRARY)
    except OSError as exc:
        raise InfeasibleError(f"cannot load {LIBRARY}: {exc}",
                              fix="apt-get install libnftables1") from None  # fmt: skip
    lib.nft_ctx_new.restype = ctypes.c_void_p
    lib.nft_ctx_new.argtypes = [ctypes.c_uint32]
    lib.nft_ctx_free.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_output_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    lib.nft_ctx_buffer_output.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_buffer_error.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_output_buffer.restype = ctypes.c_char_p
    lib.nft_ctx_get_output_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_ctx_get_error_buffer.restype = ctypes.c_char_p
    lib.nft_ctx_get_error_buffer.argtypes = [ctypes.c_void_p]
    lib.nft_run_cmd_from_buffer.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    lib.nft_run_cmd_from_buffer.restype = ctypes.c_int
    if hasattr(lib, "nft_ctx_input_set_flags"):
        lib.nft_ctx_input_set_flags.argtypes = [ctypes.c_void_p, ctypes.c_uint]
    return lib


class NftError(InfeasibleError):
    """The kernel (or libnftables) refused a transaction; nothing of it was applied."""


class Nft:
    """One libnftables context. Not thread-safe; create and use it on one thread."""

    def __init__(self) -> None:
        self._lib = _lib()
        self._ctx = self._lib.nft_ctx_new(0)
        if not self._ctx:
            raise InfeasibleError("nft_ctx_new failed")
        self._lib.nft_ctx_output_set_flags(self._ctx, _OUTPUT_JSON | _OUTPUT_HANDLE)
        if hasattr(self._lib, "nft_ctx_input_set_flags"):
            self._lib.nft_ctx_input_set_flags(self._ctx, _INPUT_JSON)
        self._lib.nft_ctx_buffer_output(self._ctx)
        self._lib.nft_ctx_buffer_error(self._ctx)

    def run(self, cmd: dict[str, Any] | str) -> dict[str, Any]:
        """Run one JSON document (dict) or text command (str) as one transaction."""
        text = cmd if isinstance(cmd, str) else json.dumps(cmd)
        rc = self._lib.nft_run_cmd_from_buffer(self._ctx, text.encode())
        out = (self._lib.nft_ctx_get_output_buffer(self._ctx) or b"").decode()
        err = (self._lib.nft_ctx_get_error_buffer(self._ctx) or b"").decode()
        if rc != 0:
            first = next((ln for ln in err.splitlines() if ln.strip()), f"rc {rc}")
            raise NftError(f"nftables refused the transaction: {first.strip()}")
        return json.loads(out) if out.strip().startswith("{") else {}

    def close(self) -> None:
        if self._ctx:
            self._lib.nft_ctx_free(self._ctx)
            self._ctx = None


class NicTables:
    """The nic namespace's `inet fornax` table, driven from the lab's nic worker thread."""

    def __init__(self, lab: Lab) -> None:
        self.lab = lab
        self._nft: Nft = lab.worker.call(Nft)
        self.compiled: CompiledPolicy | None = None
        self.versions: ScopeVersions | None = None
        self.transactions = 0
        self.nat = False  # how the loaded ruleset was built
        self.flowtable = False

    def run(self, cmd: dict[str, Any] | str) -> dict[str, Any]:
        self.transactions += 1
        return self.lab.worker.call(self._nft.run, cmd)

    def load(self, compiled: CompiledPolicy, versions: ScopeVersions | None = None, *,
             nat: bool = False, flowtable: bool = False) -> dict[str, Any]:  # fmt: skip
        """Replace the table with `compiled`'s ruleset in one transaction; returns the JSON."""
        versions = versions or ScopeVersions.zeros(compiled)
        devs = ["n0", "n1"] if flowtable else None
        ruleset = build_ruleset(compiled, versions, nat=nat, flowtable=devs)
        self.run(ruleset)
        self.compiled, self.versions = compiled, versions
        self.nat, self.flowtable = nat, flowtable
        return ruleset

    def apply_policy(self, spec: VpcSpec) -> AffectedScopes:
        """Change the policy: recompile `spec` with stable ids, bump the versions of exactly
        the affected scopes, and replace the ruleset in ONE transaction (its size is the
        policy's, never the number of sessions). From the moment it returns, no packet of a
        session in an affected scope is forwarded under the old policy: originals are decided
        again, replies dropped until then."""
        if self.compiled is None or self.versions is None:
            raise InfeasibleError("no ruleset loaded")
        new, affected = recompile(self.compiled, spec)
        v = self.versions.resized(new)
        v.eni[affected.eni.astype(np.int64)] += 1
        v.vpc[affected.vpc.astype(np.int64)] += 1
        self.load(new, v, nat=self.nat, flowtable=self.flowtable)
        return affected

    def counters(self) -> dict[str, tuple[int, int]]:
        """Named counters of the table: name -> (packets, bytes)."""
        out = self.run(f"list counters table {FAMILY} {TABLE}")
        res = {}
        for item in out.get("nftables", []):
            c = item.get("counter")
            if c is not None:
                res[c["name"]] = (int(c["packets"]), int(c["bytes"]))
        return res

    def reset_counters(self) -> None:
        self.run(f"reset counters table {FAMILY} {TABLE}")

    def flowtable_supported(self) -> bool:
        """Whether the kernel accepts a flowtable (CONFIG_NF_FLOW_TABLE), by trying one in a
        scratch table that is removed again."""
        probe = {"nftables": [
            {"add": {"table": {"family": FAMILY, "name": "fornax_probe"}}},
            {"add": {"flowtable": {"family": FAMILY, "table": "fornax_probe", "name": "ft",
                                   "hook": "ingress", "prio": 0, "dev": ["n0"]}}},
        ]}  # fmt: skip
        try:
            self.run(probe)
        except NftError:
            return False
        self.run(f"delete table {FAMILY} fornax_probe")
        return True

    def bump(self, eni: list[int] | None = None, vpc: list[int] | None = None) -> list[int]:
        """Increment the versions of ENI scopes `eni` and VPC scopes `vpc`: one transaction
        replaces each affected ENI's mark in `fresh` and in the maps (O(ENIs touched), no
        session walked). From then on an ORIGINAL packet of those ENIs' sessions is decided again
        (`revalidate`; accepted, the entry takes the new mark) and a REPLY packet is `stale`
        (dropped) until then; an engine refreshes marks itself (ctnetlink). Returns the ENIs."""
        c, v = self.compiled, self.versions
        if c is None or v is None:
            raise InfeasibleError("no ruleset loaded")
        touched = set(eni or [])
        for p in vpc or []:
            touched |= set(np.flatnonzero(c.eni_valid & (c.eni_vpc == p)).tolist())
        old = {e: v.mark(c, e) for e in touched}
        for e in eni or []:
            v.eni[e] += 1
        for p in vpc or []:
            v.vpc[p] += 1
        T = {"family": FAMILY, "table": TABLE}
        dels: list[dict[str, Any]] = []
        adds: list[dict[str, Any]] = []
        for e in sorted(touched):
            new = v.mark(c, e)
            dels.append({"delete": {"element": {**T, "name": "fresh", "elem": [old[e]]}}})
            adds.append({"add": {"element": {**T, "name": "fresh", "elem": [new]}}})
            for name, key in _mark_keys(c, e):
                dels.append({"delete": {"element": {**T, "name": name, "elem": [key]}}})
                adds.append({"add": {"element": {**T, "name": name, "elem": [[key, new]]}}})
        if dels:
            self.run({"nftables": [*dels, *adds]})
        return sorted(touched)

    def close(self) -> None:
        if self.lab.nic is not None:
            self.lab.nic.call(self._nft.close)


def _mark_keys(c: CompiledPolicy, e: int) -> list[tuple[str, Any]]:
    """(map, key) of every element of `m4`/`m6`/`meip` that maps to ENI e's mark."""
    vni = int(c.vpc_vni[int(c.eni_vpc[e])])
    out: list[tuple[str, Any]] = []
    if c.eni_has_v4[e]:
        out.append(("m4", {"concat": [vni, str(halves_to_ip(0, int(c.eni_v4_lo[e])))]}))
    if c.eni_has_v6[e]:
        a = halves_to_ip(int(c.eni_v6_hi[e]), int(c.eni_v6_lo[e]))
        out.append(("m6", {"concat": [vni, str(a)]}))
    if c.eni_has_eip[e]:
        out.append(("meip", str(halves_to_ip(0, int(c.eni_eip_lo[e])))))
    return out
