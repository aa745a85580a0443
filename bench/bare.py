"""The parse limit: a bare python-mysql-replication read of a binlog range, touching every row.

Runs as a child under the interpreter being measured (``python -m bench.bare``) and prints one
JSON object. Only the library is used: no streamer code, no Kafka. The password is read from a
file whose path is given, never passed in argv.
"""
from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from typing import Any, Dict, Tuple

from pymysqlreplication import BinLogStreamReader
from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent


def interpreter() -> Dict[str, str]:
    """Name and version of this interpreter, the key results are grouped by."""
    impl = platform.python_implementation()
    version = platform.python_version()
    if impl == "PyPy":
        pypy = ".".join(str(v) for v in sys.pypy_version_info[:3])  # type: ignore[attr-defined]
        return {"interpreter": "pypy", "version": f"{version}/pypy-{pypy}"}
    return {"interpreter": impl.lower(), "version": version}


def _position(text: str) -> Tuple[str, int]:
    name, _, pos = text.rpartition(":")
    return name, int(pos)


def read(settings: Dict[str, Any], server_id: int, start: Tuple[str, int], end: Tuple[str, int],
         db: str, rows: int) -> Dict[str, Any]:
    """Rows/s over the whole range (cold) and over its second half (warm)."""
    began = time.monotonic()
    reader = BinLogStreamReader(
        connection_settings=settings, server_id=server_id, blocking=False, resume_stream=True,
        log_file=start[0], log_pos=start[1],
        only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent], enable_logging=False)
    seen = 0
    touched = 0
    half_at = None
    half_seen = 0
    try:
        for event in reader:
            if (reader.log_file, event.packet.log_pos) > end:
                break
            batch = event.rows
            touched += len(batch)
            if event.schema == db:
                seen += len(batch)
                if half_at is None and seen >= rows // 2:
                    half_at = time.monotonic()
                    half_seen = seen
    finally:
        reader.close()
    ended = time.monotonic()
    if seen != rows:
        raise SystemExit(f"bare read found {seen} rows of {db} between {start} and {end}, "
                         f"expected {rows}: the binlog range is wrong or was purged")
    total = ended - began
    warm = (seen - half_seen) / (ended - half_at) if half_at and ended > half_at else None
    return {"rows": seen, "rows_in_range": touched, "seconds": round(total, 3),
            "rows_s": round(seen / total, 1), "warm_rows_s": round(warm, 1) if warm else None,
            **interpreter()}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--user", default="streamer")
    p.add_argument("--password-file", required=True)
    p.add_argument("--server-id", type=int, required=True)
    p.add_argument("--start", required=True, help="FILE:POS")
    p.add_argument("--end", required=True, help="FILE:POS")
    p.add_argument("--db", required=True, help="count the rows of this database")
    p.add_argument("--rows", type=int, required=True, help="rows expected in the range")
    args = p.parse_args()
    with open(args.password_file, encoding="utf-8") as fh:
        password = fh.read().strip()
    settings = {"host": "127.0.0.1", "port": args.port, "user": args.user, "password": password}
    out = read(settings, args.server_id, _position(args.start), _position(args.end), args.db,
               args.rows)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
