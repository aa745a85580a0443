"""Profiler rules and the flame graph, without servers."""
import os
import platform
import time
import xml.etree.ElementTree as ET

import pytest

from streamer import config
from streamer.ops.metrics import Metrics
from streamer.ops.profiler import CPYTHON_REFUSAL, Profiler, prune, saturated
from streamer.tools.flamegraph import collapsed, frame_name, svg, top

SVG = "{http://www.w3.org/2000/svg}"


def cfg(**profiler):
    c = config.validate(config._merge(config.DEFAULTS, {"mysql": {"server_id": 9}}))
    c["profiler"].update(profiler)
    return c


def test_enabling_vmprof_on_cpython_is_refused_naming_the_segfault_and_py_spy():
    c = cfg(enabled=True)
    with pytest.raises(config.ConfigError) as err:
        Profiler(c, Metrics(c), implementation="CPython")
    msg = str(err.value)
    assert "segfaults" in msg and "py-spy" in msg and "profiler.force" in msg
    assert msg == CPYTHON_REFUSAL


def test_force_or_pypy_or_a_disabled_profiler_is_accepted():
    c = cfg(enabled=True, force=True)
    assert Profiler(c, Metrics(c), implementation="CPython").enabled
    c = cfg(enabled=True)
    assert Profiler(c, Metrics(c), implementation="PyPy").enabled
    c = cfg(enabled=False)
    assert not Profiler(c, Metrics(c), implementation="CPython").enabled


def test_prune_keeps_only_the_newest_k_profiles_and_leaves_other_files(tmp_path):
    for i in range(7):
        p = tmp_path / f"streamer-2026010{i}-000000-000-auto.vmprof"
        p.write_bytes(b"x")
        os.utime(p, (time.time() - 100 + i, time.time() - 100 + i))
    (tmp_path / "notes.txt").write_text("keep me")
    assert prune(str(tmp_path), 3) == 4
    left = sorted(p.name for p in tmp_path.iterdir())
    assert left == ["notes.txt"] + [f"streamer-2026010{i}-000000-000-auto.vmprof" for i in (4, 5, 6)]


def test_saturated_means_backlog_over_threshold_and_reader_not_waiting():
    assert saturated(10_000, 5_000, caught_up=False)
    assert not saturated(10_000, 5_000, caught_up=True)
    assert not saturated(4_000, 5_000, caught_up=False)
    assert not saturated(None, 5_000, caught_up=False)


STACKS = {
    ("py:<module>:1:/x/streamer/cli.py", "py:run:10:/x/streamer/pipeline.py",
     "py:process_event:16:/x/streamer/envelope.py"): 60,
    ("py:<module>:1:/x/streamer/cli.py", "py:run:10:/x/streamer/pipeline.py",
     "py:_commit:250:/x/streamer/pipeline.py"): 30,
    ("py:<module>:1:/x/streamer/cli.py", "py:run:10:/x/streamer/pipeline.py"): 10,
}
NAMED = {tuple(frame_name(f) for f in s): n for s, n in STACKS.items()}


def test_top_orders_by_self_time_and_counts_total_time_once_per_sample():
    samples, rows = top(NAMED)
    assert samples == 100
    assert rows[0] == ("process_event (envelope.py:16)", 60, 60)
    by_name = {r[0]: r for r in rows}
    assert by_name["run (pipeline.py:10)"] == ("run (pipeline.py:10)", 10, 100)


def test_collapsed_stacks_are_the_standard_semicolon_format():
    lines = collapsed(NAMED).splitlines()
    assert "<module> (cli.py:1);run (pipeline.py:10);process_event (envelope.py:16) 60" in lines
    assert len(lines) == 3


def test_flame_graph_is_valid_svg_with_a_rect_and_label_per_visible_frame():
    root = ET.fromstring(svg(NAMED, "t.vmprof").encode())
    assert root.tag == SVG + "svg"
    rects = root.findall(f".//{SVG}g/{SVG}rect")
    texts = [t.text for t in root.iter(SVG + "text")]
    titles = [t.text for t in root.iter(SVG + "title")]
    assert len(rects) == 4  # <module>, run, process_event, _commit
    assert any(t and t.startswith("process_event") for t in texts)
    assert any(t.startswith("process_event (envelope.py:16): 60 samples, 60.0%") for t in titles)
    widths = {t.split(":")[0]: float(r.get("width")) for t, r in
              zip(titles, root.findall(f".//{SVG}g/{SVG}rect"))}
    assert widths["process_event (envelope.py"] == pytest.approx(2 * widths["_commit (pipeline.py"])


