"""Confluent Schema Registry mode: subjects ``{topic}-key`` / ``{topic}-value`` and the wire format
``00`` + 4-byte big-endian schema id + Avro body.

Registration happens once per table version, when the version is built, outside the hot loop;
ids are cached per (subject, schema), so switching back to an older version makes no HTTP call.
The client is the registry's REST API over the standard library: two endpoints, the same code on
PyPy and CPython, and no extra runtime dependency.
"""
from __future__ import annotations

import json
import logging
import urllib.parse
from typing import Any, Dict, Optional, Tuple

from streamer.codec import avro
from streamer.errors import RegistryError

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


class SchemaRegistry:
    """The few REST calls the streamer and its decoder make, with ids cached."""

    def __init__(self, url: str, timeout_s: float = 10.0):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self._ids: Dict[Tuple[str, str], int] = {}
        self._schemas: Dict[int, Dict[str, Any]] = {}

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        # Imported here: http.client costs ~30 ms of every PyPy start, most of which have no registry.
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode("utf-8")
        req = urllib.request.Request(self.url + path, data=data, method=method,
                                     headers={"Content-Type": CONTENT_TYPE,
                                              "Accept": CONTENT_TYPE + ", application/json"})
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s) as resp:
                return json.loads(resp.read().decode("utf-8"))
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            hint = ""
            if exc.code == 409:
                hint = (" (the subject's compatibility rule rejects this schema change; see "
                        "docs/schemas.md, or relax the subject's compatibility level)")
            raise RegistryError(f"schema registry {method} {self.url}{path} answered "
                                f"{exc.code}: {detail}{hint}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise RegistryError(f"schema registry at {self.url} is not reachable ({reason}); "
                                f"check schema_registry.url and that the registry is up") from None

    def register(self, subject: str, schema: Dict[str, Any]) -> int:
        """The id of ``schema`` under ``subject``, registering it on first use."""
        text = avro.canonical_json(schema)
        key = (subject, text)
        sid = self._ids.get(key)
        if sid is None:
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
            sid = int(self._call("POST", path, {"schema": text})["id"])
            self._ids[key] = sid
            self._schemas[sid] = schema
            log.info("registered %s as schema id %d", subject, sid)
        return sid

    def schema(self, schema_id: int) -> Dict[str, Any]:
        """The schema with this id (for decoding), fetched once."""
        found = self._schemas.get(schema_id)
        if found is None:
            found = json.loads(self._call("GET", f"/schemas/ids/{schema_id}")["schema"])
            self._schemas[schema_id] = found
        return found

    def frame(self, topic: str, value_writer: avro.Writer,
              key_writer: Optional[avro.Writer]) -> None:
        """Register a table version's key and value schemas and switch its writers to the
        Confluent framing."""
        value_writer.header = avro.confluent_header(
            self.register(f"{topic}-value", value_writer.schema))
        if key_writer is not None:
            key_writer.header = avro.confluent_header(self.register(f"{topic}-key", key_writer.schema))
