"""Every mapped MySQL type round-trips: a value written in SQL comes back equal after decoding,
its edges and NULL chosen, and 300 random rows of each server inserted, updated and snapshotted."""
import collections
import datetime
import decimal
import ipaddress
import json
import uuid

import pytest

from tests import support

COLUMNS = [
    ("ti", "TINYINT", "-128", "127"),
    ("tiu", "TINYINT UNSIGNED", "0", "255"),
    ("si", "SMALLINT", "-32768", "32767"),
    ("mi", "MEDIUMINT", "-8388608", "8388607"),
    ("miu", "MEDIUMINT UNSIGNED", "0", "16777215"),
    ("i", "INT", "-2147483648", "2147483647"),
    ("iu", "INT UNSIGNED", "0", "4294967295"),
    ("bi", "BIGINT", "-9223372036854775808", "9223372036854775807"),
    ("biu", "BIGINT UNSIGNED", "0", "18446744073709551615"),
    ("f", "FLOAT", "-0.25", "1.5"),
    ("d", "DOUBLE", "-1.7976931348623157e308", "2.2250738585072014e-308"),
    ("dc", "DECIMAL(12,4)", "-12345678.9012", "0.0001"),
    ("decbig", "DECIMAL(65,30)", "-99999999999999999999999999999999999.999999999999999999999999999999",
     "12345678901234567890123456789012345.123456789012345678901234567890"),
    ("c", "CHAR(5)", "''", "'héllo'"),
    ("vc", "VARCHAR(300)", "'ünïcödé ✓ 🎉'", "REPEAT('x', 300)"),
    ("tx", "TEXT", "''", "'multi\nline\ttext'"),
    ("lt", "LONGTEXT", "REPEAT('a', 1048576)", "'z'"),
    ("bin", "BINARY(4)", "X'00FF10'", "X'DEADBEEF'"),
    ("vb", "VARBINARY(10)", "X''", "X'000102'"),
    ("bl", "BLOB", "X'00'", "X'FFFEFD00'"),
    ("dt", "DATE", "'1000-01-01'", "'9999-12-31'"),
    ("dtm0", "DATETIME", "'1000-01-01 00:00:00'", "'9999-12-31 23:59:59'"),
    ("dtm3", "DATETIME(3)", "'2020-02-29 12:34:56.789'", "'1970-01-01 00:00:00.001'"),
    ("dtm6", "DATETIME(6)", "'2024-06-30 23:59:59.999999'", "'1969-07-20 20:17:40.000001'"),
    ("ts0", "TIMESTAMP NULL", "'1970-01-01 00:00:01'", "'2038-01-19 03:14:07'"),
    ("ts6", "TIMESTAMP(6) NULL", "'2001-09-09 01:46:40.123456'", "'2020-01-01 00:00:00.000001'"),
    ("tm", "TIME", "'-838:59:59'", "'838:59:59'"),
    ("tm6", "TIME(6)", "'-00:00:00.000001'", "'23:59:59.999999'"),
    ("tm2", "TIME(2)", "'-01:02:03.12'", "'-00:00:00.01'"),
    ("tm4", "TIME(4)", "'-01:02:03.1234'", "'100:00:00.0001'"),
    ("yr", "YEAR", "1901", "2155"),
    ("en", "ENUM('a','b','c d')", "'a'", "'c d'"),
    ("st", "SET('x','y','z')", "''", "'x,z'"),
    ("bt1", "BIT(1)", "b'1'", "b'0'"),
    ("bt", "BIT(13)", "b'1010101010101'", "b'0'"),
    ("bt64", "BIT(64)", "b'1111111111111111111111111111111111111111111111111111111111111111'", "b'1'"),
    ("js", "JSON", "'{\"a\": [1, 2, {\"b\": null}]}'", "'[]'"),
]


# Each server's own types, beside the common ones (MariaDB's data-type plugins: stored as binary
# strings, which the binlog carries; SELECT shows their text).
OWN_COLUMNS = {
    "mariadb": [
        ("uu", "UUID", "'123e4567-e89b-12d3-a456-426614174000'",
         "'00000000-0000-0000-0000-000000000000'"),
        ("uu1", "UUID", "'6ccd780c-baba-1026-9564-5b8c656024db'",
         "'018c2d2a-1234-7abc-8def-0123456789ab'"),
        ("i6", "INET6", "'2001:db8::1'", "'::ffff:1.2.3.4'"),
        ("i6b", "INET6", "'::'", "'fe80::1:0:0:0'"),
        ("i6c", "INET6", "'::192.168.0.1'", "'2001:db8:0:0:1::'"),
        ("i4", "INET4", "'192.168.0.1'", "'0.0.0.0'"),
        ("i4b", "INET4", "'255.255.255.255'", "'10.0.0.0'"),
        # Compressed columns: the binlog has their stored form, under types of MariaDB's own.
        ("tz", "TEXT COMPRESSED", "REPEAT('héllo ', 200)", "''"),
        ("vz", "VARCHAR(300) COMPRESSED", "REPEAT('ab✓', 100)", "'x'"),
        ("bz", "BLOB COMPRESSED", "REPEAT(X'00FF', 500)", "X'01'"),
        ("vbz", "VARBINARY(200) COMPRESSED", "REPEAT(X'AB', 200)", "X''"),
    ],
    "mysql": [],
}
# Every server: a geometry (its stored form, SRID and WKB, as SELECT gives it).
GEOMETRY = [("gp", "POINT", "ST_GeomFromText('POINT(1 2)')", "ST_GeomFromText('POINT(-1.5 0)')"),
            ("gg", "GEOMETRY", "ST_GeomFromText('LINESTRING(0 0, 1 1)')", "NULL")]


def columns_of(source):
    return COLUMNS + GEOMETRY + OWN_COLUMNS["mysql" if source.mysql else "mariadb"]


def _normalise(sql_type: str, value):
    """What a MySQL client returns, in the decoder's terms."""
    if value is None:
        return None
    if sql_type.startswith("SET"):
        return ",".join(sorted(value)) if isinstance(value, set) else value
    if sql_type.startswith("TIMESTAMP"):
        return value.replace(tzinfo=datetime.timezone.utc)
    if sql_type == "UUID":  # an Avro string with logicalType uuid: the decoder gives a UUID
        return uuid.UUID(value)
    return value


def _decoded(sql_type: str, value):
    if value is None:
        return None
    if sql_type.startswith("SET"):
        return ",".join(sorted(v for v in value.split(",") if v))
    return value


