"""The chaos demo's timeline series: every packet lands in its time bin and outcome."""

import numpy as np

from starfabric.fornax.demo.chaos import BIN_S, _Series
from starfabric.fornax.manager.accounting import Fate, Final
from starfabric.fornax.packets import PacketBatch


def _batch(times_s: list[float]) -> PacketBatch:
    n = len(times_s)
    z = np.zeros(n, np.uint64)
    return PacketBatch.from_columns(
        time_ns=np.round(np.array(times_s) * 1e9).astype(np.int64), vni=np.ones(n, np.uint32),
        proto=np.full(n, 6, np.uint8), src_hi=z, src_lo=z + 1, dst_hi=z, dst_lo=z + 2,
        sport=np.full(n, 1000, np.uint16), dport=np.full(n, 80, np.uint16),
    )  # fmt: skip


def test_series_counts_every_packet_in_its_bin_and_grows() -> None:
    s = _Series()
    finals = np.array([Final.HW_FORWARDED, Final.SW_FORWARDED, Final.NAMED_DROP], np.uint8)
    s.add(_batch([0.0, 0.001, 0.0105]), Fate(finals, np.zeros(3, np.uint32), np.zeros(3, np.uint8)))
    s.add(
        _batch([3 * BIN_S + 1e-4]), Fate(finals[:1], np.zeros(1, np.uint32), np.zeros(1, np.uint8))
    )
    assert s.n_bins == 4
    assert s.counts.sum() == 4
    assert s.counts[0, Final.HW_FORWARDED] == 1 and s.counts[0, Final.SW_FORWARDED] == 1
    assert s.counts[1, Final.NAMED_DROP] == 1 and s.counts[3, Final.HW_FORWARDED] == 1
