"""Tombstones, compaction and the columns kept out of Kafka (tables.columns), without a server."""
import hashlib
import hmac
import json

import pytest
from pymysqlreplication.constants import FIELD_TYPE

from streamer import config
from streamer.errors import ConfigError, UnsupportedEvent
from streamer.schema.masking import ColumnRules
from streamer.schema.versions import TableVersion
from streamer.position import Position
from tests.unit.engine_parts import ReplayedBinlog
from tests.unit.engine.test_engine import ALL, FILE, replay
from tests.unit.schema.test_tables import Col, TableMap

SALT = b"pepper-of-sixteen-bytes-or-more"


def _hmac(value: bytes) -> str:
    return hmac.new(SALT, value, hashlib.sha256).hexdigest()


def _salted(tmp_path, **columns):
    path = tmp_path / "salt"
    path.write_bytes(SALT + b"\n")
    return dict(columns, salt_file=str(path))


def _rows(publisher):
    """(op, key, before, after) of each message of app.t; tombstones as ("tombstone", key)."""
    dec = publisher.decoder()
    out = []
    for _, key, value in publisher.messages():
        env = dec.decode(value)
        k = None if key is None else dec.decode(key)
        out.append(("tombstone", k) if env is None else (env["op"], k, env["before"], env["after"]))
    return out


# -- tombstones -------------------------------------------------------------------------------------

def test_without_tombstones_a_delete_is_one_message(make):
    streamer, publisher = make(topics={"tombstones": False})
    replay(streamer, publisher)
    assert publisher.changes() == [c for c in ALL if c[0] != "tombstone"]


def test_a_tombstone_follows_each_delete_in_its_transaction_under_the_same_key(make):
    streamer, publisher = make()
    replay(streamer, publisher)
    for messages, _ in publisher.log:
        table = [m for m in messages if m[0] == "test.app.t"]
        for i, (_, key, value) in enumerate(table):
            if value is None:
                # The message before it is the delete of that key (a key change's old key too).
                assert publisher.decoder().decode(table[i - 1][2])["op"] == "d"
                assert table[i - 1][1] == key


def test_a_keyless_table_gets_no_tombstones():
    event = TableMap([Col("v", FIELD_TYPE.LONG)])
    assert not TableVersion("ns", event, tombstones=True).tombstones
    assert TableVersion("ns", TableMap([Col("id", FIELD_TYPE.LONG, True)]), tombstones=True).tombstones


def test_a_truncate_of_a_compacted_topic_stops_the_streamer_before_it(make):
    streamer, publisher = make(topics={"compact": True}, batch={"max_messages": 1})
    with pytest.raises(UnsupportedEvent, match="compacted topic test.app.t.*topics.compact: false"):
        replay(streamer, publisher)
    assert publisher.topic_configs["test.app.t"] == {"cleanup.policy": "compact"}
    # Nothing at or after the TRUNCATE was committed: a restart after the fix reads it again.
    truncate_at = next(e.packet.log_pos - e.packet.event_size
                       for e in ReplayedBinlog("engine.binlog", Position(FILE, 4))
                       if "TRUNCATE" in (getattr(e, "query", "") or ""))
    assert publisher.committed.pos < truncate_at
    assert publisher.changes()[-1] == ("c", 8)


# -- columns through the engine ------------------------------------------------------------------

def test_excluded_and_hashed_columns_through_a_ddl(make, tmp_path):
    # n arrives with the ALTER: the table's second version leaves it out as well.
    streamer, publisher = make(columns=_salted(tmp_path, exclude=["app.t.n"],
                                               mask={"app.*.V": "hash"}))
    replay(streamer, publisher)
    rows = _rows(publisher)
    first = next(r for r in rows if r[0] == "c")
    assert first == ("c", {"id": 1}, None, {"id": 1, "v": _hmac(b"a")})
    last = rows[-1]
    assert last == ("c", {"id": 9}, None, {"id": 9, "v": _hmac(b"i")})  # n=90 is gone
    schemas = [r for r in publisher.read_schema_records() if r["kind"] == "value"]
    assert len(schemas) == 2

    for record in schemas:
        row = json.loads(record["schema"])["fields"][0]["type"][1]
        v = next(f for f in row["fields"] if f["name"] == "v")
        assert v["type"] == ["null", "string"] and v["streamer.mask"] == "hash"
        assert "n" not in [f["name"] for f in row["fields"]]
    assert json.loads(schemas[1]["schema"])["fields"][0]["type"][1]["streamer.excluded"] == ["n"]


def test_a_hash_mask_without_a_salt_refuses_to_start(make, monkeypatch):
    monkeypatch.delenv("STREAMER_MASK_SALT", raising=False)
    with pytest.raises(ConfigError, match="STREAMER_MASK_SALT.*tables.columns.salt_file"):
        make(columns={"mask": {"app.t.v": "hash"}})


# -- columns, one table version --------------------------------------------------------------------

def _orders():
    return TableMap([Col("id", FIELD_TYPE.LONG, True),
                     Col("Email", FIELD_TYPE.VARCHAR, charset="utf8mb4", max_length=80),
                     Col("ssn", FIELD_TYPE.VARCHAR, charset="utf8mb4", max_length=11),
                     Col("qty", FIELD_TYPE.LONG)], nullable_bits=b"\x0e")


def _version(exclude=(), mask=None, event=None):
    return TableVersion("ns", event or _orders(), rules=ColumnRules(exclude, mask or {}, SALT))


