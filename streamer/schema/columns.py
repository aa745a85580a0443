"""MySQL column type -> Avro type and value converter, as one table of pure functions.

Each entry turns the value python-mysql-replication hands back into the value the
Avro writer takes. ``None`` never reaches a converter: NULL is handled by the row
schema (a ``["null", T]`` union for nullable columns).
"""
from __future__ import annotations

import decimal
import json
from typing import Any, Callable, Dict, List, Optional, Tuple

from pymysqlreplication.constants import FIELD_TYPE as T

from streamer.errors import UnsupportedColumn, UnsupportedValue
from streamer.source.rowplan import EPOCH_ORDINAL
from streamer.source.vectors import VECTOR, floats

Converter = Optional[Callable[[Any], Any]]

# Proleptic ordinal of 1970-01-01: Avro dates and timestamps count from it (rowplan shares it).
_ZERO_YEAR_AS_READ = 1900  # the reader adds 1900 to the stored byte; YEAR '0000' is byte 0


# The temporal converters take an int as already converted: the streamer's own row reader
# (rowplan) reads these types straight into days or microseconds. The library's reader, which
# still reads some rows, hands back date, datetime and timedelta objects.

def date_to_days(value: Any) -> int:
    if value.__class__ is int:
        return value
    return value.toordinal() - EPOCH_ORDINAL


def datetime_to_micros(value: Any) -> int:
    """Wall-clock (or naive UTC) datetime -> microseconds since 1970-01-01 00:00."""
    if value.__class__ is int:
        return value
    days = value.toordinal() - EPOCH_ORDINAL
    secs = days * 86400 + value.hour * 3600 + value.minute * 60 + value.second
    return secs * 1000000 + value.microsecond


def timedelta_to_micros(value: Any) -> int:
    if value.__class__ is int:
        return value
    return (value.days * 86400 + value.seconds) * 1000000 + value.microseconds


def year_value(value: int) -> int:
    return 0 if value == _ZERO_YEAR_AS_READ else value


def unsigned_bigint(value: int) -> decimal.Decimal:
    return decimal.Decimal(value)


def json_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8")
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def as_bytes(value: Any) -> bytes:
    if isinstance(value, str):
        # A column the reader could not tell is binary: keep the exact bytes MySQL stored.
        return value.encode("utf-8", "surrogateescape")
    return bytes(value)


def as_text(value: Any) -> str:
    if isinstance(value, bytes):
        raise UnsupportedValue("a text value the streamer can't decode in the column's "
                               "character set (a charset Python has no codec for, whose table "
                               "the server didn't give). Exclude or mask the column "
                               "(tables.columns), or convert it to utf8mb4")
    return value


def _bit_converter(nbytes: int) -> Callable[[str], bytes]:
    def convert(bits: str) -> bytes:
        return int(bits, 2).to_bytes(nbytes, "big")
    return convert


def _padded(length: int) -> Callable[[Any], bytes]:
    def convert(value: Any) -> bytes:
        return as_bytes(value).ljust(length, b"\0")
    convert.pads_to = length  # type: ignore[attr-defined]  # schema.textavro pads the text so
    return convert


def _set_converter(members: Tuple[str, ...]) -> Callable[[Any], str]:
    def convert(value: Any) -> str:
        return ",".join(m for m in members if m in value)
    return convert


# MariaDB's data-type plugins (source.definitions): the binlog has their storage bytes
# (BINARY(16) or (4), trailing zero bytes dropped), SELECT and a snapshot their text. Both are
# published as the text the server shows.

def _fixed(value: Any, size: int) -> bytes:
    return as_bytes(value).ljust(size, b"\0")


def uuid_text(value: Any) -> str:
    """A MariaDB UUID as SELECT shows it: 32 lower-case hex digits in 8-4-4-4-12 groups."""
    if isinstance(value, str):
        return value
    h = _fixed(value, 16).hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def inet4_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    return ".".join(str(b) for b in _fixed(value, 4))


def inet6_text(value: Any) -> str:
    """A MariaDB INET6 as SELECT shows it: lower-case hex words, the longest run of zero words
    (the first of equals) as '::', even a run of one, where RFC 5952 and inet_ntop would write
    a 0 (the server's INET6_NTOA does so too), and the last 32 bits as an IPv4 address after
    96 zero bits (but '::' and '::x') or after ::ffff (tests/unit/source/test_definitions.py
    holds the server's own answers)."""
    if isinstance(value, str):
        return value
    data = _fixed(value, 16)
    words = [int.from_bytes(data[i:i + 2], "big") for i in range(0, 16, 2)]
    best_at, best_len, run_at = -1, 0, -1
    for i, word in enumerate(words + [1]):
        if word == 0 and i < 8:
            if run_at < 0:
                run_at = i
        elif run_at >= 0:
            if i - run_at > best_len:
                best_at, best_len = run_at, i - run_at
            run_at = -1
    parts, i = [], 0
    while i < 8:
        if i == best_at:
            parts.append("")
            if i == 0:
                parts.append("")
            i += best_len
            if i == 8:
                parts.append("")
            continue
        if i == 6 and best_at == 0 and (best_len == 6 or (best_len == 5 and words[5] == 0xFFFF)):
            parts.append(".".join(str(b) for b in data[12:]))
            break
        parts.append(f"{words[i]:x}")
        i += 1
    text = ":".join(parts)
    return "::" if text == ":::" else text


