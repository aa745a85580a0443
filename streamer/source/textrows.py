"""A snapshot's result rows, read faster than PyMySQL's generic path, to the same values.

A snapshot reads tables through the text protocol, where PyMySQL spends most of a chunk's time:
per field a few method calls, a decode and a converter, its DATETIME and TIME converters regular
expressions. ``RowsConnection`` reads the rows of a result with one function per result (made
from the result's own field list, as PyMySQL chooses encodings and converters), which walks a
row's bytes in one loop, and with converters for DATETIME/TIMESTAMP and TIME that slice the
server's fixed layout (``YYYY-MM-DD HH:MM:SS[.ffffff]``, ``[-]HHH:MM:SS[.ffffff]``). A value the
fast converters don't take as the server writes it goes to PyMySQL's own converter, so the values
are PyMySQL's, to the value (tests/unit/source/test_textrows.py compares both on every type).
"""
from __future__ import annotations

import datetime
import decimal
import sys
from typing import Any, Callable, Dict, List, Optional, Tuple

from pymysql import converters
from pymysql.connections import MySQLResult

from streamer.source import lenenc
from streamer.source.decoders import note_undecodable
from streamer.source.server import Connection, read_in_bulk
from streamer.source.vectors import VECTOR

Converter = Optional[Callable[[Any], Any]]


def fast_datetime(text: str) -> Any:
    """``YYYY-MM-DD HH:MM:SS[.f...]`` as PyMySQL's convert_datetime reads it."""
    if len(text) >= 19 and text[10] == " ":
        try:
            frac = text[20:]
            return datetime.datetime(int(text[0:4]), int(text[5:7]), int(text[8:10]),
                                     int(text[11:13]), int(text[14:16]), int(text[17:19]),
                                     int((frac + "000000")[:6]) if frac else 0)
        except ValueError:
            pass
    return converters.convert_datetime(text)


def fast_timedelta(text: str) -> Any:
    """``[-]H:MM:SS[.f...]`` as PyMySQL's convert_timedelta reads it."""
    try:
        negative = text[0] == "-"
        hours, minutes, rest = (text[1:] if negative else text).split(":")
        seconds, _, frac = rest.partition(".")
        if len(minutes) != 2 or len(seconds) != 2 or len(frac) > 6:
            raise ValueError(text)
        delta = datetime.timedelta(hours=int(hours), minutes=int(minutes), seconds=int(seconds),
                                   microseconds=int((frac + "000000")[:6]) if frac else 0)
        return -delta if negative else delta
    except (ValueError, IndexError):
        return converters.convert_timedelta(text)


def decimal_reader(pure: Any) -> Callable[[str], Any]:
    """``[-]digits[.digits]`` (how the server writes a DECIMAL) read into ``pure.Decimal``, the
    pure-Python decimal module's, as ``Decimal(text)`` reads it. That parses its text with a
    regular expression (PyPy, warm: 0.47 µs a value); built from (sign, digits, exponent) it is
    the same value, digits and exponent alike, in 0.05 µs. A text the server could not have
    written goes to Decimal itself."""
    triple = pure._dec_from_triple
    parse = pure.Decimal

    def fast_decimal(text: str) -> Any:
        negative = text[:1] == "-"
        whole, _, frac = (text[1:] if negative else text).partition(".")
        body = whole + frac
        if whole and body.isascii() and body.isdigit():
            return triple(1 if negative else 0, body.lstrip("0") or "0", -len(frac))
        return parse(text)
    return fast_decimal


# PyPy's decimal is the pure-Python one (it star-imports _pydecimal); CPython's C Decimal parses
# its text fast and is left to do so.
_PURE = sys.modules.get("_pydecimal")
fast_decimal = (decimal_reader(_PURE) if _PURE is not None and decimal.Decimal is _PURE.Decimal
                else decimal.Decimal)

FASTER = {converters.convert_datetime: fast_datetime,
          converters.convert_timedelta: fast_timedelta,
          decimal.Decimal: fast_decimal}


