"""How a config key is declared, and the typed view the code reads a config through.

A key is declared once, as a ``Key``: its default, its check (what is allowed, in words), its
unit and one line of doc. ``config.KEYS`` declares every key with these. What ``config.load``
returns is a ``Config``: the checked values as a mapping (as YAML and the environment gave them),
and as attributes with their units converted, so a reader never converts at the use site:

    cfg.batch.linger_s          # batch.linger_ms, in seconds (a float)
    cfg.mysql.tls.mode          # a section inside a section
    cfg.kafka                   # a mapping of the user's own keys (librdkafka settings)

A view reads the mapping when an attribute is read, so a test that changes a value in the
mapping sees it in the view. Nothing here imports anything heavy: PyPy's start reads this module.
"""
from __future__ import annotations

import copy
import re
from argparse import ArgumentTypeError
from typing import Any, Callable, Dict, Iterator, Optional, Tuple, Union


class Check:
    """What a key allows: ``ok(value)`` and ``allowed``, the words an error shows."""

    __slots__ = ("ok", "allowed")

    def __init__(self, ok: Callable[[Any], bool], allowed: str) -> None:
        self.ok = ok
        self.allowed = allowed


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def number(minimum: float = 0, above: bool = True, allowed: Optional[str] = None) -> Check:
    """A number above ``minimum`` (or at least it, with ``above`` False)."""
    words = allowed or (f"a number > {minimum:g}" if above else f"a number >= {minimum:g}")
    if above:
        return Check(lambda v: _is_number(v) and v > minimum, words)
    return Check(lambda v: _is_number(v) and v >= minimum, words)


def whole(lo: int, hi: Optional[int] = None, allowed: Optional[str] = None) -> Check:
    """A whole number in lo..hi (no upper bound without ``hi``)."""
    words = allowed or (f"a whole number >= {lo}" if hi is None else f"a whole number {lo}..{hi}")
    return Check(lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v
                 and (hi is None or v <= hi), words)


def flag() -> Check:
    return Check(lambda v: isinstance(v, bool), "true or false")


def choice(*values: Any, allowed: Optional[str] = None) -> Check:
    return Check(lambda v: v in values, allowed or ", ".join(str(v) for v in values))


def matches(pattern: str, allowed: str, optional: bool = False) -> Check:
    rx = re.compile(pattern)
    return Check(lambda v: (optional and v is None) or (isinstance(v, str) and bool(rx.match(v))),
                 allowed)


def text(optional: bool = False, allowed: Optional[str] = None) -> Check:
    """A string (or, ``optional``, null)."""
    return Check(lambda v: (optional and v is None) or isinstance(v, str),
                 allowed or ("a string, or null" if optional else "a string"))


def path(allowed: str = "a file's path") -> Check:
    """Null or a non-empty path."""
    return Check(lambda v: v is None or (isinstance(v, str) and v != ""), allowed + ", or null")


def some(allowed: str, ok: Callable[[Any], bool] = lambda v: True) -> Check:
    """Any value ``ok`` takes; a cross-key rule in ``config.RULES`` may check more."""
    return Check(ok, allowed)


# Units a view converts. "ms": the key ``x_ms`` reads as ``x_ms`` and, in seconds, as ``x_s``.
# "s" reads as a float; counted things as ints.
_CASTS: Dict[Optional[str], Callable[[Any], Any]] = {"s": float, "count": int, "bytes": int}


class Key:
    """One config key: default, check, unit ("s", "ms", "count", "bytes" or None) and doc.
    ``relative``: a path, taken relative to the config file's folder. ``fix``: how the checked
    value is normalised (e.g. upper-cased)."""

    __slots__ = ("default", "check", "doc", "unit", "relative", "fix")

    def __init__(self, default: Any, check: Check, doc: str, unit: Optional[str] = None,
                 relative: bool = False, fix: Optional[Callable[[Any], Any]] = None) -> None:
        if unit not in (None, "ms") and unit not in _CASTS:
            raise ValueError(f"unknown unit {unit!r}")
        self.default = default
        self.check = check
        self.doc = doc
        self.unit = unit
        self.relative = relative
        self.fix = fix


class Free:
    """A mapping whose keys are the user's (librdkafka settings, column patterns), not config
    keys: merged key by key, checked by a rule. ``what`` names its entries in errors."""

    __slots__ = ("default", "doc", "what")

    def __init__(self, default: Dict[str, Any], doc: str, what: str) -> None:
        self.default = default
        self.doc = doc
        self.what = what


Entry = Union[Key, Free, "Section"]


class Section:
    """A mapping of keys, free mappings and sections, with one line of doc."""

    __slots__ = ("doc", "entries", "aliases")

    def __init__(self, doc: str, entries: Dict[str, Entry]) -> None:
        self.doc = doc
        self.entries = entries
        # "linger_s" -> "linger_ms": the seconds of a millisecond key.
        self.aliases = {name[:-3] + "_s": name for name, e in entries.items()
                        if isinstance(e, Key) and e.unit == "ms"}
        clash = set(self.aliases) & set(entries)
        if clash:
            raise ValueError(f"keys {sorted(clash)} clash with millisecond keys' seconds")

    def defaults(self) -> Dict[str, Any]:
        return {name: (e.defaults() if isinstance(e, Section) else copy.deepcopy(e.default))
                for name, e in self.entries.items()}

    def walk(self, prefix: str = "") -> Iterator[Tuple[str, Entry]]:
        """(dotted name, entry) of every entry, depth first, sections before their keys."""
        for name, e in self.entries.items():
            yield prefix + name, e
            if isinstance(e, Section):
                yield from e.walk(prefix + name + ".")

    def read(self, data: Dict[str, Any], name: str, where: str) -> Any:
        """The attribute ``name`` of the section whose values are ``data``."""
        e = self.entries.get(name)
        if e is None:
            seconds = self.aliases.get(name)
            if seconds is None:
                raise AttributeError(f"config section '{where[:-1] or '(top)'}' has no key "
                                     f"'{name}'")
            return float(data[seconds]) / 1000.0
        value = data[name]
        if isinstance(e, Section):
            return View(value, e, where + name + ".")
        cast = _CASTS.get(e.unit) if isinstance(e, Key) else None
        return value if cast is None or value is None else cast(value)


class View:
    """A section read as attributes (``cfg.batch.linger_s``)."""

    __slots__ = ("_data", "_section", "_where")

    def __init__(self, data: Dict[str, Any], section: Section, where: str) -> None:
        self._data = data
        self._section = section
        self._where = where

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._section.read(self._data, name, self._where)

    def mapping(self) -> Dict[str, Any]:
        """The section's values as a plain mapping (a copy)."""
        return copy.deepcopy(self._data)

    def __repr__(self) -> str:
        return f"<config section {self._where[:-1]}>"


def argument(kind: type, low: float, above: bool = False, high: Optional[float] = None
            ) -> Callable[[str], Any]:
    """An argparse type, for the commands' options: a finite number of ``kind`` from ``low`` (or
    ``above`` it) up to ``high``. NaN would pass every comparison a limit is used in (a verdict
    that can't fail), and argparse's own ``float`` takes it."""
    def parse(text: str) -> Any:
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or value != value or value in (float("inf"), float("-inf")) or \
                value < low or (above and value == low) or (high is not None and value > high):
            span = f"from {low:g} to {high:g}" if high is not None else \
                f"above {low:g}" if above else f"of at least {low:g}"
            raise ArgumentTypeError(
                f"{text!r} is not {'a whole number' if kind is int else 'a number'} {span}")
        return value
    parse.__name__ = kind.__name__  # argparse names the type in its own messages
    return parse
