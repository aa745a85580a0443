"""One config schema: defaults, validation and environment overrides in one place.

A config is a YAML file. Any key can be overridden from the environment as
``STREAMER__SECTION__KEY=value`` (double underscores separate levels), e.g.
``STREAMER__MYSQL__PORT=3307``. Secrets are never read from argv: the MySQL
password comes from ``mysql.password_env`` (an environment variable name) or
``mysql.password_file``.
"""
from __future__ import annotations

import copy
import os
import re
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

from streamer.errors import ConfigError

_NAME = re.compile(r"^[A-Za-z0-9_.\-]+$")

DEFAULTS: Dict[str, Any] = {
    "namespace": "dev",
    "source": {"name": None},
    "mysql": {
        "host": "127.0.0.1",
        "port": 3306,
        # Failover (source.failover): the servers to read from, in order of preference, each
        # "host" or "host:port" (port: mysql.port). Empty: mysql.host and mysql.port alone.
        "hosts": [],
        "user": "streamer",
        "password_env": "STREAMER_MYSQL_PASSWORD",
        "password_file": None,
        "server_id": None,
        "connect_timeout_s": 10,
        "heartbeat_s": 0.02,
        "reconnect_backoff_s": 0.5,
        "reconnect_backoff_max_s": 30.0,
        "reconnect_max_attempts": 0,
        "position_mode": "file",
        # TLS for every connection to MySQL (binlog, queries, heartbeat, snapshots, audit).
        # mode: disabled, preferred (TLS when offered, unverified), required (TLS, unverified),
        # verify_ca (the server's certificate signed by ca), verify_identity (and issued to host).
        "tls": {"mode": "preferred", "ca": None, "cert": None, "key": None},
        # Run on a python-mysql-replication or PyMySQL version the library fixes were not tested
        # with (source.patches), with a loud warning, instead of refusing to start.
        "allow_untested_libraries": False,
    },
    "kafka": {"bootstrap.servers": "127.0.0.1:9092"},
    # Hot standby (kafka.lease): instances of one source with ha.enabled share a lease; the
    # holder streams, the others wait and take over when it stops or its session expires.
    "ha": {"enabled": False, "session_timeout_ms": 6000, "heartbeat_interval_ms": 500},
    # tombstones: a null value under the key after each delete, for tables with a primary key
    # (README, "Tombstones and compaction"); compact: create table topics with cleanup.policy
    # compact.
    # transactions: BEGIN/END records per source transaction in {namespace}.__transactions
    # (engine.txmeta).
    # name: a table's topic, from {namespace}, {db} and {table}.
    # headers: Kafka headers on each table message: op, db, table, schema_id (engine.announce).
    "topics": {"partitions": 1, "replication_factor": 1, "tombstones": True, "compact": False,
               "transactions": False, "name": "{namespace}.{db}.{table}", "headers": False},
    # The messages' format (README, "Message formats"): streamer (the default: Avro, our
    # envelope), debezium (Debezium's change events: docs/debezium.md) or json (our envelope as
    # one JSON object, no schema).
    "format": "streamer",
    # format: debezium. encoding json (Connect's JsonConverter; schemas_enable: the schema in
    # each record) or avro (Connect's AvroConverter, through schema_registry.url); connector the
    # source struct's name (mysql or mariadb); Debezium's decimal.handling.mode and
    # time.precision.mode; heartbeat_interval_ms (0: off) and heartbeat_topic_prefix, Debezium's
    # heartbeat.interval.ms and topic.heartbeat.prefix (engine.stages.dbzheartbeat).
    "debezium": {"encoding": "json", "schemas_enable": True, "connector": "mysql",
                 "decimal_handling_mode": "precise",
                 "time_precision_mode": "adaptive_time_microseconds",
                 "heartbeat_interval_ms": 0, "heartbeat_topic_prefix": "__debezium-heartbeat"},
    # columns: kept out of Kafka by 'db.table.column' glob (schema.masking); mask maps a pattern
    # to hash, null or truncate:N, and hash keys its HMAC with the salt from salt_env/salt_file.
    # key_columns: 'db.table' -> the columns whose values key its messages (a table without a
    # primary key gets a key; one with a primary key gets another), as Debezium's
    # message.key.columns.
    "tables": {"include": ["*.*"], "exclude": [], "key_columns": {},
               "columns": {"exclude": [], "mask": {}, "salt_env": "STREAMER_MASK_SALT",
                           "salt_file": None}},
    # max_messages cuts batches only while catching up (live, linger_ms does); the reader waits
    # for each commit, so fewer, bigger ones (docs/benchmarks-history.md, "Waiting for commits").
    "batch": {"max_messages": 20000, "linger_ms": 20, "min_linger_ms": 0, "gather_ms": 0.8,
              "catchup_linger_ms": 500, "idle_checkpoint_ms": 1000},
    "start": {"initial": "end", "file": None, "pos": None, "gtid": None},
    # With a url (e.g. http://host:8081 or Apicurio's .../apis/ccompat/v7): Confluent wire format
    # and subjects {topic}-key/-value. Without: single-object encoding plus {namespace}.__schemas.
    # auth: mode none, basic (user + password) or bearer (token), each secret from a file or an
    # environment variable; tls: the CA that signed the registry's certificate, and a client
    # certificate and key for mutual TLS.
    "schema_registry": {"url": None, "timeout_s": 10.0,
                        "auth": {"mode": "none", "user": None,
                                 "password_env": "STREAMER_REGISTRY_PASSWORD",
                                 "password_file": None,
                                 "token_env": "STREAMER_REGISTRY_TOKEN", "token_file": None,
                                 "tls": {"ca": None, "cert": None, "key": None}}},
    "shutdown_timeout_s": 10.0,
    # How long a start waits for Kafka to accept the producer before saying it is unreachable.
    "kafka_connect_timeout_s": 15.0,
    # How long one attempt to commit a batch waits for the broker; commit_retries more follow,
    # then the outcome is unknown and the producer is replaced (kafka.publisher).
    "kafka_commit_timeout_s": 60.0,
    "commit_retries": 5,
    # level: DEBUG, INFO, WARNING or ERROR; format: text (for people) or json (one object per
    # line, for log pipelines: ops.logfmt), for the streamer and every command.
    "log": {"level": "INFO", "format": "text"},
    # Observability (docs/metrics.md). environment is a metric dimension; http_port 0 = no endpoint.
    "environment": "dev",
    "metrics": {"http_host": "127.0.0.1", "http_port": 0, "interval_s": 10.0,
                "latency_threshold_ms": 100, "log_summary": True, "stall_after_s": 30.0},
    # The warning before the checkpoint's binlog file is purged (ops/retention.py): when fewer
    # than warn_files files are older than it, or the server's expiry is within warn_margin_s.
    "retention": {"warn_files": 1, "warn_margin_s": 21600.0},
    "signalfx": {"enabled": False, "ingest_endpoint": "https://ingest.signalfx.com",
                 "token_env": "SIGNALFX_TOKEN", "token_file": None},
    "profiler": {"enabled": False, "force": False, "dir": "profiles", "auto": False,
                 "auto_backlog_bytes": 50000000, "auto_max_s": 60.0, "keep": 5},
    # user null: the streamer's own MySQL user and password (it needs INSERT, UPDATE on database).
    "heartbeat": {"enabled": False, "interval_ms": 500, "database": "streamer_heartbeat",
                  "user": None, "password_env": "STREAMER_HEARTBEAT_PASSWORD", "password_file": None},
    # Snapshots (README, "Snapshots"): the watermark and request tables live in database (null:
    # the heartbeat's, so one grant covers both), which is never published.
    # mode read_only: no watermark writes; the server's GTID position before and after each
    # chunk's SELECT frames it instead (for a replica, or a user that may not write).
    # chunk_timeout_s: the server stops a chunk's SELECT that runs longer (0: never); the table's
    # snapshot then ends with an error, and streaming goes on.
    "snapshot": {"database": None, "chunk_rows": 10000, "mode": "watermark",
                 "chunk_timeout_s": 300.0},
    # Under PyPy, this many transactions of a recorded binlog are streamed through the hot path,
    # published nowhere, while the stream is idle, so the first real changes meet compiled code
    # (engine.warmup). 0: no warm-up. CPython has no JIT and never warms up.
    "warmup": {"transactions": 8000},
}

