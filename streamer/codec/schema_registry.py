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
import os
import urllib.parse
from typing import Any, Callable, Dict, Optional, Tuple

from streamer import config as config_mod
from streamer.codec import avro
from streamer.errors import RegistryError, RegistryUnavailable

log = logging.getLogger(__name__)

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"
# What an answer that is not the registry API's suggests.
NOT_THE_API = "is schema_registry.url the registry's API (Apicurio: .../apis/ccompat/v7)?"


class Auth:
    """How the streamer proves itself to a registry (schema_registry.auth): an Authorization
    header (HTTP basic or a bearer token) and, for mutual TLS, a client certificate; ``ca``
    verifies the registry's certificate. Secrets are read from files or the environment by the
    config's owner (``from_config``), and never shown: ``repr`` names the kind only.
    ``read_header``, for secrets in files, makes the header again for each request: a token or
    password rotated while the stream runs (an agent refreshing a bearer token before it
    expires) is sent from then on, where one read at the start was refused once it expired."""

    def __init__(self, header: Optional[str] = None, ca: Optional[str] = None,
                 cert: Optional[str] = None, key: Optional[str] = None,
                 read_header: Optional[Callable[[], str]] = None) -> None:
        self.header = header
        self.ca, self.cert, self.key = ca, cert, key
        self._context: Any = None
        self._read_header = read_header

    def header_now(self) -> Optional[str]:
        """The Authorization header for a request made now."""
        if self._read_header is not None:
            self.header = config_mod.read_again(self._read_header, self.header,
                                                "sending the registry the credentials")
        return self.header

    def __repr__(self) -> str:
        kind = "none" if self.header is None else self.header.split(" ", 1)[0].lower()
        return f"Auth({kind}{', client certificate' if self.cert else ''})"

    def context(self) -> Any:
        """The TLS context for an https registry (None: the default one). A file that doesn't
        load is a RegistryError naming its key: no retry would load it."""
        if self._context is None and (self.ca or self.cert):
            import ssl
            key, path = "ca", self.ca
            try:
                ctx = ssl.create_default_context(cafile=self.ca)
                if self.cert:
                    key, path = "cert", self.cert
                    ctx.load_cert_chain(self.cert, self.key)
            except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError
                why = "a folder" if path and os.path.isdir(path) else \
                    getattr(exc, "strerror", None) or str(exc)
                raise RegistryError(f"config key 'schema_registry.auth.tls.{key}': cannot load "
                                    f"{path} ({why}): give a PEM file"
                                    f"{' and its key' if key == 'cert' else ''}") from None
            self._context = ctx
        return self._context


NO_AUTH = Auth()


def auth_from_config(sr: Any, environ: Optional[Dict[str, str]] = None) -> Auth:
    """The registry's auth from ``schema_registry.auth`` (config.py checks the keys)."""
    import base64
    import os

    environ = os.environ if environ is None else environ
    a = sr.auth

    def secret(what: str) -> Optional[str]:
        path = getattr(a, what + "_file")
        if path:
            return config_mod.read_secret_file(f"schema_registry.auth.{what}_file", path)
        name = getattr(a, what + "_env")
        return environ.get(name) if name else None

    def header() -> str:
        if a.mode == "basic":
            password = secret("password")
            if password is None:
                raise RegistryError("schema_registry.auth.mode is basic but there is no "
                                    f"password: set the environment variable {a.password_env} "
                                    "or schema_registry.auth.password_file")
            pair = f"{a.user}:{password}".encode("utf-8")
            return "Basic " + base64.b64encode(pair).decode("ascii")
        token = secret("token")
        if token is None:
            raise RegistryError("schema_registry.auth.mode is bearer but there is no token: "
                                f"set the environment variable {a.token_env} or "
                                "schema_registry.auth.token_file")
        return "Bearer " + token

    tls = a.tls
    if a.mode not in ("basic", "bearer"):
        return Auth(None, tls.ca, tls.cert, tls.key)
    in_file = a.password_file if a.mode == "basic" else a.token_file
    return Auth(header(), tls.ca, tls.cert, tls.key, read_header=header if in_file else None)


