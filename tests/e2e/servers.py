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

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

from tests import support


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class PrivateMariaDB:
    def __init__(self, base: str, extra_args: str = "", env: Optional[Dict[str, str]] = None):
        self.base = base
        self.port = free_port()
        self.env = dict(os.environ, STREAMER_MYSQL_DIR=base, STREAMER_MYSQL_PORT=str(self.port),
                        STREAMER_MYSQL_EXTRA_ARGS=extra_args, **(env or {}))
        # Where the password files are (a replica shares its primary's).
        self.secrets_base = os.path.dirname(self.env.get("STREAMER_MYSQL_SECRETS", "")) or base
        self.script = os.path.join(support.ROOT, "deploy/local/mysql.sh")

    def replica(self, base: str, server_id: int = 2) -> "PrivateMariaDB":
        """A GTID replica of this server (deploy/local/mysql.sh, STREAMER_MYSQL_REPLICA_OF),
        with the same passwords; not started."""
        return PrivateMariaDB(base, env={"STREAMER_MYSQL_SERVER_ID": str(server_id),
                                         "STREAMER_MYSQL_SECRETS": os.path.join(self.base, "secrets"),
                                         "STREAMER_MYSQL_REPLICA_OF": str(self.port)})

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
    """The source's own history: (file, event start, row index, op, key) of every row change."""
    reader = BinLogStreamReader(
        connection_settings={"host": "127.0.0.1", "port": port, "user": user, "password": password},
        server_id=999000 + port % 1000, blocking=False, resume_stream=True,
        log_file=start[0], log_pos=start[1],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], only_schemas=[db],
        enable_logging=False)
    out = []
    ops = {WriteRowsEvent: "c", UpdateRowsEvent: "u", DeleteRowsEvent: "d"}
    try:
        for ev in reader:
            if (reader.log_file, ev.packet.log_pos) > (end[0], end[1]):
                break
            pos = ev.packet.log_pos - ev.packet.event_size
            for i, row in enumerate(ev.rows):
                values = row.get("after_values") or row.get("values")
                out.append((reader.log_file, pos, i, ops[type(ev)], values.get("id")))
    finally:
        reader.close()
    return out
