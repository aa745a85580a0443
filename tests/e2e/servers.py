"""Private MariaDB and Kafka instances for tests that restart, purge or kill a server.

The shared servers on the default ports are never restarted by a test; these run on free ports
with their own state directories, using the same project scripts.
"""
from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

import pymysql
from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.event import (GtidEvent, MariadbAnnotateRowsEvent, MariadbGtidEvent,
                                      QueryEvent, RotateEvent, XidEvent)
from pymysqlreplication.row_event import (DeleteRowsEvent, TableMapEvent, UpdateRowsEvent,
                                          WriteRowsEvent)

from streamer.source import patches
from streamer.source.positions import ask_for_annotations

from tests import support

patches.apply()  # MariaDB 11's query events are read as `streamer run` reads them


# MySQL 8.0's defaults: transactions without GTIDs (flavour mysql-8.0 runs with them).
WITHOUT_GTIDS = "--gtid-mode=OFF --enforce-gtid-consistency=OFF"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateMariaDB:
    """A private server of any flavour of the source matrix (MariaDB 10.11 by default)."""

    def __init__(self, base: str, extra_args: str = "", env: Optional[Dict[str, str]] = None,
                 flavour: str = "mariadb-10.11"):
        self.base = base
        self.port = free_port()
        self.flavour = flavour
        self.mysql = flavour.startswith("mysql")
        self.env = dict(os.environ, STREAMER_MYSQL_DIR=base, STREAMER_MYSQL_PORT=str(self.port),
                        STREAMER_MYSQL_EXTRA_ARGS=extra_args, STREAMER_MYSQL_FLAVOUR=flavour,
                        **(env or {}))
        # Where the password files are (a replica shares its primary's).
        self.secrets_base = os.path.dirname(self.env.get("STREAMER_MYSQL_SECRETS", "")) or base
        self.script = os.path.join(support.ROOT, "deploy/local/mysql.sh")

    def replica(self, base: str, server_id: int = 2, extra_args: str = "") -> "PrivateMariaDB":
        """A GTID replica of this server (deploy/local/mysql.sh, STREAMER_MYSQL_REPLICA_OF),
        with the same passwords; not started."""
        return PrivateMariaDB(base, extra_args, env={"STREAMER_MYSQL_SERVER_ID": str(server_id),
                                         "STREAMER_MYSQL_SECRETS": os.path.join(self.base, "secrets"),
                                         "STREAMER_MYSQL_REPLICA_OF": str(self.port)},
                              flavour=self.flavour)

    def gtid_position(self) -> str:
        """The GTID set the server's binlog holds (MariaDB gtid_binlog_pos, MySQL gtid_executed)."""
        name = "gtid_executed" if self.mysql else "gtid_binlog_pos"
        return "".join(str(support.sql(self.admin(), f"SELECT @@GLOBAL.{name}")[0][0]).split())

    def wait_for_gtids(self, gtids: str, timeout: int = 60) -> bool:
        """Whether this server (a replica) applied ``gtids`` within ``timeout`` seconds."""
        if self.mysql:
            got = support.sql(self.admin(), "SELECT WAIT_FOR_EXECUTED_GTID_SET(%s, %s)",
                              args=(gtids, timeout))[0][0]
        else:
            got = support.sql(self.admin(), "SELECT MASTER_GTID_WAIT(%s, %s)",
                              args=(gtids, timeout))[0][0]
        return got == 0

    def kill(self) -> None:
        """SIGKILL the server, as a crash of its host would end it."""
        with open(os.path.join(self.base, "mysqld.pid")) as fh:
            pid = int(fh.read().strip())
        os.kill(pid, signal.SIGKILL)
        while True:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return
            time.sleep(0.05)

    def up(self) -> None:
        subprocess.run([self.script, "up"], env=self.env, check=True, capture_output=True)

    def down(self) -> None:
        subprocess.run([self.script, "down"], env=self.env, check=True, capture_output=True)

    def admin(self, db: str = None) -> Any:
        return support.admin(db, port=self.port, base=self.secrets_base)

    def seq(self, n: int) -> str:
        return support.seq(n, self.mysql)

    def password_file(self) -> str:
        return os.path.join(self.secrets_base, "secrets", "streamer.password")

    def __enter__(self) -> "PrivateMariaDB":
        self.up()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.down()


