"""Which streamer runs: `streamer --version`, /status's build, streamer_build_info, the first
line of a run. A canary and main can be told apart by what they run."""
import json

import pytest

import streamer
from streamer import config
from streamer.ops.buildinfo import build_info, describe, release
from streamer.ops.httpstatus import prometheus, status_text
from streamer.ops.metrics import Metrics


def test_a_release_names_itself_and_anything_else_is_no_release(tmp_path):
    assert release(str(tmp_path)) == ""  # a checkout or a development venv
    (tmp_path / "RELEASE.json").write_text(json.dumps({"version": "r42", "built_s": 3.0}))
    assert release(str(tmp_path)) == "r42"
    info = build_info(str(tmp_path))
    assert info["version"] == streamer.__version__ and info["release"] == "r42"
    assert info["python"].startswith(("PyPy ", "CPython "))
    assert describe(str(tmp_path)) == (f"streamer {streamer.__version__} (release r42) on "
                                       f"{info['python']}")
    for junk in ("{", "[]", '{"version": 7}'):  # a marker it can't read is no release, no error
        (tmp_path / "RELEASE.json").write_text(junk)
        assert release(str(tmp_path)) == ""


def test_the_version_flag_says_it_and_exits(capsys):
    from streamer import cli

    with pytest.raises(SystemExit) as stopped:
        cli.main(["--version"])
    assert stopped.value.code == 0
    assert capsys.readouterr().out.strip() == describe()


def test_status_prometheus_and_the_status_text_say_what_runs():
    from prometheus_client.parser import text_string_to_metric_families

    cfg = config.build({"mysql": {"server_id": 7}, "namespace": "ns", "environment": "canary"})
    m = Metrics(cfg)
    m.build = {"version": "9.9.9", "release": "r42", "python": "PyPy 7.3.11 (Python 3.9.16)"}
    st = m.status()
    assert st["build"] == m.build
    assert "build      streamer 9.9.9 (release r42) on PyPy 7.3.11 (Python 3.9.16)" in \
        status_text(st).splitlines()
    families = {f.name: f for f in text_string_to_metric_families(prometheus(m))}
    [sample] = families["streamer_build_info"].samples
    assert sample.value == 1.0
    assert {k: sample.labels[k] for k in ("version", "release", "python", "namespace",
                                          "environment")} == {
        "version": "9.9.9", "release": "r42", "python": "PyPy 7.3.11 (Python 3.9.16)",
        "namespace": "ns", "environment": "canary"}
