"""MySQL's partial JSON updates (``binlog_row_value_options=PARTIAL_JSON``), applied to the before image.

With the setting on, an UPDATE that changes a JSON column only through JSON_SET, JSON_REPLACE or
JSON_REMOVE is logged as a ``Partial_update_rows`` event whose after image holds, for that column,
the changes instead of the value. The before image is whole (binlog_row_image=FULL), so the after
value is the before value with the changes applied, as the server applied them.

The changes' format (MySQL's ``json_diff.h``, ``Json_diff_vector::read_binary``): the column value
is a sequence of diffs, each an operation byte (0 REPLACE, 1 INSERT, 2 REMOVE), a length-encoded
path length and the path (``$``, ``.key`` or ``."quoted key"``, ``[n]``, ``[last]``,
``[last-n]``), then, but for REMOVE, a length-encoded value length and the value as binary JSON.

- REPLACE sets the value at an existing path;
- INSERT adds an object member, or inserts into an array at the index (at its end past it);
- REMOVE deletes the member or element.

The before value is the text ``source.mysqljson`` writes (as ``SELECT`` shows it): it is parsed
back with every number kept as the text it was written as, changed, and written again in the
same form, object members in MySQL's order (shorter keys first, then by their bytes), as the
server stores them.
"""
from __future__ import annotations

import json
import re
from typing import Any, List, Optional, Tuple, Union

from streamer.errors import UnsupportedValue
from streamer.source import lenenc, mysqljson

REPLACE, INSERT, REMOVE = 0, 1, 2
Leg = Union[str, int, Tuple[str, int]]  # a member key, an index, or ("last", n) for last-n


class Number(str):
    """A JSON number, kept as the text it was written as."""


class Diffs:
    """A JSON column's partial update: (operation, path legs, new value or None) in order."""

    __slots__ = ("ops",)

    def __init__(self, ops: List[Tuple[int, List[Leg], Any]]) -> None:
        self.ops = ops

    def __repr__(self) -> str:
        return f"Diffs({self.ops!r})"


def read(data: bytes) -> Diffs:
    """The diffs of one partial column value (its bytes after the length)."""
    ops: List[Tuple[int, List[Leg], Any]] = []
    at = 0
    while at < len(data):
        op = data[at]
        if op not in (REPLACE, INSERT, REMOVE):
            raise UnsupportedValue(f"a partial JSON update has an operation {op} MySQL does not "
                                   f"define (0 replace, 1 insert, 2 remove)")
        size, at = lenenc.read(data, at + 1)
        path = parse_path(data[at:at + size].decode("utf-8"))
        at += size
        value = None
        if op != REMOVE:
            size, at = lenenc.read(data, at)
            value = parse(mysqljson.to_text(data[at:at + size]))
            at += size
        ops.append((op, path, value))
    return Diffs(ops)


_LEG = re.compile(r'\.(?:"((?:[^"\\]|\\.)*)"|([^.\[\s]+))|\[\s*(?:(\d+)|last(?:\s*-\s*(\d+))?)\s*\]')


def parse_path(text: str) -> List[Leg]:
    """The legs of a simple path: member keys, array indexes, ("last", n) for ``[last-n]``."""
    if not text.startswith("$"):
        raise UnsupportedValue(f"a partial JSON update's path {text!r} does not start with $")
    legs: List[Leg] = []
    at = 1
    while at < len(text):
        m = _LEG.match(text, at)
        if m is None:
            raise UnsupportedValue(f"a partial JSON update's path {text!r} has a part the "
                                   f"streamer can't read at {text[at:]!r}")
        quoted, bare, index, back = m.groups()
        if quoted is not None:
            legs.append(json.loads(f'"{quoted}"'))
        elif bare is not None:
            legs.append(bare)
        elif index is not None:
            legs.append(int(index))
        else:
            legs.append(("last", int(back or 0)))
        at = m.end()
    return legs


def parse(text: str) -> Any:
    """JSON text as Python values, numbers kept as their text (``Number``)."""
    return json.loads(text, parse_int=Number, parse_float=Number)


def render(value: Any) -> str:
    """JSON text as a MySQL client shows it: ``{"a": 1, "b": [true, null]}``."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{json.dumps(k, ensure_ascii=False)}: {render(v)}"
                               for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ", ".join(render(v) for v in value) + "]"
    if isinstance(value, Number):
        return str(value)
    if value is True:
        return "true"
    if value is False:
        return "false"
    if value is None:
        return "null"
    return json.dumps(value, ensure_ascii=False)


def _sorted(members: dict) -> dict:
    """An object's members in MySQL's order: shorter keys first, then by their utf8mb4 bytes."""
    return dict(sorted(members.items(), key=lambda kv: (len(kv[0].encode("utf-8")),
                                                        kv[0].encode("utf-8"))))


def _index(leg: Leg, array: list) -> int:
    if isinstance(leg, tuple):
        return len(array) - 1 - leg[1]
    return leg


def apply(before: Optional[str], diffs: Diffs) -> str:
    """The after value: ``before`` (JSON text) with ``diffs`` applied."""
    if before is None:
        raise UnsupportedValue("a partial JSON update of a column whose value before it is null "
                               "or not in the row image (binlog_row_image=FULL is needed)")
    doc = parse(before)
    for op, path, value in diffs.ops:
        if not path:
            if op == REMOVE:
                raise UnsupportedValue("a partial JSON update removes the whole document")
            doc = value
            continue
        parent = doc
        for leg in path[:-1]:
            parent = parent[_index(leg, parent)] if isinstance(parent, list) else parent[leg]
        last = path[-1]
        if isinstance(parent, list):
            i = _index(last, parent)
            if op == REMOVE:
                del parent[i]
            elif op == INSERT:
                parent.insert(min(i, len(parent)), value)
            else:
                parent[i] = value
        elif isinstance(parent, dict):
            if op == REMOVE:
                del parent[last]
            else:
                new = last not in parent
                parent[last] = value
                if new:
                    sorted_members = _sorted(parent)
                    parent.clear()
                    parent.update(sorted_members)
        else:
            raise UnsupportedValue(f"a partial JSON update's path leads into a scalar: {path!r}")
    return render(doc)


def resolve(rows: List[dict]) -> None:
    """A Partial_update_rows event's rows, in place: each partial after value becomes the whole
    value (the before value with its diffs applied)."""
    for row in rows:
        after = row["after_values"]
        for name, value in after.items():
            if value.__class__ is Diffs:
                try:
                    after[name] = apply(row["before_values"].get(name), value)
                except (KeyError, IndexError, TypeError) as exc:
                    raise UnsupportedValue(f"column {name}: a partial JSON update does not fit "
                                           f"the value before it ({exc!r}): {value!r}") from exc
