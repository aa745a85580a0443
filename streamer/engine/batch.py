"""When a batch commits: its age against the linger, and whether the reader is caught up."""
from __future__ import annotations

import time

# Changes at least this old (by the server's event time, whole seconds) mean the reader is
# catching up; batches then wait catchup_linger_ms instead of linger_ms.
CATCHUP_LAG_S = 2


def _live(last_ts: float) -> bool:
    """Whether the last change read is under CATCHUP_LAG_S old: a live reader, not a backlog."""
    return time.time() - last_ts < CATCHUP_LAG_S


class BatchClock:
    """When an open batch commits, by its age (s), given whether the reader is caught up and the
    last change's event time (the server's, whole seconds).

    Caught up (the server has sent nothing more), a batch commits once ``min_linger`` old: a
    change then waits for one commit, not for the linger. Otherwise it commits at ``bound``,
    which starts at ``linger``. Each commit stops reading for a Kafka round trip, so a reader
    that is still behind when its batch is cut short would stay behind: the next bound doubles,
    up to ``catchup_linger``, until a commit finds the reader caught up and it drops back to
    ``linger``. Changes ``CATCHUP_LAG_S`` old or more mean a backlog: batches then wait
    ``catchup_linger`` outright.
    """

    __slots__ = ("linger", "min_linger", "catchup_linger", "bound")

    def __init__(self, linger: float, min_linger: float, catchup_linger: float) -> None:
        self.linger = linger
        self.min_linger = min(linger, min_linger)
        self.catchup_linger = max(linger, catchup_linger)
        self.bound = linger

    def due(self, age: float, caught_up: bool, last_ts: float) -> bool:
        if caught_up and age >= self.min_linger:
            return True
        # The clock is read only for a batch past its bound: this runs for every event.
        return age >= self.bound and (age >= self.catchup_linger or _live(last_ts))

    def committed(self, caught_up: bool) -> None:
        """A batch that ``due`` called for was committed."""
        self.bound = self.linger if caught_up else min(self.catchup_linger, self.bound * 2)