# Mappings whose keys are the user's (librdkafka settings, column patterns), not config keys.
FREE_MAPPINGS = ("kafka", "tables.columns.mask", "tables.key_columns")

# Config keys the user may not set inside `kafka:` because the streamer owns them.
RESERVED_KAFKA_KEYS = ("transactional.id", "enable.idempotence", "acks", "isolation.level")
# Allowed only at 1 (kafka.settings.DEFAULT_PRODUCER says why).
IN_FLIGHT_KEYS = ("max.in.flight.requests.per.connection", "max.in.flight")
# librdkafka's two spellings of the SASL mechanism.
SASL_MECHANISM_KEYS = ("sasl.mechanisms", "sasl.mechanism")


# Keys an older config may still spell the old way: named with their new name.
RENAMED = {"log_level": "log.level", "log_format": "log.format"}


def _merge(base: Dict[str, Any], over: Dict[str, Any], path: str = "") -> Dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in over.items():
        where = f"{path}{key}"
        if key not in base:
            if where in RENAMED:
                raise ConfigError(f"config key '{where}' is now '{RENAMED[where]}'")
            allowed = ", ".join(sorted(base))
            raise ConfigError(f"unknown config key '{where}'; allowed here: {allowed}")
        if isinstance(base[key], dict) and where not in FREE_MAPPINGS:
            if not isinstance(value, dict):
                raise ConfigError(f"'{where}' must be a mapping, got {value!r}")
            out[key] = _merge(base[key], value, where + ".")
        elif where in FREE_MAPPINGS:
            if not isinstance(value, dict):
                what = "librdkafka settings" if where == "kafka" else "column patterns to methods"
                raise ConfigError(f"'{where}' must be a mapping of {what}, got {value!r}")
            merged = dict(base[key])
            merged.update(value)
            out[key] = merged
        else:
            out[key] = value
    return out


