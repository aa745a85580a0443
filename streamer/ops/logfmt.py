"""Log lines for people or for machines (``log.format``: text or json).

JSON is one object per line: ``time`` (UTC, ISO 8601, ms), ``level``, ``logger``, ``message``,
any fields the line was given (``extra``: ``table``, ``position``, ``exit_code`` ...), and the
traceback as ``exception`` when there is one. A log pipeline reads it without a pattern.
"""
from __future__ import annotations

import datetime
import json
import logging
import sys
import threading
from typing import Any, Dict

TEXT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
# A LogRecord's own attributes: the rest were given to the line (extra=...).
_OWN = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: Dict[str, Any] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.timezone.utc)
            .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _OWN and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def setup(level: str, fmt: str = "text") -> None:
    """The root logger on stderr, at ``level``, in ``fmt``; an exception no code caught, in any
    thread, and one ignored where it could not be raised (a ``__del__``), are logged there too,
    in the same format (JSON: one line, the traceback a field), rather than printed by Python as
    lines of its own."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(TEXT))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(getattr(logging, level))
    sys.excepthook = _uncaught
    threading.excepthook = _uncaught_in_thread
    sys.unraisablehook = _unraisable


def _uncaught(kind: Any, exc: Any, tb: Any) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    # The interpreter still exits with 1 after this hook.
    logging.getLogger("streamer").critical(
        "stopped by an unexpected error, a bug: please report it with this log line (%s: %s)",
        kind.__name__, exc, exc_info=(kind, exc, tb), extra={"exit_code": 1})


def _unraisable(args: Any) -> None:
    # "Exception ignored in ...": one raised where it can't propagate (a __del__, a finalizer).
    what = args.err_msg or "Exception ignored in"
    logging.getLogger("streamer").warning(
        "%s %r (%s: %s)", what, args.object, getattr(args.exc_type, "__name__", args.exc_type),
        args.exc_value, exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


def _uncaught_in_thread(args: Any) -> None:
    if args.exc_type is SystemExit:
        return
    name = args.thread.name if args.thread is not None else "?"
    logging.getLogger("streamer").error(
        "thread %s ended by an unexpected error, a bug: please report it with this log line "
        "(%s: %s)", name, args.exc_type.__name__, args.exc_value,
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback))


def error_line(label: str, message: str, exit_code: int, fmt: str) -> str:
    """A command's one line of error, as its log lines are."""
    if fmt != "json":
        return f"streamer: {label}: {message}"
    return json.dumps({"time": datetime.datetime.now(datetime.timezone.utc)
                       .isoformat(timespec="milliseconds").replace("+00:00", "Z"),
                       "level": "ERROR", "logger": "streamer", "message": message,
                       "error": label, "exit_code": exit_code}, ensure_ascii=False)
