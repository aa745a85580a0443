"""Avro pieces that don't depend on a table: static schemas, fingerprints, single-object framing.

Single-object encoding (Avro spec): ``C3 01`` + 8-byte little-endian CRC-64-AVRO fingerprint of the
schema's Parsing Canonical Form + the binary body. In schema-registry mode the header is the
Confluent wire format instead: ``00`` + 4-byte big-endian schema id.
"""
from __future__ import annotations

import io
import logging
import json
import os
import re
from typing import Any, Dict, List

import fastavro
from fastavro.schema import to_parsing_canonical_form

from .encode import Unsupported, compile_writer

log = logging.getLogger(__name__)

SCHEMA_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "schemas")
MAGIC = b"\xc3\x01"
CONFLUENT_MAGIC = b"\x00"

_CRC_EMPTY = 0xC15D213AA4D7A795


def _crc_table() -> List[int]:
    table = []
    for i in range(256):
        fp = i
        for _ in range(8):
            fp = (fp >> 1) ^ (_CRC_EMPTY & -(fp & 1))
        table.append(fp)
    return table


_CRC_TABLE = _crc_table()


def crc64_avro(data: bytes) -> int:
    fp = _CRC_EMPTY
    for byte in data:
        fp = (fp >> 8) ^ _CRC_TABLE[(fp ^ byte) & 0xFF]
    return fp


def fingerprint(schema: Any) -> bytes:
    """8-byte little-endian CRC-64-AVRO fingerprint of the schema's canonical form."""
    canonical = to_parsing_canonical_form(schema)
    return crc64_avro(canonical.encode("utf-8")).to_bytes(8, "little")


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
        except Unsupported:
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