def row_reader(plan: List[Tuple[Optional[str], Converter]]) -> Callable[[bytes], tuple]:
    """The function that turns one row packet's bytes into PyMySQL's tuple for ``plan``, the
    result's (encoding, converter) per field."""
    fields = [(encoding, FASTER.get(converter, converter)) for encoding, converter in plan]

    def read(data: bytes) -> tuple:
        pos = 0
        end = len(data)
        row: List[Any] = []
        for encoding, converter in fields:
            if pos >= end:  # a row shorter than the fields, as PyMySQL takes it
                break
            n = data[pos]
            if n < 251:
                pos += 1
            elif n == 251:  # NULL
                pos += 1
                row.append(None)
                continue
            elif n == 252:
                n = data[pos + 1] | data[pos + 2] << 8
                pos += 3
            elif n == 253:
                n = data[pos + 1] | data[pos + 2] << 8 | data[pos + 3] << 16
                pos += 4
            else:
                n = int.from_bytes(data[pos + 1:pos + 9], "little")
                pos += 9
            value: Any = data[pos:pos + n]
            pos += n
            if encoding is not None:
                value = value.decode(encoding)
            if converter is not None:
                value = converter(value)
            row.append(value)
        return tuple(row)
    return read


def readable(plan: List[Tuple[Optional[str], Converter]],
             data: bytes) -> Tuple[bytes, List[Tuple[int, bytes, str]]]:
    """A row packet with text ``plan``'s encodings can't read (MariaDB sends a lone UTF-16
    surrogate of a ucs2 column as three bytes no UTF-8 character stands for), made
    readable: each such field's text as the binlog's reader publishes it, a '?' for each
    character no encoding has ("mysql-replace": source.decoders); and (field, its bytes as sent,
    its text) of each field changed."""
    out = bytearray()
    changed = []
    pos, end = 0, len(data)
    for i, (encoding, _) in enumerate(plan):
        if pos >= end:
            break
        if data[pos] == 251:  # NULL
            out.append(251)
            pos += 1
            continue
        n, pos = lenenc.read(data, pos)
        raw = data[pos:pos + n]
        pos += n
        if encoding is not None:
            try:
                raw.decode(encoding)
            except UnicodeDecodeError:
                text = raw.decode(encoding, "mysql-replace")
                changed.append((i, bytes(raw), text))
                raw = text.encode(encoding)
        out += lenenc.write(len(raw))
        out += raw
    out += data[pos:]
    return bytes(out), changed


# The key readers made, by (plan, indexes): every chunk of a table has the same, and a function
# generated again is new code to the JIT, compiled again from cold for each chunk (under PyPy
# that cost ~1.3 µs a row of 10,000-row chunks: docs/benchmarks.md, "One key reader a table").
_KEY_READERS: Dict[Tuple[Any, ...], Callable[[bytes], tuple]] = {}
KEY_READERS_KEPT = 256  # layouts; past that the cache starts again (tables are not that many)


def key_reader(plan: List[Tuple[Optional[str], Converter]],
               indexes: List[int]) -> Callable[[bytes], tuple]:
    """The function that reads the fields at ``indexes`` of a row packet for ``plan`` into the
    values ``row_reader``'s would give them: straight-line code generated for the fields up to
    the last of them, the others only stepped over (a chunk reads its key of every row). Made
    once per plan and indexes."""
    layout = (tuple(plan), tuple(indexes))
    read = _KEY_READERS.get(layout)
    if read is None:
        if len(_KEY_READERS) >= KEY_READERS_KEPT:
            _KEY_READERS.clear()
        read = _KEY_READERS[layout] = _generate_key_reader(plan, indexes)
    return read


def _generate_key_reader(plan: List[Tuple[Optional[str], Converter]],
                         indexes: List[int]) -> Callable[[bytes], tuple]:
    wanted = set(indexes)
    namespace: Dict[str, Any] = {"_read_length": lenenc.read}
    lines = ["def read_key(data):", "    pos = 0"]
    for i in range(max(indexes) + 1):
        lines += ["    n = data[pos]", "    if n < 251:", "        pos += 1",
                  "    elif n == 251:", "        pos += 1", "        n = -1", "    else:",
                  "        n, pos = _read_length(data, pos)"]
        if i in wanted:
            encoding, converter = plan[i]
            converter = FASTER.get(converter, converter)
            value = "data[pos:pos + n]"
            if converter is int and encoding == "ascii":
                value = f"int({value})"  # the digits: int() reads bytes as it reads text
            else:
                if encoding is not None:
                    value = f"{value}.decode({encoding!r})"
                if converter is not None:
                    namespace[f"_convert{i}"] = converter
                    value = f"_convert{i}({value})"
            lines.append(f"    v{i} = None if n < 0 else {value}")
        if i < max(indexes):
            lines += ["    if n > 0:", "        pos += n"]
    lines.append("    return (" + "".join(f"v{i}, " for i in indexes) + ")")
    exec(compile("\n".join(lines), "<chunk key reader>", "exec"), namespace)  # noqa: S102
    return namespace["read_key"]


