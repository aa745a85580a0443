"""Corrections to python-mysql-replication's value decoding, applied once at import.

Each fix names the wrong behaviour it replaces and is covered by the type round-trip tests.

- TIME(1..6) with a negative value: the library reads the integer and fractional parts
  separately, so '-00:00:00.000001' came back as -0.999999 s. MySQL packs both parts into
  one offset integer (see the server's my_time.cc); we decode it as such.

And speed fixes for the hot path (same results, measured with vmprof under PyPy):

- Every table-map event built a ``Table`` whose primary key was found through each column's
  ``data`` property, a dict of all its attributes built per call: ~17% of a bulk catch-up.
- Strings in latin1 (MySQL's latin1 is cp1252) went through Python's charmap codec, slow on
  PyPy: ~9%. Text that is pure ASCII decodes the same in every ASCII-compatible charset, so it
  takes the ASCII path.
- A table-map event was parsed in full before each transaction's rows, its optional metadata
  (column names, charsets, keys) included: ~30 % of a live OLTP load of single-row
  transactions. While a table is unchanged its table-map events are the same bytes, so the
  parse of those bytes is kept and the next such event takes it over (see _table_map_init).
- DECIMAL columns were decoded into a digit string, read by ``Decimal(str)``: ~13% of a bulk
  catch-up with one DECIMAL column under PyPy, whose decimal module is pure Python and parses
  the string with a regular expression. We read the packed groups into the unscaled integer and
  build the Decimal from (sign, digits, exponent), with the same value and exponent.

And one for start-up: pymysql 1.2 prefers TLS when no TLS option is given, and builds a new
context for it on every connection, loading the system's CA bundle although that context
verifies nothing (no CA given: CERT_NONE). That is 66 ms per connection under PyPy, ~260 ms of
each start (four connections). The context for that case is now built once and shared, and
without the CA bundle it never reads (~60 ms under either interpreter); what it does with a
server that offers TLS, and one that does not, is unchanged.
"""
from __future__ import annotations

import datetime
import decimal
import ssl
import sys
from typing import Any, Callable, Dict, List, Tuple

from pymysql.connections import Connection
from pymysqlreplication.row_event import RowsEvent, TableMapEvent
from pymysqlreplication.table import Table

_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000


def time2_micros(packed: int) -> int:
    """A MySQL 'packed' TIME (hms << 24 | microseconds, signed) as signed microseconds."""
    magnitude = -packed if packed < 0 else packed
    hms = magnitude >> 24
    micros = (((hms >> 12) & 0x3FF) * 3600 + ((hms >> 6) & 0x3F) * 60 + (hms & 0x3F)) * 1000000 \
        + (magnitude & 0xFFFFFF)
    return -micros if packed < 0 else micros


def time2_from_packed(packed: int) -> datetime.timedelta:
    """A MySQL 'packed' TIME as a timedelta."""
    return datetime.timedelta(microseconds=time2_micros(packed))


def time2_packed_from_binary(raw: bytes, fsp: int) -> int:
    """The packed value of a TIME2 column's binlog bytes (3 + (fsp + 1) // 2 bytes)."""
    if fsp >= 5:
        return int.from_bytes(raw[:6], "big") - _TIMEF_OFS
    intpart = int.from_bytes(raw[:3], "big") - _TIMEF_INT_OFS
    if fsp == 0:
        return intpart << 24
    if fsp <= 2:
        frac = raw[3]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        return (intpart << 24) + frac * 10000
    frac = int.from_bytes(raw[3:5], "big")
    if intpart < 0 and frac:
        intpart += 1
        frac -= 0x10000
    return (intpart << 24) + frac * 100


