"""Command line: ``streamer run | check | tail | verify | status | profile | snapshot | audit``."""
from __future__ import annotations

import argparse
import functools
import json
import logging
import os
import sys
from typing import Any, Dict, List, Optional, Sequence, Tuple

from streamer.config import Config
from streamer import config as config_mod
from streamer.errors import EXIT_KAFKA, StreamerError
from streamer.ops.gcpacing import GC_ENV
from streamer.settings import argument

log = logging.getLogger("streamer")



# The log format of the command's config (log.format), once it is read: its error line too.
LOG_FORMAT = ["text"]


def _config(path: Optional[str]) -> Dict[str, Any]:
    """The command's config; its log lines (and error line) from here on in its log.format."""
    from streamer.ops import logfmt

    cfg = config_mod.load(path)
    LOG_FORMAT[0] = cfg.log.format
    logfmt.setup(cfg.log.level, cfg.log.format)
    return cfg


# PyPy's JIT compiles a loop after ~1000 iterations by default; the streamer's few hot loops are
# worth compiling sooner (docs/benchmarks-history.md, "After the optimisation": a shorter warm-up).
# A guard that fails 20 times (PyPy: 200) gets its bridge: a table the warm-up never saw is
# interpreted for fewer of its first rows after a restart (docs/benchmarks.md, "The latency
# loader's first rows, and bridges after 20 failures").
JIT_PARAMS = "threshold=200,function_threshold=250,trace_eagerness=20"


def _tune_jit() -> None:
    if sys.implementation.name == "pypy":
        import pypyjit  # type: ignore[import-not-found]

        from streamer.codec import encode
        from streamer.engine.rows import process_one_row_event
        pypyjit.set_param(JIT_PARAMS)
        # Compiled on their own, not inlined into callers (engine.rows and
        # schema.versions.OneRowVersion say why).
        pypyjit.dont_trace_here(0, False, process_one_row_event.__code__)
        encode.compiled_apart = functools.partial(pypyjit.dont_trace_here, 0, False)


def _restart_with_gc_settings() -> None:
    """Under PyPy, run this same command again (exec: the same process) with the GC settings of
    GC_ENV that the environment lacks. PyPy reads them only when the interpreter starts."""
    missing = {k: v for k, v in GC_ENV.items() if not os.environ.get(k)}
    if sys.implementation.name != "pypy" or not missing:
        return
    os.environ.update(missing)
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:  # python -m streamer.cli
        os.execv(sys.executable, [sys.executable, "-m", spec.name, *sys.argv[1:]])
    os.execv(sys.executable, [sys.executable, *sys.argv])  # the console script


def _explicit_start(args: argparse.Namespace) -> Optional[Any]:
    """The start position ``--start-file``/``--start-pos`` give (None without them), checked as
    the config's start.file/start.pos/start.gtid are; --start-gtid's set is checked too."""
    from streamer.position import GTID_SET_FORMS, Position, gtid_set_problem

    if args.start_gtid is not None:
        problem = gtid_set_problem(args.start_gtid)
        if problem is not None:
            raise config_mod.ConfigError(f"--start-gtid {args.start_gtid!r} is not a GTID set: "
                                         f"{problem}. Write {GTID_SET_FORMS}")
    if (args.start_file is None) != (args.start_pos is None):
        raise config_mod.ConfigError("--start-file and --start-pos go together")
    if args.start_file is None:
        return None
    if args.start_pos < 4:
        raise config_mod.ConfigError(f"--start-pos {args.start_pos} is not a binlog offset: a "
                                     f"file's first event is at 4")
    return Position(args.start_file, args.start_pos)


