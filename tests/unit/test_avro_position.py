import datetime
import decimal
import json
import time

import pytest

from streamer.codec import avro
from streamer.engine.tracker import Tracker
from streamer.position import GtidSet, Position
from streamer.schema import columns


def test_crc64_avro_matches_the_spec_vector_for_null():
    # Avro's reference implementation gives 7195948357588979594 for the schema "null".
    assert avro.crc64_avro(b'"null"') == 7195948357588979594


def test_single_object_header_is_marker_plus_little_endian_fingerprint():
    schema = {"type": "record", "name": "x", "fields": [{"name": "a", "type": "long"}]}
    h = avro.header(schema)
    assert h[:2] == b"\xc3\x01" and len(h) == 10
    canonical = b'{"name":"x","type":"record","fields":[{"name":"a","type":"long"}]}'
    assert int.from_bytes(h[2:], "little") == avro.crc64_avro(canonical)


def test_avro_names_are_made_valid_for_any_mysql_identifier():
    assert avro.avro_name("order-id") == "order_id"
    assert avro.avro_name("2fa") == "_2fa"
    assert avro.avro_name("a b$c") == "a_b_c"


def test_temporal_converters():
    assert columns.date_to_days(datetime.date(1970, 1, 2)) == 1
    assert columns.date_to_days(datetime.date(1969, 12, 31)) == -1
    dt = datetime.datetime(2001, 2, 3, 4, 5, 6, 789012)
    assert columns.datetime_to_micros(dt) == int(
        (dt - datetime.datetime(1970, 1, 1)).total_seconds()) * 1000000 + 789012
    assert columns.timedelta_to_micros(-datetime.timedelta(hours=838, minutes=59, seconds=59)) == \
        -(838 * 3600 + 59 * 60 + 59) * 1000000
    assert columns.year_value(1900) == 0 and columns.year_value(2024) == 2024
    assert columns.unsigned_bigint(2**64 - 1) == decimal.Decimal("18446744073709551615")


def test_mariadb_and_mysql_gtid_sets():
    s = GtidSet("0-1-5,1-2-9")
    s.add("0-1-6")
    assert str(s) == "0-1-6,1-2-9"
    m = GtidSet("3E11FA47-71CA-11E1-9E33-C80AA9429562:1-5")
    m.add("3e11fa47-71ca-11e1-9e33-c80aa9429562:6")
    m.add("3e11fa47-71ca-11e1-9e33-c80aa9429562:9")
    assert str(m) == "3e11fa47-71ca-11e1-9e33-c80aa9429562:1-6:9"


def test_position_json_round_trip():
    p = Position("mysql-bin.000003", 1234, "0-1-7", rows=12, server_id=1)
    assert Position.from_json(p.to_json()) == p


def test_position_compares_every_field_and_stamps_its_creation_time():
    before = time.time()
    p = Position("mysql-bin.000003", 1234, "0-1-7", rows=12, server_id=1, ts=5.0)
    assert json.loads(p.to_json()) == {"file": "mysql-bin.000003", "pos": 1234, "gtid_set": "0-1-7",
                                       "rows": 12, "server_id": 1, "ts": 5.0}
    for field, other in (("file", "mysql-bin.000004"), ("pos", 1235), ("gtid_set", "0-1-8"),
                         ("rows", 13), ("server_id", 2), ("ts", 6.0), ("snapshot", {"queue": []}),
                         ("transaction", {"id": "f:4"}), ("tx_gtid", "0-1-8"),
                         ("server_uuid", "3e11fa47-71ca-11e1-9e33-c80aa9429562"),
                         ("xa", {"X'7831',X'',1": ["f", 4, "0-1-9", "f:4"]}),
                         ("run", "4f1c2a"), ("awaited", {"1-1-3": {"rows": 2}}),
                         ("by_gtid", True)):
        q = Position.from_json(p.to_json())
        setattr(q, field, other)
        assert q != p, field
    assert before <= Position("f", 4).ts <= time.time()
    assert repr(Position("f", 4, ts=1.0)) == ("Position(file='f', pos=4, gtid_set='', rows=0, "
                                              "server_id=0, ts=1.0, snapshot=None, "
                                              "transaction=None, tx_gtid='', server_uuid='', xa=None, "
                                              "run='', awaited=None, by_gtid=False)")


