"""The generated writer is byte-for-byte fastavro's output for every type the streamer uses."""
import decimal
import io
import random

import fastavro
import pytest

from streamer.codec.encode import _packed_signed_bytes, compile_writer, signed_bytes
from streamer.errors import GeneratedWriterUnsupported
from streamer.schema.versions import SOURCE_SCHEMA

ROW = {
    "type": "record", "name": "Row", "namespace": "db.t",
    "fields": [
        {"name": "i", "type": "int"},
        {"name": "l", "type": "long"},
        {"name": "f", "type": "float"},
        {"name": "d", "type": "double"},
        {"name": "s", "type": "string"},
        {"name": "b", "type": "bytes"},
        {"name": "dec", "type": {"type": "bytes", "logicalType": "decimal", "precision": 65, "scale": 30}},
        {"name": "u64", "type": {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}},
        {"name": "ts", "type": {"type": "long", "logicalType": "timestamp-micros"}},
        {"name": "ns", "type": ["null", "string"], "default": None},
        {"name": "nl", "type": ["null", "long"], "default": None},
        {"name": "ndec", "type": ["null", {"type": "bytes", "logicalType": "decimal", "precision": 12, "scale": 4}]},
        {"name": "flag", "type": "boolean"},
        # MySQL 9's VECTOR columns (source.vectors).
        {"name": "vec", "type": {"type": "array", "items": "float"}},
        {"name": "nvec", "type": ["null", {"type": "array", "items": "float"}], "default": None},
    ],
}
ENVELOPE = {
    "type": "record", "name": "Envelope", "namespace": "db.t",
    "fields": [
        {"name": "before", "type": ["null", ROW], "default": None},
        {"name": "after", "type": ["null", "db.t.Row"], "default": None},
        {"name": "op", "type": "string"},
        {"name": "ts_ms", "type": "long"},
        {"name": "source", "type": SOURCE_SCHEMA},
    ],
}


def _fastavro(schema, datum):
    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, fastavro.parse_schema(schema), datum)
    return buf.getvalue()


def _generated(schema, datum):
    out = bytearray()
    compile_writer(schema)(out, datum)
    return bytes(out)


_VECTORS = random.Random(7)


def _row(rng):
    def dec(digits, scale):
        n = rng.randint(-10 ** digits + 1, 10 ** digits - 1)
        return decimal.Decimal(n).scaleb(-scale)
    return {
        "i": rng.choice([0, -1, 1, 2 ** 31 - 1, -2 ** 31, rng.randint(-1000, 1000)]),
        "l": rng.choice([0, -1, 2 ** 63 - 1, -2 ** 63, rng.randint(-2 ** 40, 2 ** 40)]),
        "f": rng.choice([0.0, -0.25, 1.5, 3.4e38]),
        "d": rng.choice([0.0, -1.7976931348623157e308, 2.2250738585072014e-308, rng.random()]),
        "s": rng.choice(["", "ascii", "ünïcödé ✓ 🎉", "x" * 300]),
        "b": rng.choice([b"", b"\x00\xff", bytes(range(256))]),
        "dec": dec(65, 30),
        "u64": decimal.Decimal(rng.choice([0, 1, 2 ** 64 - 1, 2 ** 63])),
        "ts": rng.randint(-2 ** 50, 2 ** 50),
        "ns": rng.choice([None, "a", ("string", "tupled")]),
        "nl": rng.choice([None, -5, ("long", 2 ** 40)]),
        "ndec": rng.choice([None, dec(12, 4), ("bytes", decimal.Decimal("-0.0001"))]),
        "flag": rng.choice([True, False]),
        # (Drawn from their own generator: the other fields' draws stay as they were.)
        "vec": _VECTORS.choice([[], [0.0], [1.5, -0.25, 3.4e38],
                                [_VECTORS.random() for _ in range(300)]]),
        "nvec": _VECTORS.choice([None, [], [2.0, -1.0]]),
    }


def test_rows_match_fastavro_for_every_type_and_edge():
    rng = random.Random(3)
    for _ in range(500):
        row = _row(rng)
        assert _generated(ROW, row) == _fastavro(ROW, row), row


def test_envelopes_with_named_references_and_tuple_branches_match_fastavro():
    rng = random.Random(4)
    source = {"server_id": 1, "file": "mysql-bin.000001", "pos": 4, "gtid": ("string", "0-1-2"),
              "db": "db", "table": "t", "row": 0, "txid": "mysql-bin.000001:4", "tx_row": 0, "snapshot": None}
    for op in ("c", "u", "d"):
        env = {"before": None if op == "c" else ("db.t.Row", _row(rng)),
               "after": None if op == "d" else ("db.t.Row", _row(rng)),
               "op": op, "ts_ms": 1700000000000, "source": dict(source, gtid=None)}
        assert _generated(ENVELOPE, env) == _fastavro(ENVELOPE, env)
    env = {"before": None, "after": _row(rng), "op": "c", "ts_ms": 0, "source": source}
    assert _generated(ENVELOPE, env) == _fastavro(ENVELOPE, env)


