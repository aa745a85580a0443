"""Per-table work done once per table version: filters, schemas, converters, topic, key extractor.

A *table version* is a table's column list as one binlog table-map event describes it. Everything
the hot loop needs for a row of that table is prepared here, so ``process_event`` does no schema work.
"""
from __future__ import annotations

import copy
import fnmatch
import logging
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from streamer.codec import avro
from streamer.errors import ConfigError, MissingColumnNames, UnsupportedValue
from streamer.schema import columns, evolution, masking
from streamer.schema.masking import ColumnRules
from streamer.schema.naming import TOPIC_TEMPLATE, TopicNames, topic_name, topic_part
from streamer.source import rowplan
from streamer.source.definitions import NONE as NO_DEFINITION
from streamer.source.definitions import Definition
from streamer.source.sqltext import may_name

log = logging.getLogger(__name__)

SOURCE_SCHEMA = avro.load_static("source")


class TableFilter:
    """`db.table` glob include/exclude patterns, answered once per table and cached."""

    def __init__(self, include: Sequence[str], exclude: Sequence[str]):
        self.include = list(include)
        self.exclude = list(exclude)
        self._cache: Dict[Tuple[str, str], bool] = {}

    def __call__(self, db: str, table: str) -> bool:
        key = (db, table)
        hit = self._cache.get(key)
        if hit is None:
            name = f"{db}.{table}"
            hit = any(fnmatch.fnmatchcase(name, p) for p in self.include) and not any(
                fnmatch.fnmatchcase(name, p) for p in self.exclude)
            self._cache[key] = hit
        return hit

    @classmethod
    def streamed(cls, cfg: Any) -> "TableFilter":
        """The streamer's own filter: its patterns, less the heartbeat's and the snapshots'
        databases, which are never published whatever the patterns say."""
        t = cfg.tables
        return cls(t.include, list(t.exclude) + [cfg.heartbeat.database + ".*",
                                                 cfg.snapshot.database + ".*"])


def _nothing(value: Any) -> None:
    """A column masked with null: whatever its value, None."""
    return None


def _nullable(bitmask: bytes, i: int) -> bool:
    return bool(bitmask[i >> 3] & (1 << (i & 7)))


def signature(event: Any) -> Tuple:
    """Everything about a table-map event's columns that can change the schema or the decoding."""
    cols = []
    for i, c in enumerate(event.columns):
        cols.append((c.name, c.type, c.unsigned, c.is_primary, _nullable(event.null_bitmask, i),
                     c.character_set_name, getattr(c, "precision", None),
                     getattr(c, "decimals", None), getattr(c, "fsp", None),
                     getattr(c, "bits", None), getattr(c, "max_length", None),
                     tuple(c.enum_values or ()), tuple(c.set_values or ())))
    return (event.schema, event.table, tuple(cols))


# A message's Kafka headers by op, for a version that has none.
NO_HEADERS: Dict[str, Any] = {op: None for op in ("c", "u", "d", "r", "t")}


