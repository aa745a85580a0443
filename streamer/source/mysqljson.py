"""MySQL's binary JSON (the JSON column type of MySQL 5.7+), read straight into JSON text.

MariaDB keeps JSON as text (LONGTEXT), which is published as it is. MySQL stores a binary
document, and python-mysql-replication's reading of it gives dicts with bytes keys (which
``json.dumps`` refuses) and a top-level string without its quotes. This reads the format as
MySQL's ``json_binary.h`` documents it and writes the text a MySQL client shows for the value
(``SELECT col``): ``{"a": 1, "b": [true, null]}``, keys in the document's order.

The format, in short (all integers little-endian):

- a document is a type byte and a value;
- objects (0x00 small, 0x01 large) and arrays (0x02 small, 0x03 large) start with the element
  count and the byte size, 2 bytes each when small, 4 when large. An object then has a key entry
  per key (the key's offset from the container's start, 2 or 4 bytes, and its length, 2 bytes);
  both then have a value entry per value: a type byte and either the value's offset or, for a
  literal and for int16/uint16 (and int32/uint32 in a large container), the value itself;
- literals (0x04): 0x00 null, 0x01 true, 0x02 false;
- numbers: int16 0x05, uint16 0x06, int32 0x07, uint32 0x08, int64 0x09, uint64 0x0a, double 0x0b;
- a string (0x0c) is a variable-length size (7 bits a byte, the high bit set on all but the
  last) and its utf8mb4 bytes;
- opaque data (0x0f) is a MySQL field type byte, a variable-length size and the value in that
  type's binary form: DECIMAL (precision, scale, then the packed decimal), written as a number;
  DATE, TIME, DATETIME and TIMESTAMP (an 8-byte packed integer), written as MySQL prints them,
  as strings; any other type as MySQL does too, ``"base64:typeNN:..."``.
"""
from __future__ import annotations

import base64
import json
import struct
from typing import Callable, Dict, List, Tuple

from streamer.errors import UnsupportedValue
from streamer.source.decoders import decimal_layout, decimal_unscaled, make_decimal

_SMALL_OBJECT, _LARGE_OBJECT, _SMALL_ARRAY, _LARGE_ARRAY = 0x00, 0x01, 0x02, 0x03
_LITERAL, _INT16, _UINT16, _INT32, _UINT32, _INT64, _UINT64, _DOUBLE = range(0x04, 0x0C)
_STRING, _OPAQUE = 0x0C, 0x0F
_NUMBERS = {_INT16: "<h", _UINT16: "<H", _INT32: "<i", _UINT32: "<I", _INT64: "<q",
            _UINT64: "<Q"}
_LITERALS = {0: "null", 1: "true", 2: "false"}
# MySQL field types an opaque value may carry that it writes as text.
_DECIMAL, _DATE, _TIME, _DATETIME, _TIMESTAMP, _NEWDATE = 246, 10, 11, 12, 7, 14


def to_text(data: bytes) -> str:
    """The JSON text of a binary document (a whole column value)."""
    if not data:
        return "null"  # MySQL's empty value: a JSON null
    try:
        return _value(data, data[0], 1, len(data))
    except (IndexError, struct.error, UnicodeDecodeError, KeyError) as exc:
        raise UnsupportedValue(f"a MySQL JSON value could not be read ({exc!r}); its first "
                               f"bytes: {data[:32].hex()}") from exc


def _value(data: bytes, kind: int, at: int, end: int) -> str:
    if kind in (_SMALL_OBJECT, _LARGE_OBJECT):
        return _container(data, at, end, kind == _LARGE_OBJECT, True)
    if kind in (_SMALL_ARRAY, _LARGE_ARRAY):
        return _container(data, at, end, kind == _LARGE_ARRAY, False)
    if kind == _LITERAL:
        return _LITERALS[data[at]]
    if kind in _NUMBERS:
        return str(struct.unpack_from(_NUMBERS[kind], data, at)[0])
    if kind == _DOUBLE:
        return _double(struct.unpack_from("<d", data, at)[0])
    if kind == _STRING:
        size, at = _varlen(data, at)
        return json.dumps(data[at:at + size].decode("utf-8"), ensure_ascii=False)
    if kind == _OPAQUE:
        field = data[at]
        size, at = _varlen(data, at + 1)
        return _opaque(field, data[at:at + size])
    raise KeyError(f"JSON value type 0x{kind:02x}")


def _container(data: bytes, start: int, end: int, large: bool, is_object: bool) -> str:
    word = 4 if large else 2
    fmt = "<I" if large else "<H"
    count = struct.unpack_from(fmt, data, start)[0]
    at = start + 2 * word
    keys: List[str] = []
    if is_object:
        for _ in range(count):
            offset = struct.unpack_from(fmt, data, at)[0]
            length = struct.unpack_from("<H", data, at + word)[0]
            keys.append(json.dumps(data[start + offset:start + offset + length].decode("utf-8"),
                                   ensure_ascii=False))
            at += word + 2
    values: List[str] = []
    for _ in range(count):
        kind = data[at]
        if kind == _LITERAL or kind in (_INT16, _UINT16) or (large and kind in (_INT32, _UINT32)):
            values.append(_value(data, kind, at + 1, end))  # inlined in the entry
        else:
            offset = struct.unpack_from(fmt, data, at + 1)[0]
            values.append(_value(data, kind, start + offset, end))
        at += 1 + word
    if is_object:
        return "{" + ", ".join(f"{k}: {v}" for k, v in zip(keys, values)) + "}"
    return "[" + ", ".join(values) + "]"


