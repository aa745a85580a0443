"""SQL text as tokens: names unquoted, strings and comments told apart, keywords upper-cased.

What source.dml reads statements and routine bodies with, and source.rowless and
source.truncate the DDL they look for (``table_statement``): a comment anywhere (an
application's ``/* controller=... */`` after the statement) or a string that spells a keyword
(``COMMENT 'drop partition monthly'``) changes no word. An executable comment's text
(``/*!40000 ... */``, MariaDB's ``/*M!... */``) is read as the server runs it: as text.
A statement run with MariaDB's per-statement settings (``SET STATEMENT ... FOR``) is read as
the statement after them.
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
# Whether the server keeps database and table names in lower case whatever case a statement
# writes them in (lower_case_table_names=1), as its table maps give them: the names a statement
# changes are read so too (set at start for the server in use: engine.start).
FOLD_NAMES = False


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
    """The statement's first word, in upper case ("" if it starts with no bare word), past
    MariaDB's per-statement settings (``settings_end``)."""
    for m in _TOKEN.finditer(sql):
        if m.lastgroup not in _SKIPPED:
            word = m.group().upper() if m.lastgroup == "w" else ""
            if word == "SET":
                toks = tokens(sql)
                j = settings_end(toks, 0)
                return toks[j].up if j < len(toks) else ""
            return word
    return ""


def settings_end(toks: List[Token], i: int) -> int:
    """Where the statement begins that MariaDB's ``SET STATEMENT var=value [, ...] FOR`` at
    ``toks[i]`` runs with its settings (as the binlog keeps it: ``SET STATEMENT
    lock_wait_timeout=5 FOR ALTER TABLE ...``, ``SET STATEMENT binlog_format=STATEMENT FOR
    INSERT ...``); ``i`` when no such prefix is there. The settings' values hold no bare FOR
    outside parentheses."""
    if i + 1 < len(toks) and toks[i].up == "SET" and toks[i + 1].up == "STATEMENT":
        depth = 0
        for j in range(i + 2, len(toks)):
            tok = toks[j]
            if tok.kind == "p":
                depth += (tok.text == "(") - (tok.text == ")")
            elif depth == 0 and tok.up == "FOR":
                return j + 1
    return i


def statement_tokens(sql: str) -> List[Token]:
    """A statement's tokens from its verb on: past MariaDB's per-statement settings
    (``settings_end``), a final ``;`` left out."""
    toks = tokens(sql)
    while toks and toks[-1].kind == "p" and toks[-1].text == ";":
        toks.pop()
    return toks[settings_end(toks, 0):]


def may_name(query: str, table: str) -> bool:
    """Whether ``query`` may name ``table``: its name as a word, case aside (a statement's may
    differ from the table map's on a server with lower_case_table_names), as written bare or
    quoted, where a backquote doubles inside backquotes and a double quote inside double quotes
    (ANSI_QUOTES). A cheap test, for what is redone when a table may have changed: naming
    another table of a name like it only costs that."""
    spellings = {table, table.replace("`", "``"), table.replace('"', '""')}
    return any(re.search(r"(?<![\w$])" + re.escape(name) + r"(?![\w$])", query, re.I)
               for name in spellings)


def is_name(tok: Token) -> bool:
    return tok.kind in "wqd"


def name_at(toks: List[Token], j: int, default_db: str) -> Optional[Tuple[str, str, int]]:
    """(db, table, the index after it) of a table name at ``toks[j]``: ``t`` or ``db.t``."""
    if j >= len(toks) or not is_name(toks[j]):
        return None
    if j + 2 < len(toks) and toks[j + 1].text == "." and toks[j + 1].kind == "p" and \
            is_name(toks[j + 2]):
        return toks[j].text, toks[j + 2].text, j + 3
    return default_db, toks[j].text, j + 1


def folded(db: str, name: str) -> Tuple[str, str]:
    """A table's (or routine's) database and name as the server keeps them (``FOLD_NAMES``)."""
    return (db.lower(), name.lower()) if FOLD_NAMES else (db, name)


class TableStatement(NamedTuple):
    verb: str  # ALTER, CREATE or TRUNCATE
    before: List[str]  # the words between the verb and TABLE (ONLINE, OR REPLACE, TEMPORARY...)
    db: str
    table: str
    rest: List[Token]  # what follows the name (MariaDB's WAIT n or NOWAIT, a final ; left out)


# What may stand between a statement's verb and its TABLE, and between TABLE and the name.
_BEFORE_TABLE = {"ALTER": ("ONLINE", "IGNORE"), "CREATE": ("OR", "REPLACE", "TEMPORARY"),
                 "TRUNCATE": ()}
_BEFORE_NAME = ("IF", "NOT", "EXISTS")


def table_statement(sql: str, default_db: str) -> Optional[TableStatement]:
    """``ALTER [ONLINE] [IGNORE] TABLE [IF EXISTS] t ...``, ``CREATE [OR REPLACE] [TEMPORARY]
    TABLE [IF NOT EXISTS] t ...`` or ``TRUNCATE [TABLE] t``, read; None for any other
    statement."""
    toks = statement_tokens(sql)
    verb = toks[0].up if toks else ""
    before = _BEFORE_TABLE.get(verb)
    if before is None:
        return None
    j = 1
    while j < len(toks) and toks[j].up in before:
        j += 1
    words = [t.up for t in toks[1:j]]
    if j < len(toks) and toks[j].up == "TABLE":
        j += 1
    elif verb != "TRUNCATE":
        return None
    while j < len(toks) and toks[j].up in _BEFORE_NAME:
        j += 1
    name = name_at(toks, j, default_db)
    if name is None:
        return None
    db, table, j = name
    db, table = folded(db, table)
    if j < len(toks) and toks[j].up == "WAIT":
        j += 2
    elif j < len(toks) and toks[j].up == "NOWAIT":
        j += 1
    return TableStatement(verb, words, db, table, toks[j:])


def unquote(part: str) -> str:
    """An identifier as the server knows it: back-quotes taken off, doubled ones made one."""
    return part[1:-1].replace("``", "`") if part.startswith("`") else part


# An identifier as SHOW CREATE TABLE writes it: in back-quotes, or in double quotes when the
# session's sql_mode has ANSI_QUOTES (the server's default may); a quote inside is doubled.
SHOWN_NAME = r"(?:`(?:[^`]|``)+`|\"(?:[^\"]|\"\")+\")"


def unquote_shown(name: str) -> str:
    """A ``SHOWN_NAME`` as the server knows it."""
    return name[1:-1].replace(name[0] * 2, name[0])