@pytest.fixture
def typed_table(db, source):
    name, conn = db
    cols = ", ".join(f"{c} {t}" for c, t, _, _ in columns_of(source))
    # Columns no INSERT names: generated (virtual and stored) and, on MariaDB (MySQL from 8.0.23
    # only), invisible; the row images and SELECT hold their values all the same.
    more = ", gv BIGINT AS (id * 7) VIRTUAL, gs VARCHAR(20) AS (CONCAT('s', id)) STORED" + (
        "" if source.mysql else ", hv INT DEFAULT 5 INVISIBLE")
    support.sql(conn, f"CREATE TABLE types (id INT PRIMARY KEY, {cols}{more})")
    return name, conn


def _generated(msgs, source):
    """The generated and invisible columns of ``typed_table`` carry their values."""
    for m in msgs:
        after, i = m["value"]["after"], m["key"]["id"]
        assert (after["gv"], after["gs"], after.get("hv", 5)) == (i * 7, f"s{i}", 5), after
        assert source.mysql or "hv" in after


def _assert_equal_to_select(msgs, conn, columns, op):
    """Each message's row equals what SELECT shows of it, column by column, type by type."""
    names = ", ".join(c for c, _, _, _ in columns)
    support.sql(conn, "SET time_zone = '+00:00'")
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, {names} FROM types ORDER BY id")
        rows = cur.fetchall()
    assert len(msgs) == len(rows)
    for msg, row in zip(msgs, rows):
        after = msg["value"]["after"]
        assert msg["value"]["op"] == op and msg["value"]["before"] is None
        for (col, sql_type, _, _), expected in zip(columns, row[1:]):
            want = _normalise(sql_type, expected)
            got = _decoded(sql_type, after[col])
            assert got == want, f"{op} row {row[0]} column {col} {sql_type}: {got!r} != {want!r}"
            if want is not None:
                assert type(got) in (type(want), decimal.Decimal), (col, type(got), type(want))