# Words in a key's name that make its value a secret: taken as the string it is, never parsed
# and never shown.
SECRET_WORDS = ("password", "secret", "token", "credential", "key.pem", "sasl.oauthbearer")


def is_secret(key: str) -> bool:
    return any(word in key.lower() for word in SECRET_WORDS)


def _env_value(name: str, key: str, raw: str) -> Any:
    """An environment override's value. Every secret is the string it is. librdkafka settings
    (``kafka.*``) are strings as librdkafka takes them, but for plain whole numbers (``20``, not
    ``0123``): '0123' stays '0123', 'yes' stays 'yes', a date stays text. The other keys are
    read as YAML scalars (numbers, booleans, lists); a value that isn't valid YAML is refused
    naming the variable, never quoting the value."""
    if raw == "":
        return None
    if is_secret(key):
        return raw
    if key.startswith("kafka."):
        return int(raw) if re.fullmatch(r"-?(0|[1-9][0-9]*)", raw) else raw
    yaml = _yaml()
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        raise ConfigError(f"environment variable {name} is not a valid value for config key "
                          f"'{key}' (YAML syntax); quote it, or set the key in the config "
                          f"file") from None


def _env_overrides(environ: Dict[str, str]) -> Dict[str, Any]:
    tree: Dict[str, Any] = {}
    for name, raw in environ.items():
        if not name.startswith("STREAMER__"):
            continue
        parts = [p.lower() for p in name[len("STREAMER__"):].split("__") if p]
        if not parts:
            continue
        if parts[0] == "kafka" and len(parts) == 2:
            # librdkafka keys use dots; env names can't, so KAFKA__LINGER_MS -> linger.ms
            parts[1] = parts[1].replace("_", ".")
        node = tree
        for part in parts[:-1]:
            node = node.setdefault(part, {})
        node[parts[-1]] = _env_value(name, ".".join(parts), raw)
    return tree


def _require(cond: bool, key: str, value: Any, allowed: str) -> None:
    if not cond:
        raise ConfigError(f"config key '{key}' has bad value {value!r}; allowed: {allowed}")


def _positive_number(cfg: Dict[str, Any], key: str, allow_zero: bool = False) -> None:
    node: Any = cfg
    for part in key.split("."):
        node = node[part]
    ok = isinstance(node, (int, float)) and not isinstance(node, bool)
    ok = ok and (node >= 0 if allow_zero else node > 0)
    _require(ok, key, node, "a number >= 0" if allow_zero else "a number > 0")


