"""A snapshot request's ``where``: a condition on the table's own columns, never a statement.

The condition is placed inside the chunk's SELECT (``source.chunks``), so it must not be able to
do anything a condition can't: end the WHERE clause (a parenthesis too many, a comment that
swallows the ORDER BY and LIMIT), add a UNION or a subquery that reads another table into the
topic, or stall the stream (SLEEP, BENCHMARK, locks). It is therefore tokenised and accepted only
when it is made of:

- literals: numbers, quoted strings, hex and bit literals, NULL, TRUE, FALSE;
- the table's columns (``columns``; checked where the table is known), plain or back-quoted;
- operators and balanced parentheses;
- the keywords of a condition (AND, OR, NOT, IN, IS, BETWEEN, LIKE, CASE ..., INTERVAL units);
- calls of the deterministic, cheap functions in ``FUNCTIONS``.

Anything else (a semicolon, a comment, SELECT, UNION, a function not in the list, a name that
is not a column) is refused with a message naming it.
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional, Tuple

KEYWORDS = frozenset("""
AND OR NOT XOR IN IS NULL TRUE FALSE UNKNOWN BETWEEN LIKE ESCAPE REGEXP RLIKE DIV MOD
CASE WHEN THEN ELSE END INTERVAL AS BINARY COLLATE
MICROSECOND SECOND MINUTE HOUR DAY WEEK MONTH QUARTER YEAR
SECOND_MICROSECOND MINUTE_MICROSECOND MINUTE_SECOND HOUR_MICROSECOND HOUR_SECOND HOUR_MINUTE
DAY_MICROSECOND DAY_SECOND DAY_MINUTE DAY_HOUR YEAR_MONTH
SIGNED UNSIGNED INTEGER INT CHAR DATE DATETIME TIME DECIMAL DOUBLE FLOAT JSON
CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP UTC_DATE UTC_TIME UTC_TIMESTAMP
""".split())

# Functions a condition may call: deterministic, cheap, reading nothing but their arguments.
FUNCTIONS = frozenset("""
ABS CEIL CEILING FLOOR ROUND TRUNCATE SIGN GREATEST LEAST MOD POW POWER SQRT
LOWER UPPER LCASE UCASE LENGTH CHAR_LENGTH CHARACTER_LENGTH OCTET_LENGTH BIT_LENGTH
SUBSTRING SUBSTR MID LEFT RIGHT TRIM LTRIM RTRIM LPAD RPAD CONCAT CONCAT_WS REPLACE REVERSE
LOCATE POSITION INSTR FIELD FIND_IN_SET STRCMP HEX UNHEX CRC32 MD5 SHA1 SHA2 ASCII ORD
COALESCE IFNULL NULLIF IF ISNULL CAST CONVERT
DATE TIME YEAR MONTH DAY DAYOFMONTH DAYOFWEEK DAYOFYEAR WEEKDAY WEEK HOUR MINUTE SECOND
MICROSECOND QUARTER LAST_DAY DATE_ADD DATE_SUB ADDDATE SUBDATE ADDTIME SUBTIME DATEDIFF
TIMEDIFF TIMESTAMPDIFF TIMESTAMPADD TIMESTAMP DATE_FORMAT STR_TO_DATE FROM_UNIXTIME
UNIX_TIMESTAMP NOW CURDATE CURTIME CURRENT_DATE CURRENT_TIME CURRENT_TIMESTAMP UTC_DATE
UTC_TIME UTC_TIMESTAMP TO_DAYS FROM_DAYS EXTRACT
JSON_EXTRACT JSON_UNQUOTE JSON_CONTAINS JSON_CONTAINS_PATH JSON_LENGTH JSON_TYPE JSON_VALUE
INET_ATON INET_NTOA INET6_ATON INET6_NTOA IS_IPV4 IS_IPV6
""".split())

_TOKEN = re.compile(r"""
    (?P<space>\s+)
  | (?P<comment>--|\#|/\*|\*/)
  | (?P<string>'(?:[^'\\]|\\.|'')*'|"(?:[^"\\]|\\.|"")*")
  | (?P<hexbit>[xXbB]'[0-9A-Fa-f]*')
  | (?P<number>0[xX][0-9A-Fa-f]+|0[bB][01]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
  | (?P<quoted>`(?:[^`]|``)+`)
  | (?P<name>[A-Za-z_$@][A-Za-z0-9_$]*)
  | (?P<op><=>|<>|!=|<=|>=|<<|>>|&&|\|\||[-+*/%=<>!~^&|(),.:])
  | (?P<other>.)
""", re.VERBOSE | re.DOTALL)


def _tokens(condition: str) -> Iterable[Tuple[str, str]]:
    for m in _TOKEN.finditer(condition):
        kind = m.lastgroup
        if kind != "space":
            yield kind or "other", m.group()


def check(condition: str, columns: Optional[Iterable[str]] = None) -> None:
    """Refuse (ValueError, naming the part) a condition that is more than a condition on the
    table's columns. ``columns``: the table's column names, when known (without them, any plain
    name that is not a keyword or function is taken for a column)."""
    if not isinstance(condition, str) or not condition.strip():
        raise ValueError("the condition is empty")
    known = None if columns is None else {c.lower() for c in columns}
    tokens: List[Tuple[str, str]] = list(_tokens(condition))
    depth = 0
    for i, (kind, text) in enumerate(tokens):
        following = tokens[i + 1][1] if i + 1 < len(tokens) else ""
        if kind == "comment":
            raise ValueError(f"comments ({text!r}) are not allowed in a condition")
        if kind == "other" or text == ";":
            raise ValueError(f"{text!r} is not allowed in a condition")
        if text == "(":
            depth += 1
        elif text == ")":
            depth -= 1
            if depth < 0:
                raise ValueError("the condition closes a parenthesis it did not open")
        elif kind == "name":
            _check_name(text, following, known, tokens[i - 1][1] if i else "")
        elif kind == "quoted" and known is not None and \
                text[1:-1].replace("``", "`").lower() not in known:
            raise ValueError(f"{text} is not a column of the table")
    if depth:
        raise ValueError("the condition leaves a parenthesis open")


def _check_name(text: str, following: str, known: Optional[set], before: str) -> None:
    upper = text.upper()
    if text.startswith("@"):
        raise ValueError(f"variables ({text}) are not allowed in a condition")
    if following == "(" and upper not in KEYWORDS:
        if upper not in FUNCTIONS:
            raise ValueError(f"function {text}() is not allowed in a condition (allowed: "
                             f"deterministic functions of the row's values, such as LOWER, "
                             f"DATE, COALESCE, JSON_EXTRACT)")
        return
    if upper in KEYWORDS or before == ".":
        return
    if upper in ("SELECT", "UNION", "FROM", "INTO", "WHERE", "LIMIT", "ORDER", "GROUP", "HAVING",
                 "EXISTS", "ALL", "ANY", "SOME", "LOCK", "FOR", "PROCEDURE", "WITH"):
        raise ValueError(f"{upper} is not allowed: a condition filters the table's rows, it "
                         f"can't read other rows or tables")
    if known is not None and text.lower() not in known:
        raise ValueError(f"{text} is not a column of the table")
