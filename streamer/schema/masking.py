"""Columns kept out of Kafka: ``tables.columns.exclude`` drops them, ``tables.columns.mask`` masks them.

Patterns are ``db.table.column`` globs. Database and table match case-sensitively, as the table
patterns do; the column matches without case, as MySQL compares column names. Exclusion wins over
a mask; among masks, the first pattern that matches (in the config's order) decides.

Each rule is resolved once per table version (``schema.versions.TableVersion``): the hot path then
pays only for the columns masked, through the same converter list that every column goes through.

The methods, and what they do to the column's Avro type:

- ``hash``: the HMAC-SHA256 of the value, keyed by the salt (``tables.columns.salt_env`` or
  ``salt_file``, never argv), as 64 hex digits. The type becomes ``string``. The value hashed is
  the one that would have been published unmasked, as UTF-8 text (bytes as they are, numbers in
  their decimal form), so equal values give equal hashes on every path and a hashed primary key
  still tells rows apart.
- ``null``: the column stays, nullable, and is always null. Its type is unchanged, so lifting
  the mask later is a compatible change.
- ``truncate:N``: text keeps its first N characters, bytes their first N bytes; the type is
  unchanged. Other types refuse it (a config error naming the column).
"""
from __future__ import annotations

import fnmatch
import hashlib
import hmac
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from streamer.config import Config, Rule, parse_method, split_pattern
from streamer.errors import ConfigError


# The doc string of a masked column's field, by method (the field's "streamer.mask" says which).
DOCS = {
    "hash": "masked by tables.columns.mask: HMAC-SHA256 of the value, hex",
    "null": "masked by tables.columns.mask: always null",
    "truncate": "masked by tables.columns.mask: the value's first characters (bytes) only",
}


class ColumnRules:
    """Which rule, if any, applies to a column; the salt for ``hash``."""

    def __init__(self, exclude: Sequence[str], mask: Dict[str, str], salt: Optional[bytes] = None,
                 key_columns: Optional[Dict[str, List[str]]] = None):
        # tables.key_columns: 'db.table' -> the columns whose values are its messages' key.
        self._key_columns = dict(key_columns or {})
        self._rules: List[Tuple[Tuple[str, str, str], Rule]] = []
        for pattern in exclude:
            globs = split_pattern(pattern)
            assert globs is not None, pattern  # config.validate checked it
            self._rules.append((globs, Rule("exclude", 0)))
        for pattern, method in mask.items():
            globs, rule = split_pattern(pattern), parse_method(method)
            assert globs is not None and rule is not None, pattern
            self._rules.append((globs, rule))
        self.salt = salt
        self._tables: Dict[Tuple[str, str], List[Tuple[str, Rule]]] = {}

    @classmethod
    def from_config(cls, cfg: Config, salt: Optional[bytes]) -> "ColumnRules":
        """The rules of ``tables.columns``; ``salt`` is ``config.mask_salt(cfg)``."""
        cols = cfg.tables.columns
        return cls(cols.exclude, cols.mask, salt, cfg.tables.key_columns)

    def key_columns(self, db: str, table: str) -> Optional[List[str]]:
        """The columns tables.key_columns makes the key of ``db.table``, or None."""
        return self._key_columns.get(f"{db}.{table}") if self._key_columns else None

    def __bool__(self) -> bool:
        return bool(self._rules)

    def rule(self, db: str, table: str, column: str) -> Optional[Rule]:
        by_table = self._tables.get((db, table))
        if by_table is None:
            by_table = [(c, r) for (d, t, c), r in self._rules
                        if fnmatch.fnmatchcase(db, d) and fnmatch.fnmatchcase(table, t)]
            self._tables[(db, table)] = by_table
        name = column.lower()
        for glob, rule in by_table:
            if fnmatch.fnmatchcase(name, glob):
                return rule
        return None

    def masker(self, rule: Rule, avro_type: Any, where: str) -> Callable[[Any], Any]:
        """The function that masks one (converted, non-null) value; ``where`` names the column."""
        if rule.method == "hash":
            if self.salt is None:
                raise ConfigError(f"column {where} is masked with 'hash', which needs a salt: set "
                                  f"tables.columns.salt_env or tables.columns.salt_file")
            return _hasher(self.salt)
        if rule.method == "truncate":
            if avro_type not in ("string", "bytes"):
                raise ConfigError(f"column {where} can't be masked with '{rule.describe()}': "
                                  f"truncate applies to text and binary columns only; use "
                                  f"'hash' or 'null' for it")
            n = rule.length
            return lambda v: v[:n]
        raise ValueError(rule)


def _hasher(salt: bytes) -> Callable[[Any], str]:
    keyed = hmac.new(salt, digestmod=hashlib.sha256)

    def digest(value: Any) -> str:
        h = keyed.copy()
        if value.__class__ is str:
            h.update(value.encode("utf-8"))
        elif value.__class__ is bytes:
            h.update(value)
        else:
            h.update(str(value).encode("utf-8"))
        return h.hexdigest()
    return digest


def after(conv: Optional[Callable[[Any], Any]], mask: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """``mask`` applied to what ``conv`` (the column's converter, if it has one) returns."""
    if conv is None:
        return mask

    def both(value: Any) -> Any:
        return mask(conv(value))
    return both