def test_a_snapshots_progress_rides_in_the_checkpoint_and_only_when_there_is_one():
    progress = {"queue": [{"id": "7", "table": "db.t", "where": None, "last_key": ["3", "'a'"],
                           "chunk": 2, "rows": 20, "estimate": 100}], "done": 1, "rows": 120}
    p = Position("f", 4, snapshot=progress)
    back = Position.from_json(p.to_json())
    assert back == p and back.snapshot == progress
    assert "snapshot of db.t at chunk 2, 0 more tables queued" in p.describe()
    assert "snapshot" not in json.loads(Position("f", 4).to_json())
    assert Position.from_json(Position("f", 4).to_json()).snapshot is None


def test_tracker_checkpoints_the_transaction_start_and_rows_inside_it():
    t = Tracker(Position("f.1", 100))
    t.begin(100, "0-1-1")
    t.tx_rows = 40
    p = t.position()
    assert (p.file, p.pos, p.gtid_set, p.rows) == ("f.1", 100, "", 40)
    t.end(900)
    p = t.position()
    assert (p.file, p.pos, p.gtid_set, p.rows) == ("f.1", 900, "0-1-1", 0)


def test_tracker_skips_only_within_the_first_transaction():
    t = Tracker(Position("f.1", 100, rows=3))
    t.begin(100, None)
    assert t.skip == 3
    t.end(200)
    assert t.skip == 0



def test_negative_fractional_time_is_decoded_from_mysql_packed_form():
    import datetime as dt

    from streamer.source.decoders import time2_from_packed, time2_packed_from_binary

    # TIME(6) is one 48-bit offset integer: hms << 24 | micros, plus 0x800000000000.
    raw = (-1 + 0x800000000000).to_bytes(6, "big")
    assert time2_from_packed(time2_packed_from_binary(raw, 6)) == -dt.timedelta(microseconds=1)
    raw = (0x800000 + ((12 << 12) | (34 << 6) | 56)).to_bytes(3, "big")
    assert time2_from_packed(time2_packed_from_binary(raw, 0)) == dt.timedelta(
        hours=12, minutes=34, seconds=56)


def test_a_gtid_set_contains_another_per_domain_or_per_interval():
    assert GtidSet("0-1-10,1-2-5").contains(GtidSet("0-1-9,1-2-5"))
    assert not GtidSet("0-1-10").contains(GtidSet("0-1-11"))
    assert not GtidSet("0-1-10").contains(GtidSet("0-1-3,2-1-1"))  # a domain it never saw
    assert GtidSet("0-1-10").contains(GtidSet(""))
    uuid = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
    assert GtidSet(f"{uuid}:1-6:9-12").contains(GtidSet(f"{uuid}:2-5:10"))
    assert not GtidSet(f"{uuid}:1-6:9-12").contains(GtidSet(f"{uuid}:6-9"))
    assert not GtidSet(f"{uuid}:1-6").contains(GtidSet("aaaaaaaa-71ca-11e1-9e33-c80aa9429562:1"))


def test_a_resume_skip_never_reaches_the_next_transaction():
    # The checkpoint is 3 rows into the group at 100. Its end is a kind this tracker may not
    # know; the group at 300 must still be read whole.
    t = Tracker(Position("f.1", 100, rows=3))
    t.begin(100, "0-1-5")
    assert t.count(2) == 2 and t.count(2) == 1
    t.begin(300, "0-1-6")  # the next group's GTID event, with no end seen in between
    assert t.count(4) == 0


