"""MySQL's length-encoded integer, as its binlog writes one inside an event body (a partial JSON
diff's lengths, a Transaction_payload's field sizes): one byte below 0xFB, else 0xFC, 0xFD or
0xFE and 2, 3 or 8 little-endian bytes."""
from typing import Tuple

_WIDTH = {0xFC: 2, 0xFD: 3, 0xFE: 8}


def read(data: bytes, at: int) -> Tuple[int, int]:
    """The integer at ``data[at]`` and the offset after it."""
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    width = _WIDTH[first]
    return int.from_bytes(data[at + 1:at + 1 + width], "little"), at + 1 + width


def write(n: int) -> bytes:
    """``n`` as a length-encoded integer (what ``read`` reads)."""
    if n < 0xFB:
        return bytes((n,))
    for first, width in _WIDTH.items():
        if n < 1 << (8 * width):
            return bytes((first,)) + n.to_bytes(width, "little")
    raise ValueError(f"{n} is too large for a length-encoded integer")
