"""Deploy a release to an environment: switch ``ENV/current``, restart, wait for /health, roll back.

Layout under ``STREAMER_PREFIX`` (default /opt/streamer)::

    releases/VERSION/       a release (see release.py); env/ENV.yaml is its per-environment config
    ENV/current, previous   links to releases; the service runs ENV/current
    etc/ENV.env             site settings and credentials (mode 600), STREAMER__... overrides

The service manager is systemd (``streamer@ENV``) or, where systemd doesn't run,
supervisord (``STREAMER_SUPERVISOR=supervisord``); both get the same contract.
"""
from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from typing import Any, Dict, Optional, Sequence, Tuple

from streamer import config as config_mod
from streamer.deploy import release as release_mod
from streamer.deploy import verify as verify_mod
from streamer.deploy.service import Service, service_for
from streamer.errors import DeployError, ServiceError
from streamer.ops.gcpacing import GC_ENV
from streamer.settings import argument

log = logging.getLogger(__name__)

EXIT_ERROR = 1
EXIT_ROLLED_BACK = 2
EXIT_ROLLBACK_FAILED = 3
_ENV = re.compile(r"^[a-z][a-z0-9-]*$")


class Layout:
    def __init__(self, prefix: str):
        self.prefix = os.path.abspath(prefix)

    def env_dir(self, env: str) -> str:
        return os.path.join(self.prefix, env)

    def link(self, env: str, name: str) -> str:
        return os.path.join(self.prefix, env, name)

    def env_file(self, env: str) -> str:
        return os.path.join(self.prefix, "etc", env + ".env")

    def target(self, env: str, name: str = "current") -> Optional[str]:
        path = self.link(env, name)
        return os.path.realpath(path) if os.path.islink(path) else None


def private_file(path: str, what: str) -> None:
    mode = os.stat(path).st_mode & 0o777
    if mode & 0o077:
        raise DeployError(f"{what} {path} has mode {mode:o}: it holds credentials, so only the "
                          f"service user may read it; run: chmod 600 {path}")


def read_env_file(path: str) -> Dict[str, str]:
    """``KEY=VALUE`` lines as systemd's EnvironmentFile reads them; the file must be mode 600."""
    if not os.path.exists(path):
        return {}
    private_file(path, "environment file")
    out: Dict[str, str] = {}
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, sep, value = line.partition("=")
            if not sep or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", key.strip()):
                raise DeployError(f"{path} line {n}: expected KEY=VALUE, got {line.split('=')[0]!r}")
            value = value.strip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
                value = value[1:-1]
            out[key.strip()] = value
    return out


def service_environment(layout: Layout, env: str) -> Dict[str, str]:
    """The service's environment: the site file, plus a profile directory outside the releases,
    and PyPy's GC settings (set here, `streamer run` needs no exec to set them; see gcpacing.GC_ENV)."""
    site = read_env_file(layout.env_file(env))
    site.setdefault("STREAMER__PROFILER__DIR", os.path.join(layout.env_dir(env), "profiles"))
    for key, value in GC_ENV.items():
        site.setdefault(key, value)
    return site


def release_config(release: str, env: str, site: Dict[str, str]) -> Dict[str, Any]:
    """The config the service will run with: the release's env file plus the site overrides."""
    path = os.path.join(release, "env", env + ".yaml")
    if not os.path.exists(path):
        have = sorted(f[:-5] for f in os.listdir(os.path.join(release, "env")) if f.endswith(".yaml"))
        raise DeployError(f"no config for environment {env!r} in {release}/env; have: {', '.join(have)}")
    cfg = config_mod.load(path, environ=dict(os.environ, **site))
    if cfg.mysql.password_file:
        private_file(cfg.mysql.password_file, "config key 'mysql.password_file'")
    return cfg


def switch(link: str, target: str) -> None:
    """Point ``link`` at ``target`` atomically: readers see the old or the new link, never none."""
    os.makedirs(os.path.dirname(link), exist_ok=True)
    tmp = f"{link}.tmp{os.getpid()}"
    if os.path.lexists(tmp):
        os.unlink(tmp)
    os.symlink(target, tmp)
    os.replace(tmp, link)


def wait_healthy(url: str, timeout: float) -> Tuple[bool, str]:
    deadline = time.monotonic() + timeout
    reason = "no answer yet"
    while time.monotonic() < deadline:
        try:
            code, body = verify_mod.fetch(url + "/health", timeout=2.0)
            if code == 200 and body.get("status") == "ok":
                return True, "healthy"
            reason = f"HTTP {code} {body.get('status')}: {body.get('reason', '')}".strip()
        except (OSError, ValueError) as exc:
            reason = f"{url}/health: {getattr(exc, 'reason', exc)}"
        time.sleep(0.5)
    return False, f"not healthy within {timeout:.0f}s, last: {reason}"