class TableVersion:
    """Schemas and converters for one version of one table.

    ``previous`` is the table's previous version in this run (or from the schema topic): it makes
    columns new to the table nullable (see ``evolution``).
    """

    def __init__(self, namespace: str, event: Any,
                 previous: Optional[evolution.Previous] = None, binlog: bool = True,
                 rules: Optional[ColumnRules] = None, tombstones: bool = False,
                 compact: bool = False, definition: Definition = NO_DEFINITION,
                 fmt: Optional[Any] = None, topic_template: str = TOPIC_TEMPLATE,
                 topic: Optional[str] = None):
        self.db: str = event.schema
        self.table: str = event.table
        # A catalog's version has its topic from the catalog's TopicNames (topics.names too).
        self.topic = topic or topic_name(topic_template, namespace, self.db, self.table)
        self.conversions: List[Tuple[str, str, Optional[Callable[[Any], Any]], Any]] = []
        # (Avro name, nullable, the value of an empty SET as published)
        self.empty_set_columns: List[Tuple[str, bool, str]] = []
        # Columns masked with null: (MySQL name, Avro name), set to null after the conversions.
        self.nulled: List[Tuple[str, str]] = []
        # MySQL names of columns whose published value can't tell rows apart (masked with null
        # or truncate): a snapshot can't chunk by them.
        self.lossy: List[str] = []
        # (Avro name, kind, nullable, binlog column) of each published column, for the other
        # message formats (codec.debezium, codec.jsonformat); a hashed column's kind is "masked".
        self.columns_info: List[Tuple[str, str, bool, Any]] = []
        period = definition.period
        self.versioning = None if period is None else versioning(period.end)
        fields, excluded, pk = self._columns(event, previous, rules, definition)
        table_space = f"{avro.avro_name(self.db)}.{avro.avro_name(self.table)}"
        self._schemas(table_space, fields, excluded)
        # A version described for a snapshot (binlog False) reads no binlog rows.
        # The values no message publishes (excluded, or masked with null): the binlog's reader
        # steps over them, and a row image may leave them out (rowplan.TableState).
        self.unread = frozenset(excluded + [mysql for mysql, _ in self.nulled])
        self.read_plan = rowplan.plan_for(event.columns, self.unread) if binlog else None
        # Columns of the table map that rows events leave out: a functional index's
        # (source.definitions), a multi-valued index's typed array (source.standins).
        self.hidden = frozenset(definition.hidden).union(
            c.name for c in event.columns if getattr(c, "typed_array", None) is not None)
        key_columns = rules.key_columns(self.db, self.table) if rules is not None else None
        if key_columns is not None:
            pk = _key_fields(self.db, self.table, key_columns, fields)
        self.pk_names = [n for n, _ in pk]
        # A null value under the key after each delete, so that compaction can forget the key.
        self.tombstones = tombstones and bool(pk)
        # Kafka compacts only keyed records: a keyless table's topic keeps the delete policy.
        self.compacted = compact and bool(pk)
        self._writers(table_space, pk)
        # What goes on the wire, framed by a registry: the streamer's Avro, unless the message
        # format (config format) attaches its own envelope, key and writers.
        self.wire_value: Optional[avro.Writer] = self.value_writer
        self.wire_key: Optional[avro.Writer] = self.key_writer
        self.truncate_value = streamer_truncate(self.value_writer)
        # By op, its messages' Kafka headers: none, unless topics.headers (engine.announce).
        self.headers: Dict[str, Any] = NO_HEADERS
        # What the one-row path publishes with (``one_row``): made at its first event.
        self._one_row: Any = None
        if fmt is not None:
            fmt.attach(self)
            if not getattr(self.envelope, "compiles_apart", False):
                self._one_row = self  # the format's own writers (JSON's), on both paths
        elif self.value_writer.uses_fastavro():
            self._one_row = self  # no generated writers to compile again

    def _columns(self, event: Any, previous: Optional[evolution.Previous],
                 rules: Optional[ColumnRules], definition: Definition
                 ) -> Tuple[List[Dict[str, Any]], List[str], List[Tuple[str, Dict[str, Any]]]]:
        """(fields, excluded MySQL names, (Avro name, field) of the primary key) of the
        published columns; conversions and the other per-column lists on the way."""
        fields: List[Dict[str, Any]] = []
        excluded: List[str] = []
        pk: List[Tuple[str, Dict[str, Any]]] = []
        kept: List[Tuple[int, Any, Any]] = []
        period = definition.period
        # A system-versioned table: its period's end is in the binlog's key, not the row's.
        not_key = period.end if period is not None else None
        for i, col in enumerate(event.columns):
            if not col.name or col.name.startswith("UNKNOWN_COL"):
                raise MissingColumnNames(
                    f"table {self.db}.{self.table}: the binlog carries no column names "
                    f"(binlog_row_metadata is not FULL); set binlog_row_metadata=FULL on the "
                    f"server. The events written without them stay in the binlog: restart past "
                    f"them (streamer run --start-file/--start-pos or --start-gtid), then read "
                    f"the table again (streamer snapshot --tables {self.db}.{self.table})")
            if period is not None and period.hidden and col.name in (period.start, period.end):
                continue  # the server's hidden period columns: SELECT * shows neither
            if col.name in definition.hidden or getattr(col, "typed_array", None) is not None:
                continue  # a functional or multi-valued index's column: in no rows event
            rule = rules.rule(self.db, self.table, col.name) if rules else None
            if rule is not None and col.is_primary and rule.method != "hash":
                raise ConfigError(
                    f"column {self.db}.{self.table}.{col.name} is part of the table's primary key "
                    f"and can't be {'excluded' if rule.method == 'exclude' else 'masked with ' + rule.describe()}: "
                    f"the key identifies the row in Kafka. Remove it from tables.columns, or mask "
                    f"it with 'hash'")
            if rule is not None and rule.method == "exclude":
                excluded.append(col.name)
                continue
            kept.append((i, col, rule))
        names = avro_names([col.name for _, col, _ in kept], previous)
        for i, col, rule in kept:
            nullable_in_binlog = _nullable(event.null_bitmask, i)
            field = self._column(col, names[col.name], nullable_in_binlog, previous, rules, rule,
                                 definition)
            fields.append(field)
            if col.is_primary and col.name != not_key:
                pk.append((field["name"], copy.deepcopy(field)))
        return fields, excluded, pk

    def _column(self, col: Any, name: str, nullable_in_binlog: bool,
                previous: Optional[evolution.Previous], rules: Optional[ColumnRules], rule: Any,
                definition: Definition) -> Dict[str, Any]:
        """One published column's field, under Avro name ``name``; its conversion and lists."""
        atype, conv, kind = columns.avro_type(col, definition.type_of(col.name))
        mask = None
        if rule is not None and rule.method != "null":
            assert rules is not None
            mask = rules.masker(rule, atype, f"{self.db}.{self.table}.{col.name}")
            conv = masking.after(conv, mask)
            if rule.method == "hash":
                atype = "string"
        nulled = rule is not None and rule.method == "null"
        nullable = nullable_in_binlog or kind in columns.ALWAYS_NULLABLE or \
            evolution.nullable_by_lineage(name, previous) or nulled
        self.columns_info.append((name, "masked" if rule is not None and rule.method == "hash"
                                  else kind, nullable, col))
        field: Dict[str, Any] = {"name": name, "type": ["null", atype] if nullable else atype}
        if nullable:
            field["default"] = None
        field["mysql.type"] = kind
        if name != col.name:
            field["mysql.column"] = col.name
        if rule is not None:
            field["streamer.mask"] = rule.describe()
            field["doc"] = masking.DOCS[rule.method]
            if rule.method != "hash":
                self.lossy.append(col.name)
        branch = _branch(atype) if nullable else None
        if nulled:
            self.nulled.append((col.name, name))
        elif conv is not None or branch is not None or name != col.name:
            self.conversions.append((col.name, name, conv, branch))
        if kind == "set" and not nulled:
            self.empty_set_columns.append((name, nullable, "" if mask is None else mask("")))
        return field

    def _schemas(self, table_space: str, fields: List[Dict[str, Any]],
                 excluded: List[str]) -> None:
        """The row and envelope schemas. Their namespace carries a hash of the exact fields:
        distinct full schemas, distinct fingerprints (see evolution.short_hash). Readers match
        records by unqualified name."""
        space = f"{table_space}.v{evolution.short_hash(fields + [{'excluded': excluded}] if excluded else fields)}"
        self.row_schema = {"type": "record", "name": "Row", "namespace": space, "fields": fields}
        if excluded:
            self.row_schema["streamer.excluded"] = excluded
            self.row_schema["doc"] = ("columns left out by tables.columns.exclude: "
                                      + ", ".join(excluded))
        self.value_schema = {
            "type": "record", "name": "Envelope", "namespace": space,
            "fields": [
                {"name": "before", "type": ["null", self.row_schema], "default": None},
                {"name": "after", "type": ["null", f"{space}.Row"], "default": None},
                {"name": "op", "type": "string", "doc": "c, u, d, t (truncate), r (read by a snapshot)"},
                {"name": "ts_ms", "type": "long", "doc": "event time: MySQL commit, ms"},
                {"name": "source", "type": SOURCE_SCHEMA},
            ],
        }
        self.row_name = f"{space}.Row"

    def _writers(self, table_space: str, pk: List[Tuple[str, Dict[str, Any]]]) -> None:
        """The value writer, the envelope writer built on it, and the key's."""
        self.value_writer = avro.Writer(self.value_schema)
        self.envelope = avro.EnvelopeWriter(self.value_writer, self.row_schema)
        self.key_writer: Optional[avro.Writer] = None
        self.key_schema: Optional[Dict[str, Any]] = None
        if pk:
            key_fields = [f for _, f in pk]
            self.key_schema = {"type": "record", "name": "Key",
                               "namespace": f"{table_space}.k{evolution.short_hash(key_fields)}",
                               "fields": key_fields}
            self.key_writer = avro.Writer(self.key_schema)
        if not self.value_writer.uses_fastavro():
            # The generated writers take [null, T] values as they are: no per-value tuple.
            self.conversions = [(m, n, c, None) for m, n, c, _ in self.conversions
                                if c is not None or m != n]

    def convert(self, values: Dict[str, Any], none_sources: Optional[Dict[str, str]] = None) -> None:
        """Turn a row dict from the reader into the Avro row datum, in place."""
        mysql_name = ""
        try:
            for mysql_name, name, conv, branch in self.conversions:
                v = values[mysql_name] if name == mysql_name else values.pop(mysql_name)
                if v is not None:
                    if conv is not None:
                        v = conv(v)
                    if branch is not None:
                        v = (branch, v)
                values[name] = v
        except UnsupportedValue as exc:
            raise UnsupportedValue(f"{self.db}.{self.table} column {mysql_name}: {exc}") from exc
        if self.nulled:
            for mysql_name, name in self.nulled:
                if name != mysql_name:
                    del values[mysql_name]
                values[name] = None
        if self.empty_set_columns:
            for name, nullable, empty in self.empty_set_columns:
                if values[name] is None and (not nullable or (
                        none_sources is not None and none_sources.get(name) == "empty set")):
                    values[name] = ("string", empty) if nullable else empty

    def alone(self, mysql_name: str) -> Tuple[Optional[Callable[[Any], Any]], Any, Any]:
        """How ``convert`` turns the column's value in a row read without its None sources (a
        snapshot's), from that value alone: (converter, union branch, what a None becomes), the
        first two None when not applied, the last None when a None stays None. A column masked
        with null converts every value to None; a NOT NULL SET's None becomes its empty value
        (a nullable one's only where the binlog's None sources say the set was empty)."""
        if any(m == mysql_name for m, _ in self.nulled):
            return _nothing, None, None
        name, conv, branch = mysql_name, None, None
        for m, n, c, b in self.conversions:
            if m == mysql_name:
                name, conv, branch = n, c, b
                break
        fill = next((empty for n, nullable, empty in self.empty_set_columns
                     if n == name and not nullable), None)
        return conv, branch, fill

    def key(self, values: Dict[str, Any]) -> Optional[bytes]:
        if self.key_writer is None:
            return None
        return self.key_writer.encode({n: values[n] for n in self.pk_names})

    def one_row(self) -> Any:
        """This version as events of one row are published with it (``engine.rows``): a
        ``OneRowVersion`` (``OneRowFormatVersion`` under Debezium's Avro), or the version itself
        where JSON or fastavro writes."""
        twin = self._one_row
        if twin is None:
            twin = self._one_row = (OneRowVersion(self)
                                    if isinstance(self.envelope, avro.EnvelopeWriter)
                                    else OneRowFormatVersion(self))
        return twin