def test_signed_bytes_are_int_to_bytes_at_every_size_edge():
    # Around each size's bounds, both signs: the packed-long path (up to 8 bytes) and past it.
    edges = {0, 1, -1}
    for bits in range(1, 80):
        for n in (2 ** bits - 1, 2 ** bits, 2 ** bits + 1):
            edges.update((n, -n))
    for n in sorted(edges):
        # The magnitude's bits and a sign bit, in whole bytes (fastavro's size; 0 takes one).
        size = -(-(abs(n).bit_length() + 1) // 8)
        want = n.to_bytes(size, "big", signed=True)
        assert signed_bytes(n) == want and _packed_signed_bytes(n) == want, n
        assert int.from_bytes(want, "big", signed=True) == n


def test_decimal_that_does_not_fit_the_schema_is_refused_like_fastavro():
    with pytest.raises(ValueError, match="precision"):
        _generated(ROW, dict(_row(random.Random(1)), dec=decimal.Decimal("1" * 70)))


def test_unsupported_types_are_reported_so_the_caller_can_fall_back():
    with pytest.raises(GeneratedWriterUnsupported):
        compile_writer({"type": "record", "name": "x", "fields": [
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["a"]}}]})


def test_envelopes_assembled_from_parts_are_the_whole_envelopes_bytes():
    from streamer.codec.avro import OP_BYTES, EnvelopeWriter, Writer
    rng = random.Random(5)
    writer = Writer(ENVELOPE)
    parts = EnvelopeWriter(writer, ROW)
    for gtid in (None, "0-1-2", "3E11FA47-71CA-11E1-9E33-C80AA9429562:23"):
        for op in ("c", "u", "d"):
            before = None if op == "c" else _row(rng)
            after = None if op == "d" else _row(rng)
            row, tx_row, pos = rng.randint(0, 5000), rng.randint(0, 10 ** 7), rng.randint(4, 2 ** 40)
            source = {"server_id": 2 ** 32 - 1, "file": "mysql-bin.000042", "pos": pos,
                      "gtid": gtid, "db": "db", "table": "tä", "row": row,
                      "txid": f"mysql-bin.000042:{pos}", "tx_row": tx_row, "snapshot": None}
            whole = writer.encode({"before": before, "after": after, "op": op,
                                   "ts_ms": 1700000000123, "source": source})
            mid, txid = EnvelopeWriter.event_parts(1700000000123, 2 ** 32 - 1, "mysql-bin.000042",
                                                   pos, gtid, "db", "tä", f"mysql-bin.000042:{pos}")
            assert parts.encode(before, after, OP_BYTES[op], mid, row, txid, tx_row) == whole


def test_envelope_parts_fall_back_to_fastavro_for_rows_the_generator_cannot_write():
    from streamer.codec.avro import OP_BYTES, EnvelopeWriter, Writer
    row_schema = {"type": "record", "name": "Row", "namespace": "db.e", "fields": [
        {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["a", "b"]}}]}
    envelope = dict(ENVELOPE, namespace="db.e", fields=[
        {"name": "before", "type": ["null", row_schema], "default": None},
        {"name": "after", "type": ["null", "db.e.Row"], "default": None}] + ENVELOPE["fields"][2:])
    writer = Writer(envelope)
    assert writer.uses_fastavro()
    source = {"server_id": 1, "file": "f", "pos": 4, "gtid": None, "db": "db", "table": "e",
              "row": 3, "txid": "f:4", "tx_row": 9, "snapshot": None}
    whole = writer.encode({"before": {"e": "a"}, "after": {"e": "b"}, "op": "u", "ts_ms": 5,
                           "source": source})
    mid, txid = EnvelopeWriter.event_parts(5, 1, "f", 4, None, "db", "e", "f:4")
    got = EnvelopeWriter(writer, row_schema).encode({"e": "a"}, {"e": "b"}, OP_BYTES["u"], mid, 3,
                                                    txid, 9)
    assert got == whole


def test_an_envelope_schema_in_another_field_order_is_refused_not_miswritten():
    from streamer.codec.avro import EnvelopeWriter, Writer
    fields = list(ENVELOPE["fields"])
    swapped = dict(ENVELOPE, fields=[fields[1], fields[0]] + fields[2:])
    swapped["fields"][0] = {"name": "after", "type": ["null", ROW], "default": None}
    swapped["fields"][1] = {"name": "before", "type": ["null", "db.t.Row"], "default": None}
    with pytest.raises(ValueError, match="field order|encodes"):
        EnvelopeWriter(Writer(swapped), ROW)


def test_each_function_of_a_writer_compiled_apart_is_handed_once_to_compiled_apart(monkeypatch):
    # `streamer run` under PyPy has the JIT compile those on their own (cli._tune_jit); the
    # one-row path writes with them (schema.versions.OneRowVersion).
    from streamer.codec import encode

    handed = []
    monkeypatch.setattr(encode, "compiled_apart", handed.append)
    assert compile_writer(ENVELOPE).__code__ not in handed and handed == []  # not apart
    write = compile_writer(ENVELOPE, apart=True)
    names = sorted(code.co_name for code in handed)
    # The envelope's, its row's (once, though before and after both hold it), its source's.
    assert names == ["w0", "w1", "w2"] and len(set(map(id, handed))) == 3
    assert write.__code__ in handed and all(code.co_filename == "<avro writer>" for code in handed)
    monkeypatch.setattr(encode, "compiled_apart", None)
    handed.clear()
    compile_writer(ROW, apart=True)
    assert handed == []  # not set: nothing is handed (tests, CPython, other commands)
