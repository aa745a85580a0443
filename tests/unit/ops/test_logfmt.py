"""Log lines as JSON (log_format: json): one object per line, the fields a pipeline needs."""
import json
import logging

from streamer.ops import logfmt


def test_a_json_line_has_time_level_logger_message_and_the_fields_it_was_given():
    record = logging.LogRecord("streamer.engine", logging.WARNING, "f.py", 1, "table %s: %d rows",
                               ("shop.t", 3), None)
    record.table = "shop.t"
    record.position = "mysql-bin.000002:4"
    line = json.loads(logfmt.JsonFormatter().format(record))
    assert line["level"] == "WARNING" and line["logger"] == "streamer.engine"
    assert line["message"] == "table shop.t: 3 rows"
    assert (line["table"], line["position"]) == ("shop.t", "mysql-bin.000002:4")
    assert line["time"].endswith("Z") and "T" in line["time"]
    assert "args" not in line and "msg" not in line


def test_a_traceback_is_one_field_of_one_line():
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        record = logging.LogRecord("x", logging.ERROR, "f.py", 1, "failed", (), sys.exc_info())
    out = logfmt.JsonFormatter().format(record)
    assert "\n" not in out and "ValueError: boom" in json.loads(out)["exception"]


def test_a_commands_error_line_is_json_with_its_exit_code_when_asked():
    text = logfmt.error_line("source error", "MySQL at h:1 refused", 3, "text")
    assert text == "streamer: source error: MySQL at h:1 refused"
    line = json.loads(logfmt.error_line("source error", "MySQL at h:1 refused", 3, "json"))
    assert (line["level"], line["error"], line["exit_code"]) == ("ERROR", "source error", 3)


def test_an_uncaught_exception_of_any_thread_is_one_json_line_and_the_exit_stays_1():
    # With log.format json, a crash (a bug: no error of the streamer's own) and a background
    # thread's exception came out as Python's multi-line tracebacks, which a pipeline reading
    # JSON lines drops or splits.
    import subprocess
    import sys

    code = ("from streamer.ops import logfmt\n"
            "logfmt.setup('INFO', 'json')\n"
            "import threading\n"
            "t = threading.Thread(target=lambda: 1 / 0, name='worker')\n"
            "t.start(); t.join()\n"
            "class Leaky:\n"
            "    def __del__(self):\n"
            "        raise OSError('closing')\n"
            "Leaky(); import gc; gc.collect()\n"
            "raise KeyError('the last straw')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 1
    lines = [json.loads(line) for line in done.stderr.splitlines()]  # every line is JSON
    assert len(lines) == 3, done.stderr
    thread, ignored, main = lines
    assert ignored["level"] == "WARNING" and "Exception ignored in" in ignored["message"]
    assert "OSError: closing" in ignored["exception"]
    assert thread["level"] == "ERROR" and "thread worker ended" in thread["message"]
    assert "ZeroDivisionError" in thread["exception"]
    assert main["level"] == "CRITICAL" and "KeyError: 'the last straw'" in main["exception"]
    assert main["exit_code"] == 1
