"""The MySQL password is read again for each connection: one rotated while the stream runs (the
file rewritten) is taken at the next reconnect."""
import logging
import os

import pytest

from streamer import config
from streamer.errors import ConfigError
from streamer.source import server


def _cfg(**mysql):
    return config.build({"mysql": dict({"server_id": 9}, **mysql)})


def test_each_connection_reads_the_file_as_it_is_now(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("old\n")
    password = server.Password(_cfg(password_file=str(pw)))
    assert server.connection_settings(_cfg(), password)["password"] == "old"
    (tmp_path / "new").write_text("new\n")
    os.replace(str(tmp_path / "new"), str(pw))  # as a secrets agent rewrites it
    assert server.connection_settings(_cfg(), password)["password"] == "new"


def test_a_file_gone_mid_rotation_keeps_the_password_read_before_and_says_so(tmp_path, caplog):
    pw = tmp_path / "pw"
    pw.write_text("old")
    password = server.Password(_cfg(password_file=str(pw)))
    pw.unlink()
    with caplog.at_level(logging.WARNING):
        assert password() == "old"
    assert "config key 'mysql.password_file': cannot read" in caplog.text
    assert "connecting with the password read before" in caplog.text and "old" not in caplog.text


def test_no_password_at_the_start_is_refused_then(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        server.Password(_cfg(password_file=str(tmp_path / "missing")))


def test_from_the_environment_it_is_read_once(monkeypatch):
    monkeypatch.setenv("STREAMER_MYSQL_PASSWORD", "from-env")
    password = server.Password(_cfg())
    monkeypatch.setenv("STREAMER_MYSQL_PASSWORD", "changed")
    assert password() == "from-env"


def test_it_is_never_shown(tmp_path):
    pw = tmp_path / "pw"
    pw.write_text("s3cret")
    password = server.Password(_cfg(password_file=str(pw)))
    assert "s3cret" not in repr(password) and "s3cret" not in str(password)
    assert server.connection_settings(_cfg(), "plain")["password"] == "plain"  # a str as before