def validate(cfg: Dict[str, Any]) -> Dict[str, Any]:
    """Check every key (one clear error naming the first bad one) and fill the derived ones."""
    ns = cfg["namespace"]
    _require(isinstance(ns, str) and bool(_NAME.match(ns)), "namespace", ns,
             "letters, digits, '_', '-', '.' (it prefixes every topic name)")
    _validate_mysql(cfg)
    _validate_numbers(cfg)
    _validate_ha(cfg["ha"])
    _validate_start_and_tables(cfg)
    _validate_kafka(cfg["kafka"])
    url = cfg["schema_registry"]["url"]
    _require(url is None or (isinstance(url, str) and url.startswith(("http://", "https://"))),
             "schema_registry.url", url, "unset, or the registry's base URL: http(s)://host:port[/path]")
    _positive_number(cfg, "schema_registry.timeout_s")
    _validate_registry_auth(cfg["schema_registry"]["auth"])
    _validate_format(cfg)
    _validate_topics_and_keys(cfg)
    _validate_log(cfg["log"])
    _validate_observability(cfg)
    if cfg["source"]["name"] is None:
        cfg["source"]["name"] = f"{cfg['mysql']['host']}-{cfg['mysql']['port']}"
    name = cfg["source"]["name"]
    _require(isinstance(name, str) and bool(_NAME.match(name)), "source.name", name,
             "letters, digits, '_', '-', '.'")
    return cfg


def _validate_mysql(cfg: Dict[str, Any]) -> None:
    m = cfg["mysql"]
    sid = m["server_id"]
    _require(isinstance(sid, int) and not isinstance(sid, bool) and 1 <= sid < 2**32,
             "mysql.server_id", sid,
             "a fixed integer 1..4294967295, unique among the source's replicas (never random)")
    port = m["port"]
    _require(isinstance(port, int) and 0 < port < 65536, "mysql.port", port, "1..65535")
    _validate_hosts(m)
    _validate_tls(m["tls"])
    _require(m["position_mode"] in ("file", "gtid"), "mysql.position_mode", m["position_mode"],
             "'file' or 'gtid'")


def _validate_numbers(cfg: Dict[str, Any]) -> None:
    for key in ("mysql.connect_timeout_s", "mysql.heartbeat_s", "mysql.reconnect_backoff_s",
                "mysql.reconnect_backoff_max_s", "shutdown_timeout_s", "kafka_connect_timeout_s",
                "kafka_commit_timeout_s", "batch.max_messages",
                "batch.linger_ms", "batch.catchup_linger_ms", "batch.idle_checkpoint_ms", "topics.partitions",
                "topics.replication_factor"):
        _positive_number(cfg, key)
    for key in ("mysql.reconnect_max_attempts", "commit_retries", "batch.min_linger_ms",
                "batch.gather_ms"):
        _positive_number(cfg, key, allow_zero=True)
    warm = cfg["warmup"]["transactions"]
    _require(isinstance(warm, int) and not isinstance(warm, bool) and warm >= 0,
             "warmup.transactions", warm, "a whole number >= 0 (0: no JIT warm-up)")


def _validate_ha(ha: Dict[str, Any]) -> None:
    _require(isinstance(ha["enabled"], bool), "ha.enabled", ha["enabled"], "true or false")
    for key in ("session_timeout_ms", "heartbeat_interval_ms"):
        _require(isinstance(ha[key], int) and not isinstance(ha[key], bool) and ha[key] > 0,
                 f"ha.{key}", ha[key], "a whole number of milliseconds > 0")
    _require(ha["heartbeat_interval_ms"] * 3 <= ha["session_timeout_ms"],
             "ha.heartbeat_interval_ms", ha["heartbeat_interval_ms"],
             "at most a third of ha.session_timeout_ms (the session must outlive a lost heartbeat)")


def _validate_start_and_tables(cfg: Dict[str, Any]) -> None:
    start = cfg["start"]
    _require(start["initial"] in ("end", "beginning", "snapshot"), "start.initial",
             start["initial"],
             "'end', 'beginning' or 'snapshot' (copy the tables' rows, then stream from the end)")
    if (start["file"] is None) != (start["pos"] is None):
        raise ConfigError("config keys 'start.file' and 'start.pos' go together: set both or neither")
    if start["pos"] is not None:
        _require(isinstance(start["pos"], int) and start["pos"] >= 4, "start.pos", start["pos"],
                 "an integer >= 4 (a binlog offset)")
    for key in ("include", "exclude"):
        pats = cfg["tables"][key]
        _require(isinstance(pats, list) and all(isinstance(p, str) and "." in p for p in pats),
                 f"tables.{key}", pats, "a list of 'db.table' glob patterns such as 'shop.*'")
    _validate_columns(cfg)
    for key in ("topics.tombstones", "topics.compact", "topics.transactions", "topics.headers"):
        section, name = key.split(".")
        _require(isinstance(cfg[section][name], bool), key, cfg[section][name], "true or false")


