"""The checkpoint: the last position a source committed, read back from ``{namespace}.__positions``.

Every batch's transaction ends with the position after it, keyed by the source's name, so the
newest record of that key read with read_committed is the last committed position. Another
source of the namespace that is publishing a batch (or died doing so) has a checkpoint in an open
transaction, which hides every checkpoint after it from a read_committed read, this source's
newest perhaps among them: resuming from an older one would publish its changes twice. So the
read waits until what was written before it ended is decided; the broker aborts a dead
producer's transaction after its transaction.timeout.ms. (This source's own open transaction, if
an earlier instance left one, was aborted by init_transactions already.)
"""
from __future__ import annotations

import logging
from typing import Any, Dict, Optional, Tuple

from confluent_kafka import KafkaException

from streamer.errors import KafkaFatal, OpenTransaction, UnreadableCheckpoint
from streamer.kafka.topics import json_object, read_topic_tail
from streamer.position import GtidSet, Position

log = logging.getLogger(__name__)

# The checkpoint is looked for among the topic's last offsets first: it is almost always there.
TAIL = 1000


def read_checkpoint(client: Dict[str, Any], topic: str, source: str, namespace: str,
                    settle_s: float) -> Tuple[Optional[Position], int]:
    """The last committed position of ``source`` in ``topic`` and the records read for it."""
    key = source.encode()
    found: Optional[Position] = None
    read = 0

    def on_open(partition: int, stable: int, high: int) -> None:
        log.warning("another producer's transaction is open in %s (partition %d: offsets %d to "
                    "%d are not decided yet); waiting up to %.0f s for it to end, so that no "
                    "newer checkpoint of this source is missed", topic, partition, stable,
                    high - 1, settle_s)

    # Only when other sources of the namespace wrote many since is the whole topic read.
    for tail in (TAIL, None):
        try:
            # The caller made sure the topic exists: a broker that says it doesn't is behind.
            records, whole = read_topic_tail(client, topic, timeout=settle_s, tail=tail,
                                             settle=True, on_open=on_open, must_exist=True)
        except OpenTransaction as exc:
            raise KafkaFatal(f"cannot read the checkpoint from {topic}: {exc}, and a checkpoint "
                             f"of this source committed after it can't be read until it ends. "
                             f"Find the producer holding it (another source of namespace "
                             f"{namespace!r}, or a client writing to that topic) and let it "
                             f"finish or stop it, then start again") from None
        except (RuntimeError, KafkaException) as exc:
            raise KafkaFatal(f"cannot read the checkpoint from {topic}: {exc}") from None
        read = len(records)
        newest = None
        for k, value in records:
            if k == key and value is not None:
                if json_object(value) is None:
                    log.warning("a record of %s keyed %r is no checkpoint (not a JSON object: "
                                "%r): skipped. Only the streamer's transactions write "
                                "checkpoints; something else wrote to this topic", topic,
                                source, value[:60])
                    continue
                newest = value
        if newest is not None:
            found = _position(newest, topic, source)
        if found is not None or whole:
            break
    return found, read


def _position(value: bytes, topic: str, source: str) -> Position:
    """The checkpoint a record holds. A JSON object it can't be read from may be a checkpoint
    of another version of the streamer, whose position this one can't tell: refused, never
    taken for an older one (which would publish again what came after it)."""
    try:
        found = Position.from_json(value)
        GtidSet(found.gtid_set)  # what a resume by it would read
        return found
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise UnreadableCheckpoint(
            f"the newest checkpoint of source {source!r} in {topic} can't be read "
            f"({type(exc).__name__}: {exc}; {value[:200]!r}): written by another version of the "
            f"streamer, or by something else. Run the version that wrote it, or start once at "
            f"an explicit position (--start-file/--start-pos or --start-gtid)") from None