def cmd_run(args: argparse.Namespace) -> int:
    from streamer.engine import warmup
    from streamer.engine.supervisor import Supervisor
    from streamer.source import patches

    cfg = _config(args.config)
    from streamer.ops.buildinfo import describe

    log.info("%s", describe())
    # After the config, not before: eager thresholds would compile yaml's one-off parse of it too
    # (docs/benchmarks-history.md, "The eager JIT thresholds after the config").
    _tune_jit()
    if sys.implementation.name == "pypy":
        import gc
        log.info("PyPy GC nursery %.1f MiB (PYPY_GC_NURSERY), "
                 "marking step %s (PYPY_GC_INCREMENT_STEP)",
                 gc._get_stats(False).nursery_size / 2 ** 20,  # type: ignore[attr-defined]
                 os.environ.get("PYPY_GC_INCREMENT_STEP"))
    start = _explicit_start(args)
    from streamer.ops.observe import Observability

    # The library fixes, checked and applied before anything reads the binlog.
    patches.apply(allow_untested=cfg.mysql.allow_untested_libraries)

    with Observability(cfg) as obs:
        supervisor = Supervisor(cfg, start=start, start_gtid=args.start_gtid, metrics=obs.metrics,
                                warmup=warmup.Warmup(cfg) if warmup.wanted(cfg) else None)
        supervisor.install_signals()
        return supervisor.run()


