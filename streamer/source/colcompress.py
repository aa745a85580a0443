"""MariaDB's compressed columns (10.3+): a value as stored, and as the column holds it.

A ``COMPRESSED`` column (``TEXT COMPRESSED``, ``VARCHAR(n) COMPRESSED``, their binary twins)
stores each value behind a header byte, and the binlog writes that stored form
(sql/field_comp.cc, ``Field_longstr::uncompress`` in sql/field.cc):

- an empty value is stored empty, without a header;
- a header whose high four bits are 0: the value itself follows, uncompressed (the server
  stores a value so when compressing would not make it shorter);
- high bits 8 (zlib): the low three bits are how many bytes of the value's length follow, big
  endian, then a deflate stream, raw if bit 3 is set (``column_compression_zlib_wrap`` OFF,
  the default), else with zlib's header and checksum.

No other method is defined. ``SELECT`` shows the values uncompressed, and so does a snapshot.
"""
from __future__ import annotations

import zlib

from streamer.errors import UnsupportedValue

_ZLIB = 8


def inflate(stored: bytes) -> bytes:
    """The value a compressed column's stored bytes hold."""
    if not stored:
        return b""
    head = stored[0]
    method = head >> 4
    if method == 0:
        return stored[1:]
    if method != _ZLIB:
        raise UnsupportedValue(f"a compressed column's value by compression method {method}, "
                               f"which MariaDB doesn't define (zlib is {_ZLIB})")
    n = head & 7
    size = int.from_bytes(stored[1:1 + n], "big")
    inflater = zlib.decompressobj(-zlib.MAX_WBITS if head & 8 else zlib.MAX_WBITS)
    try:
        value = inflater.decompress(stored[1 + n:], size) if size else b""
    except zlib.error as exc:
        raise UnsupportedValue(f"a compressed column's value that zlib can't inflate "
                               f"({exc})") from exc
    if len(value) != size or (size and not inflater.eof):
        raise UnsupportedValue(f"a compressed column's value of {len(value)} bytes where its "
                               f"header says {size}")
    return value
