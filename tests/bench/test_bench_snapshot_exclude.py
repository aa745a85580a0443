"""A snapshot shape with columns kept out of Kafka: a shape of its own, read with its config."""
import yaml

from bench import snapshot, suite
from streamer import config


def test_excluded_columns_make_a_shape_of_their_own_without_the_live_stream(monkeypatch, tmp_path):
    runs = []
    monkeypatch.setattr(suite.snapshot, "load", lambda quick, rows, table: ("db1", 10, 0.1))
    monkeypatch.setattr(suite.snapshot, "run", lambda *a: runs.append(a) or {
        "rows_s": 1.0, "launch_rows_s": 1.0, "cpu_s": 1.0, "rss_mb": 1.0, "rss_growth_mb": 0.0})
    monkeypatch.setattr(suite, "interpreter_of", lambda python: {"interpreter": "pypy"})
    monkeypatch.setattr(suite, "drop", lambda db: None)

    def live_cost(*a):
        raise AssertionError("no live stream beside a shape of its own")

    monkeypatch.setattr(suite.snapshot, "live_cost", live_cost)
    recs = suite.measure_snapshots(["pypy3"], False, str(tmp_path), None, None, "wide",
                                   ["payload", "email"])
    assert [r["shape"] for r in recs] == ["snapshot-wide-without-payload-email"]
    assert runs[0][-1] == ["payload", "email"]
    recs = suite.measure_snapshots(["pypy3"], False, str(tmp_path), None, None, "bulk", ["v"])
    assert [r["shape"] for r in recs] == ["snapshot-without-v"]
    recs = suite.measure_snapshots(["pypy3"], False, str(tmp_path), None, None, "wide")
    assert [r["shape"] for r in recs] == ["snapshot-wide"] and runs[2][-1] == ()


def test_the_excluded_columns_are_the_snapshot_tables_in_the_config(tmp_path):
    path = snapshot.write_config(str(tmp_path / "c.yaml"), "ns1", "db1", 500, ["payload"])
    with open(path, encoding="utf-8") as fh:
        raw = yaml.safe_load(fh)
    assert raw["tables"]["columns"] == {"exclude": ["db1.snap.payload"]}
    cfg = config.load(path, environ={})
    assert cfg.tables.columns.exclude == ["db1.snap.payload"] and cfg.start.initial == "snapshot"
    assert cfg.snapshot.chunk_rows == 500
    plain = snapshot.write_config(str(tmp_path / "d.yaml"), "ns1", "db1")
    with open(plain, encoding="utf-8") as fh:
        assert "columns" not in yaml.safe_load(fh)["tables"]
