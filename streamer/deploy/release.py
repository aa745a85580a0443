"""Versioned releases: ``releases/VERSION`` is a small PyPy virtualenv holding only the project.

The dependencies live in a shared layer, ``deps/HASH``: a virtualenv built once per lock file
(``deploy/constraints-pypy.txt``) and interpreter, and never changed afterwards. A ``.pth`` file
puts the layer's site-packages on the release's path. A release therefore builds in seconds, and
an old release keeps its own layer when a new one brings new dependencies, so a rollback always
lands on exactly what was tested. The layer and the release also get the librdkafka the streamer
loads (deploy/librdkafka.sh: upstream's, fetched once per host into the same directory as the
layers); the layer's confluent-kafka-pypy is relinked to its copy.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import logging
import os
import shutil
import subprocess
import time
from typing import List, Tuple

from streamer.errors import ReleaseError
from streamer.kafka.bundle import BUNDLED_RELPATH

log = logging.getLogger(__name__)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LOCK_FILE = os.path.join("deploy", "constraints-pypy.txt")
LIBRDKAFKA_SCRIPT = os.path.join("deploy", "librdkafka.sh")
MARKER = "RELEASE.json"
# What a release needs from a source tree; everything else (venvs, state, tests) stays behind.
_SKIP = shutil.ignore_patterns(".git", ".venv*", ".local", "__pycache__", "build", "dist",
                               "*.egg-info", ".pytest_cache", ".ruff_cache", "profiles", "tests",
                               "bench", ".ci")


def run(cmd: List[str], what: str, **kw: object) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-15:]
        raise ReleaseError(f"{what} failed (exit {proc.returncode}): {' '.join(cmd)}\n" +
                           "\n".join(tail))
    return proc.stdout


def _purelib(python: str) -> str:
    return run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
               "asking the interpreter for its site-packages").strip()


def deps_layer(deps_dir: str, lock_path: str, python: str, librdkafka_script: str) -> Tuple[str, str]:
    """The dependency layer for this lock file, built when missing: (its root, its site-packages)."""
    ident = run([python, "-c", "import sys; print(sys.executable, sys.version)"],
                f"running the interpreter {python}")
    digest = hashlib.sha256(ident.encode())
    for path in (lock_path, librdkafka_script):  # a new librdkafka makes a new layer too
        with open(path, "rb") as fh:
            digest.update(fh.read())
    key = digest.hexdigest()[:16]
    layer = os.path.join(deps_dir, key)
    done = os.path.join(layer, "COMPLETE")
    os.makedirs(deps_dir, exist_ok=True)
    with open(os.path.join(deps_dir, ".lock"), "w") as lock:
        # Two deploys at once (canary and stage from one Jenkins agent) must not build one layer twice.
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not os.path.exists(done):
            started = time.monotonic()
            shutil.rmtree(layer, ignore_errors=True)
            run([python, "-m", "venv", layer], "creating the dependency virtualenv")
            run([os.path.join(layer, "bin", "python"), "-m", "pip", "install", "-q",
                 "--no-deps", "-r", lock_path], f"installing the locked dependencies {lock_path}")
            # confluent-kafka-pypy, built above against the system's librdkafka, is built again
            # linked to the layer's own copy of the producer's (the streamer's topic reads).
            run(["bash", librdkafka_script, "--relink-consumer", deps_dir,
                 os.path.join(layer, "bin", "python"), layer],
                "installing librdkafka into the dependency layer (deploy/librdkafka.sh)")
            with open(done, "w") as fh:
                fh.write(lock_path + "\n")
            log.info("built dependency layer %s in %.1fs", layer, time.monotonic() - started)
    return layer, _purelib(os.path.join(layer, "bin", "python"))


def install_librdkafka(layer: str, release: str) -> str:
    """The producer's librdkafka in the release, where streamer.rdkafka looks first: a link to
    the layer's copy, the very file its confluent-kafka-pypy is linked to, so that the process
    loads one librdkafka, not two."""
    built = os.path.join(layer, BUNDLED_RELPATH)
    if not os.path.isfile(built):
        raise ReleaseError(f"the dependency layer {layer} has no {BUNDLED_RELPATH}; remove the "
                           f"layer to have it built again")
    target = os.path.join(release, BUNDLED_RELPATH)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    os.symlink(built, target)
    return target


def build(prefix: str, version: str, source: str, python: str, deps_dir: str) -> str:
    """``prefix/releases/version``, built from the source tree unless it is already complete."""
    if not version or "/" in version or version.startswith("."):
        raise ReleaseError(f"bad release version {version!r}: use letters, digits, '.', '-', '_'")
    release = os.path.join(prefix, "releases", version)
    if os.path.exists(os.path.join(release, MARKER)):
        log.info("release %s already built", release)
        return release
    lock_path = os.path.join(source, LOCK_FILE)
    if not os.path.isfile(lock_path):
        raise ReleaseError(f"{lock_path} is missing: run 'make constraints' and commit it")
    started = time.monotonic()
    layer, layer_site = deps_layer(deps_dir, lock_path, python,
                                   os.path.join(source, LIBRDKAFKA_SCRIPT))
    # Scripts in a virtualenv embed its absolute path, so a release is built in place and
    # only counts once its marker exists; a half-built one is removed and built again.
    shutil.rmtree(release, ignore_errors=True)
    run([python, "-m", "venv", "--without-pip", release], "creating the release virtualenv")
    release_py = os.path.join(release, "bin", "python")
    release_site = _purelib(release_py)
    with open(os.path.join(release_site, "_streamer_deps.pth"), "w") as fh:
        fh.write(layer_site + "\n")
    src = os.path.join(release, "src")
    shutil.copytree(source, src, ignore=_SKIP, symlinks=True)
    run([release_py, "-m", "pip", "install", "-q", "--no-deps", "--no-index",
         "--no-build-isolation", src], f"installing the project from {source}")
    # The project's bytecode, written here whatever the environment: pip's install of it skips
    # that where PYTHONDONTWRITEBYTECODE is set (as in CI), and the service's user can't, as a
    # rule, write into the release. Without it every start compiled the package again: 45-66 ms
    # of a PyPy start (docs/benchmarks-history.md, "A release's bytecode").
    run([release_py, "-m", "compileall", "-q", os.path.join(release_site, "streamer")],
        "compiling the project's bytecode")
    run([release_py, "-m", "pip", "check"], "checking the release's dependencies against the lock")
    install_librdkafka(layer, release)
    shutil.copytree(os.path.join(source, "deploy", "env"), os.path.join(release, "env"))
    shutil.rmtree(src)
    seconds = round(time.monotonic() - started, 1)
    with open(os.path.join(release, MARKER), "w") as fh:
        json.dump({"version": version, "source": os.path.abspath(source), "deps": layer_site,
                   "built_s": seconds, "built_at": time.strftime("%Y-%m-%dT%H:%M:%SZ",
                                                                 time.gmtime())}, fh)
    log.info("built release %s in %.1fs", release, seconds)
    return release
