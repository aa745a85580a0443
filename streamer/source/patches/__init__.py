"""Fixes to python-mysql-replication (and one check of PyMySQL), applied on purpose, never silently.

``apply()`` is called by the commands that read the binlog (``streamer run``), before the first
connection; importing a module changes nothing. Before anything is replaced:

- the installed libraries must be versions the fixes were tested with (``TESTED``); on any other
  the streamer refuses to start, naming both, unless ``mysql.allow_untested_libraries`` is set,
  which warns loudly and goes on;
- every target must exist where it is expected, with the parameters it is expected to have. A
  fix assigned to a renamed (or name-mangled) attribute would otherwise succeed and do nothing,
  and a correctness fix such as negative TIME(fsp) would be dropped without a word.

Where the library offers a seam, the streamer uses it instead of a patch: connections are made
through ``source.server.Connection`` (a subclass), and the reader's stream and control
connections through the library's ``pymysql_wrapper`` hook. What is left has no seam: the
library builds its events and tables itself, so their private readers are replaced here.
Each fix is written up for upstream in docs/library-fixes.md.
"""
from __future__ import annotations

import logging
import os
from typing import Any, Callable, Dict, List, Optional, Tuple

import pymysql
import pymysqlreplication
from pymysql.connections import Connection, MySQLResult
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (BinLogEvent, ExecuteLoadQueryEvent, MariadbGtidEvent,
                                      MariadbGtidListEvent, PreviousGtidsEvent, QueryEvent)
from pymysqlreplication.packet import BinLogPacketWrapper
from pymysqlreplication.row_event import (PartialUpdateRowsEvent, RowsEvent, TableMapEvent,
                                          UpdateRowsEvent)
from pymysqlreplication.table import Table

from streamer.errors import LibraryVersionUnsupported, PatchTargetMissing
from streamer.source import (checksums, compressed, decoders, filestart, gtidtag, oldtemporal,
                             payload, rowplan, standins)
from streamer.source.patches import gtid, query, table_map

log = logging.getLogger(__name__)

# Distribution name -> the versions every fix and check here was tested with.
TESTED: Dict[str, Tuple[str, ...]] = {"mysql-replication": ("1.0.17",), "PyMySQL": ("1.2.4",)}
_MODULES = {"mysql-replication": pymysqlreplication, "PyMySQL": pymysql}


class Fix:
    """``owner.attr`` (a function with parameters ``params``) replaced by ``make(original)``."""

    def __init__(self, owner: Any, attr: str, params: Tuple[str, ...],
                 make: Callable[[Any], Any], why: str) -> None:
        self.owner, self.attr, self.params, self.make, self.why = owner, attr, params, make, why

    def target(self) -> str:
        return f"{self.owner.__module__}.{self.owner.__name__}.{self.attr}"


def _keep(replacement: Any) -> Callable[[Any], Any]:
    return lambda original: replacement


