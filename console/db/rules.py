"""What a trigger or index enforces, whatever it is called: how a rule archon holds under its own
name is recognised.

The console's 1.8.20 reconstruction (console/db/migrations/steps/s001_baseline_1_8_20.py,
RECONSTRUCTED) names some rules itself because archon's text never shows their names: archon's
trigger raising 'Execution environment binding evidence is immutable' is not called
`preserve_execution_environment_binding_evidence`. Looking such a rule up by the console's name
finds it missing on every genuine archon database. A rule is identified instead by what it does:

* a trigger by its table, its timing and event (BEFORE UPDATE OF cols ..., AFTER DELETE ...) and the
  set of messages it RAISEs (a trigger that raises nothing has no identity beyond its name);
* an index by its table, UNIQUE or not, its key columns (with order and collation) and its WHERE.

Everything here reads database text, hence hostile: the patterns have no nested repetition (linear
time on any input), names only ever reach SQL through `quote_identifier`, and a text that does not
parse has no identity (None), so it is never taken for a rule it might imitate.
"""

from __future__ import annotations

import re
import sqlite3

from console.db.sql import quote_identifier

_NAME = r'(?:"(?:[^"]|"")*+"|`(?:[^`]|``)*+`|\[[^\]]*+\]|[^\s(),;."`\[\]]++)'
_TRIGGER_HEAD = re.compile(
    r"\s*+CREATE\s++(?:TEMP\s++|TEMPORARY\s++)?TRIGGER\s++(?:IF\s++NOT\s++EXISTS\s++)?"
    rf"{_NAME}(?:\s*+\.\s*+{_NAME})?\s++"
    r"(?:(BEFORE|AFTER|INSTEAD\s++OF)\s++)?"
    rf"(DELETE|INSERT|UPDATE(?:\s++OF\s++({_NAME}(?:\s*+,\s*+{_NAME})*+))?)\s++ON\s",
    re.I,
)
_COLUMN = re.compile(_NAME)
# One pass over the text: a string literal ('' inside it is a quote), a quoted name, a comment, a
# run of anything else, or one character that opens none of these. Possessive, and an unclosed
# literal, name or comment runs to the end, so no input makes the scan go back over itself (the
# text is the database's).
_TOKEN = re.compile(
    r"""'(?:[^']|'')*+(?:'|\Z)|"(?:[^"]|"")*+(?:"|\Z)|`(?:[^`]|``)*+(?:`|\Z)|\[[^\]]*+(?:\]|\Z)|--[^\n]*+"""
    r"""|/\*(?:[^*]|\*(?!/))*+(?:\*/|\Z)|[^'"`\[\-/]++|.""",
    re.S,
)
_RAISE_BEFORE = re.compile(r"RAISE\s*+\(\s*+(ABORT|FAIL|ROLLBACK)\s*+,\s*+\Z", re.I)
_WHERE = re.compile(r"\)\s*+WHERE\s", re.I)


def _raised(sql: str) -> frozenset[tuple[str, str]]:
    """(kind, message) of every RAISE(kind, 'message') in `sql`, found in one linear pass."""
    tokens = [m.group() for m in _TOKEN.finditer(sql)]
    found = set()
    for index, token in enumerate(tokens):
        if len(token) < 2 or token[0] != "'" or token[-1] != "'" or index == 0:
            continue
        before = _RAISE_BEFORE.search(tokens[index - 1][-80:])
        after = tokens[index + 1] if index + 1 < len(tokens) else ""
        if before and after.lstrip().startswith(")"):
            found.add((before.group(1).upper(), token[1:-1].replace("''", "'")))
    return frozenset(found)


def _unquote(name: str) -> str:
    if name[:1] in ('"', "`"):
        return name[1:-1].replace(name[0] * 2, name[0])
    if name[:1] == "[":
        return name[1:-1]
    return name


def trigger_rule(table: str, sql: str | None) -> tuple | None:
    """(trigger, table, timing, event, columns, messages) of a trigger's stored text, or None."""
    if not isinstance(sql, str) or not isinstance(table, str):
        return None
    head = _TRIGGER_HEAD.match(sql)
    messages = _raised(sql)
    if not head or not messages:
        return None
    timing = " ".join((head.group(1) or "BEFORE").upper().split())
    event = head.group(2).split()[0].upper()
    columns = frozenset(_unquote(c).lower() for c in _COLUMN.findall(head.group(3) or ""))
    return ("trigger", table.lower(), timing, event, columns, messages)


_UNIQUE = re.compile(r"\s*+CREATE\s++UNIQUE\s", re.I)


def index_rule(conn: sqlite3.Connection, name: str, table: str, sql: str | None) -> tuple | None:
    """(index, table, unique, key columns, WHERE) of an index, or None for one SQLite made itself."""
    if not isinstance(sql, str) or not isinstance(table, str):
        return None
    try:
        keys = tuple(
            (r[2] if r[2] is not None else r[1], r[3], r[4])  # column name (or expression rank), desc, collation
            for r in conn.execute(f"PRAGMA index_xinfo({quote_identifier(name)})") if r[5]
        )
    except sqlite3.DatabaseError:
        return None
    where = _WHERE.search(sql)
    condition = " ".join(sql[where.end():].split()).lower() if where else ""
    return ("index", table.lower(), bool(_UNIQUE.match(sql)), keys, condition)


def _rule(conn: sqlite3.Connection, kind: str, name: str, table: str, sql: str | None) -> tuple | None:
    return trigger_rule(table, sql) if kind == "trigger" else index_rule(conn, name, table, sql)


def rule_of(conn: sqlite3.Connection, kind: str, name: str) -> tuple | None:
    """What the trigger or index `name` of `conn` enforces; None for a table, or when it is absent."""
    if kind not in ("trigger", "index"):
        return None
    row = conn.execute(
        "SELECT tbl_name, sql FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)
    ).fetchone()
    return None if row is None else _rule(conn, kind, name, row[0], row[1])


def rules_present(conn: sqlite3.Connection, wanted: set[tuple]) -> dict[tuple, str]:
    """Those of the rules `wanted` the database holds -> the name it holds each under. Only triggers
    and indexes of the wanted rules' kinds and tables are read (a hostile file may hold thousands)."""
    scope = {(rule[0], rule[1]) for rule in wanted}
    found: dict[tuple, str] = {}
    for kind, name, table, sql in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('trigger', 'index') ORDER BY name"
    ):
        if not isinstance(table, str) or (kind, table.lower()) not in scope:
            continue
        rule = _rule(conn, kind, name, table, sql)
        if rule in wanted:
            found.setdefault(rule, name)
    return found
