"""SQL text as tokens: names unquoted, strings and comments told apart, keywords upper-cased.

What source.dml reads statements and routine bodies with. An executable comment's text
(``/*!40000 ... */``, MariaDB's ``/*M!... */``) is read as the server runs it: as text. And the
names source.rowless's patterns find, unquoted the same way (``unquote``, ``table_named``).
"""
from __future__ import annotations

import re
from typing import List, NamedTuple, Optional, Tuple

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<xopen>/\*M?!\d*)                      # an executable comment: its text runs
  | (?P<comment>/\*.*?\*/|--(?:\s[^\n]*)?(?:\n|$)|\#[^\n]*)
  | (?P<q>`(?:[^`]|``)*`)
  | (?P<s>'(?:[^'\\]|\\.|'')*')
  | (?P<d>"(?:[^"\\]|\\.|"")*")              # a string, or a name under ANSI_QUOTES
  | (?P<w>[\w$]+)
  | (?P<xclose>\*/)
  | (?P<p>.)
""", re.X | re.S)
_SKIPPED = ("space", "xopen", "comment", "xclose")


class Token(NamedTuple):
    kind: str   # w (a bare word), q (`quoted`), d ("quoted"), s ('string'), p (punctuation)
    text: str   # a name as the server knows it, quotes taken off
    up: str     # a bare word in upper case (a keyword's spelling), else ""


def tokens(sql: str) -> List[Token]:
    out = []
    for m in _TOKEN.finditer(sql):
        kind = m.lastgroup
        if kind in _SKIPPED:
            continue
        text = m.group()
        if kind == "q":
            text = text[1:-1].replace("``", "`")
        elif kind == "d":
            text = text[1:-1].replace('""', '"')
        out.append(Token(kind, text, text.upper() if kind == "w" else ""))
    return out


def first_word(sql: str) -> str:
    """The statement's first word, in upper case ("" if it starts with no bare word)."""
    for m in _TOKEN.finditer(sql):
        if m.lastgroup not in _SKIPPED:
            return m.group().upper() if m.lastgroup == "w" else ""
    return ""


def unquote(part: str) -> str:
    """An identifier as the server knows it: back-quotes taken off, doubled ones made one."""
    return part[1:-1].replace("``", "`") if part.startswith("`") else part


def table_named(first: str, second: Optional[str], default_db: str) -> Tuple[str, str]:
    """(db, table) of a statement's ``first[.second]`` table name, in ``default_db`` if bare."""
    if second is None:
        return default_db, unquote(first)
    return unquote(first), unquote(second)