class OneRowVersion:
    """A table version for the one-row path (``engine.rows.process_one_row_event``): its own
    compile of the version's generated writers, which PyPy's JIT compiles on their own
    (``encode.compiled_apart``), and the version itself for everything else.

    After a restart, a table's first row changes failed a guard into writers the warm-up never
    saw, and the bridges compiled into them, inlined, held those changes; compiled on their own,
    they are one call (docs/benchmarks.md, "The one-row path's own writers"). Events of many
    rows (a bulk catch-up's) keep the version's writers, inlined into their loop, where the
    rows would pay a call each. The writers' headers stay the version's, framed by a registry or
    not."""

    __slots__ = ("version", "envelope", "_key")

    def __init__(self, version: TableVersion) -> None:
        self.version = version
        self.envelope = avro.EnvelopeWriter(version.value_writer, version.row_schema, apart=True)
        key = version.key_writer
        # fastavro's (no generated writer to compile again) serves both paths.
        self._key = key if key is None or key.uses_fastavro() else avro.ApartWriter(key)

    def key(self, values: Dict[str, Any]) -> Optional[bytes]:
        if self._key is None:
            return None
        return self._key.encode({n: values[n] for n in self.version.pk_names})

    def __getattr__(self, name: str) -> Any:
        return getattr(self.version, name)


