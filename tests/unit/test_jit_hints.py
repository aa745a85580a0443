"""What `streamer run` tells PyPy's JIT (cli._tune_jit), checked in a process of its own: the
hints last for the process."""
import subprocess
import sys

import pytest

from streamer.engine import rows

CHECK = """
import pypyjit
from streamer import cli
from streamer.engine.rows import process_event, process_one_row_event

def entry_cells():
    # The JIT's cells at the functions' entries (bytecode 0): made by a hint, or by the JIT
    # counting calls, which functions never called can't have made.
    return [pypyjit.get_jitcell_at_key(0, False, f.__code__)
            for f in (process_one_row_event, process_event)]

def writer_cells():
    # Each function of a generated writer, the record's and the nested one's: compiled apart
    # (the one-row path's), then as the version's own (the loop's).
    from streamer.codec.encode import compile_writer
    inner = {"type": "record", "name": "In", "fields": [{"name": "n", "type": "long"}]}
    outer = {"type": "record", "name": "Out", "fields": [{"name": "i", "type": inner},
                                                         {"name": "s", "type": "string"}]}
    cells = []
    for apart in (True, False):
        write = compile_writer(outer, apart)
        for code in (write.__code__, write.__globals__["w1"].__code__):
            cells.append(pypyjit.get_jitcell_at_key(0, False, code))
    return cells

before = entry_cells() + writer_cells()
cli._tune_jit()
print(*before, *entry_cells(), *writer_cells())
"""


@pytest.mark.skipif(sys.implementation.name != "pypy", reason="CPython has no JIT to tune")
def test_one_row_events_are_published_by_code_compiled_on_its_own():
    out = subprocess.run([sys.executable, "-c", CHECK], capture_output=True, text=True,
                         check=True)
    # Before: none has a cell. After: the one-row copy has (not inlined into callers), and each
    # function of a writer compiled apart from then on; process_event and the writers of
    # events of many rows are left to the JIT as they were.
    assert out.stdout.split() == ["False"] * 6 + ["True", "False", "True", "True", "False",
                                                  "False"]


def test_the_one_row_copy_is_process_event_under_a_code_object_of_its_own():
    one, many = rows.process_one_row_event, rows.process_event
    assert one.__code__ is not many.__code__
    assert one.__code__.co_code == many.__code__.co_code
    assert one.__code__.co_consts == many.__code__.co_consts
    assert one.__globals__ is many.__globals__
    assert one.__name__ == "process_one_row_event"
