"""The bench's per-server CPU: which local servers are running, and the cores each used."""
import subprocess
import sys

from bench import proc


def _sleeper(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv])


def _pid_file(local, rel: str, pid: int) -> None:
    path = local / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"{pid}\n")


def test_a_server_is_found_by_its_pid_file_only_while_that_process_is_the_server(tmp_path):
    server, other = _sleeper("mariadbd"), _sleeper("something-else")
    try:
        _pid_file(tmp_path, "mariadb/mysqld.pid", server.pid)
        _pid_file(tmp_path, "kafka/kafka.pid", other.pid)  # a recycled pid: not a broker
        assert proc.server_pids(str(tmp_path)) == {"mariadb": server.pid}
    finally:
        for p in (server, other):
            p.kill()
            p.wait()
    assert proc.server_pids(str(tmp_path)) == {}  # stale pid files name nothing
    assert proc.server_pids(str(tmp_path / "absent")) == {}


def test_cpu_window_is_the_cores_each_process_used_and_none_for_one_not_running():
    spinner = subprocess.Popen([sys.executable, "-c",
                                "import time\nend = time.time() + 60\nwhile time.time() < end: pass"])
    try:
        cpu = proc.CpuWindow({"mariadb": spinner.pid, "kafka": None})
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.6)"], check=True)
        out = cpu.stop()
    finally:
        spinner.kill()
        spinner.wait()
    assert set(out) == {"mariadb_cores", "kafka_cores"}
    # A busy loop's CPU is counted, and one thread can't use more than one core.
    assert 0 < out["mariadb_cores"] <= 1.05
    assert out["kafka_cores"] is None


def test_the_servers_window_names_every_server_running_or_not(monkeypatch):
    monkeypatch.setattr(proc, "server_pids", lambda: {"kafka": 4321})
    assert proc.CpuWindow.servers() == {"mariadb": None, "kafka": 4321}


def test_cores_needs_both_readings_and_a_window():
    assert proc.cores(1.0, 2.5, 3.0) == 0.5
    assert proc.cores(None, 2.5, 3.0) is None and proc.cores(1.0, None, 3.0) is None
    assert proc.cores(1.0, 2.0, 0.0) is None
