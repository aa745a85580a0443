"""The MySQL server the binlog comes from: connections, its settings for row-based CDC, its binlog
files, and the error codes that mean a retry won't help."""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import pymysql

from streamer.errors import SourceError

ER_MASTER_FATAL_READING_BINLOG = 1236


ER_ACCESS_DENIED = (1045, 1044, 1227, 1142, 1143)


ER_LOGIN_REFUSED = (1045, 4151)  # wrong user or password; account locked


def connection_settings(cfg: Dict[str, Any], password: str) -> Dict[str, Any]:
    m = cfg["mysql"]
    return {"host": m["host"], "port": m["port"], "user": m["user"], "password": password,
            "connect_timeout": m["connect_timeout_s"]}


def connect(settings: Dict[str, Any]) -> pymysql.connections.Connection:
    return pymysql.connect(autocommit=True, **settings)


def query_one(conn: Any, sql: str) -> Optional[Tuple]:
    with conn.cursor() as cur:
        cur.execute(sql)
        return cur.fetchone()


def variables(conn: Any, names: List[str]) -> Dict[str, str]:
    with conn.cursor() as cur:
        cur.execute("SHOW GLOBAL VARIABLES WHERE Variable_name IN (%s)" %
                    ",".join(["%s"] * len(names)), names)
        return {k.lower(): v for k, v in cur.fetchall()}


REQUIRED_SETTINGS = [
    ("log_bin", "ON", "start the server with --log-bin (binary logging is off)"),
    ("binlog_format", "ROW", "set binlog_format=ROW (SET GLOBAL binlog_format='ROW' and in my.cnf)"),
    ("binlog_row_image", "FULL", "set binlog_row_image=FULL so updates and deletes carry every column"),
    ("binlog_row_metadata", "FULL",
     "set binlog_row_metadata=FULL (MySQL >= 8.0.14, MariaDB >= 10.5) so the binlog carries column names"),
]


def settings_problems(conn: Any) -> List[str]:
    """One message per binlog setting that keeps the streamer from working, naming the fix."""
    found = variables(conn, [n for n, _, _ in REQUIRED_SETTINGS])
    problems = []
    for name, want, fix in REQUIRED_SETTINGS:
        have = found.get(name)
        if have is None or have.upper() != want:
            problems.append(f"{name} is {have or 'not available'}, must be {want}: {fix}")
    return problems


def binlog_files(conn: Any) -> List[str]:
    with conn.cursor() as cur:
        cur.execute("SHOW BINARY LOGS")
        return [row[0] for row in cur.fetchall()]


def master_status(conn: Any) -> Tuple[str, int]:
    row = query_one(conn, "SHOW MASTER STATUS")
    if row is None:
        raise SourceError("SHOW MASTER STATUS returned nothing: binary logging is off; "
                          "start the server with --log-bin")
    return row[0], int(row[1])


def is_mariadb(conn: Any) -> bool:
    return "mariadb" in conn.get_server_info().lower()