def test_a_group_that_ends_in_rollback_ends_there():
    from types import SimpleNamespace

    from pymysqlreplication.event import QueryEvent

    t = Tracker(Position("f.1", 100))
    t.begin(100, "0-1-5")
    t.explicit = True
    ended = t.on_event(SimpleNamespace(query="ROLLBACK", packet=SimpleNamespace(log_pos=250)),
                       QueryEvent)
    assert ended and not t.in_tx and t.position().pos == 250


def _events(*specs):
    """Events as the library hands them over: (class, query or None, start, end) each."""
    from types import SimpleNamespace
    out = []
    for cls, query, start, end in specs:
        ev = SimpleNamespace(query=query, gtid=f"{UUID}:6", flags=0,
                             packet=SimpleNamespace(log_pos=end, event_size=end - start))
        out.append((ev, cls))
    return out


UUID = "c8ec3a3b-ce8d-11eb-a313-8c8caaa4a076"


@pytest.mark.parametrize("begin", [False, True])
def test_mysqls_create_table_select_is_one_transaction_from_its_gtid_to_its_xid(begin):
    # MySQL 8.0.21+ (its SHOW BINLOG EVENTS, as reported against 8.0.24 and 9.3): Gtid,
    # [Query BEGIN], Query "CREATE TABLE ... START TRANSACTION", Table_map, Write_rows, Xid.
    from pymysqlreplication.event import GtidEvent, QueryEvent, XidEvent
    ctas = "CREATE TABLE `t1` (\n  `id` int NOT NULL DEFAULT '0'\n) START TRANSACTION"
    t = Tracker(Position("binlog.000001", 1336, rows=2))
    specs = [(GtidEvent, None, 1336, 1415)] + ([(QueryEvent, "BEGIN", 1415, 1492)] if begin
                                                else [])
    for ev, cls in _events(*specs, (QueryEvent, ctas, 1492, 1636)):
        assert t.on_event(ev, cls) is False  # the CREATE TABLE does not end it
    assert t.in_tx and t.position().pos == 1336
    # Its rows are inside it: a checkpoint there is its start plus the rows, and a resume
    # with 2 rows published skips exactly those.
    assert t.count(3) == 2 and t.position().rows == 3 and t.position().pos == 1336
    (xid, cls), = _events((XidEvent, None, 1726, 1757))
    assert t.on_event(xid, cls) is True and t.position().pos == 1757
    assert t.position().gtid_set == f"{UUID}:6"


def test_a_ddl_is_still_a_transaction_of_its_own():
    from pymysqlreplication.event import GtidEvent, QueryEvent
    t = Tracker(Position("binlog.000001", 100))
    (gtid, g), (ddl, q) = _events((GtidEvent, None, 100, 179),
                                  (QueryEvent, "CREATE TABLE t2 (id INT) ENGINE=InnoDB", 179, 300))
    t.on_event(gtid, g)
    assert t.on_event(ddl, q) is True and not t.in_tx and t.position().pos == 300


def test_the_documented_checkpoint_schema_names_every_field_a_checkpoint_has():
    fields = {f["name"] for f in avro.load_static("position")["fields"]}
    assert fields == set(Position.__slots__)
    # A checkpoint inside another domain's transaction, awaiting one with its metadata counts,
    # is a record of the schema (its absent fields at their defaults).
    fastavro = pytest.importorskip("fastavro")
    schema = avro.load_static("position")
    progress = {"id": "f:4", "gtid": "0-1-8", "ts_ms": 5, "counts": {"ns.a.t": 3},
                "records": {"total": 3, "by_collection": {"a.t": 3}}}
    tracker = Tracker(Position("", 4, "0-1-7", rows=3, server_id=2, tx_gtid="0-1-8",
                               transaction=progress))
    tracker.begin(400, "1-1-3")
    tracker.count(2)
    record = json.loads(tracker.position().to_json())
    assert record["awaited"] == {"0-1-8": {"rows": 3, "transaction": progress}}
    for field in schema["fields"]:
        record.setdefault(field["name"], field.get("default"))
    assert fastavro.validation.validate(record, fastavro.parse_schema(schema), raise_errors=True)