def _validate_kafka(kafka: Dict[str, Any]) -> None:
    for key in RESERVED_KAFKA_KEYS:
        if key in kafka:
            raise ConfigError(f"config key 'kafka.{key}' is set by the streamer itself "
                              f"(exactly-once needs it); remove it")
    for key in IN_FLIGHT_KEYS:
        value = kafka.get(key)
        if value is not None and str(value).strip() != "1":
            raise ConfigError(f"config key 'kafka.{key}' is {value!r}; it must stay 1 (or be "
                              f"left out): with more requests in flight, librdkafka (2.0.2, as "
                              f"seen here) can drop a message while a partition's leader "
                              f"changes, and per-key order and exactly-once depend on it")
    for key in SASL_MECHANISM_KEYS:
        if str(kafka.get(key, "")).strip().upper() == "GSSAPI":
            raise ConfigError(f"config key 'kafka.{key}' is GSSAPI (Kerberos), which the "
                              f"streamer's librdkafka (upstream's build, deploy/librdkafka.sh) "
                              f"does not include; use SCRAM-SHA-256, SCRAM-SHA-512, PLAIN "
                              f"(over SASL_SSL) or OAUTHBEARER")
    _require(bool(kafka.get("bootstrap.servers")), "kafka.bootstrap.servers",
             kafka.get("bootstrap.servers"), "host:port[,host:port...]")


def _validate_log(log: Dict[str, Any]) -> None:
    level = str(log["level"]).upper()
    _require(level in ("DEBUG", "INFO", "WARNING", "ERROR"), "log.level", log["level"],
             "DEBUG, INFO, WARNING or ERROR")
    log["level"] = level
    _require(log["format"] in ("text", "json"), "log.format", log["format"],
             "text or json (one JSON object per line)")


