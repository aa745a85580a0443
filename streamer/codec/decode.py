"""Turn any message the streamer wrote back into a dict, with no server but Kafka.

Messages are Avro single-object encoded. The writer schema of each fingerprint is in the
compacted topic ``{namespace}.__schemas``; the decoder reads it when it meets a fingerprint it
doesn't know yet. In schema-registry mode messages carry the Confluent wire format instead
(``00`` + 4-byte schema id); the decoder then asks the registry for the schema of that id.
"""
from __future__ import annotations

import datetime
import io
import json
import uuid
from typing import Any, Callable, Dict, Optional, Tuple

import fastavro
import fastavro.read

from streamer.codec.avro import CONFLUENT_MAGIC, MAGIC
from streamer.errors import UndecodableMessage, UnknownSchema

SchemaSource = Callable[[], Dict[str, Dict[str, Any]]]
RegistrySource = Callable[[int], Dict[str, Any]]


TIME_MICROS = "long-streamer.time-micros"  # fastavro's key: Avro type, then logical type


def _read_time_micros(value: int, writer_schema: Any = None, reader_schema: Any = None
                      ) -> datetime.timedelta:
    """TIME columns: signed microseconds (schema/columns.py) back to a timedelta."""
    return datetime.timedelta(microseconds=value)


def _named(schema: Any, names: Dict[str, Any], space: str = "") -> Dict[str, Any]:
    """Full name -> definition of every named record in a schema, for references by name."""
    if isinstance(schema, list):
        for branch in schema:
            _named(branch, names, space)
    elif isinstance(schema, dict) and schema.get("type") == "record":
        ns = schema.get("namespace", space)
        full = schema["name"] if "." in schema["name"] or not ns else f"{ns}.{schema['name']}"
        names[full] = schema
        for f in schema["fields"]:
            _named(f["type"], names, ns)
    return names


def _restore(datum: Any, schema: Any, names: Dict[str, Any]) -> Any:
    """The MySQL column names that Avro names could not carry (``mysql.column``)."""
    if datum is None:
        return None
    if isinstance(schema, str):
        schema = names.get(schema, schema)
    if isinstance(schema, list):
        for branch in schema:
            if branch != "null":
                return _restore(datum, branch, names)
        return datum
    if isinstance(schema, dict) and schema.get("type") == "record":
        out = {}
        for f in schema["fields"]:
            out[f.get("mysql.column", f["name"])] = _restore(datum[f["name"]], f["type"], names)
        return out
    return datum


def _renames(schema: Dict[str, Any]) -> Optional[Dict[str, Any]]:
    """The named records of a schema that renames a column, for _restore; None when none does."""
    return _named(schema, {}) if '"mysql.column"' in json.dumps(schema) else None


class Decoder:
    """Decodes keys and values; ``schemas`` loads {fingerprint hex: schema dict} on demand,
    ``registry`` (schema id -> schema) serves messages in the Confluent wire format, and
    ``known`` are schemas to know from the start (a table's own, which no topic may hold yet).

    A source may also have a ``settled()`` load, slower but complete (KafkaSchemas: one that
    waits for open transactions): it is asked only for a fingerprint ``schemas()`` lacks.
    """

    def __init__(self, schemas: SchemaSource, registry: Optional[RegistrySource] = None,
                 known: Optional[Dict[str, Dict[str, Any]]] = None):
        self._load = schemas
        self._settled: Optional[SchemaSource] = getattr(schemas, "settled", None)
        self._registry = registry
        self._parsed: Dict[bytes, Any] = {}
        self._raw: Dict[bytes, Any] = {}
        self._names: Dict[bytes, Optional[Dict[str, Any]]] = {}
        self._take(known or {})
        # TIME's logical type, through fastavro's registry of logical-type readers (documented
        # for this): set here, by whoever decodes, never as a side effect of an import.
        fastavro.read.LOGICAL_READERS[TIME_MICROS] = _read_time_micros

    def _take(self, schemas: Dict[str, Dict[str, Any]]) -> None:
        for hexfp, schema in schemas.items():
            key = bytes.fromhex(hexfp)
            self._raw[key] = schema
            self._names[key] = _renames(schema)
            self._parsed[key] = fastavro.parse_schema(schema)

    def _schema(self, fp: bytes) -> Any:
        parsed = self._parsed.get(fp)
        if parsed is None:
            for load in (self._load, self._settled):
                if load is not None and fp not in self._parsed:
                    self._take(load())
            parsed = self._parsed.get(fp)
            if parsed is None:
                raise UnknownSchema(f"no writer schema with fingerprint {fp.hex()} in the schema topic")
        return parsed

    def decode(self, data: Optional[bytes]) -> Optional[Dict[str, Any]]:
        if data is None:
            return None
        fp, body = self._split(data)
        parsed = self._schema(fp)
        try:
            datum = fastavro.schemaless_reader(io.BytesIO(data[body:]), parsed)
        except (EOFError, ValueError, TypeError, LookupError, OverflowError) as exc:
            # What fastavro raises differs by runtime: a varint cut short is a TypeError from
            # its pure-Python reader (PyPy), an EOFError from its C one (CPython).
            raise UndecodableMessage(
                f"a message of {len(data)} bytes does not decode with the writer schema its "
                f"header names ({fp.hex()}): {type(exc).__name__}: {exc}. It was cut short, or "
                f"not written with that schema") from None
        names = self._names[fp]
        return datum if names is None else _restore(datum, self._raw[fp], names)

    def _split(self, data: bytes) -> Tuple[bytes, int]:
        """(cache key of the writer schema, offset of the body); loads a registry schema."""
        if data[:2] == MAGIC:
            return data[2:10], 10
        if data[:1] == CONFLUENT_MAGIC and len(data) >= 5:
            if self._registry is None:
                raise ValueError("message in the Confluent wire format (schema id "
                                 f"{int.from_bytes(data[1:5], 'big')}): pass the schema registry")
            key = data[:5]
            if key not in self._parsed:
                schema = self._registry(int.from_bytes(data[1:5], "big"))
                self._raw[key] = schema
                self._names[key] = _renames(schema)
                self._parsed[key] = fastavro.parse_schema(schema)
            return key, 5
        raise ValueError("not a streamer message: neither Avro single-object encoding (C3 01) "
                         "nor the Confluent wire format (00 + schema id)")

    def schema_of(self, data: bytes) -> Dict[str, Any]:
        fp, _ = self._split(data)
        self._schema(fp)
        return self._raw[fp]


def to_jsonable(value: Any) -> Any:
    """For printing: bytes as hex-free latin-1 escapes, decimals and times as strings."""
    if isinstance(value, dict):
        return {k: to_jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return value.decode("latin-1")
    if isinstance(value, (datetime.datetime, datetime.date)):
        return value.isoformat()
    if isinstance(value, datetime.timedelta):
        return str(value)
    if hasattr(value, "as_tuple") or isinstance(value, uuid.UUID):
        return str(value)
    return value