def _read_time2(self: Any, column: Any) -> datetime.timedelta:
    fsp = column.fsp or 0
    raw = self.packet.read(3 + (fsp + 1) // 2)
    return time2_from_packed(time2_packed_from_binary(raw, fsp))


_ASCII_COMPATIBLE = frozenset(["latin1", "utf8", "utf8mb3", "utf8mb4", "ascii", "cp1252"])


def _read_string(self: Any, size: int, column: Any) -> Any:
    raw = self.packet.read_length_coded_pascal_string(size)
    name = column.character_set_name
    if name in _ASCII_COMPATIBLE and raw.isascii():
        return raw.decode("ascii")
    errors = "ignore" if self._ignore_decode_errors else "strict"
    if name is None:
        return raw.decode("utf-8", errors)
    try:
        return raw.decode(self.charset_to_encoding(name), errors)
    except LookupError:
        # No Python codec (e.g. 'binary', 'swe7'): hand back the stored bytes.
        return raw


def _table_init(self: Any, table_id: int, schema: str, table: str, columns: Any,
                primary_key: Any = None, column_name_flag: bool = False) -> None:
    if primary_key is None:
        names = [c.name for c in columns if c.is_primary]
        primary_key = "" if not names else names[0] if len(names) == 1 else tuple(names)
    self.__dict__.update({"table_id": table_id, "schema": schema, "table": table,
                          "columns": columns, "primary_key": primary_key,
                          "column_name_flag": column_name_flag})


# The packet wrapper reads the OK byte and the 19-byte event header before the event's own reads.
_EVENT_BODY_AT = 20
TABLE_MAP_CACHE = 4096  # parsed table maps kept; a changed table's maps are new bytes, so old ones go stale
_table_maps: Dict[bytes, Dict[str, Any]] = {}
# The stream the kept parses belong to (the library's table_map dict, one per stream; a
# streamer reads one stream at a time), and whether they may be used for it.
_stream: List[Any] = [None, False]
# Library filters, names looked up on the server, and checksum checks (a field per event) make
# a parse depend on more than the event's bytes; the streamer uses none of them.
_FILTERS = ("only_tables", "ignored_tables", "only_schemas", "ignored_schemas")
_STEP_ASIDE = ("freeze_schema", "use_column_name_cache", "verify_checksum")


def _table_map_init(parse: Callable[..., None]) -> Callable[..., None]:
    """TableMapEvent.__init__ that parses each distinct event body (the checksum and the header,
    with its timestamp and position, left out) once per stream. A later event with the same
    bytes takes over the first parse, the same Table object included, with its own packet and
    timestamp: the only fields BinLogEvent.__init__ takes from the event. The others it sets
    come from the stream (its connection, server and options), and parses are kept for one
    stream at a time, so they are the stream's. A table's definition is in its table-map bytes
    (with binlog_row_metadata=FULL its names, keys and charsets too), so the same bytes parse
    the same."""
    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any,
                 ctl_connection: Any, **kwargs: Any) -> None:
        if table_map is not _stream[0]:
            _table_maps.clear()
            _stream[0] = table_map
            _stream[1] = not any(kwargs.get(k) for k in _STEP_ASIDE) and \
                all(kwargs.get(k) is None for k in _FILTERS)
        if not _stream[1]:
            parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
            return
        body = from_packet.packet.get_bytes(_EVENT_BODY_AT + from_packet.read_bytes, event_size)
        known = _table_maps.get(body)
        if known is None:
            parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
            if len(_table_maps) >= TABLE_MAP_CACHE:
                _table_maps.clear()
            _table_maps[body] = dict(self.__dict__)
            return
        state = known.copy()
        state["packet"] = from_packet
        state["timestamp"] = from_packet.timestamp
        self.__dict__ = state
        if state["_processed"]:
            table_map[state["table_id"]] = state["table_obj"]
    __init__.caches_table_maps = True  # type: ignore[attr-defined]
    return __init__


# MySQL packs a DECIMAL as groups of 9 digits in 4 bytes; a shorter leading integral group and
# trailing fractional group take the fewest bytes that hold their digits (the server's decimal.cc).
_DIG_PER_INT = 9
_BYTES_FOR_DIGITS = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
Layout = Tuple[int, List[Tuple[int, int, int]]]
_layouts: Dict[Tuple[int, int], Layout] = {}