class OneRowFormatVersion:
    """``OneRowVersion`` under a message format with generated writers (config format: Debezium's
    Avro): the format's encoder makes its copy for the one-row path (``apart``), and the key is
    that copy's."""

    __slots__ = ("version", "envelope", "key")

    def __init__(self, version: TableVersion) -> None:
        self.version = version
        self.envelope = version.envelope.apart()
        self.key = self.envelope.key

    def __getattr__(self, name: str) -> Any:
        return getattr(self.version, name)


# A current row's period end: the largest TIMESTAMP(6) (2038, or 2106 from MariaDB 11.5), or the
# largest BIGINT UNSIGNED of a transaction-precise period. A history row's end is in the past.
CURRENT_END_MICROS = 2147483647 * 1000000


def avro_names(columns: Sequence[str], previous: Optional[evolution.Previous]) -> Dict[str, str]:
    """Each published column's Avro name: the one it had in the table's previous version, if
    it had one, else its own made Avro's (codec.avro.avro_name) and, when another column has
    that, made unique with underscores. So columns whose names become one Avro name (``a-b`` and
    ``a_b``) keep theirs whatever columns a DDL adds or drops before them: a field never comes to
    carry another column's values."""
    before: Dict[str, str] = {}
    if previous is not None:
        for f in previous.fields.values():
            before[f.get("mysql.column", f["name"])] = f["name"]
    names: Dict[str, str] = {}
    used: set = set()
    for column in columns:
        kept = before.get(column)
        if kept is not None and kept not in used:
            names[column] = kept
            used.add(kept)
    for column in columns:
        if column not in names:
            name = avro.avro_name(column)
            while name in used:
                name += "_"
            names[column] = name
            used.add(name)
    return names


