"""What the Makefile's test targets run (read from `make -n`, which runs nothing)."""
import os
import re
import subprocess

from streamer.ops import gcpacing

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def recipes(*targets):
    # -o: the venv and the servers count as made, so only the targets' own commands print.
    out = subprocess.run(["make", "-n", "--no-print-directory", "-o", "venv", "-o", "up", *targets],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return out.replace("\\\n", " ").splitlines()


def test_every_pypy_run_of_the_suite_marks_each_major_collection_in_one_step_as_the_streamer():
    pypy = [line for line in recipes("unit", "test-pypy")
            if re.search(r"\.venv-pypy/bin/python -m pytest\b", line)]
    assert len(pypy) == 2, pypy  # unit's and test-pypy's
    for line in pypy:
        assert f"PYPY_GC_INCREMENT_STEP={gcpacing.GC_MARKING_STEP} " in line, line
