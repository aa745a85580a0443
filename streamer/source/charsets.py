"""Character sets decoded by the server's own tables, where Python's codecs differ from the server.

The server's charsets are its tables (strings/ctype-*.c), and Python's codecs of the same names
are not always the same tables. Checked character by character against MariaDB (every BMP
character converted by the server into the charset and back):

- Python has no codec at all for dec8, hp8, swe7, armscii8, keybcs2, geostd8, macce and eucjpms:
  a value in one came out of the reader as bytes, and one row stopped the streamer.
- Python decodes some bytes to other characters than the server: koi8u, greek, hebrew and cp866
  (e.g. greek 0xA1/0xA2, hebrew 0xAF): a silent change of the text.
- Python refuses sequences the server stores: tis620 (0xFF), big5 (its ETEN extensions), euckr
  (the CP949 extension the server's euckr has), ujis (the user-defined area): one row stopped
  the streamer, again at every restart.

(latin1 is MySQL's own in source.decoders; cp1250, cp1251, cp1256, cp1257, latin2, latin5,
latin7, koi8r, cp850, cp852, macroman, sjis, cp932, gbk, gb2312, utf8mb3 and ascii matched
exactly, and keep Python's codecs.)

So for these, the streamer asks the server for the table the first time a value needs it: all
256 bytes of a single-byte charset in one query; every two-byte sequence of a multi-byte one (a
query per lead byte), and the three-byte ones of ujis and eucjpms. The codec it makes is
registered as ``mysql-<name>``. ``configure`` gives it the connection settings (``streamer run``
does at start); ``load`` fills tables from a connection at hand.
"""
from __future__ import annotations

import codecs
import logging
import threading
from typing import Any, Callable, Dict, List, Optional

from streamer.source import decoders

log = logging.getLogger(__name__)

SINGLE_BYTE: List[str] = ["dec8", "hp8", "swe7", "armscii8", "keybcs2", "geostd8", "macce",
                          "koi8u", "greek", "hebrew", "cp866", "tis620", "cp1256"]
MULTI_BYTE: List[str] = ["big5", "ujis", "euckr", "eucjpms"]
_THREE_BYTE = {"ujis": 0x8F, "eucjpms": 0x8F}  # the lead byte of their three-byte sequences
SERVER_DEFINED = SINGLE_BYTE + MULTI_BYTE
# The names python-mysql-replication gives a column's charset where they are not the server's.
LIBRARY_NAMES = {"koi8_u": "koi8u"}
_ALL_BYTES = bytes(range(256)).hex()
_tables: Dict[str, Any] = {}  # codec name -> a charmap string, or (two-byte, three-byte) dicts
_lock = threading.Lock()
_refused: set = set()  # charsets the server gave no table for: not asked again


def _multibyte_codec(name: str, two: Dict[int, str], three: Dict[int, str]
                     ) -> codecs.CodecInfo:
    lead3 = _THREE_BYTE.get(name[len("mysql-"):], -1)

    def decode(data: Any, errors: str = "strict") -> Any:
        data = bytes(data)
        out: List[str] = []
        i, n = 0, len(data)
        while i < n:
            b = data[i]
            if b < 0x80:
                out.append(chr(b))
                i += 1
                continue
            if b == lead3 and i + 2 < n:
                ch = three.get(data[i + 1] << 8 | data[i + 2])
                if ch is not None:
                    out.append(ch)
                    i += 3
                    continue
            ch = two.get(b << 8 | data[i + 1]) if i + 1 < n else None
            if ch is None:  # the error handler says how many bytes: "mysql-replace", one '?'
                ch, i = codecs.lookup_error(errors)(UnicodeDecodeError(
                    name, data, i, i + 1, "no such character in the server's table"))
                out.append(ch)
                continue
            out.append(ch)
            i += 2
        return "".join(out), len(data)

    def encode(text: str, errors: str = "strict") -> Any:
        raise UnicodeError(f"{name} is decoded only")

    return codecs.CodecInfo(encode, decode, name=name)


