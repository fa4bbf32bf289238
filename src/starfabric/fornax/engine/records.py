"""Record rows -> ENTRY_DTYPE (query, dump), shared by the fast engine and the reference.

Rows are in the table's canonical layout (layout.py); entries are reported in ORIGINAL
orientation, with `stale` telling whether a snapshot is older than its scope's version.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine import layout as L
from starfabric.fornax.engine.conntrack import TRACK_META_MASK
from starfabric.fornax.engine.interface import ENTRY_DTYPE

_M32 = np.uint64(0xFFFF_FFFF)
_S = np.uint64


def entries_from_rows(
    rows: npt.NDArray[np.uint64],
    slots: npt.NDArray[np.int64],
    eni_current: npt.NDArray[np.uint32],
    vpc_current: npt.NDArray[np.uint32],
) -> np.ndarray:
    """Decode record rows (uint64[n, N_WORDS]) held at `slots` into ENTRY_DTYPE records."""
    r = np.asarray(rows, dtype=np.uint64).reshape(-1, L.N_WORDS)
    out = np.zeros(len(r), dtype=ENTRY_DTYPE)
    meta = r[:, L.W_META]
    flags = (meta >> _S(16)) & _S(0xFF)
    ob = (flags & _S(L.FLAG_ORIG_B)) != 0
    pw = r[:, L.W_PORTS]
    pa = (pw >> _S(16)) & _S(0xFFFF)
    pb = pw & _S(0xFFFF)
    act0, act1 = r[:, L.W_ACT] & _M32, r[:, L.W_ACT] >> _S(32)
    pk0, pk1 = r[:, L.W_PKTS] & _M32, r[:, L.W_PKTS] >> _S(32)
    out["slot"] = slots
    out["vni"] = pw >> _S(32)
    out["proto"] = meta & _S(0xFF)
    out["tcp_state"] = (meta >> _S(8)) & _S(0xFF)
    out["flags"] = flags
    out["src_hi"] = np.where(ob, r[:, L.W_B_HI], r[:, L.W_A_HI])
    out["src_lo"] = np.where(ob, r[:, L.W_B_LO], r[:, L.W_A_LO])
    out["dst_hi"] = np.where(ob, r[:, L.W_A_HI], r[:, L.W_B_HI])
    out["dst_lo"] = np.where(ob, r[:, L.W_A_LO], r[:, L.W_B_LO])
    out["sport"] = np.where(ob, pb, pa)
    out["dport"] = np.where(ob, pa, pb)
    eni = (r[:, L.W_SCOPE] & _M32).astype(np.int64)
    vpc = (r[:, L.W_SCOPE] >> _S(32)).astype(np.int64)
    ev = r[:, L.W_VER] & _M32
    vv = r[:, L.W_VER] >> _S(32)
    out["eni_scope"] = eni
    out["vpc_scope"] = vpc
    out["eni_version"] = ev
    out["vpc_version"] = vv
    if len(r):
        eni_c = np.asarray(eni_current)[np.minimum(eni, len(eni_current) - 1)]
        vpc_c = np.asarray(vpc_current)[np.minimum(vpc, len(vpc_current) - 1)]
        out["stale"] = (ev != eni_c) | (vv != vpc_c)
    out["action_orig"] = np.where(ob, act1, act0)
    out["action_reply"] = np.where(ob, act0, act1)
    out["last_seen_ns"] = r[:, L.W_SEEN].view(np.int64)
    out["pkts_orig"] = np.where(ob, pk1, pk0)
    out["pkts_reply"] = np.where(ob, pk0, pk1)
    out["bytes_orig"] = np.where(ob, r[:, L.W_BYTES1], r[:, L.W_BYTES0])
    out["bytes_reply"] = np.where(ob, r[:, L.W_BYTES0], r[:, L.W_BYTES1])
    out["aux"] = r[:, L.W_AUX]
    out["expires_ns"] = r[:, L.W_EXPIRES].view(np.int64)
    out["track"][:, 0] = meta & _S(TRACK_META_MASK | 0xFF00)
    out["track"][:, 1:] = r[:, L.W_TRACK : L.W_TRACK + L.N_TRACK_WORDS]
    return out


__all__ = ["entries_from_rows"]
