"""Kafka Connect schemas of a table's columns, as Debezium's MySQL connector maps MySQL types, and
the values those schemas hold, from the values the streamer's converters make.

A column is described once per table version (``columns``): its Connect schema (the JSON that
Connect's JsonConverter writes under ``schema``), the Avro schema Connect's AvroConverter makes of
it (``to_avro``), and ``adapt``, the function from the streamer's value (schema.columns) to the
Connect value, or None where they are the same. Debezium's documented defaults, and their
options ``decimal.handling.mode`` (precise, string, double) and ``time.precision.mode``
(adaptive_time_microseconds, connect). docs/debezium.md lists every type and what differs.
"""
from __future__ import annotations

import datetime
import decimal
from typing import Any, Callable, Dict, List, Optional, Tuple

from pymysqlreplication.constants import FIELD_TYPE as T

from streamer.codec.encode import signed_bytes

Adapt = Optional[Callable[[Any], Any]]

DECIMAL = "org.apache.kafka.connect.data.Decimal"
EPOCH = datetime.datetime(1970, 1, 1)


class Options:
    """Debezium's options that change a column's schema."""

    __slots__ = ("decimal_mode", "time_mode")

    def __init__(self, decimal_mode: str = "precise",
                 time_mode: str = "adaptive_time_microseconds") -> None:
        self.decimal_mode = decimal_mode
        self.time_mode = time_mode


def schema(ctype: str, name: Optional[str] = None, params: Optional[Dict[str, str]] = None,
           version: Optional[int] = None) -> Dict[str, Any]:
    out: Dict[str, Any] = {"type": ctype}
    if name is not None:
        out["name"] = name
    if version is not None:
        out["version"] = version
    if params:
        out["parameters"] = params
    return out


# Room for every DECIMAL (MySQL's widest: 65 digits, 30 after the point): the default context's
# 28 digits would refuse a DECIMAL(65,30) value its quantize.
_WIDE = decimal.Context(prec=80)


def _scaled(scale: int) -> Callable[[Any], decimal.Decimal]:
    """A number as a Decimal of Connect's Decimal's scale (Avro's decimal writes it so)."""
    quantum = decimal.Decimal(1).scaleb(-scale)
    return lambda value: decimal.Decimal(value).quantize(quantum, context=_WIDE)


def unscaled_bytes(value: decimal.Decimal) -> bytes:
    """A Decimal's unscaled value, two's complement, big-endian: Connect's Decimal in JSON (then
    base64) and in Avro's bytes."""
    sign, digits, exponent = value.as_tuple()
    unscaled = int("".join(map(str, digits)) or "0") * (-1 if sign else 1)
    return signed_bytes(unscaled)


def _decimal(precision: int, scale: int, opts: Options) -> Tuple[Dict[str, Any], Adapt]:
    if opts.decimal_mode == "string":
        return schema("string"), str
    if opts.decimal_mode == "double":
        return schema("double"), float
    return (schema("bytes", DECIMAL, {"scale": str(scale),
                                      "connect.decimal.precision": str(precision)}, 1),
            _scaled(scale))


def millis(micros: int) -> int:
    """µs as ms (Connect's Timestamp and Time, and Debezium's Timestamp)."""
    return micros // 1000


def _zoned(fsp: int) -> Callable[[int], str]:
    """TIMESTAMP's UTC microseconds as Debezium's ZonedTimestamp: ISO 8601 in UTC, with the
    column's fractional digits."""
    def adapt(micros: int) -> str:
        when = EPOCH + datetime.timedelta(microseconds=micros)
        text = when.strftime("%Y-%m-%dT%H:%M:%S")
        if fsp:
            text += "." + f"{when.microsecond:06d}"[:fsp]
        return text + "Z"
    return adapt


def _bits_le(nbits: int) -> Callable[[bytes], Any]:
    """BIT(n): the streamer's big-endian bytes; Debezium's boolean for BIT(1), else its Bits
    (the same bits, little-endian)."""
    if nbits == 1:
        return lambda value: bool(int.from_bytes(value, "big"))
    return lambda value: value[::-1]


def _geometry(value: bytes) -> Dict[str, Any]:
    """MySQL's geometry (4-byte little-endian SRID, then WKB) as Debezium's Geometry struct."""
    srid = int.from_bytes(value[:4], "little")
    return {"wkb": value[4:], "srid": srid or None}


