"""Where the decoder finds a writer schema: its first load, a settled load, and schemas it knows."""
import pytest

from streamer.codec.avro import Writer
from streamer.codec.decode import Decoder
from streamer.errors import UnknownSchema

SCHEMA = {"type": "record", "name": "K", "namespace": "shop.t", "fields": [{"name": "id", "type": "long"}]}
OTHER = {"type": "record", "name": "V", "namespace": "shop.t", "fields": [{"name": "v", "type": "string"}]}


class Source:
    """A schema topic whose plain read ends before the records ``pending`` holds: their
    transaction is decided, but its commit marker hasn't reached the schema topic yet."""

    def __init__(self, committed, pending, settles=True):
        self.committed, self.pending = committed, pending
        self.calls = []
        if not settles:
            self.settled = None

    def __call__(self):
        self.calls.append("plain")
        return dict(self.committed)

    def settled(self):
        self.calls.append("settled")
        return dict(self.committed, **self.pending)


def _entry(schema):
    return {Writer(schema).fingerprint.hex(): schema}


def test_a_fingerprint_the_plain_read_lacks_is_looked_for_in_a_settled_read():
    src = Source(_entry(OTHER), _entry(SCHEMA))
    dec = Decoder(src)
    assert dec.decode(Writer(SCHEMA).encode({"id": 7})) == {"id": 7}
    assert src.calls == ["plain", "settled"]
    # Known from then on: no read at all.
    assert dec.decode(Writer(OTHER).encode({"v": "x"})) == {"v": "x"}
    assert dec.decode(Writer(SCHEMA).encode({"id": 8})) == {"id": 8}
    assert src.calls == ["plain", "settled"]


def test_a_fingerprint_the_plain_read_has_needs_no_settled_read():
    src = Source(_entry(SCHEMA), {})
    assert Decoder(src).decode(Writer(SCHEMA).encode({"id": 1})) == {"id": 1}
    assert src.calls == ["plain"]


def test_a_fingerprint_in_neither_read_is_named():
    src = Source(_entry(OTHER), {})
    fp = Writer(SCHEMA).fingerprint.hex()
    with pytest.raises(UnknownSchema, match=f"no writer schema with fingerprint {fp}"):
        Decoder(src).decode(Writer(SCHEMA).encode({"id": 1}))
    assert src.calls == ["plain", "settled"]


def test_a_source_without_a_settled_read_is_read_once():
    src = Source({}, _entry(SCHEMA), settles=False)
    with pytest.raises(UnknownSchema):
        Decoder(src).decode(Writer(SCHEMA).encode({"id": 1}))
    assert src.calls == ["plain"]
    assert Decoder(lambda: _entry(SCHEMA)).decode(Writer(SCHEMA).encode({"id": 2})) == {"id": 2}


def test_known_schemas_decode_without_a_read():
    src = Source({}, {})
    dec = Decoder(src, known=_entry(SCHEMA))
    assert dec.decode(Writer(SCHEMA).encode({"id": 3})) == {"id": 3}
    assert src.calls == []


WIDE = {"type": "record", "name": "V", "namespace": "shop.t", "fields": [
    {"name": "id", "type": "long"}, {"name": "s", "type": ["null", "string"]},
    {"name": "b", "type": "bytes"}, {"name": "d", "type": {"type": "array", "items": "long"}},
    {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["a", "b"]}}]}


def test_a_message_cut_short_or_altered_is_one_named_error_on_either_runtime():
    # fastavro's pure-Python reader (PyPy's) raised a TypeError for a varint cut short, and an
    # IndexError for a union or enum index out of range: errors a consumer (and `streamer tail`,
    # which shows any message it can't read) could not tell from its own bugs.
    import random

    from streamer.errors import UndecodableMessage

    writer = Writer(WIDE)
    message = writer.encode({"id": 123456789, "s": "hello", "b": b"\x00a", "d": [1, 2, 3],
                             "e": "b"})
    decoder = Decoder(lambda: {}, known=_entry(WIDE))
    assert decoder.decode(message)["e"] == "b"
    header = len(writer.header)
    for cut in range(header, len(message)):
        with pytest.raises(UndecodableMessage, match="does not decode with the writer schema "
                                                     f"its header names .{writer.fingerprint.hex()}"):
            decoder.decode(message[:cut])
    rng = random.Random(7)
    kinds = set()
    for _ in range(3000):
        altered = bytearray(message)
        altered[rng.randrange(header, len(message))] = rng.randrange(256)
        try:
            decoder.decode(bytes(altered))  # Avro has no checksum: many still decode
        except UndecodableMessage as exc:
            kinds.add(str(exc).split(": ")[1])
    assert "UnicodeDecodeError" in kinds and len(kinds) >= 2, kinds
