"""Bench results name no machine's paths: interpreters are recorded relative to the repo or venv."""
import os
import re

from bench import env
from bench.suite import _label


def test_an_interpreter_is_recorded_without_the_machine_path():
    assert _label(os.path.join(env.ROOT, ".venv-pypy", "bin", "python")) == ".venv-pypy/bin/python"
    # A worktree measured with the main tree's venv.
    assert _label("/elsewhere/checkout/.venv-cpy/bin/python") == ".venv-cpy/bin/python"
    assert _label("pypy3") == "pypy3"


def test_the_committed_results_name_no_checkout_paths():
    with open(os.path.join(env.ROOT, "bench", "results.jsonl"), encoding="utf-8") as fh:
        assert not [line for line in fh if re.search(r'"/[^"]*/\.venv', line)]
