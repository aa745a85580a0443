"""server.binlog_events: SHOW BINLOG EVENTS read page after page, each from the offset of the
last row shown, against a server that shows several rows at one offset (MySQL's
Transaction_payload and the events inside it)."""
import re

import pytest

from streamer.source import server

_SHOW = re.compile(r"SHOW BINLOG EVENTS IN '(\S+)' FROM (\d+) LIMIT (\d+)$")


class _Server:
    """Rows (file, pos, type, server_id, end, info) as the server shows them: FROM an offset
    starts at the first row at it."""

    def __init__(self, rows):
        self.rows, self.queries = rows, []

    def escape(self, value):
        return f"'{value}'"

    def cursor(self):
        return _Cursor(self)


class _Cursor:
    def __init__(self, srv):
        self.srv, self.result = srv, []

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql):
        if sql.startswith(("SELECT @@SESSION.character_set_results",
                           "SET SESSION character_set_results")):
            self.result = [("utf8mb4",)]
            return
        m = _SHOW.match(sql)
        assert m is not None, sql
        self.srv.queries.append(sql)
        at, limit = int(m.group(2)), int(m.group(3))
        first = next(i for i, r in enumerate(self.srv.rows) if r[1] >= at)
        self.result = self.srv.rows[first:first + limit]

    def fetchall(self):
        return self.result

    def fetchone(self):
        return self.result[0]


def _binlog(payload_events):
    rows, pos = [("f", 4, "Format_desc", 1, 120, "")], 120
    for n in range(3):
        rows.append(("f", pos, "Gtid", 1, pos + 70, f"SET @@SESSION.GTID_NEXT= 'u:{n + 1}'"))
        pos += 70
        # The payload, then its events: all shown at the payload's offset.
        rows.append(("f", pos, "Transaction_payload", 1, pos + 300, "compression='ZSTD'"))
        rows.extend(("f", pos, kind, 1, pos + 300, "") for kind in
                    ["Query"] + ["Table_map", "Write_rows"] * payload_events + ["Xid"])
        pos += 300
    return rows


@pytest.mark.parametrize("page", [1, 2, 3, 5, 7, 1000])
@pytest.mark.parametrize("payload_events", [1, 6])
def test_every_row_is_read_once_whatever_the_page(monkeypatch, page, payload_events):
    rows = _binlog(payload_events)
    srv = _Server(rows)
    monkeypatch.setattr(server, "_EVENTS_PAGE", page)
    assert list(server.binlog_events(srv, "f")) == rows
    # Each page from where the last ended: never again from the file's start.
    starts = [int(_SHOW.match(q).group(2)) for q in srv.queries]
    assert starts == sorted(starts) and (len(srv.queries) == 1 or starts[-1] > 4)


def test_the_starts_around_an_offset_inside_a_payload(monkeypatch):
    rows = _binlog(6)
    monkeypatch.setattr(server, "_EVENTS_PAGE", 4)
    gtids = [r[1] for r in rows if r[2] == "Gtid"]
    assert server.nearest_transaction_starts(_Server(rows), "f", gtids[1] + 1) == (gtids[1],
                                                                                  gtids[2])
