"""The audit's bookkeeping, without a server: the topic's materialized state and the comparison."""
import datetime
import decimal

from streamer.tools.audit import Store, canonical, digest, print_report, report


def test_the_topic_state_is_the_last_value_per_key_less_deletes_and_truncates(tmp_path):
    s = Store(str(tmp_path / "d.sqlite"))
    s.apply(0, '{"id":1}', "a", False)
    s.apply(0, '{"id":1}', "b", False)          # an update: the last value wins
    s.apply(1, '{"id":2}', "c", False)
    s.apply(0, '{"id":3}', "d", False)
    s.apply(0, '{"id":3}', None, False)         # a delete or a tombstone
    s.apply(1, '{"id":4}', "e", False)
    s.apply(1, None, None, True)                # a TRUNCATE in partition 1 only
    assert sorted(s.db.execute("SELECT pk, digest FROM topic")) == [('{"id":1}', "b")]


def test_keys_missing_extra_and_different_and_a_recheck_only_of_the_candidates(tmp_path):
    s = Store(str(tmp_path / "d.sqlite"))
    s.put_rows([('{"id":1}', "x"), ('{"id":2}', "y"), ('{"id":3}', "z")])
    for pk, d in (('{"id":1}', "x"), ('{"id":2}', "other"), ('{"id":4}', "w")):
        s.apply(0, pk, d, False)
    found = s.differences(False, extras=True)
    assert found == {"missing": ['{"id":3}'], "different": ['{"id":2}'], "extra": ['{"id":4}']}
    assert s.differences(False, extras=False)["extra"] == []
    # A recheck compares the candidates only: the table row 3 arrived in the topic meanwhile.
    s.candidates(['{"id":3}'])
    s.apply(0, '{"id":3}', "z", False)
    assert s.differences(True, extras=True) == {"missing": [], "different": [], "extra": []}
    r = report("db.t", "ns.db.t", s, found, 1, 5, 0.1, True)
    assert r["missing"] == [{"id": 3}] and r["extra"] == [{"id": 4}] and not r["equal"]


def test_digests_follow_the_values_not_their_python_types_or_key_order():
    a = {"id": 1, "d": datetime.date(2020, 1, 2), "n": decimal.Decimal("1.50"), "b": b"\x00\xff"}
    b = {"b": b"\x00\xff", "n": decimal.Decimal("1.50"), "d": datetime.date(2020, 1, 2), "id": 1}
    assert digest(a) == digest(b) and canonical(a) == canonical(b)
    assert digest(dict(a, n=decimal.Decimal("1.51"))) != digest(a)


def test_the_text_report_lists_each_kind_and_ends_with_the_verdict(tmp_path, capsys):
    s = Store(str(tmp_path / "d.sqlite"))
    s.put_rows([('{"id":1}', "x")])
    found = {"missing": ['{"id":1}'], "different": [], "extra": []}
    assert print_report(report("db.t", "ns.db.t", s, found, 0, 0, 0.0, True), False) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[0] == 'missing {"id": 1}'
    assert out[-1].startswith("audit of db.t against ns.db.t: DIFFERENT: 1 rows, 0 keys")
    equal = {"missing": [], "different": [], "extra": []}
    assert print_report(report("db.t", "ns.db.t", s, equal, 0, 0, 0.0, False), True) == 0


def test_a_key_is_looked_up_again_by_the_literals_of_its_columns_types():
    # Rechecking a key turns its canonical JSON back into SQL: a binary key's latin-1 text as
    # bytes, a TIMESTAMP in UTC, a TIME in the server's form. Looked up as text, a binary key
    # found no row, and a row missing from the topic vanished from the report (EQUAL).
    from streamer.tools.audit import sql_literal

    class Conn:
        def escape(self, value):
            return "'" + str(value) + "'"

    c = Conn()
    assert sql_literal(c, {"type": "bytes", "mysql.type": "binary"}, "\x00\xff") == "X'00ff'"
    assert sql_literal(c, {"type": "bytes", "mysql.type": "bit"}, "\x01\x02") == "258"
    ts = {"type": {"type": "long", "logicalType": "timestamp-micros"}}
    assert sql_literal(c, ts, "2024-01-02T03:04:05.000006+02:00") == "'2024-01-02 01:04:05.000006'"
    local = {"type": ["null", {"type": "long", "logicalType": "local-timestamp-micros"}]}
    assert sql_literal(c, local, "2024-01-02T03:04:05") == "'2024-01-02 03:04:05.000000'"
    tm = {"type": {"type": "long", "logicalType": "streamer.time-micros"}}
    assert sql_literal(c, tm, "-1 day, 23:59:59.999999") == "'-0:00:00.000001'"
    assert sql_literal(c, tm, "34 days, 22:59:59") == "'838:59:59.000000'"
    assert sql_literal(c, {"type": "int"}, 7) == "'7'" and sql_literal(c, {"type": "int"}, None) == "NULL"
    # The zero year as text: the number 0 is the year 2000 to MariaDB's YEAR(2).
    year = {"type": "int", "mysql.type": "year"}
    assert sql_literal(c, year, 0) == "'0000'" and sql_literal(c, year, 2000) == "'2000'"


def test_a_topic_message_that_does_not_decode_is_named_by_partition_and_offset(tmp_path):
    # It was fastavro's TypeError or IndexError, a traceback with no word of where.
    import pytest

    from streamer.codec.avro import Writer
    from streamer.codec.decode import Decoder
    from streamer.errors import UndecodableMessage
    from streamer.tools.audit import TopicSide

    key = Writer({"type": "record", "name": "K", "namespace": "s.t",
                  "fields": [{"name": "id", "type": "long"}]})

    class Reader:
        topic = "ns.s.t"
        next = {}

        def ends(self):
            return {2: 8}

        def read(self, until):
            yield 2, 6, key.encode({"id": 1}), None  # a tombstone: read
            yield 2, 7, key.encode({"id": 2})[:10], None  # cut after its header

    side = TopicSide.__new__(TopicSide)
    side.reader, side.records = Reader(), 0
    side.decoder = Decoder(lambda: {}, known={key.fingerprint.hex(): key.schema})
    side.store = Store(str(tmp_path / "d.sqlite"))
    with pytest.raises(UndecodableMessage, match=r"^ns.s.t partition 2 offset 7: a message of 10 "
                                                 r"bytes does not decode"):
        side.follow()
    assert side.records == 2