def _current(end: Any) -> bool:
    if end.__class__ is int:
        return end >= CURRENT_END_MICROS
    return getattr(end, "year", 0) >= 2038


def _key_fields(db: str, table: str, key_columns: List[str],
                fields: List[Dict[str, Any]]) -> List[Tuple[str, Dict[str, Any]]]:
    """tables.key_columns of a table: its key fields in the order given; a column the table
    does not publish (absent, or excluded) is a config error naming the table's columns."""
    by_mysql = {f.get("mysql.column", f["name"]): f for f in fields}
    missing = [c for c in key_columns if c not in by_mysql]
    if missing:
        raise ConfigError(
            f"tables.key_columns names {', '.join(missing)} for {db}.{table}, which publishes "
            f"only {', '.join(by_mysql)}: name published columns of the table")
    return [(by_mysql[c]["name"], copy.deepcopy(by_mysql[c])) for c in key_columns]


def versioning(end: str) -> Callable[[str, Dict[str, Any]], Tuple[Optional[str], Any]]:
    """How a system-versioned table's row events map to its current rows' changes, by their
    period's end (column ``end``): an insert of a history row (an update's old version) is no
    change; an update that ends a row's period is its delete; the rest are what they say."""
    def classify(op: str, row: Dict[str, Any]) -> Tuple[Optional[str], Any]:
        if op == "u":
            if not _current(row["before_values"][end]):
                return None, row
            if _current(row["after_values"][end]):
                return "u", row
            return "d", {"values": row["before_values"],
                         "none_sources": row.get("before_none_sources")}
        return (op, row) if _current(row["values"][end]) else (None, row)
    return classify


