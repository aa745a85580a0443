"""The server's own tables for the single-byte character sets Python has no codec for.

MariaDB and MySQL have a few 8-bit character sets that Python's codecs don't: dec8, hp8, swe7,
armscii8, keybcs2, geostd8, and macce (which Python's mac_latin2 nearly is, but not byte for byte).
A column in one of them came out of the reader as bytes, which a text field refuses: one row
stopped the streamer. Their tables are the server's (strings/ctype-extra.c), so the streamer asks
the server for them instead of carrying copies: one query at start converts all 256 bytes of each
to utf8mb4, and each becomes a charmap codec registered under ``mysql-<name>`` (``BYTE_ORDER`` of
source.decoders then names it for the charset). A byte the server can't map comes back as the
server's own replacement, as a client reading the column would see it.
"""
from __future__ import annotations

import codecs
import logging
from typing import Any, Dict, List, Optional

from streamer.source.decoders import BYTE_ORDER

log = logging.getLogger(__name__)

SERVER_DEFINED: List[str] = ["dec8", "hp8", "swe7", "armscii8", "keybcs2", "geostd8", "macce"]
_TABLES: Dict[str, str] = {}  # codec name -> the 256-character decoding table
_ALL_BYTES = bytes(range(256)).hex()


def _search(name: str) -> Optional[codecs.CodecInfo]:
    table = _TABLES.get(name.replace("_", "-"))
    if table is None:
        return None
    encoding = codecs.charmap_build(table)

    def decode(data: Any, errors: str = "strict") -> Any:
        return codecs.charmap_decode(data, errors, table)

    def encode(text: str, errors: str = "strict") -> Any:
        return codecs.charmap_encode(text, errors, encoding)

    return codecs.CodecInfo(encode, decode, name=name)


codecs.register(_search)


def load(conn: Any) -> List[str]:
    """Ask the server for each charset's table and register its codec; the charsets loaded.
    One the server doesn't have (a MySQL without it) is left out, as no column can use it."""
    loaded = []
    for name in SERVER_DEFINED:
        codec = f"mysql-{name}"
        if codec in _TABLES:
            loaded.append(name)
            continue
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT CONVERT(CONVERT(UNHEX('{_ALL_BYTES}') USING {name}) "
                            f"USING utf8mb4)")
                row = cur.fetchone()
        except Exception as exc:  # noqa: BLE001 - an unknown charset; the rest still load
            log.debug("charset %s not loaded from the server: %s", name, exc)
            continue
        text = row[0] if row else None
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not isinstance(text, str) or len(text) != 256:
            log.warning("charset %s: the server's table has %s characters, not 256; its columns "
                        "are not decoded", name, None if text is None else len(text))
            continue
        _TABLES[codec] = text
        BYTE_ORDER[name] = codec
        loaded.append(name)
    return loaded
