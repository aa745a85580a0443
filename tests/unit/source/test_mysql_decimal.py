"""DECIMAL as MySQL packs it in the binlog, decoded without the library's string round trip."""
import decimal
import random

import pytest

from streamer.source.decoders import decimal_layout, decimal_unscaled, make_decimal

_BYTES_FOR = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def mysql_pack(text: str, precision: int, scale: int) -> bytes:
    """The server's decimal2bin, written from its description: integral digits grouped by 9 from
    the point leftwards, fractional by 9 rightwards, each group big-endian in as few bytes as hold
    it; then the sign bit toggled, and every bit inverted for a negative value."""
    negative = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    integral = precision - scale
    whole = whole.rjust(integral, "0")
    frac = frac.ljust(scale, "0")
    parts = []
    lead = integral % 9
    if lead:
        parts.append((_BYTES_FOR[lead], whole[:lead]))
    parts += [(4, whole[i:i + 9]) for i in range(lead, integral, 9)]
    parts += [(4, frac[i:i + 9]) for i in range(0, scale - scale % 9, 9)]
    if scale % 9:
        parts.append((_BYTES_FOR[scale % 9], frac[scale - scale % 9:]))
    raw = bytearray(b"".join(int(d).to_bytes(n, "big") for n, d in parts))
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    return bytes(raw)


def decode(raw: bytes, precision: int, scale: int) -> decimal.Decimal:
    size, groups = decimal_layout(precision, scale)
    assert size == len(raw)
    return make_decimal(*decimal_unscaled(raw, groups), scale)


@pytest.mark.parametrize("text, precision, scale, packed", [
    # The example in the server's decimal.cc: 1234567890.1234 as DECIMAL(14,4).
    ("1234567890.1234", 14, 4, "810dfb38d204d2"),
    ("-1234567890.1234", 14, 4, "7ef204c72dfb2d"),
    ("0.0000", 12, 4, "800000000000"),
])
def test_the_documented_packings_decode(text, precision, scale, packed):
    raw = bytes.fromhex(packed)
    assert mysql_pack(text, precision, scale) == raw
    got = decode(raw, precision, scale)
    assert got == decimal.Decimal(text)
    assert str(got) == text  # same exponent as Decimal(text): scale digits after the point


def test_random_values_round_trip_with_the_columns_exponent():
    rng = random.Random(7)
    for precision, scale in [(1, 0), (9, 0), (10, 0), (12, 4), (10, 2), (18, 9), (19, 10),
                             (20, 0), (30, 15), (65, 30), (65, 0), (38, 38)]:
        for _ in range(300):
            digits = "".join(rng.choice("0123456789") for _ in range(precision))
            text = (digits[:precision - scale] or "0") + ("." + digits[precision - scale:] if scale else "")
            text = text.lstrip("0") or "0"
            if text.startswith("."):
                text = "0" + text
            if rng.random() < 0.5 and decimal.Decimal(text) != 0:
                text = "-" + text
            got = decode(mysql_pack(text, precision, scale), precision, scale)
            want = decimal.Decimal(text)
            assert got == want and got.as_tuple().exponent == -scale, (precision, scale, text, got)


def test_the_decimals_built_are_the_decimal_modules_own_type():
    assert type(make_decimal(1, 5, 2)) is decimal.Decimal
