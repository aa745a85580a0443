"""Service managers the deploy drives: systemd (``streamer@ENV``) and supervisord.

Both honour one contract (deploy/systemd/streamer@.service): run ``ENV/current`` under PyPy,
stop with SIGTERM and wait longer than the streamer's shutdown timeout, restart on failure.
"""
from __future__ import annotations

import logging
import os
import subprocess
import sys
import time
from typing import Dict, Optional

from streamer.deploy.release import ROOT, run
from streamer.errors import ServiceError

log = logging.getLogger(__name__)

TEMPLATES = os.path.join(ROOT, "deploy", "supervisor")
# Room over shutdown_timeout_s for the final commit before the manager escalates to SIGKILL.
STOP_MARGIN_S = 20


class Service:
    def install(self, env: str, env_dir: str, site: Dict[str, str], shutdown_s: float) -> None:
        """Make the manager know the service with these settings (idempotent)."""

    def restart(self, env: str) -> str:
        """Restart it; '' on success, else what went wrong."""
        raise NotImplementedError

    def stop(self, env: str) -> None:
        raise NotImplementedError


class Systemd(Service):
    def _ctl(self, *args: str) -> str:
        proc = subprocess.run(["systemctl", *args], capture_output=True, text=True)
        return "" if proc.returncode == 0 else (proc.stderr or proc.stdout).strip()

    def restart(self, env: str) -> str:
        return self._ctl("restart", f"streamer@{env}")

    def stop(self, env: str) -> None:
        problem = self._ctl("stop", f"streamer@{env}")
        if problem:
            log.error("systemctl stop streamer@%s: %s", env, problem)


def _quote(key: str, value: str) -> str:
    # supervisord splits KEY="v",... with a non-POSIX shlex: no escapes, and it strips every
    # quote character off both ends. So pick the quote the value doesn't contain, or refuse.
    quote = "'" if '"' in value else '"'
    if quote in value or (value and (value[0] in "'\"" or value[-1] in "'\"")):
        raise ServiceError(f"{key} can't be passed through supervisord's environment= (it has "
                           f"both quote kinds or starts/ends with one); put a secret like this "
                           f"in the file named by mysql.password_file instead")
    return quote + value.replace("%", "%%") + quote


def _write_private(path: str, text: str) -> None:
    # The program file carries the site environment, credentials included: mode 600 from birth.
    fd = os.open(path + ".tmp", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(text)
    os.replace(path + ".tmp", path)


class Supervisord(Service):
    """A private supervisord under ``PREFIX/supervisor``, started on first use."""

    def __init__(self, prefix: str):
        self.dir = os.path.join(prefix, "supervisor")
        self.conf = os.path.join(self.dir, "supervisord.conf")

    def ctl(self, *args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "supervisor.supervisorctl", "-c", self.conf,
                               *args], capture_output=True, text=True)

    def running(self) -> bool:
        return self.ctl("pid").returncode == 0

    def ensure_running(self) -> None:
        os.makedirs(os.path.join(self.dir, "programs"), mode=0o700, exist_ok=True)
        with open(os.path.join(TEMPLATES, "supervisord.conf.in")) as fh:
            _write_private(self.conf, fh.read().format(dir=self.dir))
        if self.running():
            return
        # The services inherit supervisord's environment: it must not carry the deploy's own
        # PYTHONPATH (a release would import the deploying tree) or its STREAMER_* settings.
        env = {k: v for k, v in os.environ.items()
               if not k.startswith(("PYTHON", "STREAMER", "VIRTUAL_ENV"))}
        run([sys.executable, "-m", "supervisor.supervisord", "-c", self.conf],
            "starting supervisord", env=env)
        deadline = time.monotonic() + 15
        while not self.running():
            if time.monotonic() > deadline:
                raise ServiceError(f"supervisord did not answer; see {self.dir}/supervisord.log")
            time.sleep(0.1)

    def install(self, env: str, env_dir: str, site: Dict[str, str], shutdown_s: float) -> None:
        self.ensure_running()
        os.makedirs(env_dir, exist_ok=True)
        environment = ",".join(f"{k}={_quote(k, v)}" for k, v in sorted(site.items()))
        with open(os.path.join(TEMPLATES, "streamer.conf.in")) as fh:
            text = fh.read().format(env=env, env_dir=env_dir, conf=self.conf,
                                    stop_wait_s=int(shutdown_s) + STOP_MARGIN_S,
                                    environment=f"environment={environment}" if site else "")
        _write_private(os.path.join(self.dir, "programs", f"streamer-{env}.conf"), text)
        for args in (["reread"], ["update", f"streamer-{env}"]):
            proc = self.ctl(*args)
            if proc.returncode != 0:
                raise ServiceError(f"supervisorctl {' '.join(args)}: {proc.stdout.strip()}")

    def restart(self, env: str) -> str:
        proc = self.ctl("restart", f"streamer-{env}")
        return "" if proc.returncode == 0 else (proc.stdout + proc.stderr).strip()

    def stop(self, env: str) -> None:
        proc = self.ctl("stop", f"streamer-{env}")
        if proc.returncode != 0:
            log.error("supervisorctl stop streamer-%s: %s", env, proc.stdout.strip())

    def shutdown(self) -> None:
        proc = self.ctl("shutdown")
        if proc.returncode != 0:
            raise ServiceError(f"supervisorctl shutdown: {proc.stdout.strip()}")


def service_for(prefix: str, kind: Optional[str] = None) -> Service:
    kind = kind or os.environ.get("STREAMER_SUPERVISOR", "systemd")
    if kind == "supervisord":
        return Supervisord(prefix)
    if kind == "systemd":
        return Systemd()
    raise ValueError(f"STREAMER_SUPERVISOR={kind!r}: use 'systemd' or 'supervisord'")
