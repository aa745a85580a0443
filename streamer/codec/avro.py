"""Avro pieces that don't depend on a table: static schemas, fingerprints, single-object framing.

Single-object encoding (Avro spec): ``C3 01`` + 8-byte little-endian CRC-64-AVRO fingerprint of the
schema's Parsing Canonical Form + the binary body. In schema-registry mode the header is the
Confluent wire format instead: ``00`` + 4-byte big-endian schema id.
"""
from __future__ import annotations

import io
import json
import logging
import os
import re
from typing import Any, Callable, Dict, List, Optional, Tuple

import fastavro
from fastavro.schema import fingerprint as schema_fingerprint
from fastavro.schema import to_parsing_canonical_form

from streamer.codec.encode import compile_writer, write_long, write_string
from streamer.errors import GeneratedWriterUnsupported

log = logging.getLogger(__name__)

# schemas/ at the project root, beside the streamer package (setup.py ships it).
SCHEMA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                          "schemas")
MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"

def crc64_avro(data: bytes) -> int:
    """The Avro spec's CRC-64-AVRO (Rabin) fingerprint of ``data``, as an integer."""
    return int.from_bytes(bytes.fromhex(schema_fingerprint(data.decode("utf-8"), "CRC-64-AVRO")),
                          "little")


def fingerprint(schema: Any) -> bytes:
    """8-byte little-endian CRC-64-AVRO fingerprint of the schema's canonical form."""
    return bytes.fromhex(schema_fingerprint(to_parsing_canonical_form(schema), "CRC-64-AVRO"))


def header(schema: Any) -> bytes:
    return MAGIC + fingerprint(schema)


def confluent_header(schema_id: int) -> bytes:
    return CONFLUENT_MAGIC + schema_id.to_bytes(4, "big")


def load_static(name: str) -> Dict[str, Any]:
    with open(os.path.join(SCHEMA_DIR, name + ".avsc"), encoding="utf-8") as fh:
        return json.load(fh)


_BAD = re.compile(r"[^A-Za-z0-9_]")


def avro_name(name: str) -> str:
    """A valid Avro name for a MySQL identifier (which may hold '-', '$', spaces or start with a digit)."""
    out = _BAD.sub("_", name)
    if not out or out[0].isdigit():
        out = "_" + out
    return out


def canonical_json(schema: Any) -> str:
    """Deterministic JSON of a full schema (logical types and docs kept): same table, same bytes."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


class Writer:
    """Encodes records of one schema: header (single-object by default, or Confluent) + body.

    The body comes from a writer generated for this schema (``encode.compile_writer``); fastavro
    writes only schemas that the generator doesn't support.
    """

    __slots__ = ("schema", "parsed", "fingerprint", "header", "_write", "_fallback")

    def __init__(self, schema: Dict[str, Any]):
        self.schema = schema
        self.parsed = fastavro.parse_schema(schema)
        self.fingerprint = fingerprint(schema)
        self.header = MAGIC + self.fingerprint
        try:
            self._write = compile_writer(schema)
            self._fallback = False
        except GeneratedWriterUnsupported:
            log.info("schema %s: no generated writer, using fastavro", schema.get("name"))
            self._fallback = True

    def uses_fastavro(self) -> bool:
        return self._fallback

    def encode(self, record: Any) -> bytes:
        if self._fallback:
            buf = io.BytesIO()
            buf.write(self.header)
            fastavro.schemaless_writer(buf, self.parsed, record)
            return buf.getvalue()
        out = bytearray(self.header)
        self._write(out, record)
        return bytes(out)


class ApartWriter:
    """``of``'s encoding by a second compile of its generated writer, compiled ``apart``
    (``encode.compiled_apart``) for the one-row path. The header is read from ``of`` at each
    record, so a registry's framing of ``of`` (``schema_registry.frame``) holds here too."""

    __slots__ = ("of", "_write")

    def __init__(self, of: Writer):
        if of.uses_fastavro():
            raise GeneratedWriterUnsupported(f"schema {of.schema.get('name')}: no generated writer")
        self.of = of
        self._write = compile_writer(of.schema, apart=True)

    def encode(self, record: Any) -> bytes:
        out = bytearray(self.of.header)
        self._write(out, record)
        return bytes(out)


def body_writer(schema: Dict[str, Any], apart: bool = False) -> Callable[[bytearray, Any], None]:
    """A writer that appends a record's Avro body (no header) to a buffer: generated for the
    schema (``encode.compile_writer``, ``apart`` or not), or fastavro's where the generator
    can't."""
    try:
        return compile_writer(schema, apart)
    except GeneratedWriterUnsupported:
        parsed = fastavro.parse_schema(schema)

        def write_body(buf: bytearray, datum: Any) -> None:
            out = io.BytesIO()
            fastavro.schemaless_writer(out, parsed, datum)
            buf += out.getvalue()
        return write_body


