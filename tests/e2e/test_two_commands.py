"""`make run`, then `make test`, then `make run` again: the suite's bench purges the default
server's binlog, and keeps every file the local streamer's checkpoint needs, so the second
`make run` resumes where the first stopped. (.ci/run runs the real sequence; this is the same
path, on a config of its own.)"""
import os
import subprocess

import yaml

from bench import binlogs
from tests import support


def _local_config(tmp_path, db):
    """deploy/local/config.sh's config, on a namespace, source name and server id of its own."""
    path = str(tmp_path / "streamer.yaml")
    subprocess.run([os.path.join(support.ROOT, "deploy", "local", "config.sh"), path],
                   check=True, capture_output=True)
    with open(path) as fh:
        cfg = yaml.safe_load(fh)
    ns = support.unique("two")
    cfg["namespace"], cfg["source"]["name"] = ns, ns
    cfg["mysql"] = support.DEFAULT.mysql_config(ns)
    cfg["tables"]["include"] = [f"{db}.*"]
    cfg["warmup"] = {"transactions": 0}
    with open(path, "w") as fh:
        yaml.safe_dump(cfg, fh)
    return path, ns


def test_a_purge_by_the_bench_keeps_what_the_local_streamer_needs_and_it_resumes(db, tmp_path):
    name, conn = db
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY)")
    cfg, ns = _local_config(tmp_path, name)
    with support.StreamerProcess(cfg, str(tmp_path / "run1.log")) as proc:  # make run
        proc.wait_reading()
        support.sql(conn, "INSERT INTO t VALUES (1), (2)")
        support.consume([f"{ns}.{name}.t"], expect=2)
        assert proc.stop() == 0, proc.output()[-3000:]
    needed = binlogs.local_needs(cfg)
    assert needed is not None
    # make test: rows written, files rotated, then the bench's purge.
    support.sql(conn, "INSERT INTO t VALUES (3)", "FLUSH BINARY LOGS", "INSERT INTO t VALUES (4)",
                "FLUSH BINARY LOGS")
    admin = support.admin()
    try:
        # What this test's streamer needs, and what the real local one (make run's) does: the
        # suite runs between two make runs (.ci/run), and the second resumes from the first.
        keep = binlogs.oldest(binlogs.local_needs(cfg), binlogs.local_needs())
        done = binlogs.purge(admin, keep_from=keep, pause_s=0.2)
        files = [row[0] for row in support.sql(admin, "SHOW BINARY LOGS")]
    finally:
        admin.close()
    assert binlogs.oldest(done.kept, needed) == done.kept and files[0] <= needed, (done, files)
    with support.StreamerProcess(cfg, str(tmp_path / "run2.log")) as proc:  # make run again
        msgs = support.consume([f"{ns}.{name}.t"], expect=4, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"]["id"] for m in msgs] == [1, 2, 3, 4]
    assert "resuming from committed checkpoint" in proc.output()
