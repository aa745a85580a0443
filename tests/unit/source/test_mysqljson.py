"""MySQL's binary JSON read into the text a MySQL client shows, on vectors built from the format
MySQL documents in json_binary.h (no MySQL server can run here). The library's own reading is the
independent second opinion on the structure; it gets the text wrong (bytes keys, a bare string)."""
import json
import random
import struct

import pytest
from pymysqlreplication.packet import parse_json

from streamer.errors import UnsupportedValue
from streamer.source import mysqljson

# {"a": 1, "b": "x"}, by hand: a small object (0x00), 2 elements in 22 bytes; key entries
# (offset 18, length 1) and (19, 1); value entries int16 1 inlined, and a string at offset 20;
# the keys "a" "b"; the string: length 1, "x".
SMALL_OBJECT = bytes.fromhex("00" "0200" "1600" "12000100" "13000100" "050100" "0c1400"
                             "6162" "0178")


def test_a_small_object_by_hand():
    assert mysqljson.to_text(SMALL_OBJECT) == '{"a": 1, "b": "x"}'


def test_a_top_level_string_keeps_its_quotes_and_a_literal_is_a_literal():
    assert mysqljson.to_text(bytes.fromhex("0c03616263")) == '"abc"'
    assert mysqljson.to_text(bytes.fromhex("0c00")) == '""'
    assert mysqljson.to_text(bytes.fromhex("0400")) == "null"
    assert mysqljson.to_text(bytes.fromhex("0401")) == "true"
    assert mysqljson.to_text(bytes.fromhex("0402")) == "false"
    assert mysqljson.to_text(b"") == "null"


def _enc_string(raw: bytes) -> bytes:
    out, n = bytearray(), len(raw)
    while True:
        byte = n & 0x7F
        n >>= 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out) + raw


def _scalar(v):
    """(type, bytes) of a scalar as json_binary.h lays it out."""
    if v is None or v is True or v is False:
        return 0x04, bytes([{None: 0, True: 1, False: 2}[v]])
    if isinstance(v, int):
        for kind, fmt, lo, hi in ((0x05, "<h", -2 ** 15, 2 ** 15 - 1), (0x06, "<H", 0, 2 ** 16 - 1),
                                  (0x07, "<i", -2 ** 31, 2 ** 31 - 1), (0x08, "<I", 0, 2 ** 32 - 1),
                                  (0x09, "<q", -2 ** 63, 2 ** 63 - 1), (0x0A, "<Q", 0, 2 ** 64 - 1)):
            if lo <= v <= hi:
                return kind, struct.pack(fmt, v)
    if isinstance(v, float):
        return 0x0B, struct.pack("<d", v)
    if isinstance(v, str):
        return 0x0C, _enc_string(v.encode("utf-8"))
    raise TypeError(v)


def encode(v, large=False):
    """A value as MySQL's binary JSON (type byte first), written from json_binary.h."""
    if isinstance(v, (dict, list)):
        return bytes([(0x01 if large else 0x00) if isinstance(v, dict) else
                      (0x03 if large else 0x02)]) + _container(v, large)
    kind, raw = _scalar(v)
    return bytes([kind]) + raw


def _container(v, large):
    word, fmt = (4, "<I") if large else (2, "<H")
    items = list(v.items()) if isinstance(v, dict) else [(None, x) for x in v]
    head = 2 * word + (len(items) * (word + 2) if isinstance(v, dict) else 0) + \
        len(items) * (1 + word)
    keys = b"".join(k.encode("utf-8") for k, _ in items if k is not None)
    key_entries, at = b"", head
    for k, _ in items:
        if k is not None:
            key_entries += struct.pack(fmt, at) + struct.pack("<H", len(k.encode("utf-8")))
            at += len(k.encode("utf-8"))
    body, value_entries = b"", b""
    for _, x in items:
        if isinstance(x, (dict, list)):
            kind, raw = encode(x, large)[0], encode(x, large)[1:]
        else:
            kind, raw = _scalar(x)
        inline = kind == 0x04 or kind in (0x05, 0x06) or (large and kind in (0x07, 0x08))
        if inline:
            value_entries += bytes([kind]) + raw.ljust(word, b"\0")
        else:
            value_entries += bytes([kind]) + struct.pack(fmt, head + len(keys) + len(body))
            body += raw
    size = head + len(keys) + len(body)
    return struct.pack(fmt, len(items)) + struct.pack(fmt, size) + key_entries + \
        value_entries + keys + body