@pytest.mark.skipif(platform.python_implementation() != "PyPy",
                    reason="vmprof samples reliably only under PyPy (CPython: see RUNTIME.md)")
def test_a_real_vmprof_profile_reads_back_with_this_modules_functions(tmp_path):
    import vmprof

    from streamer.tools.flamegraph import read_stacks

    def busy_streamer_test_function():
        # vmprof samples CPU time: spend 1 s of it, however busy the machine is. At 1 ms that is
        # ~1000 samples on a quiet host; a starved one delivered 36 of the timer's ticks for 0.4 s.
        end = time.process_time() + 1.0
        give_up = time.monotonic() + 60
        n = 0
        while time.process_time() < end and time.monotonic() < give_up:
            n += sum(i * i for i in range(200))
        return n

    path = str(tmp_path / "p.vmprof")
    with open(path, "w+b") as fh:
        vmprof.enable(fh.fileno(), 0.001, native=False, warn=False)
        busy_streamer_test_function()
        vmprof.disable()
    stacks = read_stacks(path)
    assert sum(stacks.values()) > 20
    assert any("busy_streamer_test_function" in f for s in stacks for f in s)


@pytest.mark.parametrize("content", [b"streamer-host\n", bytes(range(256)) * 2, b""])
def test_a_file_that_is_no_vmprof_profile_is_refused_naming_it(tmp_path, content, capsys):
    # vmprof's reader raised an IndexError (or NotImplementedError...) from inside it: `streamer
    # profile` printed a traceback.
    from streamer import cli

    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    assert cli.main(["profile", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"streamer: cannot read profile: {path} ")
    assert "Traceback" not in err


def test_a_profile_that_can_t_be_written_is_one_error_and_streaming_goes_on(tmp_path, caplog):
    # The profile folder replaced (or made unwritable) after the start: open() raised out of the
    # main loop's tick, and a signal meant to look at the streamer stopped it.
    import logging
    import shutil

    folder = tmp_path / "profiles"
    c = cfg(enabled=True, dir=str(folder))
    metrics = Metrics(c)
    with Profiler(c, metrics, implementation="PyPy") as profiler:
        shutil.rmtree(folder)
        folder.write_text("a file where the folder was")
        profiler.toggle_requested = True
        with caplog.at_level(logging.ERROR, logger="streamer.ops.profiler"):
            metrics.tick()
        assert profiler.path is None
        said = [r.getMessage() for r in caplog.records]
        assert len(said) == 1 and "could not start vmprof" in said[0] and str(folder) in said[0]
        assert "profiler.dir" in said[0]


def test_profiles_gone_before_the_prune_are_not_an_error(tmp_path, monkeypatch):
    # Another instance's prune, or an operator's clean-up, took a file between the listing and
    # its removal: FileNotFoundError out of stop(), in the main loop.
    for i in range(4):
        (tmp_path / f"streamer-2024010{i}-000000-000-signal.vmprof").write_bytes(b"x")
        os.utime(tmp_path / f"streamer-2024010{i}-000000-000-signal.vmprof", (i, i))
    real_remove = os.remove

    def remove_twice(path):
        real_remove(path)
        real_remove(path)  # as if another process had removed it first

    monkeypatch.setattr(os, "remove", remove_twice)
    assert prune(str(tmp_path), 1) == 3
    assert sorted(p.name for p in tmp_path.iterdir()) == ["streamer-20240103-000000-000-signal.vmprof"]


@pytest.mark.skipif(platform.python_implementation() != "PyPy", reason=CPYTHON_REFUSAL[:40])
def test_a_profile_folder_deleted_after_the_start_is_made_again(tmp_path):
    import shutil

    folder = tmp_path / "profiles"
    c = cfg(enabled=True, dir=str(folder))
    metrics = Metrics(c)
    with Profiler(c, metrics) as profiler:
        shutil.rmtree(folder)
        profiler.toggle_requested = True
        metrics.tick()
        assert profiler.path is not None and os.path.dirname(profiler.path) == str(folder)
        profiler.toggle_requested = True
        metrics.tick()
        assert profiler.path is None
    assert len(list(folder.glob("streamer-*.vmprof"))) == 1