FIXES: List[Fix] = [
    Fix(RowsEvent, "_RowsEvent__read_time2", ("self", "column"), _keep(decoders.read_time2),
        "correctness: negative TIME(fsp) values"),
    Fix(RowsEvent, "_RowsEvent__read_new_decimal", ("self", "column"),
        _keep(decoders.read_new_decimal), "speed: DECIMAL from its packed groups"),
    Fix(RowsEvent, "_RowsEvent__read_string", ("self", "size", "column"),
        _keep(decoders.read_string), "speed: ASCII text skips the charset codec"),
    Fix(RowsEvent, "_read_column_data", ("self", "cols_bitmap", "row_image_type"),
        rowplan.read_column_data, "speed: rows read through a plan made once per table version"),
    Fix(RowsEvent, "_get_none_sources", ("self", "column_data"), rowplan.get_none_sources,
        "speed: no per-row none sources where no empty SET needs them"),
    Fix(UpdateRowsEvent, "_fetch_one_row", ("self",), rowplan.fetch_update_row,
        "correctness: an update's after image without its unchanged columns (FULL_NODUP)"),
    Fix(PartialUpdateRowsEvent, "_fetch_one_row", ("self",), rowplan.fetch_update_row,
        "correctness: an update's after image without its unchanged columns (FULL_NODUP)"),
    Fix(Table, "__init__", ("self", "table_id", "schema", "table", "columns", "primary_key",
                            "column_name_flag"), _keep(table_map.table_init),
        "speed: the primary key found without each column's data dict"),
    Fix(Table, "data", ("self",), _keep(table_map.table_data),
        "speed: a table's data dict built once, not for every rows event"),
    Fix(TableMapEvent, "__init__", ("self", "from_packet", "event_size", "table_map",
                                    "ctl_connection"),
        lambda original: table_map.cached_init(oldtemporal.measuring(
            standins.translating(table_map.completed(original)))),
        "speed: each distinct table-map event parsed once; correctness: MySQL 9's VECTOR "
        "columns, MariaDB's compressed columns (and optional metadata the library doesn't "
        "know) no longer stop the stream, old temporal columns get their fractional "
        "digits, ENUM and SET members are read in their column's charset, and a key with a "
        "prefix part is the table's key"),
    Fix(TableMapEvent, "_read_type_values", ("self", "length"),
        _keep(table_map.read_type_values),
        "correctness: ENUM and SET members kept as bytes, not UTF-8 or \"\" (completed)"),
    Fix(QueryEvent, "_read_status_vars_value_for_key", ("self", "key"), query.read_status_var,
        "correctness: MariaDB 11's status variables no longer stop the stream at a DDL"),
    Fix(QueryEvent, "__init__", ("self", "from_packet", "event_size", "table_map",
                                 "ctl_connection"), _keep(query.query_init),
        "correctness: a statement is read in its client's charset, not always as UTF-8"),
    Fix(ExecuteLoadQueryEvent, "__init__", ("self", "from_packet", "event_size", "table_map",
                                            "ctl_connection"), query.load_query_init,
        "correctness: a LOAD DATA logged as a statement is judged by its table, as any "
        "statement is (the library reads no statement text of it)"),
    Fix(MariadbGtidEvent, "__init__", ("self", "from_packet", "event_size", "table_map",
                                       "ctl_connection"), gtid.gtid_init,
        "correctness: the phase of a two-phase ALTER (START, COMMIT or ROLLBACK ALTER), which "
        "only the GTID event's extra flags tell"),
    Fix(BinLogStreamReader, "_BinLogStreamReader__checksum_enabled", ("self",),
        checksums.always_checksum_aware,
        "correctness: binlogs written without checksums, and with, in one stream"),
]
# Used as they are, not replaced: a change to them would break a fix just as silently.
USED: List[Tuple[Any, str, Tuple[str, ...]]] = [
    (RowsEvent, "_RowsEvent__read_values_name", ("self", "column", "null_bitmap",
                                                 "null_bitmap_index", "is_partial", "cols_bitmap",
                                                 "unsigned", "i")),
    # Overridden by source.server.Connection.
    (Connection, "_create_ssl_ctx", ("self", "sslp")),
    (Connection, "connect", ("self", "sock")),
    # What source.textrows builds on: a buffered result's rows, read its own way.
    (Connection, "_read_query_result", ("self", "unbuffered")),
    (MySQLResult, "_read_rowdata_packet", ("self",)),
    (MySQLResult, "_read_row_from_packet", ("self", "packet")),
    (MySQLResult, "_check_packet_is_eof", ("self", "packet")),
    (MySQLResult, "_get_descriptions", ("self",)),
    # source.compressed's events are built by the packet wrapper and parsed by the library's own
    # classes, through the constructor every event shares.
    (BinLogPacketWrapper, "__init__", ("self", "from_packet", "table_map", "ctl_connection",
                                       "mysql_version", "use_checksum", "allowed_events",
                                       "only_tables", "ignored_tables", "only_schemas",
                                       "ignored_schemas", "freeze_schema", "ignore_decode_errors",
                                       "verify_checksum", "optional_meta_data", "enable_logging",
                                       "use_column_name_cache", "post_header_lengths")),
    (BinLogEvent, "_declared_post_header_len", ("self", "default")),
    (BinLogEvent, "_advance_to_payload", ("self", "known_post_header_len")),
    (BinLogEvent, "__init__", ("self", "from_packet", "event_size", "table_map",
                               "ctl_connection", "mysql_version", "only_tables",
                               "ignored_tables", "only_schemas", "ignored_schemas",
                               "freeze_schema", "ignore_decode_errors", "verify_checksum",
                               "use_checksum", "optional_meta_data", "enable_logging",
                               "use_column_name_cache", "post_header_lengths")),
]
# The packet wrapper's type-code -> class map, to which MariaDB's compressed events, MySQL's
# compressed transactions and MySQL 8.4's tagged GTID event are added.
EVENT_MAP_ATTR = "_BinLogPacketWrapper__event_map"
_applied: Dict[str, Any] = {}


def installed_version(distribution: str, module: Any) -> Optional[str]:
    """The version of the distribution that provides ``module``, from its metadata folder beside
    it (importlib.metadata would cost a PyPy start ~40 ms of imports for two names)."""
    site = os.path.dirname(os.path.dirname(os.path.abspath(module.__file__)))
    prefix = distribution.lower().replace("-", "_") + "-"
    for name in os.listdir(site):
        if name.lower().startswith(prefix) and name.endswith((".dist-info", ".egg-info")):
            return name[len(prefix):].rsplit(".", 1)[0].split("-")[0]
    return None