def split_host(entry: Any, default_port: int) -> Tuple[str, int]:
    """``host``, ``host:port`` or ``[v6 address]:port`` as (host, port); ValueError if malformed."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(entry)
    text = entry.strip()
    if text.startswith("["):
        host, sep, rest = text[1:].partition("]")
        port_text = rest[1:] if rest.startswith(":") else None
        if not sep or (rest and port_text is None):
            raise ValueError(entry)
    elif text.count(":") == 1:
        host, port_text = text.split(":")
    else:
        host, port_text = text, None
    port = default_port if port_text is None else int(port_text)
    if not host or not 0 < port < 65536:
        raise ValueError(entry)
    return host, port


def _validate_hosts(m: Dict[str, Any]) -> None:
    """``mysql.hosts`` as a list of "host:port"; mysql.host and mysql.port become its first
    entry (the server a start tries first). Without it, the list is mysql.host:mysql.port."""
    hosts = m["hosts"]
    allowed = "a list of 'host' or 'host:port' strings, in order of preference"
    _require(isinstance(hosts, list), "mysql.hosts", hosts, allowed)
    if not hosts:
        hosts = [f"[{m['host']}]" if ":" in m["host"] else m["host"]]
    parsed = []
    for entry in hosts:
        try:
            parsed.append(split_host(entry, m["port"]))
        except ValueError:
            raise ConfigError(f"config key 'mysql.hosts' has bad entry {entry!r}; allowed: "
                              f"{allowed}") from None
    if len(set(parsed)) != len(parsed):
        raise ConfigError(f"config key 'mysql.hosts' names a server twice: {hosts!r}")
    m["hosts"] = [f"[{h}]:{p}" if ":" in h else f"{h}:{p}" for h, p in parsed]
    m["host"], m["port"] = parsed[0]


_TOPIC = re.compile(r"^[A-Za-z0-9._{}-]+$")


def _validate_topics_and_keys(cfg: Dict[str, Any]) -> None:
    name = cfg["topics"]["name"]
    _require(isinstance(name, str) and "{db}" in name and "{table}" in name
             and bool(_TOPIC.match(name)) and not name.startswith("__"), "topics.name", name,
             "a template naming {db} and {table} (and {namespace}, if you like), of the "
             "characters a Kafka topic may hold: letters, digits, '.', '_', '-'")
    for table, columns in cfg["tables"]["key_columns"].items():
        _require(isinstance(table, str) and table.count(".") == 1, "tables.key_columns", table,
                 "'db.table' keys")
        _require(isinstance(columns, list) and bool(columns)
                 and all(isinstance(c, str) and c for c in columns),
                 f"tables.key_columns.{table}", columns, "a list of the table's column names")


def _validate_format(cfg: Dict[str, Any]) -> None:
    _require(cfg["format"] in ("streamer", "debezium", "json"), "format", cfg["format"],
             "streamer (Avro, the streamer's envelope), debezium or json")
    d = cfg["debezium"]
    _require(d["encoding"] in ("json", "avro"), "debezium.encoding", d["encoding"],
             "json (Connect's JsonConverter) or avro (Connect's AvroConverter)")
    _require(d["connector"] in ("mysql", "mariadb"), "debezium.connector", d["connector"],
             "mysql or mariadb (the source struct's name)")
    _require(d["decimal_handling_mode"] in ("precise", "string", "double"),
             "debezium.decimal_handling_mode", d["decimal_handling_mode"],
             "precise, string or double")
    _require(d["time_precision_mode"] in ("adaptive_time_microseconds", "connect"),
             "debezium.time_precision_mode", d["time_precision_mode"],
             "adaptive_time_microseconds or connect")
    _positive_number(cfg, "debezium.heartbeat_interval_ms", allow_zero=True)
    prefix = d["heartbeat_topic_prefix"]
    _require(isinstance(prefix, str) and bool(_TOPIC.match(prefix + ".x")),
             "debezium.heartbeat_topic_prefix", prefix,
             "a topic name's start, of the characters a Kafka topic may hold: letters, digits, "
             "'.', '_', '-'")
    if cfg["format"] == "debezium" and d["encoding"] == "avro":
        _require(bool(cfg["schema_registry"]["url"]), "schema_registry.url", None,
                 "a registry's URL: format debezium with encoding avro writes the Confluent wire "
                 "format, as Connect's AvroConverter reads it")


def _validate_registry_auth(a: Dict[str, Any]) -> None:
    _require(a["mode"] in ("none", "basic", "bearer"), "schema_registry.auth.mode", a["mode"],
             "none, basic or bearer")
    if a["mode"] == "basic":
        _require(isinstance(a["user"], str) and a["user"] != "", "schema_registry.auth.user",
                 a["user"], "the registry user's name (its password from password_file or "
                 "password_env)")
    tls = a["tls"]
    for key in ("ca", "cert", "key"):
        _require(tls[key] is None or (isinstance(tls[key], str) and tls[key] != ""),
                 f"schema_registry.auth.tls.{key}", tls[key], "a PEM file's path")
    if (tls["cert"] is None) != (tls["key"] is None):
        raise ConfigError("config keys 'schema_registry.auth.tls.cert' and '.key' go together "
                          "(a client certificate and its key): set both or neither")


# A salt this short makes hashes of small value sets (phone numbers, birthdays) guessable.
MIN_SALT_BYTES = 16


class Rule(NamedTuple):
    """What ``tables.columns`` does to a column (``schema.masking`` applies it)."""

    method: str  # "exclude", "hash", "null" or "truncate"
    length: int  # truncate's N; 0 otherwise

    def describe(self) -> str:
        return f"truncate:{self.length}" if self.method == "truncate" else self.method


def split_pattern(pattern: Any) -> Optional[Tuple[str, str, str]]:
    """(db, table, column) globs of a ``db.table.column`` pattern; None when it isn't one. The
    column's glob is lower-cased: MySQL compares column names without case."""
    if not isinstance(pattern, str):
        return None
    parts = pattern.split(".")
    if len(parts) != 3 or not all(parts):
        return None
    return parts[0], parts[1], parts[2].lower()


def parse_method(method: Any) -> Optional[Rule]:
    """The rule a ``tables.columns.mask`` value names; None when it names none."""
    if method in ("hash", "null"):
        return Rule(method, 0)
    if isinstance(method, str) and method.startswith("truncate:"):
        n = method[len("truncate:"):]
        if n.isdigit() and int(n) > 0:
            return Rule("truncate", int(n))
    return None


TLS_MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")


