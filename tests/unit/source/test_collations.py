"""Collation ids the replication library doesn't know, read by the server's charsets."""
import copy

import pymysql
import pytest
from pymysqlreplication.constants import CHARSET
from pymysqlreplication.row_event import find_charset

from streamer.source import collations


class _Cursor:
    def __init__(self, server):
        self.server = server

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def execute(self, sql):
        self.server.asked.append(sql)
        if "APPLICABILITY" in sql and not self.server.full:
            raise pymysql.err.OperationalError(1054, "Unknown column 'ID' in 'field list'")
        self.rows = self.server.rows

    def fetchall(self):
        return self.rows


class _Server:
    def __init__(self, rows, full=True):
        self.rows, self.full, self.asked = rows, full, []

    def cursor(self):
        return _Cursor(self)


@pytest.fixture(autouse=True)
def library_table(monkeypatch):
    monkeypatch.setattr(CHARSET.charsets, "_by_id", copy.deepcopy(CHARSET.charsets._by_id))


def test_a_uca1400_collation_is_read_by_its_charset_not_as_utf8():
    assert find_charset("2816", dbms="mariadb")[2] == "utf8"  # the library's guess
    server = _Server([(8, "latin1", "latin1_swedish_ci"), (2816, "utf16", "utf16_uca1400_ai_ci"),
                      (2560, b"ucs2", b"ucs2_uca1400_ai_ci"), (None, None, "uca1400_ai_ci")])
    assert collations.register(server, mariadb=True) == [2816, 2560]
    assert find_charset("2816", dbms="mariadb") == ("utf16", "utf16_uca1400_ai_ci", "utf16")
    assert find_charset("2560", dbms="mariadb")[0] == "ucs2"
    assert find_charset("2816", dbms="mysql")[2] == "utf8"  # MySQL's ids are another table


def test_mysqls_utf8_is_its_utf8mb3_and_servers_without_full_names_are_read_too():
    # MySQL (and MariaDB before 10.10) have no ids in COLLATION_CHARACTER_SET_APPLICABILITY.
    server = _Server([(33, "utf8", "utf8_general_ci"), (5000, "utf32", "utf32_x")],
                     full=False)
    assert collations.register(server, mariadb=False) == [5000]
    assert "information_schema.COLLATIONS" in server.asked[-1]
    assert find_charset("33", dbms="mysql")[2] == "utf8mb3"  # the library's name, kept
