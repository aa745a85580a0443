"""MySQL's binary value formats, decoded: used by the row plans (source.rowplan), and as fixes to
python-mysql-replication's own readers (source.patches installs them).

Corrections:

- MySQL's latin1 is cp1252 plus five bytes cp1252 leaves undefined; the library decoded it as
  strict cp1252, so a row holding one of them (double-encoded UTF-8 'Á' is C3 81) stopped the
  streamer, again at every restart. UTF-16, UCS-2 and UTF-32 are big-endian in MySQL; the library
  decoded utf16 and utf32 little-endian and had no codec for ucs2 and utf16le. MySQL's gb18030
  is the 2005 edition, Python's codec the 2000 edition's table for one pair of sequences; the
  server's sjis has a backslash where Python's has a fullwidth one.
- TIME(1..6) with a negative value: the library reads the integer and fractional parts
  separately, so '-00:00:00.000001' came back as -0.999999 s. MySQL packs both parts into
  one offset integer (see the server's my_time.cc); we decode it as such.
  (docs/library-fixes.md has the upstream report.)

And speed fixes for the hot path, with the same results (docs/benchmarks.md has the profiles):

- Strings in latin1 went through Python's charmap codec, slow on PyPy. Text that is pure ASCII
  decodes the same in every ASCII-compatible charset, so it takes the ASCII path.
- DECIMAL columns were decoded into a digit string, read by ``Decimal(str)``; PyPy's decimal
  module is pure Python and parses the string with a regular expression. We read the packed
  groups into the unscaled integer and build the Decimal from (sign, digits, exponent), with
  the same value and exponent.
"""
from __future__ import annotations

import codecs
import datetime
import decimal
import sys
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Tuple

_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000


def time2_micros(packed: int) -> int:
    """A MySQL 'packed' TIME (hms << 24 | microseconds, signed) as signed microseconds."""
    magnitude = -packed if packed < 0 else packed
    hms = magnitude >> 24
    micros = (((hms >> 12) & 0x3FF) * 3600 + ((hms >> 6) & 0x3F) * 60 + (hms & 0x3F)) * 1000000 \
        + (magnitude & 0xFFFFFF)
    return -micros if packed < 0 else micros


def time2_from_packed(packed: int) -> datetime.timedelta:
    """A MySQL 'packed' TIME as a timedelta."""
    return datetime.timedelta(microseconds=time2_micros(packed))


def time2_packed_from_binary(raw: bytes, fsp: int) -> int:
    """The packed value of a TIME2 column's binlog bytes (3 + (fsp + 1) // 2 bytes)."""
    if fsp >= 5:
        return int.from_bytes(raw[:6], "big") - _TIMEF_OFS
    intpart = int.from_bytes(raw[:3], "big") - _TIMEF_INT_OFS
    if fsp == 0:
        return intpart << 24
    if fsp <= 2:
        frac = raw[3]
        if intpart < 0 and frac:
            intpart += 1
            frac -= 0x100
        return (intpart << 24) + frac * 10000
    frac = int.from_bytes(raw[3:5], "big")
    if intpart < 0 and frac:
        intpart += 1
        frac -= 0x10000
    return (intpart << 24) + frac * 100