# A VECTOR's Avro type (MySQL 9's, MariaDB's): its 32-bit floats.
FLOATS = {"type": "array", "items": "float"}


def vector_floats(value: Any) -> List[float]:
    """MariaDB's VECTOR (11.7+): a VARBINARY of 32-bit floats, as MySQL 9's VECTOR's bytes."""
    return floats(as_bytes(value))


PLUGINS: Dict[str, Tuple[Any, Callable[[Any], Any]]] = {
    "uuid": ({"type": "string", "logicalType": "uuid"}, uuid_text),
    "inet6": ("string", inet6_text),
    "inet4": ("string", inet4_text),
    "vector": (FLOATS, vector_floats),
}


_INTS = {T.TINY: "int", T.SHORT: "int", T.INT24: "int", T.LONG: "int", T.LONGLONG: "long"}
_TEXT_TYPES = (T.VARCHAR, T.VAR_STRING, T.STRING, T.BLOB, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)


def _is_binary(column: Any) -> bool:
    return getattr(column, "character_set_name", None) in (None, "binary")


def avro_type(column: Any, plugin: Optional[str] = None) -> Tuple[Any, Converter, str]:
    """(Avro type, converter or None, short MySQL type name) for one binlog column; ``plugin``
    names the MariaDB data-type plugin its table's definition gives it (source.definitions)."""
    if plugin is not None:
        atype, convert = PLUGINS[plugin]
        return atype, convert, plugin
    t = column.type
    if t in _INTS:
        if column.unsigned and t == T.LONGLONG:
            return ({"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0},
                    unsigned_bigint, "bigint unsigned")
        if column.unsigned and t == T.LONG:
            return "long", None, "int unsigned"
        return _INTS[t], None, "integer"
    if t == T.FLOAT:
        return "float", None, "float"
    if t == T.DOUBLE:
        return "double", None, "double"
    if t in (T.NEWDECIMAL, T.DECIMAL):
        return ({"type": "bytes", "logicalType": "decimal", "precision": column.precision,
                 "scale": column.decimals}, None, "decimal")
    if t in _TEXT_TYPES:
        if _is_binary(column):
            if t == T.STRING:
                # The binlog drops BINARY(n)'s trailing zero bytes; a client sees all n.
                return "bytes", _padded(column.max_length), "binary"
            return "bytes", as_bytes, "binary"
        return "string", as_text, "text"
    if t == T.JSON:
        return "string", json_text, "json"
    if t in (T.DATE, T.NEWDATE):
        return {"type": "int", "logicalType": "date"}, date_to_days, "date"
    if t in (T.DATETIME, T.DATETIME2):
        return ({"type": "long", "logicalType": "local-timestamp-micros"}, datetime_to_micros,
                "datetime")
    if t in (T.TIMESTAMP, T.TIMESTAMP2):
        return {"type": "long", "logicalType": "timestamp-micros"}, datetime_to_micros, "timestamp"
    if t in (T.TIME, T.TIME2):
        # Avro's time-micros is limited to one day; MySQL TIME spans -838:59:59..838:59:59.
        return ({"type": "long", "logicalType": "streamer.time-micros"}, timedelta_to_micros,
                "time")
    if t == T.YEAR:
        return "int", year_value, "year"
    if t == T.ENUM:
        return "string", None, "enum"
    if t == T.SET:
        return "string", _set_converter(tuple(column.set_values or ())), "set"
    if t == T.BIT:
        return "bytes", _bit_converter(column.bytes), "bit"
    if t == T.GEOMETRY:
        return "bytes", as_bytes, "geometry"
    if t == VECTOR:  # MySQL 9's (source.vectors): its 32-bit floats
        return FLOATS, floats, "vector"
    raise UnsupportedColumn(f"MySQL column type code {t} of column '{column.name}' has no Avro "
                            f"mapping; exclude the table with 'tables.exclude' or open an issue")


# Temporal columns are always nullable in Avro: MySQL zero dates ('0000-00-00') and other
# out-of-range values have no Avro representation and are published as null.
ALWAYS_NULLABLE = frozenset(["date", "datetime"])

# The README documents this table; tests check that every entry is exercised.
DOC: Dict[str, str] = {
    "TINYINT/SMALLINT/MEDIUMINT/INT (signed)": "int",
    "INT UNSIGNED": "long",
    "BIGINT": "long",
    "BIGINT UNSIGNED": "bytes, logicalType decimal(20,0)",
    "FLOAT / DOUBLE": "float / double",
    "DECIMAL(p,s)": "bytes, logicalType decimal(p,s)",
    "CHAR/VARCHAR/TEXT, ENUM, JSON": "string",
    "SET": "string, members in definition order joined by ','",
    "BINARY/VARBINARY/BLOB, GEOMETRY": "bytes",
    "BIT(n)": "bytes, big-endian, ceil(n/8) long",
    "DATE": "int, logicalType date (nullable: zero date -> null)",
    "DATETIME(0-6)": "long, logicalType local-timestamp-micros (wall clock; zero -> null)",
    "TIMESTAMP(0-6)": "long, logicalType timestamp-micros (UTC instant)",
    "TIME(0-6)": "long, logicalType streamer.time-micros (signed, may exceed 24 h)",
    "YEAR": "int (0 for YEAR 0000)",
    "UUID (MariaDB)": "string, logicalType uuid, as SELECT shows it",
    "INET6, INET4 (MariaDB)": "string, as SELECT shows it",
}