def decimal_layout(precision: int, scale: int) -> Layout:
    """(bytes, [(bit shift, bit mask, 10 ** digits) per group, most significant first]) of a
    DECIMAL(precision, scale), computed once per column type."""
    key = (precision, scale)
    found = _layouts.get(key)
    if found is None:
        integral = precision - scale
        sizes = []  # (bytes, digits)
        if integral % _DIG_PER_INT:
            sizes.append((_BYTES_FOR_DIGITS[integral % _DIG_PER_INT], integral % _DIG_PER_INT))
        sizes += [(4, _DIG_PER_INT)] * (integral // _DIG_PER_INT + scale // _DIG_PER_INT)
        if scale % _DIG_PER_INT:
            sizes.append((_BYTES_FOR_DIGITS[scale % _DIG_PER_INT], scale % _DIG_PER_INT))
        total = sum(n for n, _ in sizes)
        groups = []
        shift = total * 8
        for nbytes, digits in sizes:
            shift -= nbytes * 8
            groups.append((shift, (1 << nbytes * 8) - 1, 10 ** digits))
        found = _layouts[key] = (total, groups)
    return found


def decimal_unscaled(raw: bytes, groups: List[Tuple[int, int, int]]) -> Tuple[int, int]:
    """(sign, unscaled magnitude) of a packed DECIMAL: the top bit is set for a non-negative
    value, and a negative one is stored with every bit inverted."""
    bits = len(raw) * 8
    packed = int.from_bytes(raw, "big") ^ (1 << bits - 1)
    negative = not raw[0] & 0x80
    if negative:
        packed ^= (1 << bits) - 1
    unscaled = 0
    for shift, mask, scale in groups:
        unscaled = unscaled * scale + ((packed >> shift) & mask)
    return (1 if negative else 0), unscaled


def _decimal_factory() -> Callable[[int, int, int], decimal.Decimal]:
    """Decimal from (sign, unscaled, scale), with exponent -scale as Decimal('1.2300') has.
    PyPy's pure-Python decimal builds one from its parts directly; CPython's C decimal parses
    a string fast."""
    # PyPy's decimal star-imports _pydecimal, which keeps the helper to itself; CPython loads
    # its C decimal and not _pydecimal at all.
    pure = sys.modules.get("_pydecimal")
    if pure is not None and decimal.Decimal is pure.Decimal:
        triple = pure._dec_from_triple
        return lambda sign, unscaled, scale: triple(sign, str(unscaled), -scale)
    return lambda sign, unscaled, scale: decimal.Decimal(
        f"{'-' if sign else ''}{unscaled}E-{scale}")


make_decimal = _decimal_factory()


def _read_new_decimal(self: Any, column: Any) -> decimal.Decimal:
    scale = column.decimals
    size, groups = decimal_layout(column.precision, scale)
    sign, unscaled = decimal_unscaled(self.packet.read(size), groups)
    return make_decimal(sign, unscaled, scale)


_PREFERRED_TLS: List[Any] = []


def _unverified_tls() -> ssl.SSLContext:
    """What pymysql builds for TLS with no option given, less the CA bundle it loads and, with
    verification off, never consults."""
    # The stdlib's unverified sibling of create_default_context: the same protocol and options
    # for this Python version, and no CA bundle when nothing is verified (PEP 476).
    ctx = ssl._create_unverified_context()
    ctx.verify_flags &= ~ssl.VERIFY_X509_STRICT
    ctx.options |= ssl.OP_NO_SSLv2 | ssl.OP_NO_SSLv3
    return ctx


def _shared_preferred_tls(create: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def create_ssl_ctx(self: Any, sslp: Any) -> Any:
        if isinstance(sslp, dict) and not sslp:  # preferred TLS, no option given
            if not _PREFERRED_TLS:
                _PREFERRED_TLS.append(_unverified_tls())
            return _PREFERRED_TLS[0]
        return create(self, sslp)
    create_ssl_ctx.shares_preferred_tls = True  # type: ignore[attr-defined]
    create_ssl_ctx.__wrapped__ = create  # type: ignore[attr-defined]
    return create_ssl_ctx


def apply() -> None:
    create = getattr(Connection, "_create_ssl_ctx", None)
    if create is not None and not getattr(create, "shares_preferred_tls", False):
        Connection._create_ssl_ctx = _shared_preferred_tls(create)  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_new_decimal = _read_new_decimal  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_time2 = _read_time2  # type: ignore[attr-defined]
    RowsEvent._RowsEvent__read_string = _read_string  # type: ignore[attr-defined]
    Table.__init__ = _table_init  # type: ignore[method-assign]
    if not getattr(TableMapEvent.__init__, "caches_table_maps", False):
        TableMapEvent.__init__ = _table_map_init(TableMapEvent.__init__)  # type: ignore[method-assign]
