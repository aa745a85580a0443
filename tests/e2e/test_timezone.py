"""Type fidelity under time zones: the server in Pacific/Apia, the streamer in America/St_Johns.

TIMESTAMP must come out as the same UTC instant, DATETIME as the same wall-clock value, whatever
the zones of the server, of the writing session and of the streamer process.
"""
import datetime
import subprocess
import zoneinfo

import pytest

from tests import support
from tests.e2e.servers import PrivateMariaDB
from tests.e2e.test_types import COLUMNS

# A private server only (its time zone set).
pytestmark = pytest.mark.private_servers

SERVER_TZ = "Pacific/Apia"
STREAMER_TZ = "America/St_Johns"
UTC = datetime.timezone.utc

# (id, DATETIME(6) literal, TIMESTAMP(6) literal); both literals read in the session's zone (Apia).
TEMPORAL = [
    (1, "2024-03-10 02:30:00.250000", "2024-03-10 02:30:00.250000"),  # no such time in St_Johns
    (2, "2011-12-30 12:00:00", "2011-12-29 23:59:59.999999"),  # Apia skipped 2011-12-30
    (3, "2024-11-03 01:30:00", "2024-11-03 01:30:00"),  # happens twice in St_Johns
    (4, "1970-01-01 00:00:00", "1970-01-01 00:00:01"),
]


@pytest.fixture(scope="module")
def apia_server(tmp_path_factory):
    base = str(tmp_path_factory.mktemp("apia"))
    server = PrivateMariaDB(base)
    server.up()
    try:
        tz_sql = subprocess.run(["mariadb-tzinfo-to-sql", f"/usr/share/zoneinfo/{SERVER_TZ}",
                                 SERVER_TZ], check=True, capture_output=True).stdout
        subprocess.run(["mariadb", "--no-defaults", f"--socket={base}/mysqld.sock", "-uroot",
                        "mysql"], input=tz_sql, check=True, capture_output=True)
        conn = server.admin()
        support.sql(conn, f"SET GLOBAL time_zone = '{SERVER_TZ}'")
        conn.close()
        yield server
    finally:
        server.down()


def test_timestamp_keeps_its_instant_and_datetime_its_wall_clock_across_zones(apia_server, tmp_path):
    conn = apia_server.admin()
    assert support.sql(conn, "SELECT @@session.time_zone")[0][0] == SERVER_TZ
    db = support.unique("tz_")
    cols = ", ".join(f"{c} {t}" for c, t, _, _ in COLUMNS)
    support.sql(conn, f"CREATE DATABASE {db}", f"USE {db}",
                f"CREATE TABLE types (id INT PRIMARY KEY, {cols})",
                "CREATE TABLE clock (id INT PRIMARY KEY, dt DATETIME(6), ts TIMESTAMP(6) NULL)")
    start = support.master_pos(conn)
    names = ", ".join(c for c, _, _, _ in COLUMNS)
    for row_id, idx in ((1, 2), (2, 3)):
        values = ", ".join(col[idx] for col in COLUMNS)
        support.sql(conn, f"INSERT INTO types (id, {names}) VALUES ({row_id}, {values})")
    for row_id, dt, ts in TEMPORAL:
        support.sql(conn, f"INSERT INTO clock VALUES ({row_id}, '{dt}', '{ts}')")

    ns = support.unique("tz")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{db}.*"],
                               mysql={"port": apia_server.port,
                                      "password_file": apia_server.password_file()})
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1]),
                                 env={"TZ": STREAMER_TZ}) as proc:
        msgs = support.consume([f"{ns}.{db}.types", f"{ns}.{db}.clock"],
                               expect=2 + len(TEMPORAL), decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    types = [m["value"]["after"] for m in msgs if m["topic"].endswith(".types")]
    clock = [m["value"]["after"] for m in msgs if m["topic"].endswith(".clock")]

    apia = zoneinfo.ZoneInfo(SERVER_TZ)
    for (row_id, dt, ts), got in zip(TEMPORAL, clock):
        assert got["dt"] == datetime.datetime.fromisoformat(dt), (row_id, got)
        instant = datetime.datetime.fromisoformat(ts).replace(tzinfo=apia).astimezone(UTC)
        assert got["ts"] == instant, (row_id, got["ts"], instant)

    # The whole type round-trip, read back by a UTC session: the same instants and wall clocks.
    support.sql(conn, "SET time_zone = '+00:00'")
    rows = support.sql(conn, f"SELECT {names} FROM types ORDER BY id")
    clock_rows = support.sql(conn, "SELECT dt, ts FROM clock ORDER BY id")
    assert [(c["dt"], c["ts"]) for c in clock] == [
        (dt, ts.replace(tzinfo=UTC)) for dt, ts in clock_rows]
    for got, row in zip(types, rows):
        for (col, sql_type, _, _), want in zip(COLUMNS, row):
            value = got[col]
            if sql_type.startswith("TIMESTAMP"):
                want = want.replace(tzinfo=UTC)
            elif sql_type.startswith("SET"):
                want = ",".join(sorted(want)) if isinstance(want, set) else want
                value = ",".join(sorted(v for v in value.split(",") if v))
            assert value == want, (col, value, want)
    conn.close()


def test_a_snapshot_reads_the_same_instants_and_wall_clocks_as_the_binlog(apia_server, tmp_path):
    # A chunk's SELECT gives TIMESTAMP in its session's zone (the server's, Apia): the snapshot
    # must publish the instant, as the binlog path does from the epoch seconds it logs, and a
    # TIMESTAMP chunk key must order and resume the same. Chunks of 2 rows make key literals.
    conn = apia_server.admin()
    db = support.unique("tz_")
    support.sql(conn, f"CREATE DATABASE {db}", f"USE {db}",
                "CREATE TABLE clock (id INT PRIMARY KEY, dt DATETIME(6), ts TIMESTAMP(6) NULL)",
                "CREATE TABLE by_ts (ts TIMESTAMP(6) NOT NULL PRIMARY KEY, id INT)")
    for row_id, dt, ts in TEMPORAL:
        support.sql(conn, f"INSERT INTO clock VALUES ({row_id}, '{dt}', '{ts}')",
                    f"INSERT INTO by_ts VALUES ('{ts}', {row_id})")
    ns = support.unique("tz")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{db}.*"],
                               mysql={"port": apia_server.port,
                                      "password_file": apia_server.password_file()},
                               start={"initial": "snapshot"}, snapshot={"chunk_rows": 2})
    with support.StreamerProcess(cfg, str(tmp_path / "log"), env={"TZ": STREAMER_TZ}) as proc:
        msgs = support.consume([f"{ns}.{db}.clock", f"{ns}.{db}.by_ts"],
                               expect=2 * len(TEMPORAL), decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    apia = zoneinfo.ZoneInfo(SERVER_TZ)
    want = {row_id: (datetime.datetime.fromisoformat(dt),
                     datetime.datetime.fromisoformat(ts).replace(tzinfo=apia).astimezone(UTC))
            for row_id, dt, ts in TEMPORAL}
    clock = {m["value"]["after"]["id"]: m["value"]["after"] for m in msgs
             if m["topic"].endswith(".clock")}
    assert {k: (v["dt"], v["ts"]) for k, v in clock.items()} == want
    by_ts = [m["value"]["after"] for m in msgs if m["topic"].endswith(".by_ts")]
    assert all(m["value"]["op"] == "r" for m in msgs)
    assert [(r["id"], r["ts"]) for r in by_ts] == sorted(
        ((k, ts) for k, (_, ts) in want.items()), key=lambda pair: pair[1])
    conn.close()
