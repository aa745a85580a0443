"""Command line: ``streamer run | check | tail | verify | status | profile``."""
from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple

from . import config as config_mod

log = logging.getLogger("streamer")

EXIT_CONFIG = 2
EXIT_SOURCE = 3
EXIT_KAFKA = 4
EXIT_REGISTRY = 5


def _setup_logging(level: str) -> None:
    logging.basicConfig(level=getattr(logging, level), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


# PyPy's JIT compiles a loop after ~1000 iterations by default. The streamer's loops are few
# and hot, so compiling them sooner shortens warm-up: a 200k-row bulk catch-up went from
# 65k to 74k rows/s cold (medians of 2; warm unchanged at ~80k).
JIT_PARAMS = "threshold=200,function_threshold=250,trace_eagerness=50"


def _tune_jit() -> None:
    if sys.implementation.name == "pypy":
        import pypyjit  # type: ignore[import-not-found]
        pypyjit.set_param(JIT_PARAMS)


# PyPy sizes its GC nursery from the cache size the CPU reports: 52.5 MB on one machine of this
# project's kind, 1 MB on another (a VM reporting "cache size: 1024 KB"). With 1 MB, much of each
# binlog event's short-lived data outlives a minor collection, and the old generation then needs a
# major collection every ~12k rows. A 400k-row bulk catch-up: 32 major collections and 160k rows/s
# with 1 MB; 5 and 195-230k with 8 MB, for ~6 MB more RSS. So `run` fixes it, unless the operator has.
GC_NURSERY = "8MB"


def _restart_with_gc_settings() -> None:
    """Under PyPy, run this same command again (exec: the same process) with GC_NURSERY set.
    The nursery size is read only when the interpreter starts."""
    if sys.implementation.name != "pypy" or os.environ.get("PYPY_GC_NURSERY"):
        return
    os.environ["PYPY_GC_NURSERY"] = GC_NURSERY
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:  # python -m streamer.cli
        os.execv(sys.executable, [sys.executable, "-m", spec.name, *sys.argv[1:]])
    os.execv(sys.executable, [sys.executable, *sys.argv])  # the console script


def cmd_run(args: argparse.Namespace) -> int:
    from .pipeline import Streamer
    from .position import Position

    cfg = config_mod.load(args.config)
    # After the config, not before: with the eager thresholds, PyPy also compiled yaml's one-off
    # parse of it, and reading the config took 52-90 ms instead of 26-40 (7 cold starts each).
    _tune_jit()
    _setup_logging(cfg["log_level"])
    if sys.implementation.name == "pypy":
        import gc
        log.info("PyPy GC nursery %.1f MiB (PYPY_GC_NURSERY)",
                 gc._get_stats(False).nursery_size / 2 ** 20)  # type: ignore[attr-defined]
    start = None
    if (args.start_file is None) != (args.start_pos is None):
        raise config_mod.ConfigError("--start-file and --start-pos go together")
    if args.start_file is not None:
        start = Position(args.start_file, args.start_pos)
    from .observe import Observability

    with Observability(cfg) as obs:
        streamer = Streamer(cfg, start=start, start_gtid=args.start_gtid, metrics=obs.metrics)
        streamer.install_signals()
        return streamer.run()


def cmd_status(args: argparse.Namespace) -> int:
    from .httpstatus import EndpointUnavailable, fetch_status, status_text

    cfg = config_mod.load(args.config)
    try:
        st = fetch_status(cfg)
    except EndpointUnavailable as exc:
        print(f"streamer: {exc}", file=sys.stderr)
        return 1
    print(json.dumps(st, indent=2, sort_keys=True) if args.json else status_text(st))
    return 0


def cmd_profile(args: argparse.Namespace) -> int:
    from .flamegraph import report

    try:
        print(report(args.file, args.svg or args.file + ".svg",
                     args.collapsed or args.file + ".collapsed", args.top))
    except (OSError, ValueError) as exc:
        print(f"streamer: cannot read profile: {exc}", file=sys.stderr)
        return 1
    return 0


def _checks(cfg: Dict[str, Any]) -> List[Tuple[str, bool, str]]:
    import pymysql
    from confluent_kafka.admin import AdminClient

    from .reader import REQUIRED_SETTINGS, connect, connection_settings, variables

    results: List[Tuple[str, bool, str]] = []
    m = cfg["mysql"]
    where = f"{m['user']}@{m['host']}:{m['port']}"
    try:
        password = config_mod.mysql_password(cfg)
        conn = connect(connection_settings(cfg, password))
    except config_mod.ConfigError as exc:
        results.append(("MySQL password", False, str(exc)))
        conn = None
    except pymysql.err.MySQLError as exc:
        results.append((f"MySQL login {where}", False,
                        f"{exc.args[-1]}; check mysql.host/port/user and the password"))
        conn = None
    if conn is not None:
        results.append((f"MySQL login {where}", True, conn.get_server_info()))
        try:
            found = variables(conn, [n for n, _, _ in REQUIRED_SETTINGS])
            for name, want, fix in REQUIRED_SETTINGS:
                have = found.get(name, "not available")
                ok = have.upper() == want
                results.append((f"{name} = {want}", ok, f"is {have}" if ok else f"is {have}: {fix}"))
            results.extend(_privilege_checks(conn))
        finally:
            conn.close()
    try:
        admin = AdminClient({k: v for k, v in cfg["kafka"].items()})
        md = admin.list_topics(timeout=10)
        results.append((f"Kafka {cfg['kafka']['bootstrap.servers']}", True,
                        f"{len(md.brokers)} broker(s)"))
    except Exception as exc:  # noqa: BLE001 - any client failure means "not reachable"; reported
        results.append((f"Kafka {cfg['kafka']['bootstrap.servers']}", False,
                        f"{exc}; check kafka.bootstrap.servers and that the brokers are up"))
    return results


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


def cmd_check(args: argparse.Namespace) -> int:
    cfg = config_mod.load(args.config)
    results = _checks(cfg)
    for name, ok, detail in results:
        print(f"{'✓' if ok else '✗'} {name}: {detail}")
    failed = [r for r in results if not r[1]]
    print(f"{len(results) - len(failed)} passed, {len(failed)} failed")
    return 0 if not failed else 1


def cmd_tail(args: argparse.Namespace) -> int:
    from confluent_kafka import Consumer, KafkaError

    from .decode import Decoder, kafka_schema_source, to_jsonable

    conf: Dict[str, Any] = {"bootstrap.servers": args.bootstrap}
    if args.config:
        conf = dict(config_mod.load(args.config)["kafka"])
    namespace = args.namespace or args.topic.split(".")[0]
    decoder = Decoder(kafka_schema_source(conf, namespace))
    consumer = Consumer(dict(conf, **{
        "group.id": f"streamer-tail-{time.time()}", "enable.auto.commit": False,
        "auto.offset.reset": "latest" if args.from_end else "earliest",
        "isolation.level": "read_committed"}))
    consumer.subscribe([args.topic])
    seen = 0
    idle_since = time.monotonic()
    try:
        while args.max is None or seen < args.max:
            msg = consumer.poll(0.5)
            if msg is None:
                if args.idle_exit and time.monotonic() - idle_since > args.idle_exit:
                    break
                continue
            if msg.error():
                if msg.error().code() == KafkaError._PARTITION_EOF:
                    continue
                raise RuntimeError(msg.error().str())
            idle_since = time.monotonic()
            line = {"topic": msg.topic(), "partition": msg.partition(), "offset": msg.offset(),
                    "key": decoder.decode(msg.key()), "value": decoder.decode(msg.value())}
            print(json.dumps(to_jsonable(line), sort_keys=True), flush=True)
            seen += 1
    except KeyboardInterrupt:
        pass
    finally:
        consumer.close()
    return 0


def cmd_verify(args: argparse.Namespace) -> int:
    from . import verify

    url = verify.base_url(config_mod.load(args.config))
    main_url = verify.base_url(config_mod.load(args.main_config)) if args.main_config else None
    return verify.run(url, main_url, args.window, verify.Limits(args.max_lag_s, args.max_slower_pct))


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="streamer", description="MySQL binlog -> Kafka (Avro), exactly once")
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
    tail.add_argument("--max", type=int, help="stop after this many messages")
    tail.add_argument("--idle-exit", type=float, help="stop after this many idle seconds")
    tail.set_defaults(func=cmd_tail)
    status = sub.add_parser("status", help="position, lag, throughput, latency of the running instance")
    status.add_argument("-c", "--config", required=True)
    status.add_argument("--json", action="store_true", help="the raw /status JSON")
    status.set_defaults(func=cmd_status)
    prof = sub.add_parser("profile", help="top functions and a flame graph SVG of a vmprof file")
    prof.add_argument("file")
    prof.add_argument("--svg", help="flame graph output (default FILE.svg)")
    prof.add_argument("--collapsed", help="collapsed-stack output (default FILE.collapsed)")
    prof.add_argument("--top", type=int, default=20, help="functions per table")
    prof.set_defaults(func=cmd_profile)
    ver = sub.add_parser("verify", help="canary verdict: watch its /status over a window")
    ver.add_argument("-c", "--config", required=True, help="the canary's config")
    ver.add_argument("--main-config", help="main's config, to compare throughput when it runs")
    ver.add_argument("--window", type=float, default=30.0, help="seconds to watch")
    ver.add_argument("--max-lag-s", type=float, default=60.0, help="fail above this lag")
    ver.add_argument("--max-slower-pct", type=float, default=25.0,
                     help="fail when this many percent below main's rows/s")
    ver.set_defaults(func=cmd_verify)
    return p


def main(argv: Optional[Sequence[str]] = None) -> int:
    if argv is None and sys.argv[1:2] == ["run"]:  # a command line, not a caller's own process
        # Before argparse and before anything else is imported: all of it would be again.
        _restart_with_gc_settings()
    args = build_parser().parse_args(argv)

    from confluent_kafka import KafkaException

    from .publisher import Fenced, KafkaFatal
    from .reader import SourceError
    from .registry import RegistryError
    from .tables import MissingColumnNames

    try:
        return args.func(args)
    except config_mod.ConfigError as exc:
        print(f"streamer: config error: {exc}", file=sys.stderr)
        return EXIT_CONFIG
    except (SourceError, MissingColumnNames) as exc:
        print(f"streamer: error: {exc}", file=sys.stderr)
        return EXIT_SOURCE
    except Fenced as exc:
        print(f"streamer: fenced: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    except (KafkaFatal, KafkaException) as exc:
        print(f"streamer: Kafka error: {exc}", file=sys.stderr)
        return EXIT_KAFKA
    except RegistryError as exc:
        print(f"streamer: {exc}", file=sys.stderr)
        return EXIT_REGISTRY


if __name__ == "__main__":
    sys.exit(main())
