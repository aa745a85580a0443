"""Where a run starts: the source's checks and the start position, read side by side with Kafka's,
and the reconnect backoff."""
from __future__ import annotations

import threading
from typing import Any, Callable, Dict, Generic, Optional, TypeVar

T = TypeVar("T")


class _Ahead(Generic[T]):
    """``fn()`` run in a thread started now; ``result()`` waits for it and returns its value or
    raises its exception. Start-up waits on MySQL and Kafka round trips that don't depend on
    each other; side by side they cost the longer of the two, not the sum. (Not a
    concurrent.futures executor: its threads are joined at exit, so a probe stuck connecting to
    an unreachable MySQL would hold up a streamer that is exiting on a Kafka error.)"""

    def __init__(self, fn: Callable[[], T], name: str) -> None:
        self._value: Optional[T] = None
        self._exc: Optional[BaseException] = None
        self._thread = threading.Thread(target=self._run, args=(fn,), name=name, daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], T]) -> None:
        try:
            self._value = fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller of result()
            self._exc = exc

    def result(self) -> T:
        self._thread.join()
        if self._exc is not None:
            raise self._exc
        return self._value  # type: ignore[return-value]


class Backoff:
    """Reconnect delays: doubling from mysql.reconnect_backoff_s up to reconnect_backoff_max_s,
    for at most mysql.reconnect_max_attempts attempts (0: no limit)."""

    def __init__(self, mysql: Dict[str, Any]) -> None:
        self.delay = float(mysql["reconnect_backoff_s"])
        self.max_s = float(mysql["reconnect_backoff_max_s"])
        self.limit = int(mysql["reconnect_max_attempts"])
        self.attempts = 0

    def next(self) -> Optional[float]:
        """Seconds to wait before the next attempt, or None when the attempts are used up."""
        self.attempts += 1
        if self.limit and self.attempts > self.limit:
            return None
        delay = self.delay
        self.delay = min(delay * 2, self.max_s)
        return delay