GEOMETRY = {"type": "struct", "name": "io.debezium.data.geometry.Geometry", "version": 1,
            "fields": [dict(schema("bytes"), field="wkb", optional=False),
                       dict(schema("int32"), field="srid", optional=True)]}

# MySQL 9's VECTOR (source.vectors), as Debezium publishes it: an array of FLOAT32.
FLOAT_VECTOR = {"type": "array", "items": {"type": "float", "optional": False},
                "name": "io.debezium.data.FloatVector", "version": 1}

_INT_TYPES = {T.TINY: ("int8", "int16"), T.SHORT: ("int16", "int32"),
              T.INT24: ("int32", "int32"), T.LONG: ("int32", "int64"),
              T.LONGLONG: ("int64", None)}


def _integer(column: Any) -> Tuple[Dict[str, Any], Adapt]:
    signed, unsigned = _INT_TYPES.get(column.type, ("int64", "int64"))
    if column.unsigned and unsigned is None:  # BIGINT UNSIGNED: precise, never wrapped
        return schema("bytes", DECIMAL, {"scale": "0", "connect.decimal.precision": "20"}, 1), \
            _scaled(0)
    return schema(unsigned if column.unsigned else signed), None


def _temporal(kind: str, column: Any, opts: Options) -> Tuple[Dict[str, Any], Adapt]:
    fsp = int(getattr(column, "fsp", 0) or 0)
    connect = opts.time_mode == "connect"
    if kind == "date":
        return schema("int32", "org.apache.kafka.connect.data.Date" if connect
                      else "io.debezium.time.Date", version=1), None
    if kind == "datetime":
        if connect:
            return schema("int64", "org.apache.kafka.connect.data.Timestamp", version=1), millis
        if fsp <= 3:
            return schema("int64", "io.debezium.time.Timestamp", version=1), millis
        return schema("int64", "io.debezium.time.MicroTimestamp", version=1), None
    if kind == "timestamp":
        return schema("string", "io.debezium.time.ZonedTimestamp", version=1), _zoned(fsp)
    if kind == "time":
        if connect:  # Connect's Time: milliseconds since midnight, an int32
            return schema("int32", "org.apache.kafka.connect.data.Time", version=1), millis
        return schema("int64", "io.debezium.time.MicroTime", version=1), None
    return schema("int32", "io.debezium.time.Year", version=1), None  # year


def column_schema(kind: str, column: Any, opts: Options) -> Tuple[Dict[str, Any], Adapt]:
    """(Connect schema without field name or optional flag, adapt) for a column of streamer
    kind ``kind`` (schema.columns.avro_type's third value)."""
    if kind == "integer" or kind == "int unsigned":
        return _integer(column)
    if kind == "bigint unsigned":
        return _integer(column)
    # Connect's FLOAT32 and FLOAT64, as JsonConverter names them.
    if kind == "float":
        return schema("float"), None
    if kind == "double":
        return schema("double"), None
    if kind == "decimal":
        return _decimal(int(column.precision), int(column.decimals), opts)
    if kind in ("date", "datetime", "timestamp", "time", "year"):
        return _temporal(kind, column, opts)
    if kind == "enum":
        return schema("string", "io.debezium.data.Enum",
                      {"allowed": ",".join(column.enum_values or ())}, 1), None
    if kind == "set":
        return schema("string", "io.debezium.data.EnumSet",
                      {"allowed": ",".join(column.set_values or ())}, 1), None
    if kind == "json":
        return schema("string", "io.debezium.data.Json", version=1), None
    if kind == "bit":
        nbits = int(getattr(column, "bits", 0) or column.bytes * 8)
        if nbits == 1:
            return schema("boolean"), _bits_le(1)
        return schema("bytes", "io.debezium.data.Bits", {"length": str(nbits)}, 1), \
            _bits_le(nbits)
    if kind == "geometry":
        return dict(GEOMETRY), _geometry
    if kind == "vector":
        return dict(FLOAT_VECTOR), None
    if kind in ("binary",):
        return schema("bytes"), None
    return schema("string"), None  # text, uuid, inet6, inet4, a hashed mask


class Field:
    """One column of a table version, as Connect sees it."""

    __slots__ = ("name", "schema", "optional", "adapt")

    def __init__(self, name: str, connect_schema: Dict[str, Any], optional: bool,
                 adapt: Adapt) -> None:
        self.name = name
        self.schema = connect_schema
        self.optional = optional
        self.adapt = adapt

    def described(self) -> Dict[str, Any]:
        """The field as JsonConverter writes it inside a struct's ``fields``."""
        out = dict(self.schema)
        out["optional"] = self.optional
        out["field"] = self.name
        return out