def cmd_status(args: argparse.Namespace) -> int:
    from streamer.errors import EndpointUnavailable
    from streamer.ops.httpstatus import fetch_status, status_text

    cfg = _config(args.config)
    try:
        st = fetch_status(cfg)
    except EndpointUnavailable as exc:
        print(f"streamer: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(st, indent=2, sort_keys=True) if args.json else status_text(st))
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from streamer.tools.flamegraph import report

    try:
        print(report(args.file, args.svg or args.file + ".svg",
                     args.collapsed or args.file + ".collapsed", args.top))
    except (OSError, ValueError) as exc:
        print(f"streamer: cannot read profile: {exc}", file=sys.stderr)
        return 1
    return 0


def _checks(cfg: Config) -> List[Tuple[str, bool, str]]:
    import pymysql

    from streamer.engine import start as start_mod
    from streamer.source.server import (connect, connection_settings, settings_checks,
                                        settings_noted)

    results: List[Tuple[str, bool, str]] = []
    m = cfg.mysql
    several = len(m.hosts) > 1
    for entry in m.hosts:  # every server a failover may read (source.failover)
        host, port = config_mod.split_host(entry, m.port)
        one = cfg.but({"mysql.host": host, "mysql.port": port})
        where = f"{m.user}@{host}:{port}"
        prefix = f"{entry}: " if several else ""
        try:
            password = config_mod.mysql_password(cfg)
            conn = connect(connection_settings(one, password))
        except config_mod.ConfigError as exc:  # the password, or a TLS file (mysql.tls)
            results.append((f"MySQL login {where}", False, str(exc)))
            break
        except pymysql.err.MySQLError as exc:
            refused = start_mod.refusal(exc, one.mysql)
            results.append((f"MySQL login {where}", False, str(refused) if refused else
                            f"{exc.args[-1]}; check mysql.host/port/user and the password"))
            continue
        results.append((f"MySQL login {where}", True, conn.get_server_info()))
        try:
            for c in settings_checks(conn):
                want, have = c.want or "''", c.have or "''"
                results.append((f"{prefix}{c.name} = {want}", c.ok,
                                f"is {have}" if c.ok else f"is {have}: {c.fix}"))
            for name, value, meaning in settings_noted(conn):
                results.append((f"{prefix}{name}", True, f"is {value or chr(39) * 2}: {meaning}"))
            results.append((f"{prefix}per-session settings", True,
                            "binlog_format and binlog_row_image can be changed by any session: a "
                            "published table's change logged otherwise stops the streamer (exit "
                            "3), naming the setting"))
            results.extend((prefix + name, ok, text) for name, ok, text in _privilege_checks(conn))
            results.append(_server_id_check(cfg, conn, prefix))
            results.extend((prefix + name, ok, text) for name, ok, text in _unlogged_checks(cfg, conn))
            results.extend((prefix + name, ok, text) for name, ok, text in _topic_checks(cfg, conn))
            if cfg.snapshot.mode == "read_only":
                results.append(_read_only_check(cfg, conn, prefix))
        finally:
            conn.close()
    results.append(_kafka_check(cfg))
    if cfg.schema_registry.url:
        results.append(_registry_check(cfg))
    return results


def _kafka_check(cfg: Config) -> Tuple[str, bool, str]:
    """Whether the config's Kafka answers, and takes its kafka settings."""
    from confluent_kafka.admin import AdminClient

    from streamer.kafka import logs
    from streamer.kafka.settings import client

    where = f"Kafka {cfg.kafka['bootstrap.servers']}"
    try:
        admin = client(AdminClient, logs.client_conf(dict(cfg.kafka)))
        md = admin.list_topics(timeout=10)
        return where, True, f"{len(md.brokers)} broker(s)"
    except config_mod.ConfigError as exc:
        return where, False, str(exc)
    except Exception as exc:  # noqa: BLE001 - any client failure means "not reachable"; reported
        return where, False, f"{exc}; check kafka.bootstrap.servers and that the brokers are up"


def _registry_check(cfg: Config) -> Tuple[str, bool, str]:
    """Whether the config's schema registry answers the streamer, signed in as it will be."""
    from streamer.codec.schema_registry import SchemaRegistry

    where = f"schema registry {cfg.schema_registry.url}"
    try:
        level = SchemaRegistry.from_config(cfg.schema_registry).compatibility()
    except StreamerError as exc:  # RegistryError, and a secret that can't be read
        return where, False, str(exc)
    return where, True, (f"answers the streamer; subjects' default compatibility {level} (a "
                         f"change it refuses stops the streamer, naming the subject: "
                         f"docs/schemas.md)")


def _read_only_check(cfg: Config, conn: Any, prefix: str) -> Tuple[str, bool, str]:
    from streamer.source import server

    why = server.read_only_refusal(server.writes_gtids(conn), server.commits_in_binlog_order(conn),
                                   cfg.snapshot.database)
    return (f"{prefix}snapshot.mode read_only", why is None,
            why or "the server's GTID positions frame each chunk")


_PRIVS = [
    ("REPLICATION SLAVE", ("REPLICATION SLAVE", "REPLICATION REPLICA"), "to read the binlog"),
    ("REPLICATION CLIENT", ("REPLICATION CLIENT", "BINLOG MONITOR"), "to read binlog positions"),
    ("SELECT", ("SELECT",), "to read table metadata"),
]


def _privilege_checks(conn: Any) -> List[Tuple[str, bool, str]]:
    with conn.cursor() as cur:
        cur.execute("SHOW GRANTS FOR CURRENT_USER()")
        grants = [row[0].upper() for row in cur.fetchall()]
    global_grants = [g for g in grants if " ON *.* " in g]
    out = []
    for name, spellings, why in _PRIVS:
        ok = any("ALL PRIVILEGES" in g or any(s in g for s in spellings) for g in global_grants)
        fix = "granted" if ok else (f"missing ({why}): GRANT {name} ON *.* TO the streamer's user")
        out.append((f"privilege {name}", ok, fix))
    return out


def _server_id_check(cfg: Config, conn: Any, prefix: str) -> Tuple[str, bool, str]:
    """Whether a replica registered on the server reads its binlog as mysql.server_id."""
    from streamer.source.server import replica_with_id

    wanted = cfg.mysql.server_id
    name = f"{prefix}server_id {wanted} (mysql.server_id)"
    replica = replica_with_id(conn, wanted)
    if replica is None:
        return (name, True, "can't tell: MariaDB lists its replicas only to REPLICATION MASTER "
                            "ADMIN; make sure none uses it (SELECT @@server_id on each)")
    if replica:
        return (name, False, f"replica {replica} reads the binlog as it: give the streamer "
                             f"one of its own")
    return (name, True, "no replica of the server reads as it")


def _unlogged_checks(cfg: Config, conn: Any) -> List[Tuple[str, bool, str]]:
    """What the binlog will not show of the published tables (source.rowless): tables or the
    streamer's own databases its filters leave out, and tables whose rows foreign keys'
    actions change. Checks that fail: the topics can't follow those tables."""
    from streamer.schema.versions import TableFilter
    from streamer.source import rowless

    published = TableFilter.streamed(cfg)
    left_out = rowless.left_out(conn, published, [cfg.heartbeat.database, cfg.snapshot.database])
    out = [("binlog filters", not left_out, left_out or "binlog_do_db and binlog_ignore_db "
                                                        "leave out no published table")]
    said = rowless.cascades_said(rowless.cascading(conn, published))
    if not said:
        return out + [("foreign key actions", True, "none changes a published table's rows (the "
                                                    "server logs no row event for what they "
                                                    "change)")]
    return out + [(f"foreign key actions on {table}", False, text) for table, text in said]


def _topic_checks(cfg: Config, conn: Any) -> List[Tuple[str, bool, str]]:
    """Published tables that would meet in one topic (schema.naming): the second one's first
    change would stop the streamer, exit 2."""
    from streamer.errors import TopicClash
    from streamer.schema.naming import TopicNames
    from streamer.schema.versions import TableFilter
    from streamer.source import server

    tables = server.user_tables(conn, TableFilter.streamed(cfg))
    names = TopicNames.from_config(cfg)
    clashes = []
    for db, table in tables:
        try:
            names.claim(db, table)
        except TopicClash as exc:
            clashes.append(str(exc))
    if not tables:
        from streamer.engine.start import no_table_matched
        return [("published tables", True, no_table_matched(cfg))]
    if not clashes:
        return [("topic names", True, f"each of the {len(tables)} published tables has a topic "
                                      f"of its own")]
    return [("topic names", False, text) for text in clashes]


def cmd_check(args: argparse.Namespace) -> int:
    cfg = _config(args.config)
    results = _checks(cfg)
    for name, ok, detail in results:
        print(f"{'✓' if ok else '✗'} {name}: {detail}")
    failed = [r for r in results if not r[1]]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 0 if not failed else 1



def cmd_tail(args: argparse.Namespace) -> int:
    from streamer.tools.tail import tail

    return tail(args)


def cmd_snapshot(args: argparse.Namespace) -> int:
    from streamer.tools import snapshot

    cfg = _config(args.config)
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    if not tables:
        raise config_mod.ConfigError("--tables names no table; give db.table[,db.table...]")
    request_id = snapshot.request(cfg, tables, args.where)
    print(f"snapshot request {request_id} written for {', '.join(tables)}: the streamer carries it "
          f"out when its binlog reading reaches the request (at once when it is running and "
          f"caught up; else when it next starts)")
    if args.follow:
        return snapshot.follow(cfg, request_id, len(tables))
    return 0


def cmd_audit(args: argparse.Namespace) -> int:
    from streamer.tools import audit

    cfg = _config(args.config)
    tables = [t.strip() for t in args.tables.split(",") if t.strip()]
    if not tables:
        raise config_mod.ConfigError("--tables names no table; give db.table[,db.table...]")
    worst = 0
    for table in tables:
        found = audit.audit(cfg, table, args.where, args.timeout,
                            bars=sys.stderr.isatty() and not args.json)
        worst = max(worst, audit.print_report(found, args.json))
    return worst


def cmd_verify(args: argparse.Namespace) -> int:
    from streamer.deploy import verify

    url = verify.base_url(_config(args.config))
    main_url = verify.base_url(config_mod.load(args.main_config)) if args.main_config else None
    return verify.run(url, main_url, args.window, verify.Limits(args.max_lag_s, args.max_slower_pct))


class _Version(argparse.Action):
    """--version: the version, the deployed release and the runtime (ops.buildinfo), read only
    when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: Any) -> None:
        super().__init__(option_strings, dest, nargs=0,
                         help="show the streamer's version, release and runtime, and exit")

    def __call__(self, parser: argparse.ArgumentParser, *_: Any) -> None:
        from streamer.ops.buildinfo import describe

        print(describe())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamer", description="MySQL binlog -> Kafka (Avro), exactly once")
    p.add_argument("--version", action=_Version)
    sub = p.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="stream in the foreground until SIGTERM/SIGINT")
    run.add_argument("-c", "--config", required=True)
    run.add_argument("--start-file", help="binlog file to start at; overrides the checkpoint")
    run.add_argument("--start-pos", type=int, help="offset in --start-file (a transaction start)")
    run.add_argument("--start-gtid", help="GTID set to start after; overrides the checkpoint")
    run.set_defaults(func=cmd_run)
    check = sub.add_parser("check", help="preflight: connectivity, binlog settings, privileges")
    check.add_argument("-c", "--config", required=True)
    check.set_defaults(func=cmd_check)
    tail = sub.add_parser("tail", help="decode a topic's messages as JSON lines")
    tail.add_argument("topic")
    tail.add_argument("-c", "--config", help="take the Kafka settings from this config")
    tail.add_argument("--bootstrap", default="127.0.0.1:9092")
    tail.add_argument("--namespace", help="namespace of the schema topic (default: topic prefix)")
    tail.add_argument("--from-end", action="store_true", help="only new messages")
    tail.add_argument("--max", type=argument(int, 1), help="stop after this many messages")
    tail.add_argument("--idle-exit", type=argument(float, 0, above=True),
                      help="stop after this many idle seconds")
    tail.set_defaults(func=cmd_tail)
    status = sub.add_parser("status", help="position, lag, throughput, latency of the running instance")
    status.add_argument("-c", "--config", required=True)
    status.add_argument("--json", action="store_true", help="the raw /status JSON")
    status.set_defaults(func=cmd_status)
    prof = sub.add_parser("profile", help="top functions and a flame graph SVG of a vmprof file")
    prof.add_argument("file")
    prof.add_argument("--svg", help="flame graph output (default FILE.svg)")
    prof.add_argument("--collapsed", help="collapsed-stack output (default FILE.collapsed)")
    prof.add_argument("--top", type=argument(int, 1), default=20, help="functions per table")
    prof.set_defaults(func=cmd_profile)
    snap = sub.add_parser("snapshot", help="ask the streamer to copy tables' existing rows (op r)")
    snap.add_argument("-c", "--config", required=True)
    snap.add_argument("--tables", required=True, help="db.table[,db.table...]")
    snap.add_argument("--where", help="SQL condition: only the rows it selects")
    snap.add_argument("--follow", action="store_true",
                      help="show the progress (from the running streamer's /status) until done")
    snap.set_defaults(func=cmd_snapshot)
    aud = sub.add_parser("audit", help="compare tables with their topics, key by key (exit 1: "
                                       "they differ)")
    aud.add_argument("-c", "--config", required=True)
    aud.add_argument("--tables", required=True, help="db.table[,db.table...]")
    aud.add_argument("--where", help="SQL condition: only the rows it selects (no extra keys "
                                     "are looked for then)")
    aud.add_argument("--json", action="store_true", help="one JSON report per table")
    aud.add_argument("--timeout", type=argument(float, 0, above=True), default=300.0,
                     help="seconds to wait for the streamer to pass each read")
    aud.set_defaults(func=cmd_audit)
    ver = sub.add_parser("verify", help="canary verdict: watch its /status over a window")
    ver.add_argument("-c", "--config", required=True, help="the canary's config")
    ver.add_argument("--main-config", help="main's config, to compare throughput when it runs")
    ver.add_argument("--window", type=argument(float, 0, above=True), default=30.0,
                     help="seconds to watch")
    ver.add_argument("--max-lag-s", type=argument(float, 0), default=60.0, help="fail above this lag")
    ver.add_argument("--max-slower-pct", type=argument(float, 0, high=100), default=25.0,
                     help="fail when this many percent below main's rows/s")
    ver.set_defaults(func=cmd_verify)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None and sys.argv[1:2] == ["run"]:  # a command line, not a caller's own process
        # Before argparse and before anything else is imported: all of it would be again.
        _restart_with_gc_settings()
    args = build_parser().parse_args(argv)

    from confluent_kafka import KafkaException

    from streamer.kafka import logs
    from streamer.ops import logfmt

    try:
        return args.func(args)
    except StreamerError as exc:
        print(logfmt.error_line(exc.label, str(exc), exc.exit_code, LOG_FORMAT[0]),
              file=sys.stderr)
        return exc.exit_code
    except KafkaException as exc:
        # A client call the streamer didn't wrap: still Kafka's side, still one line.
        print(logfmt.error_line("Kafka error", str(exc), EXIT_KAFKA, LOG_FORMAT[0]),
              file=sys.stderr)
        return EXIT_KAFKA
    except BrokenPipeError:
        # The reader of the output went first (`streamer tail TOPIC | head`): as other tools
        # do, no traceback, and nothing more written to the closed pipe at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141  # 128 + SIGPIPE, as a shell reports a pipe's writer that stopped there
    finally:
        # Every Kafka client the command let go of (or that only an error still held) is
        # destroyed here, before the interpreter's teardown (kafka.logs.free_dropped_clients).
        logs.free_dropped_clients()


if __name__ == "__main__":
    sys.exit(main())