def _search(name: str) -> Optional[codecs.CodecInfo]:
    table = _tables.get(name.replace("_", "-"))
    if table is None:
        return None
    if isinstance(table, tuple):
        return _multibyte_codec(name, *table)
    encoding = codecs.charmap_build(table)

    def decode(data: Any, errors: str = "strict") -> Any:
        return codecs.charmap_decode(data, errors, table)

    def encode(text: str, errors: str = "strict") -> Any:
        return codecs.charmap_encode(text, errors, encoding)

    return codecs.CodecInfo(encode, decode, name=name)


codecs.register(_search)


def _convert(cur: Any, charset: str, sequences: List[bytes]) -> List[Optional[str]]:
    """The server's reading of each byte sequence in ``charset``: one character, or None."""
    exprs = ", ".join(f"CONVERT(CONVERT(X'{s.hex()}' USING {charset}) USING utf8mb4)"
                      for s in sequences)
    cur.execute(f"SELECT {exprs}")
    row = cur.fetchone()
    out: List[Optional[str]] = []
    for value in row:
        if isinstance(value, bytes):
            value = value.decode("utf-8")
        out.append(value if isinstance(value, str) and len(value) == 1 and value != "?"
                   else None)
    return out


def _build(cur: Any, name: str) -> Any:
    if name in SINGLE_BYTE:
        cur.execute(f"SELECT CONVERT(CONVERT(UNHEX('{_ALL_BYTES}') USING {name}) "
                    f"USING utf8mb4)")
        row = cur.fetchone()
        text = row[0] if row else None
        if isinstance(text, bytes):
            text = text.decode("utf-8")
        if not isinstance(text, str) or len(text) != 256:
            raise ValueError(f"the server's {name} table has {len(text or '')} characters")
        return text
    two: Dict[int, str] = {}
    for lead in range(0x81, 0x100):
        pairs = [bytes([lead, trail]) for trail in range(0x40, 0x100)]
        for pair, ch in zip(pairs, _convert(cur, name, pairs)):
            if ch is not None:
                two[pair[0] << 8 | pair[1]] = ch
    three: Dict[int, str] = {}
    lead3 = _THREE_BYTE.get(name)
    if lead3 is not None:
        for second in range(0xA1, 0xFF):
            triples = [bytes([lead3, second, third]) for third in range(0xA1, 0xFF)]
            for triple, ch in zip(triples, _convert(cur, name, triples)):
                if ch is not None:
                    three[triple[1] << 8 | triple[2]] = ch
    return two, three


def load(conn: Any, names: Optional[List[str]] = None) -> List[str]:
    """Fill the tables of ``names`` (every server-defined charset by default) from ``conn``;
    the charsets loaded. One the server doesn't have is left out: no column can use it."""
    loaded = []
    for name in names if names is not None else SERVER_DEFINED:
        codec = f"mysql-{name}"
        if codec not in _tables:
            try:
                with conn.cursor() as cur:
                    _tables[codec] = _build(cur, name)
            except Exception as exc:  # noqa: BLE001 - an unknown charset; the rest still load
                log.debug("charset %s not loaded from the server: %s", name, exc)
                continue
        decoders.CODEC_OF[name] = codec
        for alias, charset in LIBRARY_NAMES.items():
            if charset == name:
                decoders.CODEC_OF[alias] = codec
        loaded.append(name)
    return loaded


def configure(settings: Callable[[], Dict[str, Any]],
              connect: Callable[[Dict[str, Any]], Any]) -> None:
    """Where to ask for a table the first time a value needs it (source.decoders calls back):
    ``settings()`` gives the connection settings of the server in use at that time."""
    def ensure(name: str) -> Optional[str]:
        name = LIBRARY_NAMES.get(name, name)
        with _lock:
            if f"mysql-{name}" not in _tables and name not in _refused:
                conn = connect(settings())
                try:
                    if load(conn, [name]):
                        log.info("charset %s: decoded by the server's table", name)
                    else:  # asked once: its values are then refused, naming the column
                        _refused.add(name)
                finally:
                    conn.close()
            return decoders.CODEC_OF.get(name)

    decoders.SERVER_TABLE = ensure
    decoders.SERVER_TABLE_NAMES = frozenset(SERVER_DEFINED + list(LIBRARY_NAMES))