class PrivateKafka:
    def __init__(self, base: str, env: Optional[Dict[str, str]] = None):
        self.base = base
        self.port = free_port()
        self.cport = free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.env = dict(os.environ, STREAMER_KAFKA_DIR=base, STREAMER_KAFKA_PORT=str(self.port),
                        STREAMER_KAFKA_CONTROLLER_PORT=str(self.cport), **(env or {}))
        self.script = os.path.join(support.ROOT, "deploy/local/kafka.sh")
        shared_libs = os.path.join(support.LOCAL, "kafka", "libs")
        os.makedirs(base, exist_ok=True)
        if not os.path.exists(os.path.join(base, "libs")):
            # Reuse the jars the shared broker already fetched instead of another maven run.
            os.symlink(shared_libs, os.path.join(base, "libs"))

    def up(self) -> None:
        subprocess.run([self.script, "up"], env=self.env, check=True, capture_output=True)

    def down(self) -> None:
        subprocess.run([self.script, "down"], env=self.env, check=True, capture_output=True)

    def __enter__(self) -> "PrivateKafka":
        self.up()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.down()


def binlog_rows(port: int, password: str, start: Tuple[str, int], end: Tuple[str, int],
                db: str, user: str = "admin") -> List[Tuple[str, int, int, str, Dict[str, Any]]]:
    """The source's own history: (file, event start, row index, op, key) of every row change.

    A server that writes no offset inside a transaction (MariaDB 11.4's default
    binlog_legacy_event_pos=OFF) is read with every event of each transaction, its annotations
    included, and each event without an offset starts where the one before it ended (worked
    out here on its own, to check the streamer's source.positions against)."""
    settings = {"host": "127.0.0.1", "port": port, "user": user, "password": password}
    conn = pymysql.connect(**settings)
    try:
        with conn.cursor() as cur:
            cur.execute("SHOW GLOBAL VARIABLES LIKE 'binlog_legacy_event_pos'")
            row = cur.fetchone()
    finally:
        conn.close()
    offsets_written = row is None or str(row[1]).upper() in ("ON", "1")
    rows_events = (WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent)
    ops = {WriteRowsEvent: "c", UpdateRowsEvent: "u", DeleteRowsEvent: "d"}
    def connect(**kwargs: Any) -> Any:
        conn = pymysql.connections.Connection(**kwargs)
        if not offsets_written:
            ask_for_annotations(conn)
        return conn

    reader = BinLogStreamReader(
        connection_settings=settings, server_id=999000 + port % 1000, blocking=False,
        resume_stream=True, log_file=start[0], log_pos=start[1], enable_logging=False,
        pymysql_wrapper=connect,
        only_events=list(rows_events) + [TableMapEvent, XidEvent, QueryEvent, RotateEvent,
                                         MariadbGtidEvent, GtidEvent, MariadbAnnotateRowsEvent],
        annotate_rows_event=not offsets_written)
    out = []
    next_pos = start[1]
    try:
        for ev in reader:
            packet = ev.packet
            if isinstance(ev, RotateEvent):
                next_pos = ev.position
                continue
            if packet.log_pos:
                pos, next_pos = packet.log_pos - packet.event_size, packet.log_pos
            else:
                pos, next_pos = next_pos, next_pos + packet.event_size
            if (reader.log_file, next_pos) > (end[0], end[1]):
                break
            if isinstance(ev, rows_events) and ev.schema == db:
                for i, row in enumerate(ev.rows):
                    values = row.get("after_values") or row.get("values")
                    out.append((reader.log_file, pos, i, ops[type(ev)], values.get("id")))
    finally:
        reader.close()
    return out