class SchemaRegistry:
    """The few REST calls the streamer and its decoder make, with ids cached."""

    def __init__(self, url: str, timeout_s: float = 10.0, auth: Auth = NO_AUTH):
        self.url = url.rstrip("/")
        self.timeout_s = timeout_s
        self.auth = auth
        self._ids: Dict[Tuple[str, str], int] = {}
        self._schemas: Dict[int, Dict[str, Any]] = {}

    def _call(self, method: str, path: str, body: Any = None) -> Any:
        # Imported here: http.client costs ~30 ms of every PyPy start, most of which have no registry.
        import http.client
        import urllib.error
        import urllib.request

        data = None if body is None else json.dumps(body).encode("utf-8")
        headers = {"Content-Type": CONTENT_TYPE, "Accept": CONTENT_TYPE + ", application/json"}
        header = self.auth.header_now()
        if header is not None:
            headers["Authorization"] = header
        req = urllib.request.Request(self.url + path, data=data, method=method, headers=headers)
        context = self.auth.context()  # before the try: a file that doesn't load is no outage
        try:
            with urllib.request.urlopen(req, timeout=self.timeout_s, context=context) as resp:
                text = resp.read().decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")[:500]
            hint = ""
            if exc.code in (401, 403):
                hint = (" (the registry refused the streamer's credentials: check "
                        "schema_registry.auth)")
                detail = ""  # it may quote what was sent
            if exc.code == 404 and "error_code" not in detail:  # not the registry API's own 404
                hint = (" (no such resource: is schema_registry.url the registry's API? "
                        "Apicurio's is .../apis/ccompat/v7)")
            if exc.code == 409:
                hint = (" (the subject's compatibility rule rejects this schema change; see "
                        "docs/schemas.md, or relax the subject's compatibility level)")
            said = f"schema registry {method} {self.url}{path} answered {exc.code}: {detail}"
            if exc.code >= 500 or exc.code in (408, 429):  # it can't serve now: try again
                raise RegistryUnavailable(said) from None
            raise RegistryError(said + hint) from None
        except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
            reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
            raise RegistryUnavailable(
                f"schema registry at {self.url} is not reachable ({reason}); check "
                f"schema_registry.url and that the registry is up") from None
        try:
            return json.loads(text)
        except ValueError:
            raise RegistryError(f"schema registry {method} {self.url}{path} answered what is not "
                                f"JSON ({text[:200]!r}): {NOT_THE_API}") from None

    def _field(self, method: str, path: str, answer: Any, name: str,
               wanted: Callable[[Any], bool], what: str) -> Any:
        """``answer[name]``, refused naming the answer when it is not what the API gives."""
        value = answer.get(name) if isinstance(answer, dict) else None
        if not wanted(value):
            raise RegistryError(f"schema registry {method} {self.url}{path} answered "
                                f"{json.dumps(answer)[:200]} without {what}: {NOT_THE_API}")
        return value

    @classmethod
    def from_config(cls, sr: Any) -> "SchemaRegistry":
        """The client of the config's schema_registry section (its url set)."""
        return cls(sr.url, sr.timeout_s, auth_from_config(sr))

    def compatibility(self) -> str:
        """The registry's default compatibility level (GET /config): a request that needs the
        streamer's credentials and changes nothing (`streamer check`)."""
        return self._field("GET", "/config", self._call("GET", "/config"), "compatibilityLevel",
                           lambda v: isinstance(v, str), "a compatibilityLevel")

    def register(self, subject: str, schema: Dict[str, Any]) -> int:
        """The id of ``schema`` under ``subject``, registering it on first use."""
        text = avro.canonical_json(schema)
        key = (subject, text)
        sid = self._ids.get(key)
        if sid is None:
            path = f"/subjects/{urllib.parse.quote(subject, safe='')}/versions"
            sid = self._field("POST", path, self._call("POST", path, {"schema": text}), "id",
                              lambda v: type(v) is int,  # bool is an int to isinstance
                              "a schema id (an integer \"id\")")
            self._ids[key] = sid
            self._schemas[sid] = schema
            log.info("registered %s as schema id %d", subject, sid)
        return sid

    def schema(self, schema_id: int) -> Dict[str, Any]:
        """The schema with this id (for decoding), fetched once."""
        found = self._schemas.get(schema_id)
        if found is None:
            path = f"/schemas/ids/{schema_id}"
            found = self._fetched_schema(schema_id, path, self._call("GET", path))
            self._schemas[schema_id] = found
        return found

    def _fetched_schema(self, schema_id: int, path: str, answer: Any) -> Dict[str, Any]:
        text = answer.get("schema") if isinstance(answer, dict) else None
        try:
            found = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            found = None
        if not isinstance(found, (dict, str)):  # a record, or a primitive type's name
            raise RegistryError(f"schema registry GET {self.url}{path} answered for schema id "
                                f"{schema_id} {json.dumps(answer)[:200]}, without an Avro schema "
                                f"(a \"schema\" of JSON text): is schema_registry.url the "
                                f"registry that framed these messages?")
        return found

    def frame(self, topic: str, value_writer: avro.Writer,
              key_writer: Optional[avro.Writer]) -> None:
        """Register a table version's key and value schemas and switch its writers to the
        Confluent framing."""
        value_writer.header = avro.confluent_header(
            self.register(f"{topic}-value", value_writer.schema))
        if key_writer is not None:
            key_writer.header = avro.confluent_header(self.register(f"{topic}-key", key_writer.schema))
