"""What a start says of the published tables, from its own thread (engine.start.warn_of_unlogged):
here, that its patterns take no table at all (a typo, or a missing grant, published nothing
without a word)."""
import logging
import time

from streamer import config
from streamer.engine import start
from streamer.source import rowless, server


def _warned(monkeypatch, caplog, tables):
    caplog.set_level(logging.WARNING, logger="streamer.engine.start")
    closed = []

    class Conn:
        def close(self):
            closed.append(True)
    monkeypatch.setattr(server, "connect", lambda settings: Conn())
    monkeypatch.setattr(server, "user_tables", lambda conn, taken: tables)
    monkeypatch.setattr(rowless, "left_out", lambda conn, published, own: None)
    monkeypatch.setattr(rowless, "cascading", lambda conn, published: [])
    cfg = config.build({"mysql": {"server_id": 9, "host": "db1", "port": 3307},
                        "tables": {"include": ["shop.*"], "exclude": ["shop.tmp_*"]}})
    start.warn_of_unlogged({}, lambda db, t: True, [], start.no_table_matched(cfg))
    deadline = time.monotonic() + 10
    while not closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert closed
    return [r.getMessage() for r in caplog.records]


def test_patterns_that_take_no_table_are_said_with_what_to_check(monkeypatch, caplog):
    said = _warned(monkeypatch, caplog, [])
    assert said == ["tables.include ['shop.*'] (less tables.exclude ['shop.tmp_*']) takes no "
                    "table that MySQL at db1:3307 shows the streamer's user now: nothing is "
                    "published until such a table is created. If that isn't meant, check the "
                    "patterns (db.table globs) and the user's SELECT grant (a table it may not "
                    "read is not shown to it)"]


def test_patterns_that_take_a_table_say_nothing(monkeypatch, caplog):
    assert _warned(monkeypatch, caplog, [("shop", "orders")]) == []
