"""The namespace's own topics read with records another writer put there: never a traceback.

In the positions topic, a record that is no JSON object can't be any version's checkpoint and
is stepped over; a JSON object that can't be read as a position may be a newer version's, and
is refused rather than taken for the older checkpoint before it (which would publish again what
came after it). In the schema topic, a record that is no schema record is stepped over."""
import json
import logging

import pytest

from streamer.errors import UnreadableCheckpoint
from streamer.kafka import checkpoints, topics

KEY = b"db1"


def _read(monkeypatch, records):
    monkeypatch.setattr(checkpoints, "read_topic_tail",
                        lambda *args, **kwargs: (records, True))
    return checkpoints.read_checkpoint({}, "ns.__positions", "db1", "ns", 1.0)


def _checkpoint(pos, **more):
    return json.dumps(dict({"file": "mysql-bin.000003", "pos": pos, "gtid_set": "0-1-9"},
                           **more)).encode()


def test_records_that_are_no_json_object_are_stepped_over_with_a_warning(monkeypatch, caplog):
    caplog.set_level(logging.WARNING)
    found, read = _read(monkeypatch, [(KEY, _checkpoint(400)), (b"other", b"x"),
                                      (KEY, b"not json"), (KEY, b"[1]"), (KEY, b"\xff\xfe")])
    assert (found.file, found.pos, found.gtid_set, read) == ("mysql-bin.000003", 400, "0-1-9", 5)
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 3 and all(s.startswith("a record of ns.__positions keyed 'db1' is no "
                                               "checkpoint (not a JSON object: ") for s in said)


@pytest.mark.parametrize("newest,why", [
    (b"{}", "KeyError: 'file'"),
    (_checkpoint("x"), "ValueError: invalid literal"),
    (_checkpoint(500, gtid_set="zzz"), "ValueError: invalid literal for int"),
])
def test_a_json_object_that_is_no_position_is_refused_naming_the_ways_on(monkeypatch, newest,
                                                                        why):
    with pytest.raises(UnreadableCheckpoint) as err:
        _read(monkeypatch, [(KEY, _checkpoint(400)), (KEY, newest)])
    text = str(err.value)
    assert text.startswith(f"the newest checkpoint of source 'db1' in ns.__positions can't be "
                           f"read ({why}")
    assert "start once at an explicit position" in text
    # Read back once the streamer committed again, the newest is its own.
    found, _ = _read(monkeypatch, [(KEY, newest), (KEY, _checkpoint(600))])
    assert found.pos == 600


def test_schema_topic_records_the_streamer_didnt_write_are_stepped_over(monkeypatch, caplog):
    # One such record stopped every start (the schema lineage is read first) with a
    # JSONDecodeError, and every `streamer tail` and `streamer.decode` consumer of the namespace.
    caplog.set_level(logging.WARNING)
    schema = json.dumps({"type": "record", "name": "V", "fields": []})
    ours = {"fingerprint": "c0ffee", "schema": schema, "topic": "ns.app.t", "kind": "value"}
    foreign = [b"not json", b"[]", b"{}", json.dumps(dict(ours, schema="not json")).encode(),
               json.dumps(dict(ours, fingerprint=7)).encode(),
               json.dumps(dict(ours, topic=None)).encode()]
    records = [(b"k", v) for v in foreign] + [(b"c0ffee", json.dumps(ours).encode()),
                                              (b"c0ffee", None)]
    monkeypatch.setattr(topics, "read_topic_tail", lambda *args, **kwargs: (records, True))
    assert topics.read_schema_records({}, "ns") == [ours]
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == len(foreign)
    assert all(s.startswith("a record of ns.__schemas (key b'k') is no schema record of the "
                            "streamer: ") for s in said)
    assert topics.KafkaSchemas({}, "ns")() == {"c0ffee": json.loads(schema)}