def fields_of(columns: List[Tuple[str, str, bool, Any]], opts: Options) -> List[Field]:
    """The Connect fields of (Avro name, kind, nullable, column) columns; a column masked by a
    hash (kind "masked") is a string."""
    out = []
    for name, kind, nullable, column in columns:
        if kind == "masked":
            out.append(Field(name, schema("string"), nullable, None))
            continue
        connect_schema, adapt = column_schema(kind, column, opts)
        out.append(Field(name, connect_schema, nullable, adapt))
    return out


def struct(name: str, fields: List[Field], optional: bool) -> Dict[str, Any]:
    return {"type": "struct", "fields": [f.described() for f in fields], "optional": optional,
            "name": name}


# -- Connect's AvroConverter: the same schemas in Avro ------------------------------------------
_AVRO_PRIMITIVE = {"int8": "int", "int16": "int", "int32": "int", "int64": "long",
                   "float": "float", "double": "double", "boolean": "boolean",
                   "string": "string", "bytes": "bytes"}


def _array_to_avro(connect_schema: Dict[str, Any], seen: set) -> Dict[str, Any]:
    """A Connect array as AvroData writes it: its items optional as Connect makes them (a union
    with null), and a named array's name and version as properties (FloatVector's)."""
    items = connect_schema["items"]
    inner = to_avro({k: v for k, v in items.items() if k not in ("optional", "default")}, seen)
    array: Dict[str, Any] = {"type": "array",
                             "items": ["null", inner] if items.get("optional") else inner}
    if connect_schema.get("version") is not None:
        array["connect.version"] = connect_schema["version"]
    if connect_schema.get("name") is not None:
        array["connect.name"] = connect_schema["name"]
    return array


def to_avro(connect_schema: Dict[str, Any], seen: Optional[set] = None) -> Any:
    """A Connect schema (no optional wrapper) as Connect's AvroData writes it: primitives with
    ``connect.type`` where Avro is wider, named types with ``connect.name``/``connect.version``/
    ``connect.parameters``, Decimal and Date with Avro's logical types, structs as records (a
    record already written, the envelope's ``after`` after its ``before``, by its name), arrays
    as arrays."""
    seen = set() if seen is None else seen
    ctype = connect_schema["type"]
    name = connect_schema.get("name")
    if ctype == "struct":
        if name is not None and name in seen:
            return name
        if name is not None:
            seen.add(name)
        namespace, _, short = (name or "ConnectDefault").rpartition(".")
        record: Dict[str, Any] = {"type": "record", "name": short, "fields": []}
        if namespace:
            record["namespace"] = namespace
        for f in connect_schema["fields"]:
            inner = to_avro({k: v for k, v in f.items()
                             if k not in ("field", "optional", "default")}, seen)
            if f.get("optional"):
                record["fields"].append({"name": f["field"], "type": ["null", inner],
                                         "default": None})
            else:
                record["fields"].append({"name": f["field"], "type": inner})
        if name:
            record["connect.name"] = name
        if connect_schema.get("version") is not None:
            record["connect.version"] = connect_schema["version"]
        return record
    if ctype == "array":
        return _array_to_avro(connect_schema, seen)
    out: Dict[str, Any] = {"type": _AVRO_PRIMITIVE[ctype]}
    if ctype in ("int8", "int16"):
        out["connect.type"] = ctype
    if name is not None:
        out["connect.name"] = name
        if connect_schema.get("version") is not None:
            out["connect.version"] = connect_schema["version"]
        if connect_schema.get("parameters"):
            out["connect.parameters"] = dict(connect_schema["parameters"])
        if name == DECIMAL:
            params = connect_schema["parameters"]
            out["logicalType"] = "decimal"
            out["scale"] = int(params["scale"])
            out["precision"] = int(params.get("connect.decimal.precision", 64))
        elif name == "org.apache.kafka.connect.data.Date":
            out["logicalType"] = "date"
        elif name == "org.apache.kafka.connect.data.Timestamp":
            out["logicalType"] = "timestamp-millis"
        elif name == "org.apache.kafka.connect.data.Time":
            out["logicalType"] = "time-millis"
    if len(out) == 1:
        return out["type"]
    return out
