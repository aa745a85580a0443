"""A snapshot row's message written straight from the text-protocol row packet the server sent.

A chunk's rows come as text-protocol packets: per column a length-encoded string, the value as
SELECT shows it (``source.textrows``). The general way to a message makes each packet a dict of
Python values (decoded strings, datetimes, Decimals), converts them (``TableVersion.convert``)
and encodes them again (``avro.EnvelopeWriter.encode_read``, the key writer): most of a wide
row's time, and most of its garbage. For the columns whose Avro is a function of their text
alone, ``TextWriter`` writes the value's and the key's Avro from the packet in one pass:

- an integer (not BIGINT UNSIGNED): its digits are the number;
- a text column or an ENUM the result sends as UTF-8: its bytes are the Avro string's bytes
  (validated as UTF-8 unless they are ASCII, so a value the general way could not decode fails
  the same way);
- a DECIMAL: its digits, without the point, are the unscaled number;
- a DATETIME: the wall clock's fields, as µs since the epoch; a TIMESTAMP (read in UTC) alike,
  or in Debezium's Avro its text in ISO 8601 (``ZonedTimestamp``);
- a DATE: its fields, as days since the epoch;
- a binary string (BINARY, VARBINARY, a binary BLOB) or a GEOMETRY: its bytes, a BINARY(n)'s
  padded to n with zero bytes as the general way pads them;
- a TIME: its fields, as µs (negative, or past a day, alike); a YEAR: its digits.

The bytes are those of the general way, value for value (tests/unit/schema/test_textavro.py
compares both on every kind, and on the values the fast paths leave to it): a text the fast
path doesn't take as the server writes it (an invalid or zero date, a decimal with other digits
than its scale) goes the general way, value by value. Any other column (a BIT, a FLOAT, JSON,
a masked column...) is made the general way column by column: its text read as PyMySQL reads
it, shaped, converted and written by its field's own generated writer. A SET, whose texts are
few, is made so once per text, and its field's bytes are kept by the text (``_memo``). A
column's value in a snapshot's row is a function of its text alone (``TableVersion.alone``): a
column masked with null is None whatever its text, and a NOT NULL SET's NULL is its empty value.
An excluded column (``tables.columns.exclude``), selected as NULL or, in a keyless table's
chunk key, read, is passed over undecoded (an invalid date in it is not counted: nothing of it
is published).

The streamer's own Avro and Debezium's (``codec.debezium.AvroEvents``) are written so: Connect's
Value struct holds the same bytes for the kinds above where Connect's type is the value itself
(an integer, a string, bytes, a precise decimal, a DATETIME as µs or ms, a DATE); a TIMESTAMP's
``ZonedTimestamp`` is its text rearranged, and any other column Connect makes another value of
(``adapt``) goes the general way. Another message format (Debezium's JSON, plain
JSON, a schema the generated writers don't write) has no ``TextWriter`` (``text_writer`` says
why) and its rows go the general way, whole.

The writer is generated once per table version and result layout (straight-line code, as
``encode.compile_writer`` does, which PyPy's JIT compiles well), and kept on the version.
"""
from __future__ import annotations

import codecs
import decimal
import logging
from typing import Any, Callable, Dict, List, Optional, Tuple

from pymysql import converters
from pymysqlreplication.constants import FIELD_TYPE as T

from streamer.codec.avro import EnvelopeWriter
from streamer.codec.connect import DECIMAL, millis
from streamer.codec.debezium import AvroEvents, value_struct
from streamer.codec.encode import _decimal_bytes, compile_writer, signed_bytes, write_long
from streamer.errors import GeneratedWriterUnsupported, UnsupportedValue
from streamer.schema import columns
from streamer.source import lenenc
from streamer.source.rowplan import EPOCH_ORDINAL
from streamer.source.textrows import FASTER, fast_datetime, fast_decimal, fast_timedelta

log = logging.getLogger(__name__)