class FastResult(MySQLResult):
    """A result whose rows are read by ``row_reader``: all at once (buffered), or one by one as
    they are asked for (unbuffered: ``_read_row_from_packet``)."""

    _row_read: Optional[Callable[[bytes], tuple]] = None

    def _get_descriptions(self) -> None:
        """PyMySQL's fields and (encoding, converter) per field; a MySQL 9 VECTOR field's value,
        its 32-bit floats (source.vectors), kept as the bytes they are: PyMySQL doesn't know its
        type, and would decode them as ASCII text."""
        super()._get_descriptions()
        for i, field in enumerate(self.fields):
            if field.type_code == VECTOR:
                self.converters[i] = (None, None)

    def _read_row_from_packet(self, packet: Any) -> tuple:
        try:
            return self.reader()(packet._data)
        except UnicodeDecodeError:
            return self.reader()(self.readable(packet._data))

    def reader(self) -> Callable[[bytes], tuple]:
        """The function that reads one of this result's row packets into PyMySQL's tuple."""
        read = self._row_read
        if read is None:
            read = self._row_read = row_reader(self.converters)
        return read

    def readable(self, data: bytes) -> bytes:
        """One of this result's row packets that ``reader`` can't read for its text, made
        readable (``readable``), each value changed counted and logged with its column, as the
        binlog's reader does (source.decoders): published as the binlog's would be."""
        fixed, changed = readable(self.converters, data)
        # The fields it changed, each with the first bytes changed (``unreadable``: made once a
        # value needs it, bounded by the fields however many rows are made readable).
        unreadable: Dict[int, bytes] = self.__dict__.setdefault("unreadable", {})
        for i, raw, text in changed:
            unreadable.setdefault(i, raw)
            field, db = self.fields[i], self.fields[i].db
            note_undecodable(db.decode("utf-8", "replace") if isinstance(db, bytes) else db,
                             field.org_table or field.table_name, field.org_name or field.name,
                             self.converters[i][0], raw, text,
                             "a snapshot's SELECT, the text as the server sent it")
        return fixed

    def key_reader(self, indexes: List[int]) -> Callable[[bytes], tuple]:
        """The function that reads the values of the fields at ``indexes`` of a row packet, as
        ``reader``'s would, without reading the fields after the last of them."""
        return key_reader(self.converters, indexes)

    def read_payloads(self, n: int) -> List[bytes]:
        """Up to ``n`` more row packets of an unbuffered result, as the server sent them (read
        with ``reader``), in one loop; fewer once it ended."""
        rows: List[bytes] = []
        if not self.unbuffered_active:
            return rows
        read_packet = self.connection._read_packet
        while len(rows) < n:
            packet = read_packet()  # an error packet raises, and ends the result
            if self._check_packet_is_eof(packet):
                self.unbuffered_active = False
                self.connection = None
                break
            rows.append(packet._data)
        return rows

    def close(self) -> None:
        """Read what is left of an unbuffered result, so the connection can be used again.
        Nothing is left to read on a connection that broke under it (a KILL, 2013): PyMySQL
        closed it, and reading it raised AttributeError."""
        if self.unbuffered_active and self.connection is not None and self.connection.open:
            self._finish_unbuffered_query()
        self.unbuffered_active = False

    def _read_rowdata_packet(self) -> None:
        read_packet = self.connection._read_packet
        read = row_reader(self.converters)
        rows = []
        while True:
            packet = read_packet()
            if self._check_packet_is_eof(packet):
                self.connection = None
                break
            try:
                rows.append(read(packet._data))
            except UnicodeDecodeError:
                rows.append(read(self.readable(packet._data)))
        self.affected_rows = len(rows)
        self.rows = tuple(rows)


class RowsConnection(Connection):
    """A connection whose results are FastResults (a snapshot's chunk reader), read from the
    socket in bulk (``server.read_in_bulk``)."""

    def connect(self, sock: Any = None) -> None:
        super().connect(sock)
        read_in_bulk(self)

    def unbuffered(self, sql: str) -> FastResult:
        """``sql``'s result, its rows read from the server as they are asked for
        (``FastResult.read_payloads``)."""
        self.query(sql, unbuffered=True)
        return self._result

    def _read_query_result(self, unbuffered: bool = False) -> Any:
        self._result = None
        result = FastResult(self)
        if unbuffered:
            result.init_unbuffered_query()
        else:
            result.read()
        self._result = result
        if result.server_status is not None:
            self.server_status = result.server_status
        return result.affected_rows
