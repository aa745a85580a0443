"""bench.report: one run's records as tables."""
from bench import report


def _snap(shape, rows_s, launch_rows_s):
    return {"shape": shape, "interpreter": "pypy", "rows": 1000000, "rows_per_chunk": 5000,
            "rows_s": rows_s, "launch_rows_s": launch_rows_s, "snapshot_s": 5.0, "cpu_s": 5.5,
            "cpu_us_per_row": 5.5, "rss_mb": 177.0, "rss_growth_mb": 0.4}


def test_each_snapshot_shape_is_a_row_with_its_rate_from_launch():
    text = report.render([_snap("snapshot", 180000.0, 150000.0),
                          _snap("snapshot-wide", 219500.0, 200000.0),
                          _snap("snapshot-mixed", 170000.0, 161000.0),
                          {"shape": "snapshot-live", "interpreter": "pypy", "p50_ms": 4.0}])
    table = text.split("snapshots (start.initial", 1)[1].split("\n\n", 1)[0].splitlines()
    header = table[1].split("  ")
    header = [h.strip() for h in header if h.strip()]
    rows = {line.split()[0]: line.split() for line in table[3:]}
    assert list(rows) == ["snapshot", "snapshot-wide", "snapshot-mixed"]
    at = header.index("launch to done")
    assert [rows[s][at] for s in rows] == ["150.0k", "200.0k", "161.0k"]
    assert [rows[s][header.index("rows/s")] for s in rows] == ["180.0k", "219.5k", "170.0k"]
