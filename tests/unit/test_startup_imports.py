"""`streamer run` leaves out start-up work it doesn't need (imports its start doesn't use, JIT
compiling of one-off code): each is paid for on every (re)start, and PyPy imports more slowly than
CPython (docs/benchmarks.md, "Start-up")."""
import json
import subprocess
import sys

import pytest

RUN_MODULES = "import streamer.cli, streamer.engine.supervisor, streamer.ops.observe"


def _imported(*names, modules=RUN_MODULES):
    code = f"import json, sys; {modules}; print(json.dumps([n for n in {list(names)!r} if n in sys.modules]))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_the_cli_module_imports_no_yaml_until_a_config_is_read():
    # `streamer run` under PyPy execs itself first thing (gcpacing.GC_ENV): whatever the process it
    # replaces imported before that is imported twice, so yaml waits for config.load.
    assert _imported("yaml", modules="import streamer.cli") == []


def test_the_status_endpoint_is_not_imported_while_it_is_off():
    # http.server and what it pulls in cost ~25 ms of a PyPy start; metrics.http_port is 0 by default.
    assert _imported("http.server", "streamer.ops.httpstatus") == []


@pytest.mark.skipif(sys.implementation.name != "pypy",
                    reason="CPython imports dataclasses anyway, from the cryptography package "
                           "pymysql uses there")
def test_run_imports_no_dataclasses_under_pypy():
    # dataclasses imports inspect: ~10 ms of a PyPy start.
    assert _imported("dataclasses", "inspect") == []


def test_run_sets_the_eager_jit_thresholds_only_after_reading_the_config(monkeypatch, tmp_path):
    # The eager thresholds are for the binlog loop; set before the config was read, they had PyPy
    # compile yaml's one-off parse of it too (docs/benchmarks.md, "The eager JIT thresholds
    # after the config").
    from streamer import cli, config

    order = []

    class Stop(Exception):
        pass

    def load(path):
        order.append("config")
        return config.build({"mysql": {"server_id": 9}})

    def tune_jit():
        order.append("jit")
        raise Stop

    from streamer.ops import logfmt

    monkeypatch.setattr(cli.config_mod, "load", load)
    monkeypatch.setattr(cli, "_tune_jit", tune_jit)
    monkeypatch.setattr(logfmt, "setup", lambda level, fmt: order.append("logging"))
    args = cli.build_parser().parse_args(["run", "-c", str(tmp_path / "streamer.yaml")])
    with pytest.raises(Stop):
        args.func(args)
    assert order == ["config", "logging", "jit"]
