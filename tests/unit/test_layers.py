"""The package's folders are its architecture: a row travels source → schema → codec → kafka, driven
by the engine, with ops, deploy and tools aside. Imports follow that road and never run back up it."""
import ast
import json
import os
import subprocess
import sys

import pytest

PACKAGE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "streamer")
# What every layer may use: the shared vocabulary at the package's top.
BASE = {"errors", "config", "settings", "position"}
# Layer -> the layers it may import besides itself and BASE.
ALLOWED = {
    "source": set(),                 # the binlog and the server: knows nothing downstream
    "codec": set(),                  # Avro bytes, for any schema
    "schema": {"source", "codec"},   # a table version plans its row reads and holds its writers
    "kafka": {"codec"},              # publishes bytes; reads back the writer schemas it published
    "ops": {"source"},               # watches the run; its own connections to the source
    "engine": {"source", "schema", "codec", "kafka", "ops"},
    "deploy": {"ops", "kafka.bundle"},
    "tools": {"source", "schema", "codec", "kafka", "ops"},
}


def _modules():
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            if name.endswith(".py"):
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, os.path.dirname(PACKAGE))[:-3].replace(os.sep, ".")
                yield rel[: -len(".__init__")] if rel.endswith(".__init__") else rel, path


def _imports(path):
    """Every streamer module a file imports, at its top or inside a function."""
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "streamer":  # a module, or the package's own __version__
                yield from ("streamer" if a.name.startswith("__") else f"streamer.{a.name}"
                            for a in node.names)
            elif node.module.startswith("streamer."):
                yield node.module
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}: relative import; name the layer (from streamer.X ...)")
        elif isinstance(node, ast.Import):
            yield from (a.name for a in node.names if a.name.startswith("streamer."))


def _allowed(layer, target):
    parts = target.split(".")
    if len(parts) < 2 or parts[1] in BASE or parts[1] == "decode" and layer == "tools":
        return True
    if parts[1] == layer:
        return True
    allowed = ALLOWED[layer]
    return parts[1] in allowed or ".".join(parts[1:3]) in allowed


def violations():
    found = []
    for module, path in _modules():
        parts = module.split(".")
        if len(parts) < 3 or parts[1] not in ALLOWED:
            continue  # cli, errors, config, settings, position, decode: the top and the base
        for target in _imports(path):
            if not _allowed(parts[1], target):
                found.append(f"{module} imports {target}")
    return sorted(found)


def test_every_layer_imports_only_the_layers_before_it_on_the_road():
    assert violations() == []


def test_the_base_modules_import_no_layer():
    for name in BASE:
        targets = set(_imports(os.path.join(PACKAGE, name + ".py")))
        assert {t for t in targets if t.split(".")[1] not in BASE} == set(), name


def test_every_subpackage_is_a_known_layer():
    folders = {d for d in os.listdir(PACKAGE)
               if os.path.isfile(os.path.join(PACKAGE, d, "__init__.py"))}
    assert folders == set(ALLOWED)


def test_the_check_catches_an_import_against_the_road(tmp_path, monkeypatch):
    # The rule itself, on a file that breaks it: source must never import kafka.
    bad = tmp_path / "streamer" / "source"
    bad.mkdir(parents=True)
    (bad / "__init__.py").write_text("")
    (bad / "leak.py").write_text("from streamer.kafka.publisher import Publisher\n"
                                 "def f():\n    from streamer import engine\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", str(tmp_path / "streamer"))
    assert violations() == ["streamer.source.leak imports streamer.engine",
                            "streamer.source.leak imports streamer.kafka.publisher"]


@pytest.mark.parametrize("entry", ["streamer.cli", "streamer.engine.supervisor", "streamer.ops.observe"])
def test_what_streamer_run_imports_pulls_in_neither_deploy_nor_tools(entry):
    code = ("import json, sys; import " + entry + "; print(json.dumps(sorted(m for m in sys.modules "
            "if m.startswith(('streamer.deploy', 'streamer.tools')))))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


# Inside the engine: the stages know the parts they share (context, commit policy, the row
# functions, tracker, snapshots), never the loop that drives them, what builds it, or each other.
ABOVE_STAGES = ("streamer.engine.pipeline", "streamer.engine.streamer",
                "streamer.engine.supervisor", "streamer.engine.warmup")


def stage_violations():
    found = []
    for module, path in _modules():
        if not module.startswith("streamer.engine.stages."):
            continue
        for target in _imports(path):
            if target.startswith(ABOVE_STAGES) or (
                    target.startswith("streamer.engine.stages.") and target != module):
                found.append(f"{module} imports {target}")
    return sorted(found)


def test_a_stage_imports_neither_the_pipeline_nor_what_builds_it_nor_another_stage():
    assert stage_violations() == []


def test_the_stage_check_catches_a_stage_that_imports_the_loop(tmp_path, monkeypatch):
    stages = tmp_path / "streamer" / "engine" / "stages"
    stages.mkdir(parents=True)
    for folder in (tmp_path / "streamer", tmp_path / "streamer" / "engine", stages):
        (folder / "__init__.py").write_text("")
    (stages / "bad.py").write_text("from streamer.engine.pipeline import Pipeline\n"
                                   "from streamer.engine.stages.rows import Rows\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", str(tmp_path / "streamer"))
    assert stage_violations() == ["streamer.engine.stages.bad imports streamer.engine.pipeline",
                                  "streamer.engine.stages.bad imports streamer.engine.stages.rows"]


MAX_FUNCTION_LINES = 60  # a screen: longer is a feature that wants an object of its own


def long_functions(files=None):
    """Every function (or method) over MAX_FUNCTION_LINES lines in ``files`` ((module, path)
    pairs; default: the package's), with its length."""
    found = []
    for module, path in _modules() if files is None else files:
        if module.endswith("_rdkafka_ffi"):
            continue  # generated by `make ffi`
        for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > MAX_FUNCTION_LINES:
                    found.append(f"{module}.{node.name}: {length} lines")
    return found


def test_no_function_in_the_package_is_longer_than_a_screen():
    assert long_functions() == []


def test_the_length_check_catches_a_long_function(tmp_path):
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_FUNCTION_LINES))
    path = tmp_path / "long.py"
    path.write_text(f"def short():\n    pass\n\n\ndef long():\n{body}")
    assert long_functions([("long", str(path))]) == [f"long.long: {MAX_FUNCTION_LINES + 1} lines"]
