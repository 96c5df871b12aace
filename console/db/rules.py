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

What a trigger claims (its messages) is not what it enforces: `WHEN 0`, a `WHEN` of its own, a
`CASE WHEN ... THEN RAISE` or a `SELECT RAISE(...) FROM ... WHERE ...` raise the same message under
a condition the console's rule does not have, or never. So a trigger held under another name counts
as the console's rule only when it is the same text apart from its name (`same_strength`: the
token stream after the name, whitespace, comments, keyword case and the quoting style of a quoted
name aside; string literals and numbers exactly); the same claim with any other text is reported as
held "with a condition the console's rule does not have" for a person to check. Proving two
different conditions equivalent is not attempted: a rule that cannot be shown equal is not vouched for.

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
    rf"(?P<name>{_NAME}(?:\s*+\.\s*+{_NAME})?)\s++"
    r"(?:(?P<timing>BEFORE|AFTER|INSTEAD\s++OF)\s++)?"
    rf"(?P<event>DELETE|INSERT|UPDATE(?:\s++OF\s++(?P<columns>{_NAME}(?:\s*+,\s*+{_NAME})*+))?)\s++ON\s",
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


_WORDS = re.compile(r"\w++|\S")
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*+")


def _atoms(sql: str) -> list[str]:
    """`sql` as a list of tokens compared for equality: bare words and punctuation lowercased, string
    literals exact, a quoted name in one canonical quoting (lowercased: SQLite's names ignore ASCII
    case), comments and whitespace gone. A quoted name never equals a bare word or punctuation (a
    quoted "(" or "where" is a name, not syntax). Linear in the text, like `_TOKEN`."""
    out: list[str] = []
    for match in _TOKEN.finditer(sql):
        token = match.group()
        first = token[0]
        if first == "'":
            out.append(token)
        elif first in '"`[':
            out.append('"' + _unquote(token).lower().replace('"', '""') + '"')
        elif token.startswith("--") or token.startswith("/*"):
            continue
        else:
            out.extend(word.lower() for word in _WORDS.findall(token))
    return out


def _without_for_each_row(atoms: list[str]) -> list[str]:
    """`FOR EACH ROW` is SQLite's only kind of trigger and may be written or not."""
    for i in range(len(atoms) - 2):
        if atoms[i] == "begin":
            break
        if atoms[i:i + 3] == ["for", "each", "row"]:
            return atoms[:i] + atoms[i + 3:]
    return atoms


def trigger_body(sql: str | None) -> tuple[str, ...] | None:
    """What a trigger enforces, apart from its name: everything after the name (timing, event,
    table, WHEN, body) as `_atoms`; None for a text that does not parse as a trigger."""
    if not isinstance(sql, str):
        return None
    sql = _uncommented(sql)
    head = _TRIGGER_HEAD.match(sql)
    if not head:
        return None
    return tuple(_without_for_each_row(_atoms(sql[head.end("name"):])))


def same_strength(kind: str, sql: str | None, reference: str | None) -> bool:
    """Whether `sql`, which makes the same claim as the console's `reference` (the same `rule_of`),
    enforces it as strongly: for a trigger its text apart from its name (`trigger_body`); an index's
    identity (`index_rule`) already holds everything it enforces."""
    if kind != "trigger":
        return True
    body = trigger_body(sql)
    return body is not None and body == trigger_body(reference)


def _index_where(sql: str) -> tuple[str, ...]:
    """The atoms of an index's WHERE: what follows the key list's closing parenthesis (found by
    nesting, never inside a literal or a quoted name)."""
    atoms = _atoms(sql)
    try:
        start = atoms.index("(")
    except ValueError:
        return ()
    depth = 0
    for i in range(start, len(atoms)):
        depth += {"(": 1, ")": -1}.get(atoms[i], 0)
        if depth == 0:
            rest = atoms[i + 1:]
            return tuple(rest[1:]) if rest[:1] == ["where"] else tuple(rest)
    return tuple(atoms[start:])


def _unquote(name: str) -> str:
    if name[:1] in ('"', "`"):
        return name[1:-1].replace(name[0] * 2, name[0])
    if name[:1] == "[":
        return name[1:-1]
    return name


def _uncommented(sql: str) -> str:
    """`sql` with each comment made one space (SQLite keeps a trigger's comments in its text, even
    between the words of its head); linear, like `_TOKEN`."""
    return "".join(" " if t.startswith(("--", "/*")) else t for t in (m.group() for m in _TOKEN.finditer(sql)))


def trigger_rule(table: str, sql: str | None) -> tuple | None:
    """(trigger, table, timing, event, columns, messages) of a trigger's stored text, or None."""
    if not isinstance(sql, str) or not isinstance(table, str):
        return None
    sql = _uncommented(sql)
    head = _TRIGGER_HEAD.match(sql)
    messages = _raised(sql)
    if not head or not messages:
        return None
    timing = " ".join((head.group("timing") or "BEFORE").upper().split())
    event = head.group("event").split()[0].upper()
    columns = frozenset(_unquote(c).lower() for c in _COLUMN.findall(head.group("columns") or ""))
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
    return ("index", table.lower(), bool(_UNIQUE.match(sql)), keys, _index_where(sql))


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


def rules_present(conn: sqlite3.Connection, wanted: dict[tuple, str]) -> dict[tuple, tuple[str, bool]]:
    """Those of the rules `wanted` (rule -> the console's text of it) the database holds -> the name
    it holds each under, and whether it is as strong as the console's (`same_strength`); a name that
    is, is preferred. Only triggers and indexes of the wanted rules' kinds and tables are read (a
    hostile file may hold thousands)."""
    scope = {(rule[0], rule[1]) for rule in wanted}
    found: dict[tuple, tuple[str, bool]] = {}
    for kind, name, table, sql in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE type IN ('trigger', 'index') ORDER BY name"
    ):
        if not isinstance(table, str) or (kind, table.lower()) not in scope:
            continue
        rule = _rule(conn, kind, name, table, sql)
        if rule not in wanted:
            continue
        held = found.get(rule)
        if held is not None and held[1]:
            continue
        strong = same_strength(kind, sql, wanted[rule])
        if held is None or strong:
            found[rule] = (name, strong)
    return found
