"""The Java client's key partitioning, written from its algorithm: murmur2 of the key bytes."""
from streamer.kafka.partition import java_partition, murmur2


def _signed(v):
    return v - (1 << 32) if v >= 1 << 31 else v


def test_murmur2_matches_the_java_clients_published_values():
    # The values Kafka's own tests hold Utils.murmur2 to (as Java ints).
    cases = {b"21": -973932308, b"foobar": -790332482, b"abc": 479470107,
             b"a-little-bit-long-string": -985981536,
             b"a-little-bit-longer-string": -1486304829,
             b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971}
    assert {k: _signed(murmur2(k)) for k in cases} == cases


def test_a_keys_partition_is_the_positive_hash_modulo_the_partitions():
    assert all(0 <= java_partition(bytes([i, 255 - i, i]), 4) < 4 for i in range(256))
    assert java_partition(b"foobar", 4) == (murmur2(b"foobar") & 0x7FFFFFFF) % 4
    assert len({java_partition(str(i).encode(), 4) for i in range(100)}) == 4