def read_time2(self: Any, column: Any) -> datetime.timedelta:
    fsp = column.fsp or 0
    raw = self.packet.read(3 + (fsp + 1) // 2)
    return time2_from_packed(time2_packed_from_binary(raw, fsp))


_ASCII_COMPATIBLE = frozenset(["latin1", "utf8", "utf8mb3", "utf8mb4", "ascii", "cp1252"])


def _mysql_latin1() -> str:
    """MySQL's latin1 as a charmap decoding table: cp1252, but for the five bytes cp1252 leaves
    undefined (0x81, 0x8D, 0x8F, 0x90, 0x9D), which MySQL maps to the C1 controls of the same
    number (the server's strings/ctype-latin1.c). Every byte decodes, as in the server."""
    table = []
    for byte in range(256):
        try:
            table.append(bytes([byte]).decode("cp1252"))
        except UnicodeDecodeError:
            table.append(chr(byte))
    return "".join(table)


MYSQL_LATIN1 = _mysql_latin1()

# Python codecs that differ from the server's tables in a few characters, and what the server
# has for them: checked against CONVERT on MySQL 8.0 and MariaDB 10.11 and 11.4 for every byte
# pair (and gb18030's four-byte sequences of the BMP); any other sequence decodes alike.
# - gb18030 (MySQL only) is GB18030-2005, which swapped the characters of 0xA8BC and 0x8135F437
#   from the 2000 edition Python's codec keeps: ḿ (U+1E3F) and U+E7C7 (private use).
# - sjis reads 0x815F as the backslash (U+005C), where Python has the fullwidth one (U+FF3C);
#   the server has no character for U+FF3C, so nothing else decodes to it.
_ADJUSTED = {"mysql_gb18030": ("gb18030", {0xE7C7: 0x1E3F, 0x1E3F: 0xE7C7}),
             "mysql_sjis": ("shift_jis", {0xFF3C: 0x5C})}


def _adjusted(name: str) -> Optional[codecs.CodecInfo]:
    found = _ADJUSTED.get(name.replace("-", "_"))  # PyPy 3.9 keeps the hyphen
    if found is None:
        return None
    base, table = found
    python = codecs.lookup(base)
    differ = [chr(c) for c in table]

    def decode(data: Any, errors: str = "strict") -> Tuple[str, int]:
        text, size = python.decode(data, errors)  # its errors name its encoding (_UNITS)
        if any(c in text for c in differ):
            text = text.translate(table)
        return text, size

    def encode(text: str, errors: str = "strict") -> Any:
        raise UnicodeError(f"{name} is decoded only")

    return codecs.CodecInfo(encode, decode, name=name.replace("_", "-"))


codecs.register(_adjusted)
# The codec of each charset the library names where Python's codec of that name is not the
# server's. MySQL's UTF-16, UCS-2 and UTF-32 are big-endian, and utf16le is its own charset: the
# library names these columns' codecs 'utf16' and 'utf32' (to Python: little-endian without a
# byte-order mark), and 'ucs2' and 'utf16le', which Python doesn't know.
CODEC_OF = {"utf16": "utf-16-be", "ucs2": "utf-16-be", "utf16le": "utf-16-le",
            "utf32": "utf-32-be", "gb18030": "mysql-gb18030", "sjis": "mysql-sjis"}
# The charsets whose codec is made from the server's own table the first time a value needs it,
# and what makes it (source.charsets.configure sets both; it adds the codec to CODEC_OF).
SERVER_TABLE_NAMES: FrozenSet[str] = frozenset()
SERVER_TABLE: Optional[Callable[[str], Optional[str]]] = None


def read_string(self: Any, size: int, column: Any) -> Any:
    return decode_string(self, self.packet.read_length_coded_pascal_string(size), column)


def decode_string(self: Any, raw: bytes, column: Any) -> Any:
    """A string column's bytes, of the rows event ``self``, as the text of its charset (a
    binary column's, and a charset's without a codec, as its bytes)."""
    name = column.character_set_name
    if name in _ASCII_COMPATIBLE and raw.isascii():
        return raw.decode("ascii")
    errors = "ignore" if self._ignore_decode_errors else "strict"
    if name is None:
        return raw.decode("utf-8", errors)
    if name == "cp1252":  # the library names MySQL's latin1 by the codec it took it for
        return codecs.charmap_decode(raw, errors, MYSQL_LATIN1)[0]
    encoding = _encoding(name, self)
    if encoding is None:
        # No Python codec (e.g. 'binary', 'swe7'): hand back the stored bytes. Asked of the
        # codec registry, not of a decode: CPython decodes b"" to "" without looking for the
        # codec, so an empty BINARY value (a MariaDB UUID of zeros) came back as text there.
        return raw
    try:
        return raw.decode(encoding, errors)
    except UnicodeDecodeError:
        if errors != "strict":
            raise
        text = raw.decode(encoding, "mysql-replace")
        _undecodable(self, column, raw, text)
        return text


def _encoding(name: str, event: Any) -> Optional[str]:
    """The Python codec of the charset the library names ``name`` (else the one ``event``'s
    class names); None when Python has none."""
    codec = CODEC_OF.get(name)
    if codec is None and name in SERVER_TABLE_NAMES and SERVER_TABLE is not None:
        codec = SERVER_TABLE(name)  # the server's table, asked for once (source.charsets)
    encoding = codec or event.charset_to_encoding(name)
    known = _CODECS.get(encoding)
    if known is None:
        known = _CODECS[encoding] = _has_codec(encoding)
    return encoding if known else None


def decode_text(raw: bytes, name: str, event: Any) -> str:
    """Text that is no stored value (a statement), written in the charset the library names
    ``name``, read with the codecs values are read with; a byte sequence no character stands
    for reads as '?', and a charset Python has no codec for as UTF-8."""
    if name == "cp1252":
        return codecs.charmap_decode(raw, "strict", MYSQL_LATIN1)[0]
    return raw.decode(_encoding(name, event) or "utf-8", "mysql-replace")


def _undecodable(event: Any, column: Any, raw: bytes, text: str) -> None:
    """A stored value with bytes no character of its charset stands for (the server keeps
    them: any byte in an ascii column, a pair its big5 table has no character for): published
    as SELECT shows it, each such character a '?', and counted and logged with its bytes as
    the invalid dates are (rowplan.INVALID), so that they are not lost."""
    packet = event.packet
    note_undecodable(event.schema, event.table, column.name, column.character_set_name, raw,
                     text, f"rows event at offset {packet.log_pos - packet.event_size}")


def note_undecodable(db: str, table: str, column: str, charset: str, raw: bytes, text: str,
                     where: str) -> None:
    """Text of ``charset`` with bytes no character stands for, published as ``text``: counted
    and logged (rowplan.INVALID), by the binlog's reader and a snapshot's alike."""
    from streamer.source.rowplan import INVALID  # rowplan imports this module
    INVALID.note(db, table, column,
                 f"{charset} text (bytes {raw[:64].hex()}{'...' if len(raw) > 64 else ''})",
                 where,
                 published=f"as {text[:64]!r}, a '?' for each character the server has none "
                           f"for, as SELECT shows it",
                 fix="store the text in a charset that has its characters: convert the "
                     "column (to utf8mb4, say) from the charset its bytes are really in")


# The length of one character of a MySQL multibyte charset from its first byte, by the codec
# that reads it: the bytes the server counts as one character ('?' when it has none for them).
# (first bytes, length) in order; a byte none names is one byte long.
_UNITS: Dict[str, List[Tuple[range, Callable[[bytes, int], int]]]] = {}


def _fixed(n: int) -> Callable[[bytes, int], int]:
    return lambda data, i: n


def _utf8(data: bytes, i: int) -> int:
    """One character's bytes from a UTF-8 lead byte: the continuation bytes that follow it, up
    to the length it announces (a UTF-16 surrogate that MariaDB sends as three UTF-8 bytes is
    one '?', as the binlog's ucs2 bytes of it are)."""
    first = data[i]
    size = 2 if first < 0xE0 else 3 if first < 0xF0 else 4
    j = i + 1
    while j < i + size and j < len(data) and 0x80 <= data[j] < 0xC0:
        j += 1
    return j - i


def _gb18030(data: bytes, i: int) -> int:
    return 4 if i + 1 < len(data) and 0x30 <= data[i + 1] <= 0x39 else 2


for _names, _units in (
        (("gbk", "mysql-euckr", "euc_kr"), [(range(0x81, 0xFF), _fixed(2))]),
        (("utf-8",), [(range(0xC2, 0xF5), _utf8)]),
        (("gb2312",), [(range(0xA1, 0xF8), _fixed(2))]),
        (("gb18030",), [(range(0x81, 0xFF), _gb18030)]),
        (("mysql-big5", "big5"), [(range(0xA1, 0xFA), _fixed(2))]),
        (("shift_jis", "cp932"), [(range(0x81, 0xA0), _fixed(2)), (range(0xE0, 0xFD), _fixed(2))]),
        (("mysql-ujis", "mysql-eucjpms", "euc_jp"),
         [(range(0x8F, 0x90), _fixed(3)), (range(0x8E, 0x8F), _fixed(2)),
          (range(0xA1, 0xFF), _fixed(2))])):
    for _name in _names:
        _UNITS[_name.replace("-", "_")] = _units


def _mysql_replace(exc: UnicodeError) -> Tuple[str, int]:
    """The "mysql-replace" error handler: a '?' for the character the server reads at the
    error, as many bytes long as the server takes it to be (``_UNITS``)."""
    if not isinstance(exc, UnicodeDecodeError):
        raise exc
    data, at = exc.object, exc.start
    size = 1
    for first, length in _UNITS.get(exc.encoding.replace("-", "_").lower(), ()):
        if data[at] in first:
            size = length(data, at)
            break
    return "?", min(at + max(size, exc.end - at), len(data))


codecs.register_error("mysql-replace", _mysql_replace)


_CODECS: Dict[str, bool] = {}


def _has_codec(encoding: str) -> bool:
    try:
        codecs.lookup(encoding)
    except LookupError:
        return False
    return True


# MySQL packs a DECIMAL as groups of 9 digits in 4 bytes; a shorter leading integral group and
# trailing fractional group take the fewest bytes that hold their digits (the server's decimal.cc).
_DIG_PER_INT = 9
_BYTES_FOR_DIGITS = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
Layout = Tuple[int, List[Tuple[int, int, int]]]
_layouts: Dict[Tuple[int, int], Layout] = {}


def decimal_layout(precision: int, scale: int) -> Layout:
    """(bytes, [(bit shift, bit mask, 10 ** digits) per group, most significant first]) of a
    DECIMAL(precision, scale), computed once per column type."""
    key = (precision, scale)
    found = _layouts.get(key)
    if found is None:
        integral = precision - scale
        sizes = []  # (bytes, digits)
        if integral % _DIG_PER_INT:
            sizes.append((_BYTES_FOR_DIGITS[integral % _DIG_PER_INT], integral % _DIG_PER_INT))
        sizes += [(4, _DIG_PER_INT)] * (integral // _DIG_PER_INT + scale // _DIG_PER_INT)
        if scale % _DIG_PER_INT:
            sizes.append((_BYTES_FOR_DIGITS[scale % _DIG_PER_INT], scale % _DIG_PER_INT))
        total = sum(n for n, _ in sizes)
        groups = []
        shift = total * 8
        for nbytes, digits in sizes:
            shift -= nbytes * 8
            groups.append((shift, (1 << nbytes * 8) - 1, 10 ** digits))
        found = _layouts[key] = (total, groups)
    return found


def decimal_unscaled(raw: bytes, groups: List[Tuple[int, int, int]]) -> Tuple[int, int]:
    """(sign, unscaled magnitude) of a packed DECIMAL: the top bit is set for a non-negative
    value, and a negative one is stored with every bit inverted."""
    bits = len(raw) * 8
    packed = int.from_bytes(raw, "big") ^ (1 << bits - 1)
    negative = not raw[0] & 0x80
    if negative:
        packed ^= (1 << bits) - 1
    unscaled = 0
    for shift, mask, scale in groups:
        unscaled = unscaled * scale + ((packed >> shift) & mask)
    return (1 if negative else 0), unscaled


def _decimal_factory() -> Callable[[int, int, int], decimal.Decimal]:
    """Decimal from (sign, unscaled, scale), with exponent -scale as Decimal('1.2300') has.
    PyPy's pure-Python decimal builds one from its parts directly; CPython's C decimal parses
    a string fast."""
    # PyPy's decimal star-imports _pydecimal, which keeps the helper to itself; CPython loads
    # its C decimal and not _pydecimal at all.
    pure = sys.modules.get("_pydecimal")
    if pure is not None and decimal.Decimal is pure.Decimal:
        triple = pure._dec_from_triple
        return lambda sign, unscaled, scale: triple(sign, str(unscaled), -scale)
    return lambda sign, unscaled, scale: decimal.Decimal(
        f"{'-' if sign else ''}{unscaled}E-{scale}")


make_decimal = _decimal_factory()


def read_new_decimal(self: Any, column: Any) -> decimal.Decimal:
    scale = column.decimals
    size, groups = decimal_layout(column.precision, scale)
    sign, unscaled = decimal_unscaled(self.packet.read(size), groups)
    return make_decimal(sign, unscaled, scale)
