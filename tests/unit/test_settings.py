"""The typed config: every key declared once (default, check, unit, doc), read as objects with
units converted, and nothing in the package reading it any other way."""
import ast
import copy
import os

import pytest

from streamer import config, settings
from streamer.settings import Free, Key, Section

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "streamer")


def _cfg(**values):
    return config.build(dict({"mysql": {"server_id": 9}}, **values))


def test_units_are_converted_once_where_the_key_is_declared():
    cfg = _cfg(batch={"linger_ms": 25, "gather_ms": 0.5}, ha={"session_timeout_ms": 9000},
               shutdown_timeout_s=7)
    assert cfg.batch.linger_s == 0.025 and cfg.batch.gather_s == 0.0005
    assert cfg.batch.linger_ms == 25  # as written, for what takes milliseconds (librdkafka)
    assert cfg.ha.session_timeout_s == 9.0 and cfg.ha.session_timeout_ms == 9000
    assert cfg.shutdown_timeout_s == 7.0 and isinstance(cfg.shutdown_timeout_s, float)
    assert cfg.batch.max_messages == 20000 and isinstance(cfg.warmup.transactions, int)
    assert cfg.mysql.tls.mode == "preferred"  # a section inside a section
    assert cfg.kafka == {"bootstrap.servers": "127.0.0.1:9092"}  # the user's own keys
    with pytest.raises(AttributeError, match="section 'batch' has no key 'linger'"):
        cfg.batch.linger


def test_every_key_has_a_default_that_passes_its_check_a_doc_and_a_known_unit():
    checked = 0
    for dotted, entry in config.KEYS.walk():
        assert entry.doc.strip(), f"{dotted} has no doc"
        if isinstance(entry, Key):
            if dotted != "mysql.server_id":  # required: no default can be right
                assert entry.check.ok(entry.default), dotted
            assert entry.check.allowed, dotted
            # A key named for its unit says so, and the view converts it.
            for suffix, unit in (("_ms", "ms"), ("_s", "s"), ("_bytes", "bytes")):
                if dotted.endswith(suffix):
                    assert entry.unit == unit, dotted
            checked += 1
    assert checked > 90
    with pytest.raises(config.ConfigError, match="mysql.server_id.*never random"):
        config.build({})


def test_a_view_reads_the_mapping_when_it_is_read():
    cfg = _cfg()
    batch = cfg.batch
    cfg["batch"]["linger_ms"] = 50
    assert batch.linger_s == 0.05
    cfg.set("mysql.host", "db2")  # the server in use after a failover
    assert cfg.mysql.host == "db2"
    with pytest.raises(KeyError, match="no config key 'mysql.hots'"):
        cfg.set("mysql.hots", "x")


def test_a_changed_copy_leaves_the_original_and_stays_a_config():
    cfg = _cfg()
    warm = cfg.but({"namespace": "w", "tables.columns.mask": {}, "mysql.server_id": 10})
    assert (warm.namespace, warm.mysql.server_id) == ("w", 10)
    assert (cfg.namespace, cfg.mysql.server_id) == ("dev", 9)
    again = copy.deepcopy(warm)
    assert isinstance(again, config.Config) and again.batch.linger_s == 0.02


def test_rules_between_keys_run_after_each_key_passed_its_own_check():
    with pytest.raises(config.ConfigError, match="'ha.session_timeout_ms' has bad value 0"):
        _cfg(ha={"session_timeout_ms": 0})
    with pytest.raises(config.ConfigError, match="ha.heartbeat_interval_ms.*a third"):
        _cfg(ha={"session_timeout_ms": 1000, "heartbeat_interval_ms": 500})
    assert _cfg().snapshot.database == "streamer_heartbeat"  # derived: heartbeat.database


def test_a_declaration_whose_seconds_name_clashes_with_a_key_is_refused():
    with pytest.raises(ValueError, match="clash"):
        Section("x", {"wait_ms": Key(1, settings.number(), "d", unit="ms"),
                      "wait_s": Key(1, settings.number(), "d", unit="s")})
    with pytest.raises(ValueError, match="unknown unit"):
        Key(1, settings.number(), "d", unit="hours")


def test_the_reference_in_docs_is_generated_from_the_declarations():
    with open(os.path.join(ROOT, "docs", "config.md"), encoding="utf-8") as fh:
        assert fh.read() == config.reference(), "run: make docs"
    text = config.reference()
    for dotted, entry in config.KEYS.walk():
        if not isinstance(entry, Section):
            assert f"`{dotted}`" in text


def _subscripted_config_reads(path):
    """Lines where a config (``cfg``, ``self.cfg``, ``x.cfg``) is read by subscript."""
    found = []
    for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
        if not isinstance(node, ast.Subscript):
            continue
        target = node.value
        while isinstance(target, ast.Subscript):
            target = target.value
        name = target.attr if isinstance(target, ast.Attribute) else getattr(target, "id", "")
        if name in ("cfg", "real_cfg"):
            found.append(node.lineno)
    return found


def test_the_package_reads_its_config_only_through_the_typed_views(tmp_path):
    offenders = []
    for folder, _, files in os.walk(PACKAGE):
        for name in files:
            path = os.path.join(folder, name)
            if name.endswith(".py") and name not in ("config.py", "settings.py"):
                offenders += [f"{os.path.relpath(path, ROOT)}:{n}"
                              for n in _subscripted_config_reads(path)]
    assert offenders == []
    # The check itself, on a file that breaks it.
    bad = tmp_path / "bad.py"
    bad.write_text("def f(cfg, self):\n    return cfg['batch']['linger_ms'], self.cfg['x']\n")
    assert _subscripted_config_reads(str(bad)) == [2, 2, 2]


def test_free_mappings_keep_the_users_keys_and_refuse_other_values():
    assert config.FREE_MAPPINGS == ("kafka", "topics.names", "tables.key_columns",
                                    "tables.columns.mask")
    assert all(isinstance(e, Free) for d, e in config.KEYS.walk() if d in config.FREE_MAPPINGS)
    cfg = _cfg(kafka={"linger.ms": 5})
    assert cfg.kafka == {"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5}
    with pytest.raises(config.ConfigError, match="'kafka' must be a mapping of librdkafka"):
        _cfg(kafka=["linger.ms"])