def _varlen(data: bytes, at: int) -> Tuple[int, int]:
    """A variable-length size: 7 bits a byte, low bits first; the high bit says more follow."""
    size = shift = 0
    while True:
        byte = data[at]
        at += 1
        size |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return size, at
        shift += 7
        if shift > 28:
            raise KeyError("a JSON size longer than 5 bytes")


def _double(value: float) -> str:
    """A double as a MySQL client shows it in JSON: the shortest digits that read back as the
    value (Python's ``repr`` finds them), laid out as MySQL's ``my_gcvt`` lays them out for
    JSON, then ``.0`` after a number with neither a point nor an exponent, so that a whole
    number stays a double. Fixed notation while the point falls from 14 zeros before the
    first digit to 15 digits after it (``0.00000025``, ``123456780000000.0``), else an
    exponent without a plus sign or leading zeros (``1e15``, ``1.5e-300``). The digits are
    taken from ``repr``'s text: through ``Decimal`` it cost 3x ``repr`` a double under PyPy."""
    if value != value or value in (float("inf"), float("-inf")):
        raise KeyError(f"a JSON double {value!r}")  # JSON has no such number; MySQL neither
    text = repr(value)  # "-1.5e-07", "100.0", "1e+22": its digits, and where the point goes
    sign = ""
    if text[0] == "-":
        sign, text = "-", text[1:]
    if text == "0.0":
        return sign + text
    e = text.find("e")
    mantissa, exponent = (text[:e], int(text[e + 1:])) if e >= 0 else (text, 0)
    dot = mantissa.find(".")
    digits = mantissa.replace(".", "")
    point = (dot if dot >= 0 else len(mantissa)) + exponent  # digits before the point
    shown = digits.lstrip("0")  # 0.00025: the zeros after the point move it left
    point -= len(digits) - len(shown)
    digits = shown.rstrip("0")
    if -_FIXED_BELOW < point <= _FIXED_UP_TO or len(digits) > point > 0:
        if point <= 0:
            text = "0." + "0" * -point + digits
        elif point < len(digits):
            text = digits[:point] + "." + digits[point:]
        else:
            text = digits + "0" * (point - len(digits)) + ".0"
    else:
        text = digits[0] + ("." + digits[1:] if len(digits) > 1 else "") + f"e{point - 1}"
    return sign + text


# Where my_gcvt stops writing a double in fixed notation (MAX_DECPT_FOR_F_FORMAT, DBL_DIG).
_FIXED_UP_TO = _FIXED_BELOW = 15


def _opaque(field: int, raw: bytes) -> str:
    """An opaque value's text: a DECIMAL as a number, a temporal value as a string with six
    fraction digits (TIME, DATETIME, TIMESTAMP) as MySQL prints it, anything else as MySQL's
    base64 string."""
    if field == _DECIMAL:
        precision, scale = raw[0], raw[1]
        size, groups = decimal_layout(precision, scale)
        sign, unscaled = decimal_unscaled(raw[2:2 + size], groups)
        return str(make_decimal(sign, unscaled, scale))
    reader = _TEMPORAL.get(field)
    if reader is not None and len(raw) >= 8:
        return json.dumps(reader(struct.unpack_from("<q", raw, 0)[0]))
    return json.dumps(f"base64:type{field}:{base64.b64encode(raw).decode('ascii')}")


def _unpack_datetime(packed: int) -> Tuple[bool, int, int, int, int, int, int, int]:
    """MySQL's packed DATETIME (my_time.cc, TIME_to_longlong_datetime_packed): the integer part
    ``(((year*13 + month) << 5 | day) << 17 | hour << 12 | minute << 6 | second)`` shifted 24
    bits left, plus the microseconds; negative as a whole for a negative value."""
    negative = packed < 0
    packed = -packed if negative else packed
    micro = packed % (1 << 24)
    whole = packed >> 24
    ymd, hms = whole >> 17, whole % (1 << 17)
    year_month = ymd >> 5
    return (negative, year_month // 13, year_month % 13, ymd % 32, hms >> 12, (hms >> 6) % 64,
            hms % 64, micro)


def _fraction(micro: int) -> str:
    return f".{micro:06d}"


def _datetime(packed: int) -> str:
    _, y, mo, d, h, mi, s, micro = _unpack_datetime(packed)
    return f"{y:04d}-{mo:02d}-{d:02d} {h:02d}:{mi:02d}:{s:02d}{_fraction(micro)}"


def _date(packed: int) -> str:
    _, y, mo, d, *_ = _unpack_datetime(packed)
    return f"{y:04d}-{mo:02d}-{d:02d}"


def _time(packed: int) -> str:
    """MySQL's packed TIME: ``(hour << 12 | minute << 6 | second) << 24`` plus microseconds,
    negative as a whole."""
    negative = packed < 0
    packed = -packed if negative else packed
    micro, hms = packed % (1 << 24), packed >> 24
    h, mi, s = hms >> 12, (hms >> 6) % 64, hms % 64
    return f"{'-' if negative else ''}{h:02d}:{mi:02d}:{s:02d}{_fraction(micro)}"


_TEMPORAL: Dict[int, Callable[[int], str]] = {_DATETIME: _datetime, _TIMESTAMP: _datetime,
                                               _DATE: _date, _NEWDATE: _date, _TIME: _time}
