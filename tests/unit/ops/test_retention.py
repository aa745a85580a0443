"""The warning before the checkpoint's binlog file is purged: which files and expiries warn."""
import pytest

from streamer.ops import retention

FILES = ["b.000003", "b.000004", "b.000005", "b.000006"]


def test_the_expiry_comes_from_seconds_or_else_days():
    assert retention.expiry_seconds({"binlog_expire_logs_seconds": "3600",
                                     "expire_logs_days": "2"}) == 3600
    assert retention.expiry_seconds({"binlog_expire_logs_seconds": "0",
                                     "expire_logs_days": "1.5"}) == 129600
    assert retention.expiry_seconds({"expire_logs_days": "0"}) == 0


@pytest.mark.parametrize("file,since", [
    ("b.000006", 10 ** 9),   # the active file is never purged, however old its last change
    ("b.000005", 100),       # two files older than it, and its expiry days away
    ("b.000009", 100),       # not on the server (the reader says so at start)
    (None, None),            # nothing committed yet
])
def test_no_warning_where_nothing_is_at_risk(file, since):
    state = retention.judge(FILES, file, 86400, since, warn_files=1, warn_margin_s=3600)
    assert state["status"] == "ok" and state["reason"] == ""


def test_the_oldest_files_warn_within_warn_files():
    state = retention.judge(FILES, "b.000003", 0, 100, warn_files=1, warn_margin_s=3600)
    assert state["status"] == "warning" and state["files_before"] == 0
    assert "only 0 binlog files older than it remain" in state["reason"]
    assert "take a snapshot of the tables and restart from a new position" in state["reason"]
    assert retention.judge(FILES, "b.000004", 0, 100, 1, 3600)["status"] == "ok"
    assert retention.judge(FILES, "b.000004", 0, 100, 2, 3600)["status"] == "warning"
    assert retention.judge(FILES, "b.000003", 0, 100, 0, 3600)["status"] == "ok"  # off


def test_an_expiry_within_the_margin_warns_with_the_time_left():
    state = retention.judge(FILES, "b.000005", 86400, 86400 - 3000, 1, 3600)
    assert state["status"] == "warning" and state["expires_in_s"] == 3000
    assert "removes it in 3000 s or less (retention.warn_margin_s is 3600)" in state["reason"]
    assert retention.judge(FILES, "b.000005", 86400, 86400 - 4000, 1, 3600)["status"] == "ok"
    # Past its expiry and not yet purged (a purge runs at a rotation): still a warning, 0 s.
    late = retention.judge(FILES, "b.000005", 86400, 90000, 1, 3600)
    assert late["status"] == "warning" and "in 0 s or less" in late["reason"]
    assert retention.judge(FILES, "b.000005", 0, 10 ** 9, 1, 3600)["status"] == "ok"  # no expiry


def test_the_file_a_restart_needs_is_the_oldest_of_the_checkpoints_and_its_pending_xas():
    from streamer.ops.metrics import needed_file
    from streamer.position import Position

    assert needed_file(Position("mysql-bin.000010", 4)) == "mysql-bin.000010"
    pending = {"x": ["mysql-bin.000009", 100, "", "t"], "y": ["mysql-bin.000011", 4, "", "t"]}
    assert needed_file(Position("mysql-bin.000010", 4, xa=pending)) == "mysql-bin.000009"
    # Numbered as numbers, past the six digits too.
    assert needed_file(Position("b.1000000", 4, xa={"x": ["b.999999", 4, "", "t"]})) == "b.999999"
    assert needed_file(Position("", 4)) is None
