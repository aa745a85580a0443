"""The streamer under test as a child process of the interpreter being measured."""
from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import time
from typing import Any, Dict, List, Optional, Tuple

from streamer.ops.gcpacing import GC_ENV

from . import env


class BenchError(RuntimeError):
    """A bench step failed; the message says which and where its log is."""


def status_mb(pid: int, field: str = "VmHWM") -> Optional[float]:
    """VmHWM (the peak resident set) of a live process in MB, or another field such as VmRSS."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith(field + ":"):
                    return int(line.split()[1]) / 1024.0
    except FileNotFoundError:
        return None
    return None


def stat_cpu(path: str) -> Optional[Tuple[str, float]]:
    """The name and user plus system CPU seconds in a /proc stat file (a process's or a thread's),
    or None once it has ended."""
    try:
        with open(path, encoding="ascii", errors="replace") as fh:
            stat = fh.read()
    except (FileNotFoundError, ProcessLookupError):
        return None
    fields = stat.rpartition(")")[2].split()
    # After the command name: state is field 3 of stat(5), utime 14 and stime 15.
    cpu = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return stat[stat.index("(") + 1:stat.rindex(")")], cpu


def cpu_seconds(pid: int) -> Optional[float]:
    """User plus system CPU time of a live process and all its threads (librdkafka's too)."""
    found = stat_cpu(f"/proc/{pid}/stat")
    return found[1] if found else None


def threads_cpu_seconds(pid: int, names: Tuple[str, ...]) -> Optional[float]:
    """User plus system CPU seconds of those threads of a live process whose names begin with
    one of ``names`` (0.0 when none does), or None once the process has ended."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    total = 0.0
    for tid in tids:
        found = stat_cpu(f"/proc/{pid}/task/{tid}/stat")
        if found is not None and found[0].startswith(names):
            total += found[1]
    return total


def schedstat(path: str) -> Optional[Tuple[float, float]]:
    """A thread's seconds on a CPU and seconds runnable but waiting for one, from its
    /proc/.../task/TID/schedstat (nanoseconds, where stat counts 10 ms clock ticks), or None when
    the thread has ended or the kernel keeps no such figures."""
    try:
        with open(path, encoding="ascii") as fh:
            fields = fh.read().split()
        return int(fields[0]) / 1e9, int(fields[1]) / 1e9
    except (OSError, ValueError, IndexError):
        return None


def runq_seconds(pid: int) -> Optional[Dict[str, float]]:
    """Per thread of a live process, the seconds it has been runnable but waiting for a CPU (the
    run delay of /proc/PID/task/TID/schedstat), or None when the process has ended or the kernel
    keeps no such figures."""
    out: Dict[str, float] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return None
    for tid in tids:
        found = schedstat(f"/proc/{pid}/task/{tid}/schedstat")
        if found is not None:  # None: a thread that ended meanwhile
            out[tid] = found[1]
    return out or None


def runq_cores(began: Optional[Dict[str, float]], ended: Optional[Dict[str, float]],
               seconds: float) -> Optional[float]:
    """Run-queue wait over a window, in cores: the seconds per second a process's threads were
    ready to run with no CPU free. Threads born in the window count from zero; those that ended
    in it are left out, their figures gone with them."""
    if began is None or ended is None or seconds <= 0:
        return None
    return round(sum(t - began.get(tid, 0.0) for tid, t in ended.items()) / seconds, 3)


def cores(began: Optional[float], ended: Optional[float], seconds: float) -> Optional[float]:
    """CPU seconds used over a window (two cpu_seconds readings), in cores."""
    if began is None or ended is None or seconds <= 0:
        return None
    return round((ended - began) / seconds, 3)


# The local servers, by the pid files deploy/local writes, and a word of their command lines.
SERVERS = (("mariadb", os.path.join("mariadb", "mysqld.pid"), "mariadbd"),
           ("kafka", os.path.join("kafka", "kafka.pid"), "java"))
SERVER_NAMES = tuple(name for name, _, _ in SERVERS)
# The servers that run on a JVM, and the names /proc gives its JIT compiler threads ("C2
# CompilerThread0", cut to 15 characters). A broker started by `make up` keeps compiling for
# minutes of a new kind of load, on the cores the streamer needs.
JVM_SERVERS = ("kafka",)
JIT_THREADS = ("C1 CompilerThre", "C2 CompilerThre")


def server_pids(local: str = env.LOCAL) -> Dict[str, int]:
    """The pids of the local servers that are running (a stale pid file names none)."""
    out: Dict[str, int] = {}
    for name, rel, word in SERVERS:
        try:
            with open(os.path.join(local, rel), encoding="ascii") as fh:
                pid = int(fh.read().split()[0])
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmdline = fh.read()
        except (OSError, ValueError, IndexError):
            continue
        if word.encode() in cmdline:
            out[name] = pid
    return out


class CpuWindow:
    """The cores each named process used while this was open, ``{name}_cores``, and the cores'
    worth of time its threads spent ready to run while every CPU was taken, ``{name}_runq``;
    None for one that wasn't running throughout (pid None, or ended). For a JVM server, also the
    cores its JIT compiler threads used, ``{name}_jit_cores``: part of ``{name}_cores``, spent
    warming up rather than serving (a compiler thread the JVM retires inside the window takes
    its figures with it).

    ``servers()`` names the local ones: on two cores shared by the load, the servers and the
    streamer, what the servers took is what the streamer could not have, and a live line's
    latency reads differently at 0.4 and 0.9 server cores."""

    def __init__(self, pids: Dict[str, Optional[int]]) -> None:
        self.pids = pids
        self._start = {name: cpu_seconds(pid) if pid is not None else None
                       for name, pid in pids.items()}
        self._runq = {name: runq_seconds(pid) if pid is not None else None
                      for name, pid in pids.items()}
        self._jit = {name: threads_cpu_seconds(pid, JIT_THREADS) if pid is not None else None
                     for name, pid in pids.items() if name in JVM_SERVERS}
        self._began = time.monotonic()

    @staticmethod
    def servers() -> Dict[str, Optional[int]]:
        """Every local server by name, with its pid if it is running."""
        found = server_pids()
        return {name: found.get(name) for name in SERVER_NAMES}

    def stop(self) -> Dict[str, Optional[float]]:
        seconds = time.monotonic() - self._began
        out: Dict[str, Optional[float]] = {}
        for name, pid in self.pids.items():
            out[f"{name}_cores"] = cores(self._start[name],
                                         cpu_seconds(pid) if pid is not None else None, seconds)
            out[f"{name}_runq"] = runq_cores(self._runq[name],
                                             runq_seconds(pid) if pid is not None else None,
                                             seconds)
            if name in self._jit:
                jit = threads_cpu_seconds(pid, JIT_THREADS) if pid is not None else None
                out[f"{name}_jit_cores"] = cores(self._jit[name], jit, seconds)
        return out


def tail(path: str, lines: int = 15) -> str:
    with open(path, "rb") as fh:
        return "\n".join(fh.read().decode("utf-8", "replace").splitlines()[-lines:])


class Streamer:
    """``python -m streamer.cli run -c CFG [args]``; stopped with SIGTERM, which must exit 0.

    It gets PyPy's GC settings (gcpacing.GC_ENV) in its environment, as the deployed service does
    (deploy/), so that PyPy starts it once: without, ``run`` sets them and executes itself again,
    ~60-85 ms more."""

    def __init__(self, python: str, config_path: str, log_path: str, args: List[str]):
        self.log_path = log_path
        self._log = open(log_path, "ab")
        self.proc = subprocess.Popen([python, "-m", "streamer.cli", "run", "-c", config_path, *args],
                                     stdout=self._log, stderr=subprocess.STDOUT, cwd=env.ROOT,
                                     env={**GC_ENV, **os.environ})
        self.rss_mb = 0.0
        self.cpu_s: Optional[float] = None

    def sample(self) -> None:
        """Fails fast when the streamer died; remembers its peak RSS."""
        rc = self.proc.poll()
        if rc is not None:
            raise BenchError(f"the streamer exited with {rc} (log {self.log_path}):\n{tail(self.log_path)}")
        rss = status_mb(self.proc.pid)
        if rss is not None:
            self.rss_mb = max(self.rss_mb, rss)

    def wait_for_log(self, marker: bytes, what: str, timeout_s: float,
                     since: Optional[float] = None, interval_s: float = 0.05) -> float:
        """Seconds from ``since`` (monotonic; default now) until the streamer's log holds
        ``marker``; fails fast if it died, and after ``timeout_s`` without it."""
        began = time.monotonic() if since is None else since
        while True:
            with open(self.log_path, "rb") as fh:
                if marker in fh.read():
                    return time.monotonic() - began
            if time.monotonic() - began > timeout_s:
                raise BenchError(f"the streamer did not {what} within {timeout_s:.0f}s "
                                 f"(log {self.log_path})")
            self.sample()
            time.sleep(interval_s)

    def rss_now_mb(self) -> Optional[float]:
        return status_mb(self.proc.pid, "VmRSS")

    def stop(self, timeout: float = 60.0) -> None:
        self.sample()
        self.cpu_s = cpu_seconds(self.proc.pid)
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise BenchError(f"the streamer ignored SIGTERM for {timeout:.0f}s (log {self.log_path})")
        if rc != 0:
            raise BenchError(f"the streamer exited with {rc} on SIGTERM (log {self.log_path}):\n"
                             f"{tail(self.log_path)}")

    def __enter__(self) -> "Streamer":
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self._log.close()


def run_json(cmd: List[str], what: str, environ: Optional[Dict[str, str]] = None) -> str:
    """A child's stdout; a non-zero exit is an error that quotes the child's stderr."""
    out = subprocess.run(cmd, cwd=env.ROOT, capture_output=True, text=True,
                         env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1", **(environ or {})))
    if out.returncode != 0:
        raise BenchError(f"{what} failed with exit code {out.returncode}:\n{out.stderr[-3000:]}")
    return out.stdout


def interpreter_of(python: str) -> Dict[str, str]:
    """bench.bare.interpreter() of ``python``: its name (pypy, cpython) and version (asked once
    per interpreter: every line of a run names it)."""
    return dict(_interpreter_of(python))


@functools.lru_cache(maxsize=None)
def _interpreter_of(python: str) -> Tuple[Tuple[str, str], ...]:
    code = "import json; from bench.bare import interpreter; print(json.dumps(interpreter()))"
    return tuple(json.loads(run_json([python, "-c", code], f"{python} -c interpreter()")).items())