def _plain(v):
    """The library's reading with its bytes turned into text: the structure, to compare."""
    if isinstance(v, dict):
        return {k.decode(): _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v.decode() if isinstance(v, bytes) else v


def _text(v):
    return json.dumps(v, ensure_ascii=False, separators=(", ", ": "))


DOCS = [
    {"a": 1, "b": "x"},
    [True, None, False, -2, 70000, -70000, 2 ** 40, 2 ** 64 - 1, 1.5, -0.25, "ü ✓ 🎉"],
    {"nested": {"list": [1, [2, [3, {"deep": "yes"}]]], "empty": {}, "none": []}, "n": 3},
    [],
    {},
    {"k" * 300: "v" * 300},  # a key and a string over 127 bytes: two-byte string sizes
    [2 ** 31 - 1, -2 ** 31, 2 ** 32 - 1, 65535, -32768],
]


@pytest.mark.parametrize("large", [False, True])
@pytest.mark.parametrize("doc", DOCS)
def test_documents_read_as_the_text_a_client_shows_and_agree_with_the_librarys_structure(doc, large):
    data = encode(doc, large)
    text = mysqljson.to_text(data)
    assert text == _text(doc)
    assert json.loads(text) == _plain(parse_json(data[0], data[1:]))


def test_random_documents_round_trip():
    rng = random.Random(35)

    def value(depth):
        pick = rng.randrange(8 if depth < 4 else 5)
        if pick == 0:
            return rng.choice([None, True, False])
        if pick == 1:
            return rng.randint(-2 ** 63, 2 ** 64 - 1) if rng.random() < 0.3 else rng.randint(-9, 9)
        if pick == 2:
            return rng.choice([0.5, -1e-7, 123456.789, 1e300])
        if pick in (3, 4):
            return "".join(rng.choice("ab\"\\\n✓") for _ in range(rng.randrange(0, 200)))
        if pick in (5, 6):
            return {f"k{i}{'x' * rng.randrange(3)}": value(depth + 1)
                    for i in range(rng.randrange(0, 5))}
        return [value(depth + 1) for _ in range(rng.randrange(0, 5))]

    for _ in range(300):
        doc, large = value(0), rng.random() < 0.5
        assert json.loads(mysqljson.to_text(encode(doc, large))) == doc


def _packed_datetime(y, mo, d, h, mi, s, micro):
    return ((((y * 13 + mo) << 5 | d) << 17 | h << 12 | mi << 6 | s) << 24) + micro


def test_opaque_decimals_are_numbers_and_temporal_values_strings_as_mysql_prints_them():
    dec = bytes([0x0F, 246]) + _enc_string(bytes([5, 2]) + bytes.fromhex("807b2d"))  # DECIMAL(5,2) 123.45
    assert mysqljson.to_text(dec) == "123.45"
    dt = struct.pack("<q", _packed_datetime(2015, 1, 15, 23, 24, 25, 500000))
    assert mysqljson.to_text(bytes([0x0F, 12]) + _enc_string(dt)) == '"2015-01-15 23:24:25.500000"'
    day = struct.pack("<q", _packed_datetime(2015, 1, 15, 0, 0, 0, 0))
    assert mysqljson.to_text(bytes([0x0F, 10]) + _enc_string(day)) == '"2015-01-15"'
    neg_time = struct.pack("<q", -(((1 << 12 | 2 << 6 | 3) << 24) + 4))
    assert mysqljson.to_text(bytes([0x0F, 11]) + _enc_string(neg_time)) == '"-01:02:03.000004"'
    blob = bytes([0x0F, 252]) + _enc_string(b"\x00\xff")
    assert mysqljson.to_text(blob) == '"base64:type252:AP8="'


def test_a_document_that_cannot_be_read_is_one_clear_error():
    with pytest.raises(UnsupportedValue, match="a MySQL JSON value could not be read"):
        mysqljson.to_text(SMALL_OBJECT[:10])
    with pytest.raises(UnsupportedValue, match="JSON value type 0x0e"):
        mysqljson.to_text(bytes([0x0E, 0]))


def test_a_whole_double_stays_a_double():
    assert mysqljson.to_text(bytes([0x0B]) + struct.pack("<d", 1.0)) == "1.0"
    assert json.loads(mysqljson.to_text(bytes([0x0B]) + struct.pack("<d", 1e300))) == 1e300


# What MySQL 8.0 shows for each (SELECT CAST('[...]' AS JSON)): fixed notation from 14 zeros
# after the point to 15 digits before it, else an exponent with no plus sign.
SHOWN = [(1.5e300, "1.5e300"), (2.5e-7, "0.00000025"), (-2.5e-7, "-0.00000025"), (1e22, "1e22"),
         (1e15, "1e15"), (1e16, "1e16"), (123456789012345678.0, "1.2345678901234568e17"),
         (0.0001, "0.0001"), (0.00001, "0.00001"), (-0.0, "-0.0"), (0.0, "0.0"), (100.0, "100.0"),
         (1.7976931348623157e308, "1.7976931348623157e308"), (5e-324, "5e-324"),
         (1.5e-10, "0.00000000015"), (12345.678e10, "123456780000000.0"), (1e-15, "0.000000000000001"),
         (1e-16, "1e-16"), (1234567890123456.7, "1234567890123456.8"), (0.1, "0.1"), (-1e-300, "-1e-300")]


def test_a_double_is_laid_out_as_mysql_shows_it():
    for value, shown in SHOWN:
        assert mysqljson.to_text(bytes([0x0B]) + struct.pack("<d", value)) == shown, value
