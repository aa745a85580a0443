"""`streamer tail` shows every message of a topic: a message it can't decode as the streamer's
Avro is shown as its JSON, its text or its bytes, and the lines after it go on."""
import json

from streamer.codec.avro import Writer
from streamer.codec.decode import Decoder
from streamer.tools.tail import readable

SCHEMA = {"type": "record", "name": "V", "namespace": "shop.t",
          "fields": [{"name": "id", "type": "long"}, {"name": "v", "type": "string"}]}
UNKNOWN = {"type": "record", "name": "W", "namespace": "shop.t",
           "fields": [{"name": "w", "type": "long"}]}


def test_each_kind_of_message_is_shown_and_none_stops_the_lines():
    # A namespace's __positions record (JSON, keyed by text) printed a ValueError traceback, as
    # did a message of another writer; a schema no longer in the schema topic, a LookupError.
    writer = Writer(SCHEMA)
    decoder = Decoder(lambda: {writer.fingerprint.hex(): SCHEMA})
    body = writer.encode({"id": 7, "v": "seven"})
    assert readable(decoder, body) == {"id": 7, "v": "seven"}
    assert readable(decoder, None) is None
    checkpoint = {"file": "mysql-bin.000003", "pos": 4}
    assert readable(decoder, json.dumps(checkpoint).encode()) == checkpoint
    assert readable(decoder, b"local-mariadb") == "local-mariadb"
    other = readable(decoder, b"\x01\xff\x00")
    assert other == {"undecoded_hex": "01ff00", "why": "not a streamer message: neither Avro "
                     "single-object encoding (C3 01) nor the Confluent wire format (00 + schema "
                     "id)"}
    gone = readable(decoder, Writer(UNKNOWN).encode({"w": 1}))
    assert gone["why"].startswith("no writer schema with fingerprint")
    cut = readable(decoder, body[:-3])
    assert cut["undecoded_hex"] == body[:-3].hex() and cut["why"]
    # Cut after the header, in the first varint: a TypeError out of fastavro under PyPy.
    header_only = readable(decoder, body[:10])
    assert header_only["why"].startswith("a message of 10 bytes does not decode")
