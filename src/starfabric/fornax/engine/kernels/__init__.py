"""numba kernels of the fast engine, one module per job (the plain-Python twin is reference.py;
the two are differentially tested):

  codes     the contract's codes and masks as numba-frozen scalars
  hashing   canonical key, hash, buckets and tag (twin of keys.py)
  ecc       SEC-DED encode / check / correct / patch (twin of ecc.py)
  ring      the event ring
  table     tag scan, record fetch hint, ECC-checked probe, invalidation
  pipeline  k_process, the packet pipeline, and the port watchdog
  ops       insert / delete / modify / query, dump, the aging scrubber

Kernels take arrays and scalars only. Table state: `tags` uint16[capacity] (0 = empty),
`rec` uint64[capacity, N_WORDS] (layout.py), `st` int64[4] = (occupancy, scrub cursor, -, -),
`rng` uint64[1] (cuckoo victim choice), `ring` uint64[ring_capacity, N_EVENT_WORDS] with
`rmeta` int64[4] = (head, count, events lost not yet reported, time of the last loss), `ctr`
int64[N_COUNTERS], ports `stalled` uint8[P], `stuck` int64[P] (first waiting packet's time, -1
none), `hung` uint8[P]. `prm` int64[7] = (n_buckets, bucket_size, drop_action, watchdog_ns,
max_displacement, capacity, INVALID policy drop).

numba's cache keys a kernel on its own file only: after editing a module whose helpers are
inlined into others (table, ecc, conntrack), clear NUMBA_CACHE_DIR.
"""

from starfabric.fornax.engine.kernels.ecc import (
    ecc_check,
    ecc_encode,
    ecc_encode_b,
    ecc_fix,
    ecc_patch,
    ecc_seal,
)
from starfabric.fornax.engine.kernels.hashing import buckets, hash_many, k_prepare, tag_of
from starfabric.fornax.engine.kernels.ops import (
    gather_floor,
    k_dump,
    k_insert,
    k_lookup_op,
    k_scrub,
)
from starfabric.fornax.engine.kernels.pipeline import k_process
from starfabric.fornax.engine.kernels.ring import ring_pop
from starfabric.fornax.engine.kernels.table import key_eq

__all__ = [
    "buckets",
    "ecc_check",
    "ecc_encode",
    "ecc_encode_b",
    "ecc_fix",
    "ecc_patch",
    "ecc_seal",
    "gather_floor",
    "hash_many",
    "k_dump",
    "k_insert",
    "k_lookup_op",
    "k_prepare",
    "k_process",
    "k_scrub",
    "key_eq",
    "ring_pop",
    "tag_of",
]
