"""Transaction boundaries in the event stream, and what to checkpoint at any point of it."""
from __future__ import annotations

from typing import Optional

from streamer.position import GtidSet, Position


class Tracker:
    """Follows transaction boundaries in the event stream and says what to checkpoint."""

    __slots__ = ("file", "next_pos", "gtids", "gtid", "tx_start", "tx_rows", "in_tx",
                 "server_id", "txid", "skip", "explicit")

    def __init__(self, start: Position):
        self.file = start.file
        self.next_pos = start.pos
        self.gtids = GtidSet(start.gtid_set)
        self.gtid: Optional[str] = None
        self.tx_start = start.pos
        self.tx_rows = 0
        self.in_tx = False
        self.server_id = start.server_id
        self.txid = ""
        # Rows of the first transaction that the previous run already published.
        self.skip = start.rows
        # True once the transaction has an explicit BEGIN; a statement outside one ends itself.
        self.explicit = False

    def begin(self, start_pos: int, gtid: Optional[str]) -> None:
        self.in_tx = True
        self.tx_start = start_pos
        self.tx_rows = 0
        self.gtid = gtid
        self.txid = f"{self.file}:{start_pos}"

    def end(self, next_pos: int) -> None:
        if self.gtid is not None:
            self.gtids.add(self.gtid)
        self.in_tx = False
        self.gtid = None
        self.tx_rows = 0
        self.skip = 0
        self.next_pos = next_pos
        self.tx_start = next_pos

    def position(self) -> Position:
        if self.in_tx:
            return Position(self.file, self.tx_start, str(self.gtids), self.tx_rows, self.server_id)
        return Position(self.file, self.next_pos, str(self.gtids), 0, self.server_id)
