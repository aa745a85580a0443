"""log: {format: json}: every line the streamer and its commands write is one JSON object, with
the fields a log pipeline filters on (position, table, exit_code)."""
import json
import subprocess
import sys

from tests import support


def _json_lines(text):
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines
    out = []
    for line in lines:
        obj = json.loads(line)  # every line, not some: a pipeline reads them all
        assert {"time", "level", "logger", "message"} <= set(obj), obj
        out.append(obj)
    return out


def test_json_logs_of_a_run_and_of_a_failing_command(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    ns = support.unique("jl")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               log={"format": "json"})
    with support.StreamerProcess(cfg, str(tmp_path / "run.log")) as proc:
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (1)")
        support.consume([f"{ns}.{name}.t"], expect=1)
        assert proc.stop() == 0, proc.output()[-3000:]
    lines = _json_lines(proc.output())
    reading = [o for o in lines if o["message"].startswith("reading the binlog from")]
    assert reading and reading[0]["position"] in reading[0]["message"]
    assert reading[0]["level"] == "INFO" and reading[0]["logger"] == "streamer.engine.supervisor"
    versions = [o for o in lines if "new schema version" in o["message"]]
    assert versions and versions[0]["table"] == f"{name}.t"
    assert lines[0]["time"].endswith("Z") and "T" in lines[0]["time"]
    # A command that fails: its error line is JSON too, with the exit code.
    failed = subprocess.run([sys.executable, "-m", "streamer.cli", "run", "-c", cfg,
                             "--start-file", "mysql-bin.999999", "--start-pos", "4"],
                            capture_output=True, text=True, cwd=support.ROOT, timeout=120)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    errors = [o for o in _json_lines(failed.stdout + failed.stderr) if o["level"] == "ERROR"]
    assert errors[-1]["exit_code"] == 3 and "mysql-bin.999999" in errors[-1]["message"]
