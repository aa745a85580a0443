"""Corrections to python-mysql-replication's value decoding, applied once at import.

Each fix names the wrong behaviour it replaces and is covered by the type round-trip tests.

- TIME(1..6) with a negative value: the library reads the integer and fractional parts
  separately, so '-00:00:00.000001' came back as -0.999999 s. MySQL packs both parts into
  one offset integer (see the server's my_time.cc); we decode it as such.
"""
from __future__ import annotations

import datetime
from typing import Any

from pymysqlreplication.row_event import RowsEvent

_TIMEF_INT_OFS = 0x800000
_TIMEF_OFS = 0x800000000000


def time2_from_packed(packed: int) -> datetime.timedelta:
    """A MySQL 'packed' TIME (hms << 24 | microseconds, signed) as a timedelta."""
    sign = -1 if packed < 0 else 1
    packed = abs(packed)
    hms = packed >> 24
    micro = packed & 0xFFFFFF
    hours = (hms >> 12) & 0x3FF
    minutes = (hms >> 6) & 0x3F
    seconds = hms & 0x3F
    return sign * datetime.timedelta(hours=hours, minutes=minutes, seconds=seconds,
                                     microseconds=micro)


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


def _read_time2(self: Any, column: Any) -> datetime.timedelta:
    fsp = column.fsp or 0
    raw = self.packet.read(3 + (fsp + 1) // 2)
    return time2_from_packed(time2_packed_from_binary(raw, fsp))


def apply() -> None:
    RowsEvent._RowsEvent__read_time2 = _read_time2  # type: ignore[attr-defined]
