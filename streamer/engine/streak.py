"""A snapshot chunk's tries of one kind that failed in a row: its SELECT met changing columns, was
interrupted (KILL QUERY), failed with an error that may pass (a lock), or was put off (MySQL
committing out of its binlog order). Each kind waits longer each time before the chunk is read
again, and says so less often the longer it lasts.

The waits double from LATER_S up to LATER_MOST_S. The first SAID_FIRST tries in a row are said
one by one, then one line at most every SAID_EVERY_S, each with the count and the time so far: a
lock a backup holds for an hour was 720 WARNINGs, one per try.
"""
from __future__ import annotations

from typing import Any, Tuple

LATER_S = 0.1
LATER_MOST_S = 5.0
SAID_FIRST = 3
SAID_EVERY_S = 60.0
# 2 ** 6 * LATER_S is past LATER_MOST_S already; the exponent stops there, so a streak of any
# length (a lock held for a day is ~17,000 tries) never makes a float of a huge int.
_DOUBLINGS_MOST = 16


class Streak:
    """``again()`` at each failed try, ``end()`` once the chunk is read (or given up)."""

    def __init__(self, clock: Any) -> None:
        self.clock = clock  # monotonic()
        self.times = 0
        self.since = 0.0
        self._said_at = 0.0

    def again(self) -> Tuple[float, bool]:
        """One more failed try in a row: the seconds to wait before the next, and whether this
        one is to be said."""
        now = self.clock.monotonic()
        if not self.times:
            self.since = now
        self.times += 1
        say = self.times <= SAID_FIRST or now - self._said_at >= SAID_EVERY_S
        if say:
            self._said_at = now
        return min(LATER_MOST_S, LATER_S * 2 ** min(self.times - 1, _DOUBLINGS_MOST)), say

    def lasted(self) -> float:
        """Seconds since the first try of the streak."""
        return self.clock.monotonic() - self.since if self.times else 0.0

    def end(self) -> None:
        self.times = 0
        self.since = 0.0

    def __str__(self) -> str:
        times = "1 time" if self.times == 1 else f"{self.times} times"
        return f"{times} in a row now, over {self.lasted():.0f} s"