def _branch(atype: Any) -> str:
    return atype if isinstance(atype, str) else atype["type"]


class TopicSchema:
    """A table known only by its topic's last value schema in the schema topic: enough to publish
    a TRUNCATE of it (``engine.rows.publish_truncate``) when no row of it was read in this run."""

    def __init__(self, namespace: str, db: str, table: str, value_schema: Dict[str, Any],
                 keyed: bool, compact: bool, topic: str) -> None:
        self.db = db
        self.table = table
        self.topic = topic
        self.value_schema = value_schema
        self.value_writer = avro.Writer(value_schema)
        self.key_writer: Optional[avro.Writer] = None
        self.compacted = compact and keyed
        self.truncate_value = streamer_truncate(self.value_writer)
        # What goes on the wire (a registry frames it), as for a TableVersion; a format other
        # than the streamer's sets its own (codec.debezium).
        self.wire_value: Optional[avro.Writer] = self.value_writer
        self.wire_key: Optional[avro.Writer] = None
        self.headers: Dict[str, Any] = NO_HEADERS


def streamer_truncate(value_writer: avro.Writer) -> Callable[..., bytes]:
    """The streamer's TRUNCATE message (op t, no before or after) in ``value_writer``'s schema."""
    def truncate_value(ts_ms: int, server_id: int, file: str, pos: int, gtid: Optional[str],
                       db: str, table: str, txid: str, tx_row: int) -> bytes:
        source = {"server_id": server_id, "file": file, "pos": pos,
                  "gtid": None if gtid is None else ("string", gtid), "db": db, "table": table,
                  "row": 0, "txid": txid, "tx_row": tx_row, "snapshot": None}
        return value_writer.encode({"before": None, "after": None, "op": "t", "ts_ms": ts_ms,
                                    "source": source})
    return truncate_value