def _published(tv, row):
    values = dict(row)
    tv.convert(values)
    return {f["name"]: values[f["name"]] for f in tv.row_schema["fields"]}


def test_each_method_masks_only_its_columns_and_says_so_in_the_schema():
    tv = _version(mask={"shop.orders.email": "truncate:3", "*.*.ssn": "null", "shop.*.qty": "hash"})
    fields = {f["name"]: f for f in tv.row_schema["fields"]}
    assert fields["Email"]["type"] == ["null", "string"] and fields["Email"]["streamer.mask"] == "truncate:3"
    assert fields["ssn"]["type"] == ["null", "string"] and fields["ssn"]["streamer.mask"] == "null"
    assert fields["qty"]["type"] == ["null", "string"] and "HMAC" in fields["qty"]["doc"]
    assert "streamer.mask" not in fields["id"]
    row = {"id": 1, "Email": "ann@example.com", "ssn": "123-45-6789", "qty": 5}
    assert _published(tv, row) == {"id": 1, "Email": "ann", "ssn": None, "qty": _hmac(b"5")}
    assert _published(tv, {"id": 2, "Email": None, "ssn": None, "qty": None}) == \
        {"id": 2, "Email": None, "ssn": None, "qty": None}
    assert tv.lossy == ["Email", "ssn"]


def test_exclusion_wins_over_a_mask_and_the_first_matching_mask_decides():
    tv = _version(exclude=["*.*.ssn"], mask={"*.*.ssn": "hash", "shop.orders.email": "null",
                                              "*.*.email": "hash"})
    names = [f["name"] for f in tv.row_schema["fields"]]
    assert names == ["id", "Email", "qty"]
    assert tv.row_schema["streamer.excluded"] == ["ssn"]
    assert _published(tv, {"id": 1, "Email": "x", "ssn": "secret", "qty": 2})["Email"] is None


def test_masks_change_the_schema_fingerprint():
    plain, masked = _version(), _version(mask={"*.*.email": "null"})
    assert plain.value_writer.fingerprint != masked.value_writer.fingerprint


@pytest.mark.parametrize("exclude,mask,message", [
    (["shop.orders.id"], {}, "shop.orders.id is part of the table's primary key and can't be excluded"),
    ([], {"*.*.id": "null"}, "can't be masked with null"),
    ([], {"*.*.id": "truncate:1"}, "can't be masked with truncate:1"),
    ([], {"*.*.qty": "truncate:1"}, "shop.orders.qty can't be masked with 'truncate:1': truncate applies"),
])
def test_what_a_column_rule_cannot_do_is_a_config_error_naming_the_column(exclude, mask, message):
    with pytest.raises(ConfigError, match=message):
        _version(exclude, mask)


def test_a_hashed_primary_key_keys_the_message_by_its_hash():
    tv = _version(mask={"*.*.id": "hash"})
    assert tv.key_schema["fields"][0]["type"] == "string"
    values = {"id": 7, "Email": None, "ssn": None, "qty": None}
    tv.convert(values)
    assert values["id"] == _hmac(b"7")
    assert tv.key(values) == tv.key_writer.encode({"id": _hmac(b"7")})


def test_an_empty_set_is_masked_like_any_value():
    event = TableMap([Col("id", FIELD_TYPE.LONG, True),
                      Col("tags", FIELD_TYPE.SET, set_values=["a", "b"])])
    tv = _version(mask={"*.*.tags": "hash"}, event=event)
    values = {"id": 1, "tags": None}
    tv.convert(values, {"tags": "empty set"})
    assert values["tags"] == _hmac(b"")


# -- config ------------------------------------------------------------------------------------------

def _load(tmp_path, text, environ=None):
    path = tmp_path / "c.yaml"
    path.write_text("mysql: {server_id: 1}\n" + text)
    return config.load(str(path), environ=environ or {})


@pytest.mark.parametrize("text,message", [
    ("tables: {columns: {exclude: ['shop.ssn']}}", "tables.columns.exclude"),
    ("tables: {columns: {mask: {'shop.t': hash}}}", "tables.columns.mask"),
    ("tables: {columns: {mask: {'shop.t.c': 'truncate:0'}}}", "hash, null .* truncate:N"),
    ("tables: {columns: {mask: {'shop.t.c': null}}}", "quoted"),
    ("tables: {columns: {mask: [a]}}", "'tables.columns.mask' must be a mapping"),
    ("topics: {tombstones: 1}", "topics.tombstones"),
])
def test_bad_column_and_topic_settings_name_the_key(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        _load(tmp_path, text)


def test_the_salt_comes_from_a_file_beside_the_config_or_the_environment(tmp_path):
    (tmp_path / "salt").write_text("a-salt-of-enough-bytes\n")
    cfg = _load(tmp_path, "tables: {columns: {mask: {'*.*.c': hash}, salt_file: salt}}")
    assert config.mask_salt(cfg) == b"a-salt-of-enough-bytes"
    cfg = _load(tmp_path, "tables: {columns: {mask: {'*.*.c': hash}}}")
    assert config.mask_salt(cfg, {"STREAMER_MASK_SALT": "from-the-environment"}) == \
        b"from-the-environment"
    with pytest.raises(ConfigError, match="at least 16"):
        config.mask_salt(cfg, {"STREAMER_MASK_SALT": "short"})
    assert config.mask_salt(_load(tmp_path, "tables: {columns: {mask: {'*.*.c': 'null'}}}")) is None
