"""The bench's per-server CPU: which local servers are running, and the cores each used."""
import shutil
import subprocess
import sys
import time

import pytest

from bench import proc


def _sleeper(*argv: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)", *argv])


def _spinner(*prefix: str) -> subprocess.Popen:
    """A process that keeps one CPU busy for up to a minute (``prefix``: e.g. taskset's pinning)."""
    return subprocess.Popen([*prefix, sys.executable, "-c",
                             "import time\nend = time.time() + 60\nwhile time.time() < end: pass"])


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
    spinner = _spinner()
    try:
        cpu = proc.CpuWindow({"mariadb": spinner.pid, "kafka": None})
        subprocess.run([sys.executable, "-c", "import time; time.sleep(0.6)"], check=True)
        out = cpu.stop()
    finally:
        spinner.kill()
        spinner.wait()
    assert set(out) == {"mariadb_cores", "mariadb_runq", "kafka_cores", "kafka_runq",
                        "kafka_jit_cores"}
    # A busy loop's CPU is counted, and one thread can't use more than one core.
    assert 0 < out["mariadb_cores"] <= 1.05
    assert out["mariadb_runq"] is not None
    assert out["kafka_cores"] is None and out["kafka_runq"] is None
    assert out["kafka_jit_cores"] is None


# A process with one thread named as the JVM names its C2 compiler, spinning, beside a main thread
# that sleeps.
_COMPILER_LIKE = ("import threading, time\n"
                  "def spin():\n"
                  "    with open(f'/proc/self/task/{threading.get_native_id()}/comm', 'w') as fh:\n"
                  "        fh.write('C2 CompilerThread0')\n"
                  "    end = time.time() + 60\n"
                  "    while time.time() < end: pass\n"
                  "threading.Thread(target=spin, daemon=True).start()\n"
                  "time.sleep(60)\n")


def test_a_jvm_servers_window_counts_the_cores_of_its_jit_compiler_threads_apart():
    jvm = subprocess.Popen([sys.executable, "-c", _COMPILER_LIKE])
    plain = _spinner()
    try:
        deadline = time.monotonic() + 10
        while not proc.threads_cpu_seconds(jvm.pid, proc.JIT_THREADS):
            assert time.monotonic() < deadline, "the compiler-named thread never ran"
            time.sleep(0.05)
        # The plain spinner, though busy, has no compiler thread.
        assert proc.threads_cpu_seconds(plain.pid, proc.JIT_THREADS) == 0.0
        cpu = proc.CpuWindow({"kafka": jvm.pid, "mariadb": plain.pid})
        time.sleep(0.6)
        out = cpu.stop()
    finally:
        for p in (jvm, plain):
            p.kill()
            p.wait()
    assert "mariadb_jit_cores" not in out  # not a JVM server
    # Nearly all of the process's CPU is its compiler-named thread's (read a moment later).
    assert 0 < out["kafka_jit_cores"] <= out["kafka_cores"] + 0.05
    assert out["kafka_jit_cores"] >= 0.8 * out["kafka_cores"]
    assert proc.threads_cpu_seconds(jvm.pid, proc.JIT_THREADS) is None  # ended


def test_the_servers_window_names_every_server_running_or_not(monkeypatch):
    monkeypatch.setattr(proc, "server_pids", lambda: {"kafka": 4321})
    assert proc.CpuWindow.servers() == {"mariadb": None, "kafka": 4321}


def test_cores_needs_both_readings_and_a_window():
    assert proc.cores(1.0, 2.5, 3.0) == 0.5
    assert proc.cores(None, 2.5, 3.0) is None and proc.cores(1.0, None, 3.0) is None
    assert proc.cores(1.0, 2.0, 0.0) is None


def test_run_queue_wait_is_counted_per_thread_and_only_while_two_processes_share_one_cpu():
    # Two spinning processes pinned to one CPU: each gets it about half the time and is ready to
    # run the other half.
    if shutil.which("taskset") is None:
        pytest.skip("taskset is needed to put two processes on one CPU")
    first = _spinner("taskset", "-c", "0")
    try:
        time.sleep(0.2)
        alone = proc.CpuWindow({"a": first.pid})
        time.sleep(0.6)
        alone_out = alone.stop()
        second = _spinner("taskset", "-c", "0")
        try:
            time.sleep(0.2)
            shared = proc.CpuWindow({"a": first.pid, "b": second.pid})
            time.sleep(0.6)
            shared_out = shared.stop()
        finally:
            second.kill()
            second.wait()
    finally:
        first.kill()
        first.wait()
    assert set(shared_out) == {"a_cores", "a_runq", "b_cores", "b_runq"}
    waited = shared_out["a_runq"] + shared_out["b_runq"]
    # Sharing one CPU, one of the two is always waiting: together about the whole window (more
    # if something else runs there too). Alone, the spinner waited only for whatever else ran.
    assert waited > 0.5
    assert alone_out["a_runq"] is not None and alone_out["a_runq"] < waited - 0.3
    assert shared_out["a_cores"] + shared_out["b_cores"] <= 1.05


def test_run_queue_cores_count_new_threads_from_zero_and_need_both_readings():
    began = {"1": 2.0, "2": 1.0}
    ended = {"1": 2.5, "3": 0.25}  # thread 2 ended in the window, thread 3 began in it
    assert proc.runq_cores(began, ended, 1.5) == 0.5
    assert proc.runq_cores(None, ended, 1.5) is None and proc.runq_cores(began, None, 1.5) is None
    assert proc.runq_cores(began, ended, 0.0) is None