@pytest.mark.every_source
def test_every_type_round_trips_including_edges_and_nulls_in_binlog_and_snapshot(
        typed_table, tmp_path, source):
    name, conn = typed_table
    columns = columns_of(source)
    ns = support.unique("ty")
    f, p = support.master_pos(conn)
    names = ", ".join(c for c, _, _, _ in columns)
    for row_id, idx in ((1, 2), (2, 3)):
        values = ", ".join(col[idx] for col in columns)
        support.sql(conn, f"INSERT INTO types (id, {names}) VALUES ({row_id}, {values})")
    support.sql(conn, "INSERT INTO types (id) VALUES (3)")  # NULL in every nullable column
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([f"{ns}.{name}.types"], expect=3, decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    assert [m["key"] for m in msgs] == [{"id": 1}, {"id": 2}, {"id": 3}]
    _assert_equal_to_select(msgs, conn, columns, "c")
    _generated(msgs, source)
    assert len(msgs[0]["value"]["after"]["lt"]) == 1048576
    assert json.loads(msgs[0]["value"]["after"]["js"]) == {"a": [1, 2, {"b": None}]}
    assert msgs[1]["value"]["after"]["biu"] == decimal.Decimal(18446744073709551615)
    assert msgs[0]["value"]["after"]["tm"] == -datetime.timedelta(hours=838, minutes=59, seconds=59)
    if not source.mysql:
        after = msgs[0]["value"]["after"]
        assert (after["uu"], after["i6"], after["i4"]) == (
            uuid.UUID("123e4567-e89b-12d3-a456-426614174000"), "2001:db8::1", "192.168.0.1")
        schema = support.decoder(ns).schema_of(msgs[0]["raw_value"])
        row = {f["name"]: f["type"] for f in schema["fields"][0]["type"][1]["fields"]}
        assert row["uu"][1] == {"type": "string", "logicalType": "uuid"}
    # The same rows read by a snapshot: the same values, and the same schema.
    ns2 = support.unique("tys")
    cfg2 = support.write_config(str(tmp_path / "s.yaml"), ns2, [f"{name}.*"], server=source,
                                start={"initial": "snapshot"})
    with support.StreamerProcess(cfg2, str(tmp_path / "log2")) as proc:
        snapped = support.consume([f"{ns2}.{name}.types"], expect=3, decode_ns=ns2)
        assert proc.stop() == 0, proc.output()
    _assert_equal_to_select(snapped, conn, columns, "r")
    _generated(snapped, source)
    binlog_schema = support.decoder(ns).schema_of(msgs[0]["raw_value"])["fields"][0]
    snapshot_schema = support.decoder(ns2).schema_of(snapped[0]["raw_value"])["fields"][0]
    assert binlog_schema == snapshot_schema


CHARSETS = [
    # MySQL's latin1 defines the five bytes cp1252 leaves undefined: double-encoded UTF-8 ('Á' is
    # C3 81) must not stop the streamer.
    ("l1", "latin1", "X'C381'", "X'818D8F909D'"),
    ("u16", "utf16", "'A€😀'", "'z'"),
    ("u16le", "utf16le", "'A€😀'", "'z'"),
    ("ucs", "ucs2", "'A€'", "'z'"),
    ("u32", "utf32", "'A€😀'", "'z'"),
    # 8-bit charsets Python has no codec for: decoded by the server's own tables.
    ("d8", "dec8", "X'C0C1C2C3'", "X'E9'"),
    ("h8", "hp8", "X'C0C1C2C3'", "X'A1'"),
    ("sw", "swe7", "X'5B5C5D7B7C7D'", "'abc'"),  # Swedish letters where ASCII has brackets
    ("ar", "armscii8", "X'B2B3B4'", "X'B5'"),
    ("kb", "keybcs2", "X'808182'", "X'A0'"),
    ("ge", "geostd8", "X'C0C1C2'", "X'80'"),
    ("mc", "macce", "X'808182'", "X'E1'"),
    # Charsets whose Python codec decodes some bytes otherwise than the server, or refuses them.
    ("gr", "greek", "X'A1A2'", "X'E1'"),
    ("he", "hebrew", "X'AFE0'", "X'E1'"),
    ("ku", "koi8u", "X'95C1'", "X'C2'"),
    ("c8", "cp866", "X'F0FC'", "X'80'"),
    ("t6", "tis620", "X'A1FF'", "X'A2'"),
    ("b5", "big5", "X'C6A1'", "X'A440'"),       # an ETEN extension; 一
    ("uj", "ujis", "X'F5A1A4A2'", "X'8FB0A1'"),  # the user-defined area and あ; a JIS X 0212 one
    ("ek", "euckr", "X'8141B0A1'", "X'B0A2'"),  # CP949's extension and 가
    ("em", "eucjpms", "X'ADA1C6FC'", "X'8FF4BD'"),  # ①日; 﨑
    ("sj", "sjis", "X'815F5C'", "X'82A0'"),  # the server's backslash (Python's fullwidth one); あ
    # MariaDB 10.10+'s uca1400 collations (ids from 2048) the replication library doesn't know.
    ("u16c", "utf16 COLLATE utf16_uca1400_ai_ci", "'A€😀'", "'z'"),
    ("ucsc", "ucs2 COLLATE ucs2_uca1400_as_cs", "'A€'", "'z'"),
    ("u32c", "utf32 COLLATE utf32_uca1400_ai_ci", "'A€😀'", "'z'"),
]


def test_text_in_every_byte_order_and_all_of_latin1_reads_as_the_server_reads_it(db, tmp_path):
    name, conn = db
    cols = ", ".join(f"{c} VARCHAR(8) CHARACTER SET {cs}" for c, cs, _, _ in CHARSETS)
    support.sql(conn, f"CREATE TABLE cs (id INT PRIMARY KEY, {cols})")
    ns = support.unique("cs")
    f, p = support.master_pos(conn)
    names = ", ".join(c for c, _, _, _ in CHARSETS)
    for row_id, idx in ((1, 2), (2, 3)):
        values = ", ".join(col[idx] for col in CHARSETS)
        support.sql(conn, f"INSERT INTO cs (id, {names}) VALUES ({row_id}, {values})")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.cs"])
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([f"{ns}.{name}.cs"], expect=2, decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    with conn.cursor() as cur:
        cur.execute(f"SELECT {names} FROM cs ORDER BY id")
        rows = cur.fetchall()
    got = [tuple(m["value"]["after"][c] for c, _, _, _ in CHARSETS) for m in msgs]
    assert got == [tuple(r) for r in rows]
    assert got[0][0] == "Ã\x81" and got[1][0] == "\x81\x8d\x8f\x90\x9d"
    assert got[0][1:5] == ("A€😀", "A€😀", "A€", "A€😀")
    assert got[0][5:12] == ("ÀÁÂÃ", "âêôû", "ÄÖÅäöå", "ԱաԲ", "Čüé", "აბგ", "ÄĀā")


def _binlog_and_snapshot(cfg, tmp_path, table, ns, start, rows):
    """The ``rows`` messages a stream of ``table`` from ``start`` publishes, then those a
    snapshot of it publishes: (streamed, snapped, the run's output)."""
    from tests.e2e.test_snapshot import snapshot_cli
    topic = f"{ns}.{table}"
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", start[0],
                                 "--start-pos", str(start[1])) as proc:
        streamed = support.consume([topic], expect=rows, decode_ns=ns)
        assert snapshot_cli(cfg, "--tables", table)[0] == 0
        snapped = support.consume([topic], expect=2 * rows, decode_ns=ns)[rows:]
        assert proc.stop() == 0, proc.output()[-3000:]
    return streamed, snapped, proc.output()


@pytest.mark.on_source("mysql-8.0")
def test_gb18030_reads_as_mysql_reads_it_its_2005_edition(tmp_path):
    # MySQL's gb18030 is GB18030-2005, which swapped the characters of 0xA8BC (ḿ) and
    # 0x8135F437 (a private-use one) from the 2000 edition Python's codec keeps. With a
    # two-byte, a four-byte and a supplementary character around them; binlog and snapshot.
    source = support.SOURCES["mysql-8.0"]
    conn = source.admin()
    name = support.unique("t_")
    support.sql(conn, f"CREATE DATABASE {name}", f"CREATE TABLE {name}.g (id INT PRIMARY KEY, "
                      "v VARCHAR(16) CHARACTER SET gb18030, t TEXT CHARACTER SET gb18030)")
    try:
        ns = support.unique("gb")
        f, p = support.master_pos(conn)
        support.sql(conn, f"INSERT INTO {name}.g VALUES (1, X'41A8BC8135F437D6D0', "
                          f"X'8135F437A8BC81308130'), (2, X'9530E232', 'plain')")
        cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.g"], server=source)
        streamed, snapped, _ = _binlog_and_snapshot(cfg, tmp_path, f"{name}.g", ns, (f, p), 2)
        with conn.cursor() as cur:
            cur.execute(f"SELECT v, t FROM {name}.g ORDER BY id")
            shown = [tuple(r) for r in cur.fetchall()]
    finally:
        support.sql(conn, f"DROP DATABASE {name}")
    assert shown[0] == ("A\u1e3f\ue7c7中", "\ue7c7\u1e3f\x80") and ord(shown[1][0]) > 0xFFFF
    for msgs in (streamed, snapped):
        assert [(m["value"]["after"]["v"], m["value"]["after"]["t"]) for m in msgs] == shown


@pytest.mark.every_source
def test_enum_and_set_members_in_any_charset_read_as_select_shows_them(source, db, tmp_path):
    # The table map writes the members in the column's charset: latin1's 'café' is no UTF-8,
    # ucs2's are two bytes a character, greek's is a charset Python's codec reads otherwise.
    name, conn = db
    support.sql(conn, "CREATE TABLE m (id INT PRIMARY KEY, "
                      "e ENUM('café', 'naïve', 'plain') CHARACTER SET latin1, "
                      "s SET('größe', 'x', 'ü') CHARACTER SET latin1, "
                      "u ENUM('Ā€', 'b') CHARACTER SET ucs2, g ENUM('ΑΒ', 'c') CHARACTER SET greek, "
                      "j ENUM('日本', 'z') CHARACTER SET utf8mb4)")
    ns = support.unique("em")
    f, p = support.master_pos(conn)
    support.sql(conn, "INSERT INTO m VALUES (1, 'café', 'größe,ü', 'Ā€', 'ΑΒ', '日本'), "
                      "(2, 'naïve', 'x', 'b', 'c', 'z'), (3, NULL, '', NULL, NULL, NULL)")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.m"], server=source)
    streamed, snapped, _ = _binlog_and_snapshot(cfg, tmp_path, f"{name}.m", ns, (f, p), 3)
    with conn.cursor() as cur:
        cur.execute("SELECT e, s, u, g, j FROM m ORDER BY id")
        shown = [tuple(r) for r in cur.fetchall()]
    assert shown[0] == ("café", "größe,ü", "Ā€", "ΑΒ", "日本")
    for msgs in (streamed, snapped):
        assert [tuple(m["value"]["after"][c] for c in "esugj") for m in msgs] == shown


@pytest.mark.every_source
def test_enums_of_over_255_members_and_sets_of_every_width_read_as_select_shows_them(
        source, db, tmp_path):
    # An ENUM of more than 255 members is stored in two bytes, a SET in 1, 2, 3, 4 or 8 (up to
    # 8, 16, 24, 32 and 64 members): their first, last and boundary members, in binlog and
    # snapshot, against SELECT.
    name, conn = db
    members = {"e": 300, "s8": 8, "s9": 9, "s17": 17, "s25": 25, "s33": 33, "s64": 64}

    def listed(n):
        return ", ".join(f"'m{i}'" for i in range(1, n + 1))
    columns = ", ".join(f"{c} {'ENUM' if c == 'e' else 'SET'}({listed(n)})"
                        for c, n in members.items())
    support.sql(conn, f"CREATE TABLE w (id INT PRIMARY KEY, {columns})")
    sets = [c for c in members if c != "e"]
    rows = [
        [1, "m1"] + ["m1" for _ in sets],
        [2, "m255"] + [",".join(f"m{i}" for i in range(1, members[c] + 1)) for c in sets],
        [3, "m256"] + [f"m{members[c]}" for c in sets],
        [4, "m300"] + [f"m1,m{members[c] - 1},m{members[c]}" for c in sets],
        [5, None] + ["" for _ in sets],
    ]
    f, p = support.master_pos(conn)
    with conn.cursor() as cur:
        cur.executemany(f"INSERT INTO w VALUES ({', '.join(['%s'] * len(rows[0]))})", rows)
    conn.commit()
    ns = support.unique("wm")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.w"], server=source)
    streamed, snapped, _ = _binlog_and_snapshot(cfg, tmp_path, f"{name}.w", ns, (f, p), len(rows))
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, {', '.join(members)} FROM w ORDER BY id")
        shown = [list(r) for r in cur.fetchall()]
    # SELECT lays a SET's members out in the order of the definition, as the topic must.
    assert shown[3][1] == "m300" and shown[1][-1].endswith(",m63,m64"), shown
    for msgs in (streamed, snapped):
        assert [[m["value"]["after"][c] for c in ["id", *members]] for m in msgs] == shown


@pytest.mark.every_source
def test_a_primary_key_with_a_prefix_part_keys_the_binlog_and_a_snapshot_alike(
        source, db, tmp_path):
    # The table map writes such a key as PRIMARY_KEY_WITH_PREFIX; a key on TEXT needs a prefix.
    from tests.e2e.test_snapshot import snapshot_cli
    name, conn = db
    support.sql(conn, "CREATE TABLE p (v INT, name VARCHAR(100) NOT NULL, id INT NOT NULL, "
                      "PRIMARY KEY (id, name(10)))",
                "CREATE TABLE q (t TEXT NOT NULL, v INT, PRIMARY KEY (t(20)))")
    ns = support.unique("pk")
    f, p = support.master_pos(conn)
    support.sql(conn, "INSERT INTO p VALUES (5, 'abcdefghijklmnop', 1)",
                "INSERT INTO q VALUES ('hello world', 1)", "DELETE FROM q")
    topics = [f"{ns}.{name}.p", f"{ns}.{name}.q"]
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.p"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        streamed = support.consume(topics[:1], expect=1, decode_ns=ns)
        assert snapshot_cli(cfg, "--tables", f"{name}.p")[0] == 0
        snapped = support.consume(topics[:1], expect=2, decode_ns=ns)[1:]
        assert proc.stop() == 0, proc.output()[-3000:]
    cfg = support.write_config(str(tmp_path / "q.yaml"), ns, [f"{name}.q"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / "qlog"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        deleted = support.consume(topics[1:], expect=3, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert [m["key"] for m in streamed + snapped] == [{"name": "abcdefghijklmnop", "id": 1}] * 2
    assert [(m["key"], m["value"] and m["value"]["op"]) for m in deleted] == [
        ({"t": "hello world"}, "c"), ({"t": "hello world"}, "d"), ({"t": "hello world"}, None)]


# Bytes a column keeps that its charset has no character for (a server takes any byte into an
# ascii column, and a well-formed pair its big5 or gbk table lacks, even in strict mode), and
# characters Python's cp1256 has where the server's has none: SELECT shows a '?' for each.
UNMAPPED = [("a", "ascii", "X'41DB42'"), ("b5", "big5", "X'41C8A142'"),
            ("ar", "cp1256", "X'41C0989F81AA42'"), ("ce", "cp1250", "X'41819042'"),
            ("gk", "gbk", "X'41AAA1A2A142'"), ("sj", "sjis", "X'41F04042'"),
            ("kr", "euckr", "X'41A2E842'")]


@pytest.mark.every_source
def test_bytes_no_character_stands_for_are_published_as_select_shows_them_and_counted(
        db, tmp_path, source):
    name, conn = db
    cols = ", ".join(f"{c} VARCHAR(8) CHARACTER SET {cs}" for c, cs, _ in UNMAPPED)
    names = ", ".join(c for c, _, _ in UNMAPPED)
    support.sql(conn, f"CREATE TABLE un (id INT PRIMARY KEY, {cols}, u VARCHAR(8) CHARACTER SET ucs2)")
    ns = support.unique("un")
    f, p = support.master_pos(conn)
    support.sql(conn, f"INSERT INTO un (id, {names}, u) VALUES "
                      f"(1, {', '.join(v for _, _, v in UNMAPPED)}, X'0041D8000042')",
                "INSERT INTO un (id) VALUES (2)")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.un"], server=source)
    streamed, snapped, out = _binlog_and_snapshot(cfg, tmp_path, f"{name}.un", ns, (f, p), 2)
    with conn.cursor() as cur:
        cur.execute(f"SELECT {names} FROM un WHERE id = 1")
        shown = cur.fetchone()
    assert "?" in shown[0] and "?" in shown[1] and "?" in shown[2], shown
    for msgs in (streamed, snapped):
        assert [m["key"]["id"] for m in msgs] == [1, 2]
        assert tuple(msgs[0]["value"]["after"][c] for c, _, _ in UNMAPPED) == shown
    # A lone UTF-16 surrogate in a ucs2 column: MariaDB's SELECT sends it as three bytes no
    # UTF-8 character stands for. Both ways publish it as one '?', and say where.
    assert streamed[0]["value"]["after"]["u"] == snapped[0]["value"]["after"]["u"] == "A?B"
    for col, charset, value in UNMAPPED[:2] + [("u", "ucs2", "X'0041D8000042'")]:
        assert (f"invalid {charset} text (bytes {value[2:-1].lower()}) in {name}.un column {col}"
                in out), out[-3000:]
    assert f"text (bytes 41eda08042) in {name}.un column u (a snapshot's SELECT" in out, out[-3000:]


def test_a_read_only_snapshot_publishes_a_lone_surrogate_as_the_binlog_and_refuses_it_in_a_key(
        db, tmp_path):
    # Read-only mode reads each chunk whole (source.chunks.read_chunk); a surrogate in a value
    # is one '?', noted, and one in a chunk key ends that table's snapshot by name: made
    # readable, it could not say where the next chunk starts.
    name, conn = db
    support.sql(conn, "CREATE TABLE un (id INT PRIMARY KEY, u VARCHAR(8) CHARACTER SET ucs2)")
    support.sql(conn, "INSERT INTO un VALUES (1, 'a'), (2, X'0041D8000042'), (3, 'z')")
    support.sql(conn, "CREATE TABLE uk (id VARCHAR(8) CHARACTER SET ucs2 PRIMARY KEY, v INT)")
    support.sql(conn, "INSERT INTO uk VALUES ('a', 1), (X'0041D8000042', 2), ('z', 3)")
    ns = support.unique("un")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.un", f"{name}.uk"],
                               start={"initial": "snapshot"}, snapshot={"mode": "read_only"})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        msgs = support.consume([f"{ns}.{name}.un"], expect=3, decode_ns=ns, timeout=60)
        support.wait_for(lambda: "uk ends" in proc.output(), timeout=30,
                         what="the snapshot of uk to end")
        out = proc.output()
    assert [m["value"]["after"]["u"] for m in msgs] == ["a", "A?B", "z"]
    assert "chunk key column id of %s.uk holds bytes that are not utf8" % name in out, out[-3000:]
    assert "invalid utf8 text (bytes 41eda08042) in %s.un column u" % name in out, out[-3000:]


@pytest.mark.every_source
def test_binlogs_written_without_checksums_and_with_are_read_alike(typed_table, tmp_path,
                                                                  source):
    # binlog_checksum NONE, then CRC32 again: each change starts a binlog of its own kind. The
    # library read a whole stream one way, the server's setting as it connected: with NONE,
    # each table's primary key was lost (its rows went out keyless), and a binlog written with
    # checksums was refused. Read from a binlog of each kind, every row is what SELECT shows.
    name, conn = typed_table
    columns = columns_of(source)
    names = ", ".join(c for c, _, _, _ in columns)
    starts = [support.master_pos(conn)]
    support.sql(conn, "INSERT INTO types (id) VALUES (10)")
    try:
        support.sql(conn, "SET GLOBAL binlog_checksum = NONE")
        starts.append(support.master_pos(conn))
        for row_id, idx in ((1, 2), (2, 3)):
            values = ", ".join(col[idx] for col in columns)
            support.sql(conn, f"INSERT INTO types (id, {names}) VALUES ({row_id}, {values})")
    finally:
        support.sql(conn, "SET GLOBAL binlog_checksum = CRC32")
    support.sql(conn, "INSERT INTO types (id) VALUES (3)", "DELETE FROM types WHERE id = 10")
    for i, (f, p) in enumerate(starts):
        ns = support.unique("ck")
        cfg = support.write_config(str(tmp_path / f"{ns}.yaml"), ns, [f"{name}.*"],
                                   server=source)
        with support.StreamerProcess(cfg, str(tmp_path / f"{ns}.log"), "--start-file", f,
                                     "--start-pos", str(p)) as proc:
            msgs = support.consume([f"{ns}.{name}.types"], expect=6 - i, decode_ns=ns)
            assert proc.stop() == 0, proc.output()[-3000:]
        ops = [(m["value"] and m["value"]["op"], m["key"]["id"]) for m in msgs]
        assert ops == [("c", 10), ("c", 1), ("c", 2), ("c", 3), ("d", 10), (None, 10)][i:], ops
        _assert_equal_to_select([m for m in msgs if m["key"]["id"] != 10], conn, columns, "c")
        _generated(msgs[1 - i:4 - i], source)


def test_zero_dates_are_published_as_null(db, tmp_path):
    name, conn = db
    support.sql(conn, "SET SESSION sql_mode = ''",
                "CREATE TABLE z (id INT PRIMARY KEY, d DATE NOT NULL, dt DATETIME(6) NOT NULL, "
                "y YEAR NOT NULL)")
    ns = support.unique("tz")
    f, p = support.master_pos(conn)
    support.sql(conn, "INSERT INTO z VALUES (1, '0000-00-00', '0000-00-00 00:00:00', 0)")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.z"])
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([f"{ns}.{name}.z"], expect=1, decode_ns=ns)
        assert proc.stop() == 0, proc.output()
    assert msgs[0]["value"]["after"] == {"id": 1, "d": None, "dt": None, "y": 0}


def test_published_schema_uses_the_documented_avro_types(typed_table, tmp_path):
    name, conn = typed_table
    ns = support.unique("ts")
    f, p = support.master_pos(conn)
    support.sql(conn, "INSERT INTO types (id) VALUES (1)")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"])
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([f"{ns}.{name}.types"], expect=1)
        assert proc.stop() == 0, proc.output()
    schema = support.decoder(ns).schema_of(msgs[0]["raw_value"])
    row = schema["fields"][0]["type"][1]
    types = {f["name"]: f["type"] for f in row["fields"]}

    def base(t):
        return t[1] if isinstance(t, list) else t

    assert types["id"] == "int"
    assert base(types["bi"]) == "long" and base(types["iu"]) == "long"
    assert base(types["biu"]) == {"type": "bytes", "logicalType": "decimal", "precision": 20, "scale": 0}
    assert base(types["decbig"]) == {"type": "bytes", "logicalType": "decimal", "precision": 65, "scale": 30}
    assert base(types["dtm6"])["logicalType"] == "local-timestamp-micros"
    assert base(types["ts6"])["logicalType"] == "timestamp-micros"
    assert base(types["dt"])["logicalType"] == "date"
    assert base(types["tm"])["logicalType"] == "streamer.time-micros"
    assert base(types["bl"]) == "bytes" and base(types["bt"]) == "bytes"
    assert base(types["f"]) == "float" and base(types["d"]) == "double"
    assert base(types["js"]) == "string" and base(types["en"]) == "string"


def test_rows_of_an_unpublished_table_are_counted_never_decoded(db, tmp_path):
    # An excluded table with every type, an invalid DATE (the library's decoding raises on it)
    # and text in every byte order and in the charsets Python has no codec for (the latin1
    # bytes cp1252 leaves undefined among them), changed in the transaction of a published row.
    # The published row's index in its transaction counts them all, without decoding any.
    name, conn = db
    cols = ", ".join(f"{c} {t}" for c, t, _, _ in COLUMNS)
    names = ", ".join(c for c, _, _, _ in COLUMNS)
    lo, hi = (", ".join(col[i] for col in COLUMNS) for i in (2, 3))
    cs_cols = ", ".join(f"{c} VARCHAR(8) CHARACTER SET {cs}" for c, cs, _, _ in CHARSETS)
    cs_names = ", ".join(c for c, _, _, _ in CHARSETS)
    cs_lo, cs_hi = (", ".join(col[i] for col in CHARSETS) for i in (2, 3))
    support.sql(conn, "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
                f"CREATE TABLE ex (id INT PRIMARY KEY, bad DATE, {cs_cols}, {cols})",
                "CREATE TABLE pub (id INT PRIMARY KEY)")
    ns = support.unique("uncounted")
    f, p = support.master_pos(conn)
    support.sql(conn, "BEGIN",
                f"INSERT INTO ex (id, bad, {cs_names}, {names}) VALUES "
                f"(1, '2023-02-30', {cs_lo}, {lo}), (2, '2023-04-31', {cs_hi}, {hi})",
                "INSERT INTO ex (id, bad) VALUES (3, '2023-02-30')",
                "UPDATE ex SET vc = 'updated', bad = '2024-02-31'",
                "DELETE FROM ex WHERE id = 2",
                "INSERT INTO pub VALUES (1)", "COMMIT")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.pub"])
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([f"{ns}.{name}.pub"], expect=1, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    # 3 inserts, 3 updates and a delete of ex come before it: index 7.
    assert msgs[0]["value"]["source"]["tx_row"] == 7
    assert "invalid" not in proc.output()  # nothing of ex was decoded, so nothing to report


def test_invalid_dates_are_published_as_null_counted_and_logged_in_binlog_and_snapshot(db, tmp_path):
    name, conn = db
    support.sql(conn, "SET SESSION sql_mode = 'ALLOW_INVALID_DATES'",
                "CREATE TABLE inv (id INT PRIMARY KEY, d DATE, dt DATETIME(3), z DATE)",
                "INSERT INTO inv VALUES (1, '2023-02-30', '2023-02-30 10:00:00.5', '0000-00-00')")
    ns = support.unique("inv")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.inv"],
                               start={"initial": "snapshot"})
    with support.StreamerProcess(cfg, str(tmp_path / "log")) as proc:
        support.consume([f"{ns}.{name}.inv"], expect=1, decode_ns=ns)
        support.sql(conn, "INSERT INTO inv VALUES (2, '2024-04-31', '2024-06-00 23:59:59', "
                          "'0000-00-00')")
        msgs = support.consume([f"{ns}.{name}.inv"], expect=2, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
        out = proc.output()
    assert [(m["value"]["op"], m["value"]["after"]) for m in msgs] == [
        ("r", {"id": 1, "d": None, "dt": None, "z": None}),
        ("c", {"id": 2, "d": None, "dt": None, "z": None})]
    # Each invalid value is logged once with what it was (the all-zero one is no news).
    assert f"invalid DATE '2023-02-30' in {name}.inv column d (snapshot)" in out, out[-3000:]
    assert f"invalid DATETIME '2023-02-30 10:00:00.500' in {name}.inv column dt (snapshot)" in out
    assert f"invalid DATE '2024-04-31' in {name}.inv column d (rows event at offset " in out
    assert f"invalid DATETIME '2024-06-00 23:59:59' in {name}.inv column dt (rows event" in out
    assert "column z" not in out and "Traceback" not in out


def _fraction(rng, sql_type):
    """Random microseconds with the column's digits (``TIME(4)``: 4)."""
    p = int(sql_type.split("(")[1][0]) if "(" in sql_type else 0
    return rng.randrange(10 ** p) * 10 ** (6 - p) if p else 0


def _int(bits):
    def make(rng, sql_type):
        lo, hi = (0, 2 ** bits - 1) if "UNSIGNED" in sql_type else (-2 ** (bits - 1),
                                                                   2 ** (bits - 1) - 1)
        return rng.choice([lo, hi, 0, rng.randint(lo, hi)])
    return make


def _decimal(rng, sql_type):
    precision, scale = map(int, sql_type[8:-1].split(","))
    unscaled = rng.randint(-10 ** precision + 1, 10 ** precision - 1)
    return decimal.Decimal(unscaled).scaleb(-scale)


def _text(size):
    return lambda rng, _: "".join(rng.choice("aé€😀'\\\n\tü中x") for _ in range(rng.randint(0, size)))


def _bytes(size):
    return lambda rng, _: rng.randbytes(rng.randint(0, size))


def _moment(first, seconds):
    return lambda rng, t: (first + datetime.timedelta(seconds=rng.randint(*seconds))).replace(
        microsecond=_fraction(rng, t))


def _time(rng, sql_type):
    micros = _fraction(rng, sql_type)
    return (-1 if rng.random() < 0.4 else 1) * datetime.timedelta(
        hours=rng.randint(0, 837), minutes=rng.randint(0, 59), seconds=rng.randint(0, 59),
        microseconds=micros)


def _uuid(rng):
    """A random UUID of version 1 (which MariaDB stores time-ordered), 4 or 7, of RFC 4122's
    variant (the only one MariaDB takes)."""
    bits = rng.getrandbits(128) & ~(0xF << 76) & ~(0xC << 60)
    return str(uuid.UUID(int=bits | rng.choice([1, 4, 7]) << 76 | 0x8 << 60))


# A random value a client sends, by a column's type (test_types' COLUMNS and OWN_COLUMNS).
RANDOM = {
    "TINYINT": _int(8), "SMALLINT": _int(16), "MEDIUMINT": _int(24), "INT": _int(32),
    "BIGINT": _int(64), "DECIMAL": _decimal,
    "FLOAT": lambda rng, _: rng.randint(-8000, 8000) / 8,  # exact in a float's 24 bits
    "DOUBLE": lambda rng, _: rng.choice([rng.uniform(-1e300, 1e300), rng.random(), 5e-324]),
    "CHAR": lambda rng, _: _text(5)(rng, _).rstrip(" "), "VARCHAR": _text(300),
    "TEXT": _text(400), "LONGTEXT": _text(400),
    "BINARY": _bytes(4), "VARBINARY": _bytes(10), "BLOB": _bytes(3000),
    "DATE": lambda rng, _: datetime.date(1000, 1, 1) + datetime.timedelta(rng.randint(0, 3287181)),
    "DATETIME": _moment(datetime.datetime(1000, 1, 1), (0, 284012524799)),
    "TIMESTAMP": _moment(datetime.datetime(1970, 1, 1), (1, 2 ** 31 - 1)),
    "TIME": _time, "YEAR": lambda rng, _: rng.randint(1901, 2155),
    "ENUM": lambda rng, _: rng.choice(["a", "b", "c d"]),
    "SET": lambda rng, _: ",".join(m for m in "xyz" if rng.random() < 0.5),
    "BIT": lambda rng, t: rng.getrandbits(int(t[4:-1])).to_bytes((int(t[4:-1]) + 7) // 8, "big"),
    "JSON": lambda rng, _: json.dumps(rng.choice([
        {"a": [1, 2.5, {"b": None}], "é": "x"}, [], "s", 123456789012, True, -1.5e-7,
        {"k": rng.randint(-10 ** 12, 10 ** 12), "l": [rng.random()] * rng.randint(0, 3)},
        [rng.uniform(-1, 1) * 10.0 ** rng.randint(-20, 20), float(rng.randint(0, 10 ** 17))]])),
    "UUID": lambda rng, _: _uuid(rng),
    # Words zero a third of the time: runs of one, two, ... zero words, as the server writes them.
    "INET6": lambda rng, _: str(ipaddress.IPv6Address(rng.choice(
        [rng.getrandbits(128), rng.getrandbits(32), (0xFFFF << 32) | rng.getrandbits(32),
         int.from_bytes(b"".join(b"\0\0" if rng.random() < 0.33 else rng.randbytes(2)
                                 for _ in range(8)), "big")]))),
    "INET4": lambda rng, _: str(ipaddress.IPv4Address(rng.getrandbits(32))),
}


def _select(conn, columns):
    """The table's rows by id, as a client reads them (in UTC)."""
    names = ", ".join(c for c, _, _, _ in columns)
    support.sql(conn, "SET time_zone = '+00:00'")
    with conn.cursor() as cur:
        cur.execute(f"SELECT id, {names} FROM types")
        return {row[0]: row[1:] for row in cur.fetchall()}


def _differences(image, row, columns):
    for (col, sql_type, _, _), expected in zip(columns, row):
        want, got = _normalise(sql_type, expected), _decoded(sql_type, image[col])
        if got != want:  # JSON too: the text a client shows, a double's digits laid out alike
            yield f"{col} {sql_type}: {got!r:.80} != {want!r:.80}"


def _images_against(msgs, inserted, updated, columns, every):
    """(images by op, differences) of ``msgs``' images against the rows inserted and updated, of
    the columns from the second on when ``every`` is 2 (the first of each pair left out of Kafka:
    none of them may be in an image)."""
    kept, left_out = columns[every - 1::every], {c for c, _, _, _ in columns} - {
        c for c, _, _, _ in columns[every - 1::every]}
    images, wrong = collections.Counter(), []
    for m in msgs:
        v, i = m["value"], m["key"]["id"]
        for image, row in ((v["before"], inserted[i]), (v["after"], inserted[i] if v["op"] == "c"
                                                         else updated[i])):
            if image is not None:
                images[v["op"]] += 1
                wrong += [f"{v['op']} row {i} left out, yet there: {c}"
                          for c in sorted(left_out & set(image))]
                wrong += [f"{v['op']} row {i} {d}"
                          for d in _differences(image, row[every - 1::every], kept)]
    return images, wrong


@pytest.mark.every_source
def test_random_rows_of_every_type_inserted_updated_and_snapshotted_read_as_select_reads_them(
        typed_table, tmp_path, source):
    # Beside the edges above: 300 random rows, each updated (before and after images), then
    # snapshotted; every nullable value NULL one time in ten.
    from tests.e2e.test_snapshot import stream_then_snapshot
    name, conn = typed_table
    columns = [c for c in columns_of(source) if c not in GEOMETRY]
    rng = support.rng(source.name)
    names = ", ".join(c for c, _, _, _ in columns)

    def random_row():
        return [None if rng.random() < 0.1 else RANDOM[t.split("(")[0].split(" ")[0]](rng, t)
                for _, t, _, _ in columns]
    f, p = support.master_pos(conn)
    support.sql(conn, "SET time_zone = '+00:00'")
    with conn.cursor() as cur:
        for i in range(1, 301):
            cur.execute(f"INSERT INTO types (id, {names}) VALUES (%s{', %s' * len(columns)})",
                        [i] + random_row())
        inserted = _select(conn, columns)
        sets = ", ".join(f"{c} = %s" for c, _, _, _ in columns)
        # Five updates a transaction, and one more taken back by a ROLLBACK TO. On MariaDB each
        # also writes a MyISAM table: the group is then logged with the update taken back, and
        # read whole before it is handled (stages.savepoints), its rows decoded by their own
        # table maps.
        if not source.mysql:
            support.sql(conn, "CREATE TABLE m (id INT PRIMARY KEY) ENGINE=MyISAM")
        for first in range(1, 301, 5):
            cur.execute("BEGIN")
            if not source.mysql:
                cur.execute("INSERT INTO m VALUES (%s)", (first,))
            for i in range(first, first + 5):
                cur.execute(f"UPDATE types SET {sets} WHERE id = %s", random_row() + [i])
                if i == first + 2:
                    cur.execute("SAVEPOINT s")
                    cur.execute(f"UPDATE types SET {sets} WHERE id = %s",
                                random_row() + [first])
                    cur.execute("ROLLBACK TO SAVEPOINT s")
            cur.execute("COMMIT")
    updated = _select(conn, columns)
    assert all(inserted[i] != updated[i] for i in inserted)
    ns = support.unique("tyr")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.types"], server=source)
    msgs = stream_then_snapshot(cfg, str(tmp_path / "log"), (f, p), f"{name}.types", ns, 600,
                                300)
    images, wrong = _images_against(msgs, inserted, updated, columns, every=1)
    assert images == {"c": 300, "u": 600, "r": 300} and not wrong, support.seeded(
        "\n".join(wrong[:30]))
    # Again from the binlog, every other column left out of Kafka (tables.columns.exclude): the
    # reader steps over their values undecoded (source.rowplan), and the rest read alike.
    left_out = [c for c, _, _, _ in columns[::2]]
    ns = support.unique("tyx")
    cfg = support.write_config(str(tmp_path / "x.yaml"), ns, [f"{name}.types"], server=source,
                               tables={"include": [f"{name}.types"], "columns": {
                                   "exclude": [f"*.*.{c}" for c in left_out]}})
    with support.StreamerProcess(cfg, str(tmp_path / "xlog"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([f"{ns}.{name}.types"], expect=600, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    images, wrong = _images_against(msgs, inserted, updated, columns, every=2)
    assert images == {"c": 300, "u": 600} and not wrong, support.seeded("\n".join(wrong[:30]))


# Temporal columns in their old formats (MariaDB made them before 10.1, or while
# mysql56_temporal_format is OFF): the binlog has no metadata for them, and their values' layout
# depends on the fractional digits only the table's definition gives (source.oldtemporal).
OLD_TEMPORAL = [
    ("d0", "DATETIME", "'2024-06-30 23:59:59'", "'1000-01-01 00:00:00'"),
    ("d3", "DATETIME(3)", "'1999-01-02 03:04:05.678'", "'9999-12-31 23:59:59.999'"),
    ("d6", "DATETIME(6)", "'2024-06-30 23:59:59.123456'", "'9999-12-31 23:59:59.999999'"),
    ("t0", "TIME", "'-838:59:59'", "'838:59:59'"),
    ("t2", "TIME(2)", "'12:34:56.78'", "'-00:00:00.01'"),
    ("t6", "TIME(6)", "'-01:02:03.000001'", "'838:59:59.000000'"),
    ("s0", "TIMESTAMP NULL", "'1970-01-01 00:00:01'", "'2038-01-19 03:14:07'"),
    ("s1", "TIMESTAMP(1) NULL", "'2001-09-09 01:46:40.1'", "'2020-02-29 12:00:00.5'"),
    ("s6", "TIMESTAMP(6) NULL", "'2038-01-19 03:14:07.999999'", "'1970-01-01 00:00:01.000001'"),
]


# The database of the old temporal formats' table, which the test leaves in place: a stream that
# reads the binlog later (make run after make test) reads the fractional digits of its columns
# from it. (A table dropped since is read as far as it can be: tests/unit/source/
# test_oldtemporal.py.)
OLD_TEMPORAL_DB = "streamer_old_temporal"


@pytest.mark.every_source
def test_old_temporal_formats_read_as_select_shows_them_in_binlog_and_snapshot(tmp_path, source):
    if source.mysql:
        pytest.skip("MySQL 8.0 has no old temporal formats: its upgrade rebuilds them")
    name = OLD_TEMPORAL_DB
    support.sql(source.admin(), f"CREATE DATABASE IF NOT EXISTS {name}")
    conn = source.admin(name)
    cols = ", ".join(f"{c} {t}" for c, t, _, _ in OLD_TEMPORAL)
    support.sql(conn, "DROP TABLE IF EXISTS types", "SET GLOBAL mysql56_temporal_format = OFF")
    try:
        support.sql(conn, f"CREATE TABLE types (id INT PRIMARY KEY, {cols}, tail VARCHAR(5))")
    finally:
        support.sql(conn, "SET GLOBAL mysql56_temporal_format = ON")
    created = support.sql(conn, "SHOW CREATE TABLE types")[0][1]
    assert created.count("/* mariadb-5.3 */") == len(OLD_TEMPORAL), created  # the old formats
    f, p = support.master_pos(conn)
    names = ", ".join(c for c, _, _, _ in OLD_TEMPORAL)
    rng = support.rng(source.name)
    support.sql(conn, "SET time_zone = '+00:00'")
    for row_id, idx in ((1, 2), (2, 3)):
        values = ", ".join(col[idx] for col in OLD_TEMPORAL)
        support.sql(conn, f"INSERT INTO types (id, {names}, tail) VALUES ({row_id}, {values}, "
                          f"'x{row_id}')")
    support.sql(conn, "INSERT INTO types (id) VALUES (3)")  # NULL in each
    with conn.cursor() as cur:
        for i in range(4, 54):
            cur.execute(f"INSERT INTO types (id, {names}, tail) VALUES "
                        f"(%s{', %s' * len(OLD_TEMPORAL)}, 'r')",
                        [i] + [RANDOM[t.split("(")[0].split(" ")[0]](rng, t)
                               for _, t, _, _ in OLD_TEMPORAL])
    ns = support.unique("ot")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.*"], server=source)
    with support.StreamerProcess(cfg, str(tmp_path / "log"), "--start-file", f,
                                 "--start-pos", str(p)) as proc:
        msgs = support.consume([f"{ns}.{name}.types"], expect=53, decode_ns=ns)
        assert proc.stop() == 0, proc.output()[-3000:]
    assert "keeps an old temporal format, with 6 fractional digits" in proc.output()
    _assert_equal_to_select(msgs, conn, OLD_TEMPORAL, "c")
    ns2 = support.unique("ots")
    cfg2 = support.write_config(str(tmp_path / "s.yaml"), ns2, [f"{name}.*"], server=source,
                                start={"initial": "snapshot"})
    with support.StreamerProcess(cfg2, str(tmp_path / "log2")) as proc:
        snapped = support.consume([f"{ns2}.{name}.types"], expect=53, decode_ns=ns2)
        assert proc.stop() == 0, proc.output()[-3000:]
    _assert_equal_to_select(snapped, conn, OLD_TEMPORAL, "r")
    binlog_schema = support.decoder(ns).schema_of(msgs[0]["raw_value"])["fields"][0]
    snapshot_schema = support.decoder(ns2).schema_of(snapped[0]["raw_value"])["fields"][0]
    assert binlog_schema == snapshot_schema


@pytest.mark.every_source
def test_a_two_digit_year_is_published_as_its_year_and_keys_chunks_in_order(db, source, tmp_path):
    # MariaDB's YEAR(2) (MySQL 8.0 makes it a YEAR): SELECT shows 24 for 2024, the binlog holds
    # the year. A snapshot publishes the year too, and a key holding one chunks every row once:
    # the server compares such a column with a constant each way but in the year's order
    # (MariaDB 10.11 and 11.4: `y > 1970` finds 1999 and not 2000).
    if source.mysql:
        pytest.skip("MySQL 8.0 has no YEAR(2)")
    from tests.e2e.test_snapshot import stream_then_snapshot
    name, conn = db
    support.sql(conn, "CREATE TABLE y2 (y YEAR(2), id INT, v YEAR(2) NULL, PRIMARY KEY (y, id))")
    f, p = support.master_pos(conn)
    years = ["'0000'", "1970", "1999", "0", "24", "2069"]  # 0 is 2000; '0000' the zero year
    for i, year in enumerate(years):
        support.sql(conn, "INSERT INTO y2 VALUES " + ", ".join(
            f"({year}, {k}, {years[(i + k) % len(years)]})" for k in range(1, 4)))
    shown = {(r[0], r[1]): r[2] for r in support.sql(conn, "SELECT YEAR(y), id, YEAR(v) FROM y2")}
    assert len(shown) == 18 and {y for y, _ in shown} == {1900, 1970, 1999, 2000, 2024, 2069}
    want = {(0 if y == 1900 else y, k): 0 if v == 1900 else v for (y, k), v in shown.items()}
    ns = support.unique("y2")
    cfg = support.write_config(str(tmp_path / "c.yaml"), ns, [f"{name}.y2"], server=source,
                               snapshot={"chunk_rows": 2})
    msgs = stream_then_snapshot(cfg, str(tmp_path / "log"), (f, p), f"{name}.y2", ns, 18, 18)
    for op in ("c", "r"):
        got = [(m["value"]["after"]["y"], m["value"]["after"]["id"], m["value"]["after"]["v"])
               for m in msgs if m["value"]["op"] == op]
        assert sorted(got) == sorted((y, k, v) for (y, k), v in want.items()), (op, got)