# The envelope's field order that EnvelopeWriter's parts are written in (schemas/source.avsc).
ENVELOPE_LAYOUT = ["before", "after", "op", "ts_ms",
                   ("source", ["server_id", "file", "pos", "gtid", "db", "table", "row", "txid",
                               "tx_row", "snapshot"])]


def _field_names(record: Dict[str, Any]) -> List[Any]:
    out: List[Any] = []
    for field in record["fields"]:
        t = field["type"]
        out.append((field["name"], _field_names(t)) if field["name"] == "source" and
                   isinstance(t, dict) else field["name"])
    return out


# An op as its Avro string encoding: length (zig-zag) and the letter.
OP_BYTES = {op: bytes([2]) + op.encode() for op in ("c", "u", "d", "t", "r")}
# source.snapshot: null for a binlog change; the string branch for a snapshot's rows.
SNAPSHOT_BYTES = {"true": b"\x02\x08true", "last": b"\x02\x08last"}


OP_READ = OP_BYTES["r"]


class EnvelopeWriter:
    """The bytes of a table's Envelope (``schema.versions.TableVersion.value_schema``), assembled from parts.

    Of the fields, only before/after, op, source.row and source.tx_row change between the rows of
    one binlog event; the rest (ts_ms and most of the source) are encoded once per event by
    ``event_parts``. The result is byte-identical to ``value_writer.encode`` of the whole envelope
    (tests/unit/codec/test_encode.py), whose header it uses, so a registry frame applies here too.
    """

    __slots__ = ("value_writer", "_row")

    def __init__(self, value_writer: Writer, row_schema: Dict[str, Any], apart: bool = False):
        layout = _field_names(value_writer.schema)
        if layout != ENVELOPE_LAYOUT:
            # The parts below follow this field order; a changed envelope or source schema
            # must change them too, not be written wrongly.
            raise ValueError(f"EnvelopeWriter encodes {ENVELOPE_LAYOUT}, the schema has {layout}")
        self.value_writer = value_writer
        self._row = body_writer(row_schema, apart)

    @staticmethod
    def event_parts(ts_ms: int, server_id: int, file: str, pos: int, gtid: Optional[str],
                    db: str, table: str, txid: str) -> Tuple[bytes, bytes]:
        """(ts_ms through source.table, source.txid) encoded: the same for a whole event."""
        mid = bytearray()
        write_long(mid, ts_ms)
        write_long(mid, server_id)
        write_string(mid, file)
        write_long(mid, pos)
        if gtid is None:
            mid.append(0)
        else:
            mid.append(2)
            write_string(mid, gtid)
        write_string(mid, db)
        write_string(mid, table)
        tx = bytearray()
        write_string(tx, txid)
        return bytes(mid), bytes(tx)

    def encode(self, before: Any, after: Any, op: bytes, mid: bytes, row: int, txid: bytes,
               tx_row: int) -> bytes:
        buf = bytearray(self.value_writer.header)
        if before is None:
            buf.append(0)
        else:
            buf.append(2)
            self._row(buf, before)
        if after is None:
            buf.append(0)
        else:
            buf.append(2)
            self._row(buf, after)
        buf += op
        buf += mid
        write_long(buf, row)
        buf += txid
        write_long(buf, tx_row)
        buf.append(0)  # source.snapshot: null
        return bytes(buf)

    def encode_read(self, after: Any, mid: bytes, row: int, txid: bytes, snapshot: bytes) -> bytes:
        """A snapshot's row (op r): ``snapshot`` is one of SNAPSHOT_BYTES; row and tx_row are both
        the row's index in its chunk."""
        buf = self.read_head()
        self._row(buf, after)
        return self.read_tail(buf, mid, row, txid, snapshot)

    def read_head(self) -> bytearray:
        """An op r message up to its row (``read_tail`` follows the row written after it)."""
        buf = bytearray(self.value_writer.header)
        buf.append(0)  # before: null
        buf.append(2)  # after: the row
        return buf

    @staticmethod
    def read_tail(buf: bytearray, mid: bytes, row: int, txid: bytes, snapshot: bytes) -> bytes:
        buf += OP_READ
        buf += mid
        write_long(buf, row)
        buf += txid
        write_long(buf, row)
        buf += snapshot
        return bytes(buf)