def _validate_tls(tls: Dict[str, Any]) -> None:
    mode = tls["mode"]
    _require(mode in TLS_MODES, "mysql.tls.mode", mode, ", ".join(TLS_MODES))
    for key in ("ca", "cert", "key"):
        _require(tls[key] is None or (isinstance(tls[key], str) and tls[key] != ""),
                 f"mysql.tls.{key}", tls[key], "a PEM file's path")
    if mode in ("verify_ca", "verify_identity") and not tls["ca"]:
        raise ConfigError(f"config key 'mysql.tls.mode' is {mode}, which verifies the server's "
                          f"certificate: set 'mysql.tls.ca' to the CA certificate that signed it")
    if (tls["cert"] is None) != (tls["key"] is None):
        raise ConfigError("config keys 'mysql.tls.cert' and 'mysql.tls.key' go together (a "
                          "client certificate and its key): set both or neither")
    if tls["cert"] and mode in ("disabled", "preferred"):
        raise ConfigError(f"config key 'mysql.tls.cert' needs 'mysql.tls.mode' required, "
                          f"verify_ca or verify_identity, not {mode}")


def _validate_columns(cfg: Dict[str, Any]) -> None:
    cols = cfg["tables"]["columns"]
    pats = cols["exclude"]
    _require(isinstance(pats, list) and all(split_pattern(p) for p in pats),
             "tables.columns.exclude", pats,
             "a list of 'db.table.column' glob patterns such as '*.*.ssn'")
    for pattern, method in cols["mask"].items():
        _require(split_pattern(pattern) is not None, "tables.columns.mask", pattern,
                 "'db.table.column' glob patterns as keys, such as 'crm.*.email'")
        _require(parse_method(method) is not None, f"tables.columns.mask.{pattern}",
                 method, "hash, null (quoted, so YAML reads a string) or truncate:N with N > 0")


def mask_salt(cfg: Dict[str, Any], environ: Optional[Dict[str, str]] = None) -> Optional[bytes]:
    """The salt of ``hash`` masks, from the file or the environment (never argv); None when no
    mask hashes. Refuses a missing or short salt, naming the keys."""
    cols = cfg["tables"]["columns"]
    if "hash" not in cols["mask"].values():
        return None
    environ = os.environ if environ is None else environ
    if cols["salt_file"]:
        salt = read_secret_file("tables.columns.salt_file", cols["salt_file"])
    elif cols["salt_env"] and environ.get(cols["salt_env"]):
        salt = environ[cols["salt_env"]]
    else:
        raise ConfigError(f"tables.columns.mask hashes columns but there is no salt: set the "
                          f"environment variable {cols['salt_env']} or the config key "
                          f"'tables.columns.salt_file'")
    data = salt.encode("utf-8")
    if len(data) < MIN_SALT_BYTES:
        raise ConfigError(f"the salt of tables.columns.mask's hash is {len(data)} bytes; use at "
                          f"least {MIN_SALT_BYTES} random bytes, or the hashes of small "
                          f"value sets can be guessed")
    return data


