"""Schema evolution between two versions of one table: the nullability rule and the change report.

The rules (docs/schemas.md explains them for consumers):

- A column that is new to a table's lineage (absent from the previous version the streamer saw)
  is nullable with default null, even when MySQL declares it NOT NULL, so a reader holding the new
  schema reads older messages (the column comes back null).
- Nullability is sticky: a column nullable in the previous version stays nullable, so a MODIFY to
  NOT NULL can't make older messages unreadable.
- Everything else follows MySQL. Drops, renames (a drop plus an add: the binlog carries no rename),
  type changes and primary-key changes are reported; the ones a reader can't bridge are warnings.

"Previous version" is memory: it depends on where the run started. Replaying the same binlog from
the same start therefore gives the same schemas, byte for byte, and a resumed run gets the memory
back from the schema topic (``lineage_from_records``).
"""
from __future__ import annotations

import hashlib
import json
import logging
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

log = logging.getLogger(__name__)

Field = Dict[str, Any]

# Avro's own promotions (a reader of the wider type reads the narrower writer's data).
_PROMOTIONS = {("int", "long"), ("int", "float"), ("int", "double"), ("long", "float"),
               ("long", "double"), ("float", "double"), ("string", "bytes"), ("bytes", "string")}


class Previous(NamedTuple):
    """What the evolution rules need to know about a table's previous version."""

    fields: Dict[str, Field]
    pk: Optional[List[str]]  # None: unknown (the version came from the schema topic)


class Change(NamedTuple):
    text: str
    breaking: bool


def previous_of(row_fields: Sequence[Field], pk: Optional[Sequence[str]]) -> Previous:
    return Previous({f["name"]: f for f in row_fields}, None if pk is None else list(pk))


def is_nullable(field: Field) -> bool:
    t = field["type"]
    return isinstance(t, list) and "null" in t


def nullable_by_lineage(name: str, previous: Optional[Previous]) -> bool:
    """True when the rules above force the column to be nullable in the new version."""
    if previous is None:
        return False
    old = previous.fields.get(name)
    return old is None or is_nullable(old)


def base_type(field: Field) -> Any:
    t = field["type"]
    if isinstance(t, list):
        return next(b for b in t if b != "null")
    return t


def short_hash(fields: Sequence[Field]) -> str:
    """8 hex digits naming one exact field list (logical types and attributes included).

    The Parsing Canonical Form behind the fingerprint drops logical types, so DATETIME and
    TIMESTAMP (both ``long``) or DECIMAL(10,2) and DECIMAL(12,4) (both ``bytes``) would share a
    fingerprint. Putting this hash in the record's namespace makes the canonical forms differ.
    """
    text = json.dumps(list(fields), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:8]


def _type_change(old: Any, new: Any) -> Optional[Change]:
    if old == new:
        return None
    if isinstance(old, str) and isinstance(new, str) and (old, new) in _PROMOTIONS:
        return Change(f"{old} -> {new} (Avro promotion: new readers read old data)", False)
    return Change(f"{json.dumps(old, sort_keys=True)} -> {json.dumps(new, sort_keys=True)}", True)


def changes(previous: Previous, fields: Sequence[Field], pk: Sequence[str]) -> List[Change]:
    """The differences from the previous version, each marked breaking or not."""
    out: List[Change] = []
    new = {f["name"]: f for f in fields}
    dropped = [n for n in previous.fields if n not in new]
    added = [n for n in new if n not in previous.fields]
    old_order = list(previous.fields)
    new_order = [f["name"] for f in fields]
    for name in added:
        out.append(Change(f"column {name} added (nullable, default null)", False))
    for name in dropped:
        old = previous.fields[name]
        guess = ""
        pos = old_order.index(name)
        if pos < len(new_order) and new_order[pos] in added and \
                base_type(new[new_order[pos]]) == base_type(old):
            guess = f" (a rename to {new_order[pos]}?: readers see a drop and an add)"
        out.append(Change(f"column {name} dropped{guess}", bool(guess) or not is_nullable(old)))
    for name, field in new.items():
        old = previous.fields.get(name)
        if old is None:
            continue
        tc = _type_change(base_type(old), base_type(field))
        if tc is not None:
            out.append(Change(f"column {name} type {tc.text}", tc.breaking))
        if old.get("mysql.type") != field.get("mysql.type") and tc is None:
            out.append(Change(f"column {name} MySQL type {old.get('mysql.type')} -> "
                              f"{field.get('mysql.type')} (same Avro type)", False))
    if previous.pk is not None and list(previous.pk) != list(pk):
        out.append(Change(f"primary key ({', '.join(previous.pk) or 'none'}) -> "
                          f"({', '.join(pk) or 'none'}): message keys change", True))
    return out


def lineage_from_records(records: Sequence[Dict[str, Any]]) -> Dict[str, Previous]:
    """Each topic's last value schema in the schema topic (records in offset order), as the
    previous version for the tables' next versions."""
    out: Dict[str, Previous] = {}
    for rec in records:
        if rec.get("kind") != "value":
            continue
        schema = json.loads(rec["schema"])
        before = next(f for f in schema["fields"] if f["name"] == "before")
        row = next(b for b in before["type"] if isinstance(b, dict))
        out[rec["topic"]] = previous_of(row["fields"], None)
    return out


def schemas_from_records(records: Sequence[Dict[str, Any]]) -> Dict[str, Tuple[Dict[str, Any], bool]]:
    """Each topic's last value schema in the schema topic (records in offset order), and whether
    that version had a key (a version's key record follows its value record)."""
    out: Dict[str, Tuple[Dict[str, Any], bool]] = {}
    for i, rec in enumerate(records):
        if rec.get("kind") == "value":
            following = records[i + 1] if i + 1 < len(records) else {}
            keyed = following.get("kind") == "key" and following.get("topic") == rec["topic"]
            out[rec["topic"]] = (json.loads(rec["schema"]), keyed)
    return out


def report(table: str, found: List[Change]) -> None:
    """Log the changes of a new version: breaking ones as one warning."""
    breaking = [c.text for c in found if c.breaking]
    fine = [c.text for c in found if not c.breaking]
    if fine:
        log.info("table %s: schema change: %s", table, "; ".join(fine), extra={"table": table})
    if breaking:
        log.warning("table %s: schema change NOT backward-compatible: %s. Readers of the old "
                    "schema may fail or misread new messages; see docs/schemas.md",
                    table, "; ".join(breaking), extra={"table": table})
