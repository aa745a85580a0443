"""Fixes to python-mysql-replication's table-map events (source.patches applies them).

Correctness fixes (``completed``), of what the library's parse of the optional metadata leaves
wrong:

- A map without column names (``binlog_row_metadata`` set to MINIMAL while streamed): the library
  took the names the table has now from the server (as bytes on MariaDB, which stopped the
  streamer with a TypeError); they are dropped, so that a published table's map is refused by
  the catalog with the setting to fix (``MissingColumnNames``), as on MySQL.
- An ENUM's or SET's members are written in the table map in the column's charset; the library
  decoded them as UTF-8, and a member that wasn't (latin1 'café') became "": its values were
  published as "" (a SET's as ",x"), in silence. The members are kept as bytes
  (``read_type_values``) and decoded in the column's charset as a value is.
- A primary key with a prefix part (``PRIMARY KEY (id, name(10))``, any key on a TEXT) is
  written as PRIMARY_KEY_WITH_PREFIX, which the library reads and leaves unused: no column was
  a key column, and the table was published keyless (no key, no tombstones) while its snapshot
  was keyed. Its columns are the key, their whole values (as a snapshot's are).

And speed fixes:

- Every table-map event built a ``Table`` whose primary key was found through each column's
  ``data`` property, a dict of all its attributes built per call (~17 % of a bulk catch-up).
- A table-map event was parsed in full before each transaction's rows, its optional metadata
  (column names, charsets, keys) included (~30 % of a live OLTP load of single-row
  transactions). While a table is unchanged its table-map events are the same bytes, so the
  parse of those bytes is kept and the next such event takes it over (``cached_init``).
- Every rows event asked its table for ``data["primary_key"]``, and ``Table.data`` built a
  dict of the table's attributes per call (~7 % of an OLTP catch-up of single-row
  transactions). A table's attributes are set once, when it is built, so the dict is built
  once too (``table_data``).

docs/benchmarks.md has the profiles behind both numbers.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, List, Optional

from pymysqlreplication.row_event import RowsEvent

from streamer.source import decoders


def table_init(self: Any, table_id: int, schema: str, table: str, columns: Any,
                primary_key: Any = None, column_name_flag: bool = False) -> None:
    if primary_key is None:
        names = [c.name for c in columns if c.is_primary]
        primary_key = "" if not names else names[0] if len(names) == 1 else tuple(names)
    self.__dict__.update({"table_id": table_id, "schema": schema, "table": table,
                          "columns": columns, "primary_key": primary_key,
                          "column_name_flag": column_name_flag})


def table_data(self: Any) -> Dict[str, Any]:
    """Table.data: the table's public attributes, built at the first call and kept (under a
    private name, which ``data`` leaves out). The library sets them only when it builds the
    table, and never changes the dict it gets."""
    state = self.__dict__
    data = state.get("_data")
    if data is None:
        data = {k: v for k, v in state.items() if not k.startswith("_")}
        state["_data"] = data
    return data


# The packet wrapper reads the OK byte and the 19-byte event header before the event's own reads.
_EVENT_BODY_AT = 20
TABLE_MAP_CACHE = 4096  # parsed table maps kept; a changed table's maps are new bytes, so old ones go stale
# The stream being read: its table_map dict (the library's, one per stream), whether its
# parses may be kept, and its parses (event body -> the parsed event's attributes). Changed in
# place, never rebound: under PyPy the JIT's code would be thrown away at each rebinding.
_stream: List[Any] = [None, False, {}]
# The last few other streams, the same three each, by id of their table_map dict. Streams
# alternate: the JIT warm-up's replayed ones run between the live stream's batches (engine.warmup),
# and the live stream would otherwise parse its table maps again after each.
_others: Dict[int, List[Any]] = {}
STREAMS_KEPT = 4
# Library filters, names looked up on the server, and checksum checks (a field per event) make
# a parse depend on more than the event's bytes; the streamer uses none of them.
_FILTERS = ("only_tables", "ignored_tables", "only_schemas", "ignored_schemas")
_STEP_ASIDE = ("freeze_schema", "use_column_name_cache", "verify_checksum")


def cached_init(parse: Callable[..., None]) -> Callable[..., None]:
    """TableMapEvent.__init__ that parses each distinct event body (the checksum and the header,
    with its timestamp and position, left out) once per stream. A later event with the same
    bytes takes over the first parse, the same Table object included, with its own packet and
    timestamp: the only fields BinLogEvent.__init__ takes from the event. The others it sets
    come from the stream (its connection, server and options), and parses are kept per
    stream (``_switch``), so they are the stream's. A table's definition is in its table-map bytes
    (with binlog_row_metadata=FULL its names, keys and charsets too), so the same bytes parse
    the same."""
    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any,
                 ctl_connection: Any, **kwargs: Any) -> None:
        stream = _stream
        if table_map is not stream[0]:
            _switch(table_map, kwargs)
        if not stream[1]:
            parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
            return
        parses = stream[2]
        body = from_packet.packet.get_bytes(_EVENT_BODY_AT + from_packet.read_bytes, event_size)
        known = parses.get(body)
        if known is None:
            parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
            if len(parses) >= TABLE_MAP_CACHE:
                parses.clear()
            parses[body] = dict(self.__dict__)
            return
        state = known.copy()
        state["packet"] = from_packet
        state["timestamp"] = from_packet.timestamp
        self.__dict__ = state
        if state["_processed"]:
            table_map[state["table_id"]] = state["table_obj"]
    return __init__


def _switch(table_map: Any, kwargs: Dict[str, Any]) -> None:
    """Make ``table_map``'s stream the current one, with its parses if it is one of the last
    few read (the same dict: a stream's identity), and keep the one it replaces."""
    old = _stream[0]
    if old is not None:  # never among the others: the current stream was taken out of them
        _others[id(old)] = list(_stream)
        while len(_others) > STREAMS_KEPT:
            del _others[next(iter(_others))]
    kept = _others.pop(id(table_map), None)
    if kept is not None and kept[0] is table_map:
        _stream[:] = kept
        return
    usable = not any(kwargs.get(k) for k in _STEP_ASIDE) and \
        all(kwargs.get(k) is None for k in _FILTERS)
    _stream[:] = [table_map, usable, {}]


def forget() -> None:
    """Drop every kept parse, of every stream: the next table-map event of each is parsed."""
    _stream[:] = [None, False, {}]
    _others.clear()


def read_type_values(self: Any, length: int) -> Optional[List[List[bytes]]]:
    """TableMapEvent._read_type_values: each ENUM's or SET's members, as the bytes of the
    column's charset they are written in (``completed`` decodes them)."""
    packet = self.packet
    read_until = packet.read_bytes + length
    if packet.read_bytes >= read_until:
        return None
    result = []
    while packet.read_bytes < read_until:
        count = packet.read_length_coded_binary()
        result.append([packet.read_variable_length_string() for _ in range(count)])
    return result


class _MemberSource:
    """What decoders.decode_string asks of the event a value comes from, for a table map's
    members: where they are, and how the library names a charset's codec."""
    _ignore_decode_errors = False
    charset_to_encoding = staticmethod(RowsEvent.charset_to_encoding)

    def __init__(self, event: Any) -> None:
        self.schema, self.table, self.packet = event.schema, event.table, event.packet


def completed(parse: Callable[..., None]) -> Callable[..., None]:
    """TableMapEvent.__init__, then what the library leaves wrong of the optional metadata it
    read: names it took from the server dropped, ENUM and SET members decoded in the column's
    charset (one without a codec, such as binary, as UTF-8, as the library did), and a key's
    prefix parts made key columns."""
    def __init__(self: Any, from_packet: Any, event_size: int, table_map: Any,
                 ctl_connection: Any, **kwargs: Any) -> None:
        parse(self, from_packet, event_size, table_map, ctl_connection, **kwargs)
        columns = getattr(self, "columns", None)
        if not columns:
            return
        metadata = getattr(self, "optional_metadata", None)
        if metadata is not None and not metadata.column_name_list:
            # binlog_row_metadata MINIMAL: the library asks the server for the names the table
            # has now (bytes, on MariaDB), which needn't be the ones this map's rows had. A map
            # has the names it carries, none here: a published table's refuses, naming the fix.
            for column in columns:
                column.name = None
            return
        source = None
        for column in columns:
            for attr in ("enum_values", "set_values"):
                members = getattr(column, attr, None)
                if members:
                    source = source or _MemberSource(self)
                    setattr(column, attr, [_member(source, m, column) for m in members])
        for index in getattr(metadata, "primary_keys_with_prefix", None) or ():
            columns[index].is_primary = True
    return __init__


def _member(source: _MemberSource, raw: Any, column: Any) -> str:
    if not isinstance(raw, bytes):
        return raw  # the library's "" for an ENUM's index 0
    text = decoders.decode_string(source, raw, column)
    return text if isinstance(text, str) else raw.decode("utf-8", "replace")
