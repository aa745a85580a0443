"""vmprof switched on and off in a running streamer: by SIGUSR2, or by itself while saturated.

The SIGUSR2 handler only sets a flag. A handler runs between two bytecodes of the main thread,
possibly inside the producer or in the middle of a batch, so the switch itself (opening the file,
enabling the sampler) happens in ``poll``, which the main loop calls after each batch commit and at
each idle binlog heartbeat, so at least every mysql.heartbeat_s. Shutdown always stops a running
profile, so the file is complete.
"""
from __future__ import annotations

import glob
import logging
import os
import signal
import sys
import time
from typing import Any, Optional

from streamer.config import Config
from streamer.errors import ConfigError
from streamer.ops.metrics import Metrics

# Not platform.python_implementation(): the platform module costs ~70 ms of a PyPy start.
IMPLEMENTATION = "PyPy" if sys.implementation.name == "pypy" else "CPython"

log = logging.getLogger(__name__)

PERIOD_S = 0.00099  # not a round 1 kHz, so periodic work is not over- or under-sampled
PATTERN = "streamer-*.vmprof"

CPYTHON_REFUSAL = (
    "profiler.enabled is refused on CPython: vmprof 0.6 segfaults intermittently while sampling "
    "on CPython 3.11 (in unsafe_PyThreadState_GetInterpreterFrame), which would take the streamer "
    "down. Profile under PyPy, the production runtime, or profile this CPython process from outside "
    "with py-spy (py-spy record --pid PID -o profile.svg). Set profiler.force: true to enable "
    "vmprof here anyway")


def prune(directory: str, keep: int) -> int:
    """Delete all but the newest ``keep`` profiles in ``directory``; returns how many went."""
    def age(path: str) -> float:
        try:
            return os.path.getmtime(path)
        except OSError:  # removed since the listing (another instance's prune, a clean-up)
            return -1.0

    files = sorted(glob.glob(os.path.join(directory, PATTERN)), key=age)
    gone = files[:-keep] if keep > 0 else files
    for path in gone:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass  # gone already, as wanted
    return len(gone)


class Profiler:
    """A context manager owning the SIGUSR2 handler and at most one running vmprof profile."""

    def __init__(self, cfg: Config, metrics: Metrics, implementation: Optional[str] = None):
        p = cfg.profiler
        self.enabled = p.enabled
        self.auto = self.enabled and p.auto
        impl = implementation or IMPLEMENTATION
        if self.enabled and impl == "CPython" and not p.force:
            raise ConfigError(CPYTHON_REFUSAL)
        self.directory = p.dir
        self.keep = p.keep
        self.auto_backlog = p.auto_backlog_bytes
        self.auto_max_s = p.auto_max_s
        self.metrics = metrics
        self.toggle_requested = False
        self.path: Optional[str] = None
        self.kind = ""
        self.started_mono = 0.0
        self.armed = True  # an auto profile needs a catch-up (idle) since the last one
        self._fh: Any = None
        self._previous_handler: Any = None

    def __enter__(self) -> "Profiler":
        # Installed whether or not profiling is on: SIGUSR2's default action ends the process,
        # and a signal meant for the canary must not take another instance down.
        self._previous_handler = signal.signal(signal.SIGUSR2, self._on_signal)
        self.metrics.hooks.append(self.poll)
        if self.enabled:
            os.makedirs(self.directory, exist_ok=True)
            log.info("profiler ready: SIGUSR2 (kill -USR2 %d) starts and stops vmprof into %s%s",
                     os.getpid(), self.directory, "; auto-profiling when saturated" if self.auto else "")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.path is not None:
            self.stop("shutdown")
        signal.signal(signal.SIGUSR2, self._previous_handler or signal.SIG_DFL)
        if self.poll in self.metrics.hooks:
            self.metrics.hooks.remove(self.poll)

    def _on_signal(self, *_: Any) -> None:
        # Only a flag: see the module docstring.
        self.toggle_requested = True

    def poll(self) -> None:
        if self.toggle_requested:
            self.toggle_requested = False
            if not self.enabled:
                log.warning("SIGUSR2: a profile was asked for, but profiling is off in this "
                            "instance's config; set profiler.enabled: true (under PyPy) and "
                            "restart to profile by signal. Streaming goes on")
            elif self.path is None:
                self.start("signal")
            else:
                self.stop("SIGUSR2")
        elif self.auto:
            self._auto()

    def _auto(self) -> None:
        m = self.metrics
        backlog = m.lag_bytes
        if m.caught_up():
            self.armed = True
        if self.path is None:
            if self.armed and saturated(backlog, self.auto_backlog, m.caught_up()):
                self.armed = False
                self.start("auto")
        elif self.kind == "auto":
            if time.monotonic() - self.started_mono >= self.auto_max_s:
                self.stop(f"auto: reached profiler.auto_max_s {self.auto_max_s:g} s")
            elif backlog is not None and backlog < self.auto_backlog // 2:
                self.stop("auto: the backlog fell below half the threshold, before catching up")
            elif m.caught_up():
                self.stop("auto: caught up")

    def start(self, kind: str) -> None:
        import vmprof

        stamp = time.strftime("%Y%m%d-%H%M%S", time.localtime())
        path = os.path.join(self.directory, f"streamer-{stamp}-{int(time.time() * 1000) % 1000:03d}"
                                            f"-{kind}.vmprof")
        try:
            os.makedirs(self.directory, exist_ok=True)  # it may have been cleaned away
            fh = open(path, "w+b")
        except OSError as exc:
            log.error("could not start vmprof: can't write %s (%s); check profiler.dir. "
                      "Streaming goes on", path, exc.strerror or exc)
            return
        extra = {"warn": False} if IMPLEMENTATION == "PyPy" else {}
        try:
            vmprof.enable(fh.fileno(), PERIOD_S, native=False, **extra)
        except Exception as exc:  # noqa: BLE001 - vmprof raises plain Exception; reported, not fatal
            fh.close()
            os.remove(path)
            log.error("could not start vmprof: %s", exc)
            return
        self._fh, self.path, self.kind = fh, path, kind
        self.started_mono = time.monotonic()
        log.info("profiling started (%s) into %s", kind, path)

    def stop(self, why: str) -> None:
        import vmprof

        vmprof.disable()
        self._fh.close()
        path, self.path, self._fh = self.path, None, None
        took = time.monotonic() - self.started_mono
        size = os.path.getsize(path) if path and os.path.exists(path) else 0
        log.info("profiling stopped (%s) after %.1f s: %s (%d bytes); read it with: "
                 "streamer profile %s", why, took, path, size, path)
        try:
            removed = prune(self.directory, self.keep)
        except OSError as exc:
            log.warning("could not remove old profiles in %s (%s); keeping them. Streaming goes "
                        "on", self.directory, exc)
            return
        if removed:
            log.info("removed %d old profile(s), keeping profiler.keep=%d", removed, self.keep)


def saturated(backlog: Optional[int], threshold: int, caught_up: bool) -> bool:
    """Saturated: a backlog above the threshold, and the reader never waiting on the socket."""
    return backlog is not None and backlog > threshold and not caught_up
