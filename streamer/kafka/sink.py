"""What the engine asks of the place it publishes to: ``Sink``.

The Kafka publisher (kafka.publisher) is one; the unit tests' in-memory publisher is another, and
drives the real engine with no broker. A batch is one transaction: ``begin`` opens it (the engine
calls it before the batch's first message), ``produce`` adds a message, ``commit`` ends it with
the position after it as its checkpoint, ``abort`` drops it.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

try:
    from typing import Protocol
except ImportError:  # pragma: no cover - Python 3.7
    from typing_extensions import Protocol  # type: ignore[assignment]

from streamer.position import Position

# A message's Kafka headers: (name, value) pairs (topics.headers).
Headers = Tuple[Tuple[str, bytes], ...]


class Sink(Protocol):
    in_tx: bool                    # a transaction is open
    committed: Optional[Position]  # the last checkpoint committed or read back
    last_commit_s: float           # how long the last commit took
    stopping: bool                 # set on shutdown: waits on an unavailable Kafka give up

    def prepare(self) -> None:
        """The internal topics exist (created when missing)."""

    def read_checkpoint(self) -> Optional[Position]:
        """The source's last committed position; also sets ``committed``."""

    def read_schema_records(self) -> List[Dict[str, Any]]:
        """The namespace's schema records, in order (table versions' lineage)."""

    def ensure_topic(self, topic: str, partitions: Optional[int] = None,
                     config: Optional[Dict[str, str]] = None) -> None:
        """The topic exists."""

    def ensure_topic_soon(self, topic: str, partitions: Optional[int] = None,
                          config: Optional[Dict[str, str]] = None) -> None:
        """Start making sure the topic exists, without waiting for it: ``ensure_topic`` of it
        then waits for what is left (and raises what went wrong)."""

    def begin(self) -> None:
        """Open a batch's transaction."""

    def produce(self, topic: str, value: Optional[bytes], key: Optional[bytes],
                headers: Optional[Headers] = None) -> None:
        """Queue a message (with its Kafka headers, if any) in the open transaction."""

    def produce_everywhere(self, topic: str, value: bytes,
                           headers: Optional[Headers] = None) -> int:
        """Queue a keyless message in every partition of ``topic``; how many."""

    def produce_schema(self, fingerprint_hex: str, schema_json: str, topic: str, kind: str) -> None:
        """Queue a writer schema record in the open transaction."""

    def commit(self, position: Position, timeout: float = 60.0) -> None:
        """Commit the open transaction (begun if needed) with ``position`` as its checkpoint."""

    def abort(self, drain: bool = False) -> None:
        """Drop the open transaction (``drain``: its messages delivered first, for a
        transaction that is healthy but must not be committed)."""

    def reset(self) -> None:
        """Replace what can't abort any more; ``committed`` is read back."""

    def queue_depth(self) -> int:
        """Messages queued and not yet delivered."""
