"""The consumer's API: turn any message the streamer wrote back into a dict.

    from streamer.decode import Decoder, kafka_schema_source
    decoder = Decoder(kafka_schema_source({"bootstrap.servers": "127.0.0.1:9092"}, "local"))
    row_change = decoder.decode(message.value())   # None for a tombstone (a delete's key)

The decoding itself is ``streamer.codec.decode``; reading the schema topic is ``streamer.kafka.topics``.
"""
from streamer.codec.decode import Decoder, RegistrySource, SchemaSource, to_jsonable
from streamer.errors import UndecodableMessage, UnknownSchema
from streamer.kafka.topics import kafka_schema_source, read_schema_records

__all__ = ["Decoder", "RegistrySource", "SchemaSource", "UndecodableMessage", "UnknownSchema",
           "kafka_schema_source", "read_schema_records", "to_jsonable"]
