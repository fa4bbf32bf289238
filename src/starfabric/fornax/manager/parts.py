"""The seams of the composed manager: a `Part` is a piece of behaviour handed to `Manager`
(failover.Resilience, the software-centric baselines' aging, rescan and flow limit), each
hook a no-op by default, so the manager is extended by composition and never by overriding
its private steps. Hooks, in the order a batch or tick meets them:

- `front(batch, inner)`: wraps the packet path (divert to software, cut a batch in time).
- `screen(pb, ck, eng)`: before punted packets are decided: may rebuild lost sessions, change
  engine outcomes and name packets to drop as SESSION_LOST (quarantine).
- `hold(slots)`: which software sessions (by software slot) must stay in software (a
  failed-over scope); None: none of this part's.
- `room(n)`: how many of n sessions may be pushed to hardware now (a flow limit; None:
  no limit of this part's).
- `promotable(live, k)`: which current-policy software sessions to promote at a tick.
- `handlers()`: {EventType: handler} entries for the manager's event table.
- `after_poll()`, `before_tick(now)`, `after_tick(now)`, `summary(out)`.
- `hardware_sessions()`: connections hardware holds, where the part counts them its own way
  (two entries per connection); `state_bytes()`: per-session software state the part keeps
  beyond the SNAT bitmaps (a flow mirror); `recover(between_chunks)`: the part's own
  state re-learned after a restart (Manager.recover).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from starfabric.fornax.engine.interface import EventType
from starfabric.fornax.keys import CanonicalKeys
from starfabric.fornax.packets import PacketBatch

if TYPE_CHECKING:
    from starfabric.fornax.manager.accounting import Fate

#: An event handler: gets the events of its type from one poll (oldest first).
Handler = Callable[[np.ndarray], None]


class Part:
    """A composable piece of manager behaviour (see the module docstring)."""

    def front(self, batch: PacketBatch, inner: Callable[[PacketBatch], Fate]) -> Fate:
        return inner(batch)

    def screen(
        self, pb: PacketBatch, ck: CanonicalKeys, eng: npt.NDArray[np.uint8]
    ) -> tuple[npt.NDArray[np.uint8], npt.NDArray[np.bool_] | None]:
        return eng, None

    def hold(self, slots: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_] | None:
        return None

    def room(self, n: int) -> int | None:
        return None

    def promotable(self, live: npt.NDArray[np.int64], k: int) -> npt.NDArray[np.int64]:
        return live

    def handlers(self) -> Mapping[EventType, Handler]:
        return {}

    def after_poll(self) -> None:
        return None

    def before_tick(self, now_ns: int) -> None:
        return None

    def after_tick(self, now_ns: int) -> None:
        return None

    def summary(self, out: dict[str, Any]) -> None:
        return None

    def hardware_sessions(self) -> int | None:
        return None

    def state_bytes(self) -> int:
        return 0

    def recover(self, between_chunks: Callable[[], None] | None) -> None:
        return None


__all__ = ["Handler", "Part"]
