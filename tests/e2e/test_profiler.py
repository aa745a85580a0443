"""vmprof in a running streamer: SIGUSR2 on and off, shutdown, auto-profiling, CPython refusal."""
import glob
import os
import platform
import re
import signal
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from tests import support

PYPY = platform.python_implementation() == "PyPy"
needs_pypy = pytest.mark.skipif(not PYPY, reason="vmprof 0.6 segfaults while sampling on CPython "
                                                "(RUNTIME.md); the streamer profiles under PyPy")
SVG = "{http://www.w3.org/2000/svg}"


def bulk_rows(conn, n, start_id=0, chunk=1000):
    for lo in range(0, n, chunk):
        values = ",".join(f"({start_id + i}, REPEAT('p', 120), {i} * 1.5, NOW(6))"
                          for i in range(lo, min(n, lo + chunk)))
        support.sql(conn, f"INSERT INTO t VALUES {values}")


def make_table(conn):
    support.sql(conn, "CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(200), d DECIMAL(12,4), "
                      "ts DATETIME(6))")


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "streamer.cli", *args], capture_output=True,
                          text=True, cwd=support.ROOT)


@needs_pypy
def test_sigusr2_profiles_a_busy_streamer_and_profile_names_its_functions_in_an_svg(db, tmp_path):
    name, conn = db
    make_table(conn)
    ns = support.unique("prof")
    pdir = tmp_path / "profiles"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               profiler={"enabled": True, "dir": str(pdir)})
    topic = f"{ns}.{name}.t"
    start = support.master_pos(conn)
    with support.StreamerProcess(cfg, str(tmp_path / "s.log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        support.wait_for(lambda: "profiler ready" in proc.output(), timeout=90)
        bulk_rows(conn, 10, 0)
        support.consume([topic], expect=10, idle=0.2)
        proc.proc.send_signal(signal.SIGUSR2)
        support.wait_for(lambda: "profiling started (signal)" in proc.output(), timeout=60)
        bulk_rows(conn, 30000, 100)
        support.consume([topic], expect=30010, idle=0.5)
        proc.proc.send_signal(signal.SIGUSR2)
        support.wait_for(lambda: "profiling stopped (SIGUSR2)" in proc.output(), timeout=60)
        # A profile still running at shutdown is stopped and closed by the shutdown path.
        proc.proc.send_signal(signal.SIGUSR2)
        support.wait_for(lambda: proc.output().count("profiling started (signal)") == 2, timeout=60)
        assert proc.stop() == 0, proc.output()
    out = proc.output()
    assert "profiling stopped (shutdown)" in out
    files = sorted(glob.glob(str(pdir / "streamer-*-signal.vmprof")), key=os.path.getmtime)
    assert len(files) == 2 and all(os.path.getsize(f) > 0 for f in files)
    busy = files[0]
    svg_path = str(tmp_path / "flame.svg")
    res = run_cli("profile", busy, "--svg", svg_path, "--top", "15")
    assert res.returncode == 0, res.stderr
    assert "top functions by self time" in res.stdout and "top functions by total time" in res.stdout
    # The streamer's own hot path shows up by name.
    assert re.search(r"process_event \(rows\.py:\d+\)", res.stdout), res.stdout
    assert re.search(r"_loop \(pipeline\.py:\d+\)", res.stdout), res.stdout
    root = ET.parse(svg_path).getroot()
    assert root.tag == SVG + "svg"
    assert len(root.findall(f".//{SVG}rect")) > 10
    texts = [t.text or "" for t in root.iter(SVG + "text")]
    assert any(t.startswith("_loop (pipeline.py") for t in texts)
    collapsed = open(busy + ".collapsed").read().splitlines()
    assert collapsed and all(re.match(r"^.+ \d+$", line) for line in collapsed)
    assert any("process_event (rows.py" in line for line in collapsed)
    # The profile stopped by shutdown is complete: it reads back.
    import vmprof

    assert vmprof.read_profile(files[1]).profiles is not None


@needs_pypy
def test_auto_profile_starts_when_saturated_stops_before_caught_up_and_keeps_k(db, tmp_path):
    name, conn = db
    make_table(conn)
    pdir = tmp_path / "profiles"
    pdir.mkdir()
    for i in range(2):  # older profiles beyond profiler.keep are removed
        (pdir / f"streamer-20200101-00000{i}-000-auto.vmprof").write_bytes(b"old")
    start = support.master_pos(conn)
    # The profile must stop in the stretch below half its threshold, which the streamer only sees
    # at each backlog poll (every metrics.interval_s): with the threshold at 3/4 of the backlog
    # that stretch is its last 3/8, ~0.5 s at 220k rows/s, against a poll every 0.1 s.
    rows = 300000
    bulk_rows(conn, rows, 0, chunk=2000)
    backlog = support.master_pos(conn)[1] - start[1]
    ns = support.unique("auto")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               metrics={"interval_s": 0.1, "log_summary": False},
                               batch={"max_messages": 2000, "linger_ms": 50},
                               profiler={"enabled": True, "auto": True, "dir": str(pdir),
                                         "auto_backlog_bytes": backlog * 3 // 4, "auto_max_s": 150.0,
                                         "keep": 1})
    with support.StreamerProcess(cfg, str(tmp_path / "s.log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        # auto_max_s is only a safety net here: a starved host took 55 s for this catch-up.
        support.wait_for(lambda: "profiling stopped (auto" in proc.output(), timeout=180,
                         what="an auto profile to stop")
        support.consume([f"{ns}.{name}.t"], expect=rows, idle=0.5, timeout=180)
        assert proc.stop() == 0, proc.output()
    out = proc.output()
    assert "profiling started (auto)" in out
    # It stops before catching up (the backlog fell below half the threshold), not at the end.
    assert re.search(r"profiling stopped \(auto: the backlog fell below half", out), out
    assert out.count("profiling started (auto)") == 1  # not again until caught up once
    left = [os.path.basename(p) for p in glob.glob(str(pdir / "streamer-*.vmprof"))]
    assert len(left) == 1 and left[0].endswith("-auto.vmprof") and "20200101" not in left[0]
    assert os.path.getsize(pdir / left[0]) > 0


@pytest.mark.skipif(PYPY, reason="the refusal is CPython's: PyPy samples safely")
def test_cpython_refuses_the_profiler_with_the_reason_and_starts_it_with_force(db, tmp_path):
    name, _ = db
    ns = support.unique("cpy")
    pdir = tmp_path / "profiles"
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               profiler={"enabled": True, "dir": str(pdir)})
    res = run_cli("run", "-c", cfg)
    assert res.returncode == 2
    assert "segfaults" in res.stderr and "py-spy" in res.stderr and "profiler.force" in res.stderr
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"],
                               profiler={"enabled": True, "force": True, "dir": str(pdir)})
    with support.StreamerProcess(cfg, str(tmp_path / "s.log")) as proc:
        support.wait_for(lambda: "profiler ready" in proc.output(), timeout=90)
        proc.proc.send_signal(signal.SIGUSR2)
        support.wait_for(lambda: "profiling started (signal)" in proc.output(), timeout=60)
        # Only check that it starts: sampling CPython for long can crash (RUNTIME.md).
        assert proc.stop() == 0, proc.output()
    assert "profiling stopped (shutdown)" in proc.output()
    assert len(glob.glob(str(pdir / "streamer-*-signal.vmprof"))) == 1


def test_sigusr2_to_an_instance_without_the_profiler_is_refused_and_streaming_goes_on(db, tmp_path):
    # The default config, as on every main instance: the signal's default action would end it.
    name, conn = db
    make_table(conn)
    ns = support.unique("nopr")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    topic = f"{ns}.{name}.t"
    start = support.master_pos(conn)
    with support.StreamerProcess(cfg, str(tmp_path / "s.log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        bulk_rows(conn, 10, 0)
        support.consume([topic], expect=10, idle=0.2)
        proc.proc.send_signal(signal.SIGUSR2)
        support.wait_for(lambda: "SIGUSR2: a profile was asked for, but profiling is off" in
                         proc.output(), timeout=60)
        assert "profiler.enabled: true" in proc.output()
        bulk_rows(conn, 10, 100)
        support.consume([topic], expect=20, idle=0.2)
        assert proc.proc.poll() is None, proc.output()
        assert proc.stop() == 0, proc.output()
    assert proc.output().count("SIGUSR2:") == 1