def start(service: Service, env: str, release: str, site: Dict[str, str],
          timeout: float) -> Tuple[bool, str]:
    url = verify_mod.base_url(release_config(release, env, site))
    problem = service.restart(env)
    if problem:
        return False, f"restart failed: {problem}"
    return wait_healthy(url, timeout)


def deploy(layout: Layout, env: str, version: str, source: str, service: Service,
           health_timeout: float, pypy: str, deps_dir: str) -> int:
    if not _ENV.match(env):
        raise DeployError(f"bad environment name {env!r}: lower-case letters, digits and '-'")
    site = service_environment(layout, env)
    release = release_mod.build(layout.prefix, version, source, pypy, deps_dir)
    cfg = release_config(release, env, site)
    verify_mod.base_url(cfg)
    previous = layout.target(env)
    switch(layout.link(env, "current"), release)
    service.install(env, layout.env_dir(env), site, cfg.shutdown_timeout_s)
    ok, why = start(service, env, release, site, health_timeout)
    if ok:
        if previous and previous != release:
            switch(layout.link(env, "previous"), previous)
        print(f"deployed {version} to {env}: healthy", flush=True)
        return 0
    print(f"{version} on {env} failed: {why}", file=sys.stderr, flush=True)
    if not previous or previous == release:
        service.stop(env)
        os.unlink(layout.link(env, "current"))
        print(f"no earlier release of {env} to roll back to; service stopped", file=sys.stderr)
        return EXIT_ROLLBACK_FAILED
    switch(layout.link(env, "current"), previous)
    ok, why = start(service, env, previous, site, health_timeout)
    back = os.path.basename(previous)
    print(f"rolled {env} back to {back}: {why}", file=sys.stderr, flush=True)
    return EXIT_ROLLED_BACK if ok else EXIT_ROLLBACK_FAILED


def verify(layout: Layout, env: str, main_env: Optional[str], window: float,
           limits: verify_mod.Limits) -> int:
    def url(e: str) -> Optional[str]:
        release = layout.target(e)
        if release is None:
            return None
        return verify_mod.base_url(release_config(release, e, service_environment(layout, e)))

    canary = url(env)
    if canary is None:
        raise DeployError(f"{env} has no current release under {layout.prefix}: deploy it first")
    return verify_mod.run(canary, url(main_env) if main_env else None, window, limits)


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in ("build", "deploy", "verify", "-h", "--help"):
        argv.insert(0, "deploy")
    p = argparse.ArgumentParser(prog="deploy.sh", description="versioned releases with rollback")
    sub = p.add_subparsers(dest="command", required=True)
    b = sub.add_parser("build", help="build releases/VERSION only")
    d = sub.add_parser("deploy", help="deploy VERSION to ENV (the default: deploy.sh ENV VERSION)")
    d.add_argument("env")
    for s in (b, d):
        s.add_argument("version")
        s.add_argument("--source", default=release_mod.ROOT, help="source tree (default: this one)")
    d.add_argument("--health-timeout", type=argument(float, 0, above=True), default=90.0)
    v = sub.add_parser("verify", help="the canary verdict over a window")
    v.add_argument("env")
    v.add_argument("--main", help="environment to compare throughput with")
    v.add_argument("--window", type=argument(float, 0, above=True), default=30.0)
    v.add_argument("--max-lag-s", type=argument(float, 0), default=verify_mod.Limits.max_lag_s)
    v.add_argument("--max-slower-pct", type=argument(float, 0, high=100), default=verify_mod.Limits.max_slower_pct)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    layout = Layout(os.environ.get("STREAMER_PREFIX", "/opt/streamer"))
    pypy = os.environ.get("STREAMER_PYPY", "pypy3")
    deps = os.environ.get("STREAMER_DEPS_DIR", os.path.join(layout.prefix, "deps"))
    try:
        if args.command == "build":
            release_mod.build(layout.prefix, args.version, args.source, pypy, deps)
            return 0
        if args.command == "verify":
            return verify(layout, args.env, args.main, args.window,
                          verify_mod.Limits(args.max_lag_s, args.max_slower_pct))
        return deploy(layout, args.env, args.version, args.source, service_for(layout.prefix),
                      args.health_timeout, pypy, deps)
    except (DeployError, release_mod.ReleaseError, ServiceError, config_mod.ConfigError,
            ValueError) as exc:
        print(f"deploy: error: {exc}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":
    sys.exit(main())