_INT_TYPES = (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG)
_TEXT_TYPES = (T.VARCHAR, T.VAR_STRING, T.STRING, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB)
# Days before each month of a common year.
_BEFORE = (0, 0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334)
_LENGTH = (0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _slow_datetime(text: bytes, shape: Callable[[Any], Any]) -> Optional[int]:
    """A DATETIME's or TIMESTAMP's text the general way: PyMySQL's reading, the snapshot's
    shaping (an invalid or zero date is None, and counted; a zero TIMESTAMP is 0), then the
    conversion to µs."""
    value = shape(fast_datetime(text.decode("ascii")))
    return None if value is None else columns.datetime_to_micros(value)


def _days(text: bytes) -> int:
    """``YYYY-MM-DD`` at the start of ``text`` as days since 1970-01-01, or -1 << 40 when it is
    not a valid date as the server writes one."""
    if text[4] == 45 and text[7] == 45:
        try:
            year, month, day = int(text[0:4]), int(text[5:7]), int(text[8:10])
        except ValueError:
            return _NO_DATE
        leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
        if year >= 1 and 1 <= month <= 12 and 1 <= day <= _LENGTH[month] \
                and (day < 29 or month != 2 or leap):
            y = year - 1
            days = y * 365 + y // 4 - y // 100 + y // 400 + _BEFORE[month] + day
            if month > 2 and leap:
                days += 1
            return days - EPOCH_ORDINAL
    return _NO_DATE


_NO_DATE = -1 << 40  # below any date's days (year 1 is -719162)


def _fast_micros(text: bytes) -> Optional[int]:
    """``YYYY-MM-DD HH:MM:SS[.f...]`` as µs since 1970-01-01, or None when it is not a valid
    time as the server writes one."""
    size = len(text)
    if (size == 19 or 21 <= size <= 26) and text[10] == 32 \
            and (size == 19 or text[19] == 46):
        days = _days(text)
        if days == _NO_DATE:
            return None
        try:
            hour, minute, second = int(text[11:13]), int(text[14:16]), int(text[17:19])
            micro = 0 if size == 19 else int(text[20:]) * 10 ** (26 - size)
        except ValueError:
            return None
        if hour < 24 and minute < 60 and second < 60:
            return (days * 86400 + hour * 3600 + minute * 60 + second) * 1000000 + micro
    return None


def datetime_micros(text: bytes, shape: Callable[[Any], Any]) -> Optional[int]:
    """A DATETIME's or TIMESTAMP's text (the snapshot reads TIMESTAMPs in UTC) as µs since
    1970-01-01, as the general way reads it."""
    micros = _fast_micros(text)
    return _slow_datetime(text, shape) if micros is None else micros


def date_days(text: bytes, shape: Callable[[Any], Any]) -> Optional[int]:
    """A DATE's ``YYYY-MM-DD`` as days since 1970-01-01, as the general way reads it (an
    invalid or zero date: PyMySQL's text, shaped to None)."""
    if len(text) == 10:
        days = _days(text)
        if days != _NO_DATE:
            return days
    value = shape(converters.convert_date(text.decode("ascii")))
    return None if value is None else columns.date_to_days(value)


def time_micros(text: bytes) -> int:
    """A TIME's ``[-]H:MM:SS[.f...]`` as µs, as the general way reads it (PyMySQL's reading,
    then ``columns.timedelta_to_micros``), which any other text goes."""
    size, colon = len(text), text.find(b":")
    sign = 1 if size and text[0] == 45 else 0  # "-"
    if 0 < colon - sign <= 3 and size >= colon + 6 and text[colon + 3] == 58 \
            and (size == colon + 6 or (text[colon + 6] == 46 and colon + 8 <= size <= colon + 13)):
        try:
            hours = int(text[sign:colon])
            minute, second = int(text[colon + 1:colon + 3]), int(text[colon + 4:colon + 6])
            micro = 0 if size == colon + 6 else int(text[colon + 7:]) * 10 ** (colon + 13 - size)
        except ValueError:
            hours = minute = -1
        if hours >= 0 and 0 <= minute < 60 and 0 <= second < 60 and micro >= 0:
            micros = ((hours * 60 + minute) * 60 + second) * 1000000 + micro
            return -micros if sign else micros
    return columns.timedelta_to_micros(fast_timedelta(text.decode("ascii")))


def year_number(text: bytes) -> int:
    """A YEAR's digits as the general way reads them (``columns.year_value``)."""
    return columns.year_value(int(text))


def zoned_text(text: bytes, shape: Callable[[Any], Any], adapt: Callable[[int], str],
               size: int) -> Optional[bytes]:
    """A TIMESTAMP's text (UTC) as Debezium's ZonedTimestamp's UTF-8: the server's
    ``YYYY-MM-DD HH:MM:SS[.f...]`` with the column's digits (``size`` bytes) is
    ``YYYY-MM-DDTHH:MM:SS[.f...]Z``; any other text goes the general way (``adapt``)."""
    if len(text) == size and _fast_micros(text) is not None:
        return text[:10] + b"T" + text[11:] + b"Z"
    micros = _slow_datetime(text, shape)
    return None if micros is None else adapt(micros).encode("utf-8")


def decimal_bytes(text: bytes, scale: int, precision: int,
                  adapt: Optional[Callable[[Any], Any]] = None) -> bytes:
    """A DECIMAL's text as its Avro decimal bytes, as the general way writes it (``adapt``:
    Debezium's scaling of the value read, ``connect._scaled``). The server writes
    ``[-]digits[.digits]`` with exactly ``scale`` digits after the point: then the digits
    without the point are the unscaled number (the scaling changes nothing), and a value with
    no more digits than the precision, leading zeros and all, is within it."""
    size = len(text)
    negative = size > 0 and text[0] == 45  # "-"
    if scale:
        dot = size - scale - 1
        if dot > negative and text[dot] == 46:  # "."
            digits = text[negative:dot] + text[dot + 1:]
        else:
            digits = b""
    else:
        digits = text[negative:] if size > negative else b""
    if digits.isdigit() and len(digits) <= precision:
        unscaled = int(digits)
        return signed_bytes(-unscaled if negative else unscaled)
    value = fast_decimal(text.decode("ascii"))
    return _decimal_bytes(value if adapt is None else adapt(value), scale, precision)


class NullInNotNull(ValueError):
    """A NULL where the table version publishes a column as not null."""


def _null(name: str) -> None:
    raise NullInNotNull(f"column {name} is NULL, but its schema has no null")


_HELPERS: Dict[str, Any] = {"write_long": write_long, "_long_length": lenenc.read,
                            "_datetime": datetime_micros, "_date": date_days,
                            "_zoned": zoned_text, "_decimal": decimal_bytes,
                            "_time": time_micros, "_year": year_number, "_null": _null}

# A field's value (``s``) written, by kind; ``{a}`` and ``{b}`` are the kind's arguments.
_WRITE = {
    "int": ["write_long(buf, int(s))"],
    "text": ["if not s.isascii():", "    s.decode('utf-8')", "write_long(buf, n)", "buf += s"],
    "decimal": ["s = _decimal(s, {a}, {b}{adapt})", "write_long(buf, len(s))", "buf += s"],
    "bytes": ["write_long(buf, n)", "buf += s"],
    "time": ["write_long(buf, _time(s))"],
    "year": ["write_long(buf, _year(s))"],
    "padded": ["if n < {a}:", "    s = s.ljust({a}, b'\\0')", "write_long(buf, len(s))",
               "buf += s"],
}

# A temporal field's value (``v``, None for an invalid date), by kind.
_TEMPORAL = {"datetime": "v = _datetime(s, _shape{i})", "date": "v = _date(s, _shape{i})",
             "zoned": "v = _zoned(s, _shape{i}, _adapt{i}, {a})"}


class TextWriter:
    """The writer of one table version's messages from its result's row packets (``encode``)."""

    __slots__ = ("envelope", "key_writer", "_write")

    def __init__(self, envelope: Any, key_writer: Any,
                 write: Callable[[bytearray, Optional[bytearray], bytes], None]) -> None:
        self.envelope = envelope
        self.key_writer = key_writer
        self._write = write

    def encode(self, data: bytes, mid: Any, row: int, txid: Any,
               snapshot: bytes) -> Tuple[bytes, Optional[bytes]]:
        """(value, key) of one row packet: what ``envelope.encode_read`` and ``TableVersion.key``
        write for the row made a converted dict."""
        envelope = self.envelope
        buf = envelope.read_head()
        key_writer = self.key_writer
        kbuf = None if key_writer is None else bytearray(key_writer.header)
        self._write(buf, kbuf, data)
        return (envelope.read_tail(buf, mid, row, txid, snapshot),
                None if kbuf is None else bytes(kbuf))


def text_writer(tv: Any, described: Any, plan: List[Tuple[Optional[str], Any]],
                fix: List[Tuple[int, Callable[[Any], Any]]]) -> Optional[TextWriter]:
    """The table version's writer for a result of ``described``'s columns read with ``plan``
    (PyMySQL's (encoding, converter) per field) and shaped by ``fix`` (``chunks.shapers``), made
    once and kept on the version; None when its rows must go the general way."""
    cache = tv.__dict__.setdefault("text_writers", {})
    layout = (tuple(plan), tuple((c.name, c.type) for c in described.columns))
    if layout not in cache:
        why, made = None, None
        target = _target(tv)
        if isinstance(target, str):
            why = target
        else:
            why, write = _generate(tv, target, described, plan, dict(fix))
            if write is not None:
                made = TextWriter(target.envelope, target.key_writer, write)
        if why is not None:
            log.debug("snapshot of %s.%s: rows converted the general way: %s", tv.db, tv.table,
                      why)
        cache[layout] = made
    return cache[layout]


class _Target:
    """What a table version's messages are written with: its envelope (``read_head`` and
    ``read_tail`` around the row), its key's writer (None: no key), the row's Avro fields in
    the row's order, and per field its Connect field (``codec.connect.Field``: Debezium's
    schema and ``adapt``), or None in the streamer's own format."""

    __slots__ = ("envelope", "key_writer", "fields", "key_fields", "connect")

    def __init__(self, envelope: Any, key_writer: Any, fields: List[Dict[str, Any]],
                 key_fields: List[Dict[str, Any]], connect: List[Any]) -> None:
        self.envelope = envelope
        self.key_writer = key_writer
        self.fields = fields
        self.key_fields = key_fields
        self.connect = connect


def _target(tv: Any) -> Any:
    """The version's ``_Target``, or why its messages aren't written from text."""
    envelope = tv.envelope
    if type(envelope) is EnvelopeWriter and "key" not in tv.__dict__:
        writers, key_writer = [tv.value_writer, tv.key_writer], tv.key_writer
        fields = tv.row_schema["fields"]
        key_fields = tv.key_schema["fields"] if tv.key_schema is not None else []
        connect: List[Any] = [None] * len(fields)
    elif type(envelope) is AvroEvents:
        writers, key_writer = [envelope.value_writer, envelope.key_writer], envelope.key_writer
        fields = value_struct(envelope.value_writer.schema)["fields"]
        key_fields = key_writer.schema["fields"] if key_writer is not None else []
        connect = envelope.fields
        if [f.name for f in connect] != [f["name"] for f in fields]:
            return "Connect's fields are not the Value record's"
    else:
        return "another message format"
    if any(w is not None and w.uses_fastavro() for w in writers):
        return "a schema the generated writer doesn't write"
    return _Target(envelope, key_writer, fields, key_fields, connect)


def _generate(tv: Any, target: _Target, described: Any, plan: List[Tuple[Optional[str], Any]],
              fix: Dict[int, Any]) -> Tuple[Optional[str], Any]:
    """(why not, None) or (None, the generated ``write(buf, kbuf, data)``)."""
    fields = target.fields
    cols = described.columns
    # The streamer's fields name the column each publishes (``mysql.column`` where the Avro
    # name differs), less those excluded (tables.columns.exclude), which are passed over;
    # Debezium's are the same fields, in the same order.
    excluded = set(tv.row_schema.get("streamer.excluded", ()))
    read = [i for i, c in enumerate(cols) if c.name not in excluded]
    published = tv.row_schema["fields"]
    if len(plan) != len(cols) \
            or [f.get("mysql.column", f["name"]) for f in published] != [cols[i].name for i in read] \
            or [f["name"] for f in published] != [f["name"] for f in fields]:
        return "its published columns are not the columns read, in their order", None
    if [f for f in fields if f["name"] in tv.pk_names] != target.key_fields:
        return "a key whose fields are not the row's, in the row's order", None
    lines = ["def write(buf, kbuf, data):", "    pos = 0"]
    namespace = dict(_HELPERS)
    field_of = dict(zip(read, range(len(fields))))
    for i, (col, (encoding, converter)) in enumerate(zip(cols, plan)):
        j = field_of.get(i)
        if j is None:
            lines += ["    " + line for line in _SKIP]
            continue
        why, made = _column(tv, i, col, fields[j], target.connect[j], encoding, converter,
                            fix.get(i), namespace)
        if why is not None:
            return why, None
        lines += ["    " + line for line in made]
    namespace.update({f"_shape{i}": shape for i, shape in fix.items()})
    exec(compile("\n".join(lines), "<text row writer>", "exec"), namespace)  # noqa: S102
    return None, namespace["write"]


# The lines that move ``pos`` past a column not published.
_SKIP = ["n = data[pos]", "if n < 251:", "    pos += 1 + n", "elif n == 251:", "    pos += 1",
         "else:", "    n, pos = _long_length(data, pos)", "    pos += n"]


def _column(tv: Any, i: int, col: Any, field: Dict[str, Any], connect: Any,
            encoding: Optional[str], converter: Any, shape: Any,
            namespace: Dict[str, Any]) -> Tuple[Optional[str], List[str]]:
    """(why not, []) or (None, the lines that write column ``i`` as ``field``), with what they
    call put in ``namespace``."""
    conv, branch, fill = tv.alone(col.name)
    if branch is not None:
        return f"column {col.name} is written as a union's branch", []
    kind = _kind(col, field, connect, encoding, converter, shape, conv, fill)
    if kind[0] in ("general", "memo"):
        try:
            write = namespace[f"_write{i}"] = compile_writer(
                {"type": "record", "name": "Field", "fields": [field]})
        except GeneratedWriterUnsupported as exc:
            return f"column {col.name}: {exc}", []
        value = namespace[f"_value{i}"] = _general_value(
            f"{tv.db}.{tv.table} column {col.name}", encoding, converter, shape, kind[1],
            None if connect is None else connect.adapt)
        if kind[0] == "memo":
            namespace[f"_memo{i}"], namespace[f"_remember{i}"] = _memo(write, value,
                                                                        field["name"])
    adapted = connect is not None and connect.adapt is not None
    if adapted:
        namespace[f"_adapt{i}"] = connect.adapt
    if fill is not None:
        namespace[f"_fill{i}"] = {field["name"]: connect.adapt(fill) if adapted else fill}
    return None, _field(i, col.name, field, kind, field["name"] in tv.pk_names, adapted,
                        fill is not None)


# The most texts a column's memo keeps (``_memo``): a SET of n members has 2**n values, and a
# table's sets few members; past it, a text not kept is made the general way every time.
MEMO_TEXTS = 4096


def _memo(write: Callable[[bytearray, Dict[str, Any]], None], value: Callable[[bytes], Any],
          name: str) -> Tuple[Dict[bytes, bytes], Callable[[bytes], bytes]]:
    """A column's field bytes by its text, for a column of few distinct texts whose value is a
    function of its text alone (a SET: its members, joined in the set's order, masked or not):
    (the texts' bytes kept, the function that makes a text's bytes the general way and keeps
    them)."""
    memo: Dict[bytes, bytes] = {}

    def remember(text: bytes) -> bytes:
        out = bytearray()
        write(out, {name: value(text)})
        made = bytes(out)
        if len(memo) < MEMO_TEXTS:
            memo[text] = made
        return made
    return memo, remember


def _atype(field: Dict[str, Any]) -> Any:
    t = field["type"]
    if isinstance(t, list):
        return t[1] if len(t) == 2 and t[0] == "null" else None
    return t


def _primitive(atype: Any) -> Any:
    """An Avro type's primitive, where its other attributes are only Connect's names for it (a
    logical type is not), else None."""
    if isinstance(atype, str):
        return atype
    if isinstance(atype, dict) and all(k == "type" or k.startswith("connect.") for k in atype):
        return atype["type"]
    return None


# Connect's types of a DATETIME as a long: the µs as they are, or as ms (``connect.millis``).
_MICROS = "io.debezium.time.MicroTimestamp"
_MILLIS = ("io.debezium.time.Timestamp", "org.apache.kafka.connect.data.Timestamp")
_ZONED = "io.debezium.time.ZonedTimestamp"
_ENUM = "io.debezium.data.Enum"


def _kind(col: Any, field: Dict[str, Any], connect: Any, encoding: Optional[str],
          converter: Any, shape: Any, conv: Any, fill: Any) -> Tuple[str, Any, Any]:
    """How the column is written from its text: (kind, a, b). ``connect``: Debezium's field
    of the column, whose value ``adapt`` makes of the streamer's (None: the streamer's own
    format); ``conv`` and ``fill``: ``TableVersion.alone``'s converter and NULL's value."""
    if col.type == T.SET:
        return "memo", conv, None
    general = ("general", conv, None)
    if fill is not None:
        return general
    atype, t = _atype(field), col.type
    cname = None if connect is None else connect.schema.get("name")
    adapt = None if connect is None else connect.adapt
    if t in _INT_TYPES and not (t == T.LONGLONG and col.unsigned) \
            and _primitive(atype) in ("int", "long") and adapt is None \
            and conv is None and encoding == "ascii" and converter is int and shape is None:
        return "int", None, None
    if t in (T.NEWDECIMAL, T.DECIMAL) and isinstance(atype, dict) and conv is None \
            and atype.get("logicalType") == "decimal" and encoding == "ascii" \
            and converter is decimal.Decimal and shape is None \
            and (connect is None or (cname == DECIMAL and adapt is not None)):
        return "decimal", int(atype.get("scale", 0)), int(atype["precision"])
    if ((t in _TEXT_TYPES and atype == "string" and conv is columns.as_text and cname is None)
            or (t == T.ENUM and _primitive(atype) == "string" and conv is None
                and cname in (None, _ENUM))) \
            and converter is None and encoding is not None \
            and codecs.lookup(encoding).name == "utf-8" and shape is None and adapt is None:
        return "text", None, None
    if _primitive(atype) == "bytes" and encoding is None and converter is None and shape is None \
            and adapt is None and cname is None:
        if conv is columns.as_bytes:
            return "bytes", None, None
        if getattr(conv, "pads_to", None) is not None:
            return "padded", conv.pads_to, None
    return _clock(col, atype, cname, adapt, encoding, converter, shape, conv) \
        or _temporal(col, field, connect, encoding, converter, shape, conv) or general


def _clock(col: Any, atype: Any, cname: Optional[str], adapt: Any, encoding: Optional[str],
           converter: Any, shape: Any, conv: Any) -> Optional[Tuple[str, Any, Any]]:
    """A TIME's or YEAR's kind, where its field is the µs or the year as they are (the
    streamer's time-micros and int, Debezium's MicroTime and Year); or None."""
    if encoding != "ascii" or shape is not None or adapt is not None:
        return None
    if col.type in (T.TIME, T.TIME2) and converter is converters.convert_timedelta \
            and conv is columns.timedelta_to_micros and isinstance(atype, dict) \
            and atype["type"] == "long" and (
                cname == "io.debezium.time.MicroTime"
                or (cname is None and atype.get("logicalType") == "streamer.time-micros")):
        return "time", None, None
    if col.type == T.YEAR and converter is int and conv is columns.year_value \
            and _primitive(atype) == "int" and cname in (None, "io.debezium.time.Year"):
        return "year", None, None
    return None


_DATES = ("io.debezium.time.Date", "org.apache.kafka.connect.data.Date")


def _temporal(col: Any, field: Dict[str, Any], connect: Any, encoding: Optional[str],
              converter: Any, shape: Any, conv: Any) -> Optional[Tuple[str, Any, Any]]:
    """A DATE's, DATETIME's or TIMESTAMP's kind, as its field (the streamer's logical type, or
    Debezium's Connect type) writes it; or None."""
    atype, t = _atype(field), col.type
    if encoding != "ascii" or shape is None or not isinstance(atype, dict):
        return None
    logical = atype.get("logicalType")
    cname = None if connect is None else connect.schema.get("name")
    adapt = None if connect is None else connect.adapt
    if t == T.DATE and conv is columns.date_to_days and converter is converters.convert_date \
            and atype["type"] == "int" and adapt is None \
            and ((connect is None and logical == "date") or cname in _DATES):
        return "date", 1, None
    if t not in (T.DATETIME2, T.TIMESTAMP2) or conv is not columns.datetime_to_micros \
            or converter is not converters.convert_datetime:
        return None
    if connect is None:
        return ("datetime", 1, None) if logical == (
            "local-timestamp-micros" if t == T.DATETIME2 else "timestamp-micros") else None
    if t == T.TIMESTAMP2:
        fsp = int(getattr(col, "fsp", 0) or 0)
        return ("zoned", 19 + (fsp and fsp + 1), None) if cname == _ZONED \
            and atype["type"] == "string" and adapt is not None else None
    long = atype["type"] == "long" and logical in (None, "timestamp-millis")
    if long and ((cname == _MICROS and adapt is None) or (cname in _MILLIS and adapt is millis)):
        return "datetime", 1 if adapt is None else 1000, None
    return None


def _general_value(where: str, encoding: Optional[str], converter: Any, shape: Any, conv: Any,
                   adapt: Any) -> Callable[[bytes], Any]:
    """A column's value, not NULL, from its text as the general way makes it: PyMySQL's
    reading (``textrows.row_reader``'s), the snapshot's shaping, the version's conversion and
    Debezium's ``adapt``; its field's writer writes it."""
    converter = FASTER.get(converter, converter)

    def value(text: bytes) -> Any:
        v: Any = text if encoding is None else text.decode(encoding)
        if converter is not None:
            v = converter(v)
        if shape is not None and v is not None:
            v = shape(v)
        if v is not None and conv is not None:
            try:
                v = conv(v)
            except UnsupportedValue as exc:
                raise UnsupportedValue(f"{where}: {exc}") from exc
        if v is not None and adapt is not None:
            v = adapt(v)
        return v
    return value


def _field(i: int, name: str, field: Dict[str, Any], kind: Tuple[str, Any, Any],
           key: bool, adapted: bool, filled: bool) -> List[str]:
    """The lines that write field ``i`` (at ``pos`` in ``data``), and into the key too when it is
    one of the key's, and move ``pos`` past it. ``adapted``: a value the general way reads
    (a decimal its fast path leaves) goes through Debezium's ``_adapt{i}`` too; ``filled``:
    a NULL is written as ``_fill{i}``, a general kind's record of the value it becomes."""
    nullable = isinstance(field["type"], list)
    if filled:
        null = [f"_write{i}(buf, _fill{i})"]
        if key:
            null = ["k = len(buf)"] + null + ["kbuf += buf[k:]"]
    elif nullable:
        null = ["buf.append(0)"] + (["kbuf.append(0)"] if key else [])
    else:
        null = [f"_null({name!r})"]
    out = ["n = data[pos]", "if n < 251:", "    pos += 1", "elif n == 251:", "    pos += 1"]
    out += ["    " + line for line in null]
    out += ["    n = -1", "else:", "    n, pos = _long_length(data, pos)", "if n >= 0:"]
    body = ["s = data[pos:pos + n]", "pos += n"]
    if key:
        body.append("k = len(buf)")
    how, a, b = kind
    if how == "general":
        body += [f"_write{i}(buf, {{{field['name']!r}: _value{i}(s)}})"]
    elif how == "memo":
        body += [f"v = _memo{i}.get(s)", "if v is None:", f"    v = _remember{i}(s)", "buf += v"]
    elif how in _TEMPORAL:
        # The general way reads an invalid date as None, so a DATE's or DATETIME's field is
        # always a union. A TIMESTAMP's is one only when the column is nullable: its zero reads
        # as 0, never None.
        write = ["write_long(buf, len(v))", "buf += v"] if how == "zoned" else [
            "write_long(buf, v)" if a == 1 else f"write_long(buf, v // {a})"]
        body.append(_TEMPORAL[how].format(i=i, a=a))
        if nullable:
            body += ["if v is None:", "    buf.append(0)", "else:", "    buf.append(2)"]
            write = ["    " + line for line in write]
        body += write
    else:
        if nullable:
            body.append("buf.append(2)")
        adapt = f", _adapt{i}" if adapted else ""
        body += [line.format(a=a, b=b, adapt=adapt) for line in _WRITE[how]]
    if key:
        body.append("kbuf += buf[k:]")
    return out + ["    " + line for line in body]
