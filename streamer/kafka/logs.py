"""librdkafka's log lines through Python's logging, at levels that say what they mean.

Left to itself librdkafka writes raw lines to stderr (``%3|1795646193.680|FAIL|rdkafka#producer-1|
...``) from its own threads. The producer (``kafka.rdkafka``) has them queued as events and logs
them from its drain thread, off the hot path; the consumers and admin clients of confluent-kafka
get ``LOGGER`` in their config and log them from their poll. Either way they go to the logger
``streamer.kafka.librdkafka``.

librdkafka's syslog levels overstate its transient trouble: a broker that refuses a connection at
start-up is an "error" (3) it retries on its own, and a coordinator not ready yet a "warning" (4)
followed by "retrying". A failure that lasts reaches the streamer as an API error, which it reports
with the fix. So: what librdkafka says it is retrying is INFO; connection failures are WARNING;
a metadata hint it could not use (``METADATAUPDATE``) is INFO; the rest keep their level (0-3
ERROR, 4 WARNING, 5 INFO), and its own informational chatter (6, 7) is DEBUG.
"""
from __future__ import annotations

import gc
import logging
import re
import threading
import time
from typing import Any, Dict, List, Tuple

NAME = "streamer.kafka.librdkafka"
log = logging.getLogger(NAME)

# librdkafka facilities of connection trouble it retries by itself.
_RECONNECTING = frozenset(("FAIL", "CONNECT", "BROKERFAIL", "DISCONNECT", "ERROR"))

# librdkafka 2.x takes a partition's new leader from the tags of a produce or fetch response
# (KIP-951) and says, at level 4, when it can't use one: "new leader-1 not found in cache" when
# the broker knows no leader yet, as it does for a topic just created. The hint is dropped, the
# request's own error makes librdkafka ask for the metadata again and retry, and a partition
# that stays leaderless shows as a stalled stream (health, metrics.stall_after_s). One CI run
# failed on a snapshot test because this line came as a WARNING.
_HINTS = frozenset(("METADATAUPDATE",))


def level_of(syslog_level: int, facility: str, text: str) -> int:
    """The Python level of one librdkafka log line."""
    if "retrying" in text.lower() or "retry" in facility.lower():
        return logging.INFO if syslog_level <= 4 else logging.DEBUG
    if syslog_level <= 3:
        return logging.WARNING if facility.upper() in _RECONNECTING else logging.ERROR
    if syslog_level == 4:
        return logging.INFO if facility.upper() in _HINTS else logging.WARNING
    if syslog_level == 5:
        return logging.INFO
    return logging.DEBUG


class Collapser:
    """Repeated lines collapsed: librdkafka retries a refused connection every few tens of ms,
    and logs each try (77 lines in the 19 s a start waited for a Kafka that was down). The first
    line of a kind is logged at its level; the same kind again within ``interval_s`` is counted,
    and once the interval is over one line says how many there were. A kind is the level, the
    facility and the text with its numbers left out (ports, ms, counts): a line that differs in
    anything else is a kind of its own and is logged."""

    def __init__(self, interval_s: float = 30.0, clock: Any = time.monotonic) -> None:
        self.interval_s = interval_s
        self.clock = clock
        self._lock = threading.Lock()
        # kind -> [when its interval began, repeats since, the last text of it]
        self.kinds: Dict[Tuple[int, str, str], List[Any]] = {}

    def admit(self, level: int, facility: str, text: str) -> List[Tuple[int, str]]:
        """The lines to log now for this one: (level, message) pairs."""
        out: List[Tuple[int, str]] = []
        now = self.clock()
        kind = (level, facility, _NUMBERS.sub("#", text))
        with self._lock:
            for other, (began, repeats, last) in list(self.kinds.items()):
                if now - began >= self.interval_s:
                    del self.kinds[other]
                    if repeats:
                        out.append((other[0], f"{other[1]}: {last} (and {repeats} more like it "
                                              f"in {now - began:.0f} s)"))
            seen = self.kinds.get(kind)
            if seen is None:
                self.kinds[kind] = [now, 0, text]
                out.append((level, f"{facility}: {text}"))
            else:
                seen[1] += 1
                seen[2] = text
        return out


_NUMBERS = re.compile(r"\d+")
COLLAPSER = Collapser()


def emit(syslog_level: int, facility: str, text: str) -> None:
    level = level_of(syslog_level, facility, text)
    if log.isEnabledFor(level):
        for at, line in COLLAPSER.admit(level, facility, text):
            log.log(at, "%s", line)


class _Logger(logging.Logger):
    """What confluent-kafka's clients are given as ``logger``: they call ``log(level, fmt,
    facility, client name, text)`` with its own mapping of the syslog level, which is undone
    here so that ``level_of`` decides."""

    _FROM_PYTHON = {logging.CRITICAL: 2, logging.ERROR: 3, logging.WARNING: 4, logging.INFO: 6,
                    logging.DEBUG: 7}

    def log(self, level: int, msg: Any, *args: Any, **kwargs: Any) -> None:  # type: ignore[override]
        if len(args) == 3:
            facility, _, text = args
            emit(self._FROM_PYTHON.get(level, 6), str(facility), str(text))
        else:
            log.log(level, msg, *args)


LOGGER = _Logger(NAME + ".client")


# librdkafka 2.16.0 (unlike 2.0.2) drops its bootstrap connection once the metadata names the
# brokers, and then waits out a "sparse connection" interval of half reconnect.backoff.ms (50 ms
# by default, at least 11 ms) before it connects to one of them: its init_transactions took
# 53 ms against 2.0.2's 2 ms, and each start-up read as much. A first reconnect backoff of 20 ms
# (which still doubles up to reconnect.backoff.max.ms, 10 s) brings that wait to 11 ms. The
# config's kafka section may set another.
RECONNECT_BACKOFF = {"reconnect.backoff.ms": 20}


def client_conf(conf: dict) -> dict:
    """A confluent-kafka client's config: its log lines routed here, and RECONNECT_BACKOFF unless
    the config sets it."""
    out = dict(RECONNECT_BACKOFF)
    out.update(conf)  # which may be such a config already (the lease's admin client's is)
    out["logger"] = LOGGER
    return out


def free_dropped_clients() -> None:
    """Destroy now the confluent-kafka clients that nothing refers to any more; ``cli.main``
    calls it once, as a command returns, so that owners need only let go of theirs.

    CPython destroys such a client at once; PyPy only when its garbage collector runs, and a
    short run may not collect before it exits. An AdminClient left alive at exit keeps its broker
    threads, which call ``LOGGER`` while the interpreter is being torn down. A start refused by
    Kafka over TLS (a wrong CA) crashed at exit (SIGSEGV): an admin client of that config, left
    to the exit under PyPy, crashed in 5 runs of 480; dropped and collected first, in none of
    300. A collection costs a few ms."""
    gc.collect()