def _validate_observability(cfg: Dict[str, Any]) -> None:
    env = cfg["environment"]
    _require(isinstance(env, str) and bool(_NAME.match(env)), "environment", env,
             "letters, digits, '_', '-', '.' (a metric dimension, e.g. prod or canary)")
    port = cfg["metrics"]["http_port"]
    _require(isinstance(port, int) and not isinstance(port, bool) and 0 <= port < 65536,
             "metrics.http_port", port, "0 (endpoint off) or a port 1..65535")
    _positive_number(cfg, "retention.warn_files", allow_zero=True)
    _positive_number(cfg, "retention.warn_margin_s", allow_zero=True)
    for key in ("metrics.interval_s", "metrics.latency_threshold_ms", "metrics.stall_after_s",
                "heartbeat.interval_ms", "profiler.auto_backlog_bytes", "profiler.auto_max_s"):
        _positive_number(cfg, key)
    _positive_number(cfg, "profiler.keep", allow_zero=True)
    for key in ("metrics.log_summary", "signalfx.enabled", "profiler.enabled", "profiler.force",
                "profiler.auto", "mysql.allow_untested_libraries"):
        section, name = key.split(".")
        _require(isinstance(cfg[section][name], bool), key, cfg[section][name], "true or false")
    url = cfg["signalfx"]["ingest_endpoint"]
    _require(isinstance(url, str) and url.startswith(("http://", "https://")),
             "signalfx.ingest_endpoint", url, "an http(s):// URL")
    hb = cfg["heartbeat"]["enabled"]
    _require(hb in (True, False, "auto"), "heartbeat.enabled", hb,
             "true, false or auto (on when its table can be written, else off with a warning)")
    db = cfg["heartbeat"]["database"]
    _require(isinstance(db, str) and bool(re.match(r"^[A-Za-z0-9_]+$", db)), "heartbeat.database",
             db, "a database name of letters, digits and '_'")
    snap = cfg["snapshot"]
    if snap["database"] is None:
        snap["database"] = db
    _require(isinstance(snap["database"], str) and bool(re.match(r"^[A-Za-z0-9_]+$", snap["database"])),
             "snapshot.database", snap["database"], "a database name of letters, digits and '_'")
    _require(snap["mode"] in ("watermark", "read_only"), "snapshot.mode", snap["mode"],
             "'watermark' (writes to snapshot.database) or 'read_only' (GTID positions)")
    _positive_number(cfg, "snapshot.chunk_timeout_s", allow_zero=True)
    rows = snap["chunk_rows"]
    _require(isinstance(rows, int) and not isinstance(rows, bool) and 1 <= rows <= 1000000,
             "snapshot.chunk_rows", rows, "an integer 1..1000000 (rows read per chunk)")
    if cfg["profiler"]["auto"] and not cfg["profiler"]["enabled"]:
        raise ConfigError("config key 'profiler.auto' needs 'profiler.enabled: true' as well")


def _yaml() -> Any:
    """The yaml module, imported when a config is read rather than with this module: `streamer run`
    under PyPy execs itself once (cli._restart_with_gc_settings), and the process it replaces should
    import as little as it can. yaml is ~20 ms of a PyPy start."""
    import yaml
    return yaml


def load(path: Optional[str], environ: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """Load, merge with defaults, apply environment overrides and validate."""
    environ = dict(os.environ if environ is None else environ)
    raw: Dict[str, Any] = {}
    if path is not None:
        yaml = _yaml()
        try:
            with open(path, encoding="utf-8") as fh:
                raw = yaml.safe_load(fh) or {}
        except FileNotFoundError:
            raise ConfigError(f"config file {path} does not exist") from None
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {path} is not valid YAML: {exc}") from None
        if not isinstance(raw, dict):
            raise ConfigError(f"config file {path} must hold a mapping at the top level")
    cfg = _merge(DEFAULTS, raw)
    cfg = _merge(cfg, _env_overrides(environ))
    if path is not None:
        base = os.path.dirname(os.path.abspath(path))
        for section, key in (("mysql", "password_file"), ("heartbeat", "password_file"),
                             ("signalfx", "token_file"), ("profiler", "dir"),
                             ("tables.columns", "salt_file"), ("mysql.tls", "ca"),
                             ("mysql.tls", "cert"), ("mysql.tls", "key"),
                             ("schema_registry.auth", "password_file"),
                             ("schema_registry.auth", "token_file"),
                             ("schema_registry.auth.tls", "ca"),
                             ("schema_registry.auth.tls", "cert"),
                             ("schema_registry.auth.tls", "key")):
            node = cfg
            for part in section.split("."):
                node = node[part]
            pf = node[key]
            if pf and not os.path.isabs(pf):
                node[key] = os.path.join(base, pf)
    return validate(cfg)


def read_secret_file(key: str, path: str) -> str:
    """A secret from the file named by config key ``key``, stripped; a clear error if unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read().strip()
    except OSError as exc:
        raise ConfigError(f"config key '{key}': cannot read {path}: {exc.strerror}") from None


def mysql_password(cfg: Dict[str, Any], environ: Optional[Dict[str, str]] = None) -> str:
    """The MySQL password from the file or the environment; never from argv."""
    environ = os.environ if environ is None else environ
    mysql = cfg["mysql"]
    if mysql["password_file"]:
        return read_secret_file("mysql.password_file", mysql["password_file"])
    env_name = mysql["password_env"]
    if env_name and env_name in environ:
        return environ[env_name]
    raise ConfigError(f"no MySQL password: set the environment variable {env_name} "
                      f"or the config key 'mysql.password_file'")


def patterns(cfg: Dict[str, Any]) -> List[str]:
    return list(cfg["tables"]["include"]) + ["!" + p for p in cfg["tables"]["exclude"]]