def check_versions(found: Dict[str, Optional[str]], allow_untested: bool) -> None:
    untested = [f"{name} {found[name] or '(version unknown)'} (tested: {', '.join(TESTED[name])})"
                for name in TESTED if found.get(name) not in TESTED[name]]
    if not untested:
        return
    what = "; ".join(untested)
    if not allow_untested:
        raise LibraryVersionUnsupported(
            f"untested library version: {what}. The streamer corrects these libraries' decoding "
            f"(source/patches) and has not been tested with this version. Install the tested "
            f"version (pip install -e . pins it), or set mysql.allow_untested_libraries: true to "
            f"run anyway")
    log.warning("!!! running with an UNTESTED library version: %s (mysql.allow_untested_libraries"
                " is set). Every fix's target was checked, but the library's behaviour around "
                "them was not: compare a topic against its table before trusting it !!!", what)


def _params(function: Any) -> Optional[Tuple[str, ...]]:
    code = getattr(function, "__code__", None)
    return None if code is None else tuple(code.co_varnames[:code.co_argcount])


def check_target(owner: Any, attr: str, params: Tuple[str, ...]) -> Any:
    """The function at ``owner.attr`` (defined on ``owner`` itself), or PatchTargetMissing."""
    where = f"{owner.__module__}.{owner.__name__}.{attr}"
    found = owner.__dict__.get(attr)
    if isinstance(found, property):
        found = found.fget  # a property is checked and replaced by its getter
    if found is None:
        raise PatchTargetMissing(f"library fix target {where} is missing: the library changed. "
                                 f"Install the tested version ({_tested()})")
    original = getattr(found, "__wrapped__", found)
    if _params(original) != params:
        raise PatchTargetMissing(f"library fix target {where} takes {_params(original)}, the fix "
                                 f"expects {params}: the library changed. Install the tested "
                                 f"version ({_tested()})")
    return original


def _tested() -> str:
    return ", ".join(f"{name} {' or '.join(v)}" for name, v in TESTED.items())


# The library's classes of the events source.filestart reads instead.
REPLACED = {filestart.PREVIOUS_GTIDS: PreviousGtidsEvent, filestart.GTID_LIST: MariadbGtidListEvent}


def event_map() -> Dict[int, Any]:
    """The library's type-code -> event class map, checked to lack every compressed type (a
    library that learnt them would be read its own way, or ours, without anyone knowing)."""
    found = BinLogPacketWrapper.__dict__.get(EVENT_MAP_ATTR)
    where = f"{BinLogPacketWrapper.__module__}.BinLogPacketWrapper.__event_map"
    if not isinstance(found, dict):
        raise PatchTargetMissing(f"library fix target {where} is missing: the library changed. "
                                 f"Install the tested version ({_tested()})")
    ours = {**compressed.EVENT_MAP, **payload.EVENT_MAP, **gtidtag.EVENT_MAP}
    known = sorted(code for code in ours if code in found and found[code] is not ours[code])
    if known:
        raise PatchTargetMissing(f"library fix target {where} already maps the compressed event "
                                 f"types {known}: the library changed. Install the tested "
                                 f"version ({_tested()})")
    # The file-start GTID events, read our way in the place of the library's classes.
    changed = sorted(code for code, cls in REPLACED.items()
                     if found.get(code) not in (cls, filestart.EVENT_MAP[code]))
    if changed:
        raise PatchTargetMissing(f"library fix target {where} maps the event types {changed} "
                                 f"to other classes than the tested version's: the library "
                                 f"changed. Install the tested version ({_tested()})")
    return found


def apply(allow_untested: bool = False) -> None:
    """Check the libraries and every target, then apply the fixes; once per process."""
    if _applied:
        return
    check_versions({name: installed_version(name, module) for name, module in _MODULES.items()},
                   allow_untested)
    originals = [check_target(f.owner, f.attr, f.params) for f in FIXES]
    for owner, attr, params in USED:
        check_target(owner, attr, params)
    types = event_map()
    types.update(compressed.EVENT_MAP)
    types.update(payload.EVENT_MAP)
    types.update(gtidtag.EVENT_MAP)
    types.update(filestart.EVENT_MAP)
    _applied[EVENT_MAP_ATTR] = "compressed events"
    for fix, original in zip(FIXES, originals):
        replacement = fix.make(original)
        replacement.__wrapped__ = original
        if isinstance(fix.owner.__dict__[fix.attr], property):
            replacement = property(replacement)
        setattr(fix.owner, fix.attr, replacement)
        _applied[fix.target()] = original


def applied() -> bool:
    return bool(_applied)
