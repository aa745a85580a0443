"""Which streamer this is: its version, the deployed release it runs from, and the interpreter.

``streamer --version``, the first line a run logs, ``/status`` (``build``) and the Prometheus
series ``streamer_build_info`` all say it, so that a canary and main can be told apart by what
they run, not only by their namespace. A release (streamer.deploy.release) is the virtualenv the
process runs in: its ``RELEASE.json`` names it.
"""
from __future__ import annotations

import json
import os
import sys
from typing import Dict, Optional

from streamer import __version__

RELEASE_FILE = "RELEASE.json"


def release(prefix: Optional[str] = None) -> str:
    """The deployed release's name, or "" outside one (a checkout, a development venv)."""
    try:
        with open(os.path.join(prefix or sys.prefix, RELEASE_FILE), encoding="utf-8") as fh:
            name = json.load(fh).get("version")
    except (OSError, ValueError, AttributeError):
        return ""
    return name if isinstance(name, str) else ""


def runtime() -> str:
    """``PyPy 7.3.11 (Python 3.9.16)`` or ``CPython 3.11.2``."""
    python = ".".join(str(n) for n in sys.version_info[:3])
    pypy = getattr(sys, "pypy_version_info", None)
    if pypy is None:
        return f"CPython {python}"
    return f"PyPy {'.'.join(str(n) for n in pypy[:3])} (Python {python})"


def build_info(prefix: Optional[str] = None) -> Dict[str, str]:
    return {"version": __version__, "release": release(prefix), "python": runtime()}


def describe(prefix: Optional[str] = None) -> str:
    """One line: ``streamer 0.1.0 (release r42) on PyPy 7.3.11 (Python 3.9.16)``."""
    return text(build_info(prefix))


def text(info: Dict[str, str]) -> str:
    """``describe``'s line for a build as /status gives it (another instance's, say)."""
    of = f" (release {info['release']})" if info.get("release") else ""
    return f"streamer {info.get('version')}{of} on {info.get('python')}"
