"""Which partition a keyed message lands in: the Java client's murmur2 of the key bytes.

Kafka Streams, ksqlDB and the Java producer put a key in partition ``toPositive(murmur2(key)) %
partitions``; librdkafka's default (``consistent_random``, CRC32) puts it elsewhere, so topics with
more than one partition would not co-partition with the consumers' own. The publisher sets
librdkafka's ``murmur2_random``, which is that function (random only for a null key). This module
is the algorithm written from the Java client's description, for tests and tools to check against.
"""
from __future__ import annotations

_M = 0x5BD1E995
_SEED = 0x9747B28C
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """MurmurHash2, 32-bit, as Kafka's Java client computes it (an unsigned 32-bit result)."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    end = length & ~3
    for i in range(0, end, 4):
        k = data[i] | (data[i + 1] << 8) | (data[i + 2] << 16) | (data[i + 3] << 24)
        k = (k * _M) & _MASK
        k ^= k >> 24
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    rest = length & 3
    if rest == 3:
        h ^= data[end + 2] << 16
    if rest >= 2:
        h ^= data[end + 1] << 8
    if rest >= 1:
        h ^= data[end]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h


def java_partition(key: bytes, partitions: int) -> int:
    """The partition the Java client picks for ``key`` (toPositive: the sign bit cleared)."""
    return (murmur2(key) & 0x7FFFFFFF) % partitions