class TableCatalog:
    """Maps binlog table ids to table versions, building each version once.

    ``on_table_map`` returns a table's version whenever the table's current version changes (a
    new version, or an older one again, or the first sight after ``forget_current``), so that the
    caller announces it and the schema topic's last record per table is always the table's
    current version. ``lineage`` (by topic) seeds the previous version of tables from an earlier
    run (see ``evolution``).
    """

    def __init__(self, namespace: str, table_filter: TableFilter,
                 lineage: Optional[Dict[str, evolution.Previous]] = None,
                 rules: Optional[ColumnRules] = None, tombstones: bool = False,
                 compact: bool = False,
                 schemas: Optional[Dict[str, Tuple[Dict[str, Any], bool]]] = None,
                 definitions: Optional[Any] = None, fmt: Optional[Any] = None,
                 topic_template: str = TOPIC_TEMPLATE, topics: Optional[TopicNames] = None):
        self.namespace = namespace
        # Each table's topic; a table takes it when its first version is built here, and two
        # tables can't take one (naming.TopicNames.claim).
        self.topics = topics if topics is not None else TopicNames(namespace, topic_template)
        # The message format's attach(version) (codec.formats), or None: the streamer's Avro.
        self.fmt = fmt
        # What a MariaDB table map hides (source.definitions.Definitions), or None.
        self.definitions = definitions
        self.filter = table_filter
        # Each topic's last value schema in the schema topic (evolution.schemas_from_records).
        self._schemas = dict(schemas or {})
        self._last: Dict[Tuple[str, str], TableVersion] = {}
        self.rules = rules
        self.tombstones = tombstones
        self.compact = compact
        self.by_id: Dict[int, Optional[TableVersion]] = {}
        self.current: Dict[Tuple[str, str], TableVersion] = {}
        self._by_signature: Dict[Tuple, TableVersion] = {}
        self._described: Dict[Tuple, TableVersion] = {}
        self._lineage = dict(lineage or {})

    def topic_of(self, db: str, table: str) -> str:
        """The table's topic, which the table takes: another table of this run that would go
        to it makes a TopicClash (naming.TopicNames.claim)."""
        return self.topics.claim(db, table)

    def forget_current(self) -> None:
        """After a reconnect: announce each table's version again (its schema record may have
        been in the aborted batch), keeping the versions themselves so a re-read is identical."""
        for key, tv in self.current.items():
            self._lineage[tv.topic] = evolution.previous_of(tv.row_schema["fields"], tv.pk_names)
            self._last[key] = tv
        self.current.clear()

    def last_version(self, db: str, table: str) -> Optional[Any]:
        """What a statement on the table without rows (a TRUNCATE) is published with when the
        table has no current version: its last version of this run (forgotten by a reconnect),
        else the last value schema the schema topic has for its topic (``TopicSchema``); None
        when the table never had a message in this namespace."""
        found = self.current.get((db, table)) or self._last.get((db, table))
        if found is not None:
            return found
        known = self._schemas.get(self.topics.of(db, table))
        if known is None:
            return None
        found = TopicSchema(self.namespace, db, table, known[0], known[1], self.compact,
                            self.topic_of(db, table))
        if self.fmt is not None:
            self.fmt.attach_topic(found)
        return found

    def had_messages(self, db: str, table: str) -> bool:
        """Whether the table's topic had a message in this namespace: a version of this run, or
        a value schema in the schema topic (its topic not claimed by asking)."""
        key = (db, table)
        return key in self.current or key in self._last or \
            self.topics.of(db, table) in self._schemas

    def database_topics(self, db: str) -> List[str]:
        """The topics of the database's published tables that had a message in this namespace:
        this run's versions', and those in the schema topic whose name ``topics.names`` or the
        topic template gives a table of ``db`` (the table's name read back from it)."""
        found = {tv.topic for (d, _), tv in list(self.current.items()) + list(self._last.items())
                 if d == db}
        topics = self.topics
        for name, topic in topics.names.items():
            if name.startswith(db + ".") and topic in self._schemas and \
                    self.filter(db, name[len(db) + 1:]):
                found.add(topic)
        template = topics.template
        if "{db}" in template and "{table}" in template:
            head, _, tail = template.replace("{namespace}", self.namespace) \
                .replace("{db}", topic_part(db)).partition("{table}")
            others = set(topics.names.values())
            for topic in self._schemas:
                if topic.startswith(head) and topic.endswith(tail) and topic not in others and \
                        len(topic) > len(head) + len(tail) and \
                        self.filter(db, topic[len(head):len(topic) - len(tail)]):
                    found.add(topic)
        return sorted(found)

    def on_statement(self, query: str) -> None:
        """A statement (DDL) naming a table whose definition was read: it is read again, and
        the table's version built again, at its next table map (whose bytes a change of a
        plugin type, BINARY(16) to UUID, leaves as they were)."""
        definitions = self.definitions
        if definitions is None or not definitions.cache:
            return
        for db, table in list(definitions.cache):
            if may_name(query, table):
                definitions.forget(db, table)
                tv = self.current.pop((db, table), None)
                if tv is not None:
                    self._lineage[tv.topic] = evolution.previous_of(tv.row_schema["fields"],
                                                                    tv.pk_names)
                    self._last[(db, table)] = tv

    def make_current(self, tv: Any) -> bool:
        """Make ``tv`` its table's current version, as a table map does: a snapshot's version, or
        the version a TRUNCATE is published with. True when it was not current (it must be
        announced). A version built for a snapshot is then the previous version of the table's
        next one (nullability stays sticky across it) and what a TRUNCATE is published with; a
        table known only by its topic's schema (``TopicSchema``) is announced and stays so."""
        key = (tv.db, tv.table)
        if self.current.get(key) is tv:
            return False
        if isinstance(tv, TableVersion):
            self.current[key] = tv
            self._lineage.pop(tv.topic, None)
        return True

    def snapshot_version(self, described: Any) -> TableVersion:
        """The version of a table as a snapshot describes it (``source.chunks.Described``, which
        has a table-map event's attributes). The table's current binlog version when its schemas
        are the same, so its announcement holds; else one built like it, with the same lineage,
        kept apart from the binlog's versions (it has no row reader)."""
        definition = getattr(described, "definition", NO_DEFINITION)
        sig = (signature(described), definition)
        tv = self._described.get(sig)
        cur = self.current.get((described.schema, described.table))
        if tv is None:
            topic = self.topic_of(described.schema, described.table)
            previous = self._lineage.get(topic)
            if cur is not None:
                previous = evolution.previous_of(cur.row_schema["fields"], cur.pk_names)
            tv = TableVersion(self.namespace, described, previous, binlog=False,
                              rules=self.rules, tombstones=self.tombstones,
                              compact=self.compact, definition=definition, fmt=self.fmt,
                              topic=topic)
            self._described[sig] = tv
        if cur is not None and cur.value_writer.fingerprint == tv.value_writer.fingerprint and \
                cur.key_schema == tv.key_schema:
            return cur
        return tv

    def on_table_map(self, event: Any) -> Optional[TableVersion]:
        """Follow a table-map event; the table's version when it is new to announce, else None."""
        state = rowplan.state_of(event.get_table())
        if state is not None and self.current.get((event.schema, event.table)) is state.version:
            # The same table map as before (source.patches keeps one Table per distinct event):
            # its version, plan and announcement are done; only the id's entry may be new.
            self.by_id[event.table_id] = state.version
            return None
        if not self.filter(event.schema, event.table):
            self.by_id[event.table_id] = None
            return None
        definition = NO_DEFINITION if self.definitions is None else \
            self.definitions.of(event.schema, event.table, event.columns)
        if definition.sequence:
            self.by_id[event.table_id] = None  # said once per version (Definitions.of)
            return None
        sig = (signature(event), definition)
        tv = self._by_signature.get(sig)
        key = (event.schema, event.table)
        cur = self.current.get(key)
        if tv is None:
            topic = self.topic_of(event.schema, event.table)
            previous = self._lineage.get(topic)
            if cur is not None:
                previous = evolution.previous_of(cur.row_schema["fields"], cur.pk_names)
            tv = TableVersion(self.namespace, event, previous, rules=self.rules,
                              tombstones=self.tombstones, compact=self.compact,
                              definition=definition, fmt=self.fmt, topic=topic)
            self._by_signature[sig] = tv
            log.info("table %s.%s: new schema version %s (%d columns)%s", tv.db, tv.table,
                     tv.value_writer.fingerprint.hex(), len(tv.row_schema["fields"]),
                     "" if topic_part(tv.db) == tv.db and topic_part(tv.table) == tv.table else
                     f", on topic {tv.topic} (a topic name holds ASCII letters, digits, '.', '_' "
                     f"and '-' only)", extra={"table": f"{tv.db}.{tv.table}"})
            if previous is not None:
                evolution.report(f"{tv.db}.{tv.table}", evolution.changes(
                    previous, tv.row_schema["fields"], tv.pk_names))
        self.by_id[event.table_id] = tv
        rowplan.attach(event, tv, tv.read_plan, bool(tv.empty_set_columns), tv.hidden,
                       tv.unread)
        if cur is tv:
            return None
        self.current[key] = tv
        self._lineage.pop(tv.topic, None)
        return tv
