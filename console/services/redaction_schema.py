"""The schema of a redacted copy: archon's own DDL, and placeholders for everything else.

A name does not make a definition archon's: a trigger recreated under an archon trigger's name can
carry any text in its body, an archon-named index can be partial with any WHERE, an archon table can
gain columns whose names, DEFAULTs and CHECKs are anybody's. So a definition is archon's only when
its SQL is archon's DDL for that object at some release (`known_definition`, whitespace aside), and
only that text ever reaches a redacted bundle or the copy doctor re-runs on. Every other table is
rebuilt from what SQLite says about its shape, with nothing of its text: placeholder names for the
table and every column that is not archon's (`table-1`, `column-2`, the same as in every member),
each column's type reduced to its affinity, and its keys (primary, unique, foreign) so doctor finds
the same foreign-key violations, now between placeholders. Indexes and triggers that are not
archon's DDL are left out, or, under an archon name, stand in as bare objects of that name so the
release doctor detects and the objects it counts are the same as in the original.

Rows travel through a private `staging` schema under their original names (their values already
redacted: console/services/redacted_copy.py), then move to the rebuilt table column by column; the
original names exist only in this process (the staging schema is SQLite's private temporary file,
unlinked while open) and the staging schema is dropped before anyone reads the copy.
"""

from __future__ import annotations

import os
import re
import sqlite3
from typing import Any

from console.db.sql import quote_identifier

STAGING = "archon_console_staging"


def affinity(declared: str | None) -> str:
    """SQLite's own affinity rule (datatype3 §3.1), so values keep how they are stored; the declared
    type's text (anybody's words) is not kept. `INTEGER` stays itself: it makes a rowid alias."""
    text = (declared or "").upper()
    if text == "INTEGER":
        return "INTEGER"
    if "INT" in text:
        return "INT"
    if any(word in text for word in ("CHAR", "CLOB", "TEXT")):
        return "TEXT"
    if not text or "BLOB" in text:
        return "BLOB"
    if any(word in text for word in ("REAL", "FLOA", "DOUB")):
        return "REAL"
    return "NUMERIC"


def _columns(conn: sqlite3.Connection, table: str, schema: str = "main") -> list[tuple]:
    """(name, declared type, pk position) of the stored columns (hidden virtual-table columns left out)."""
    rows = conn.execute(f"PRAGMA {schema}.table_xinfo({quote_identifier(table)})").fetchall()
    return [(r[1], r[2], r[5]) for r in rows if r[6] != 1]


def stage(conn: sqlite3.Connection, copy: sqlite3.Connection, table: str) -> None:
    """An empty table of `table`'s columns in the staging schema, without any of its text but names."""
    columns = _columns(conn, table)
    if not columns:
        raise sqlite3.OperationalError("no columns")
    body = ", ".join(f"{quote_identifier(name)} {affinity(declared)}" for name, declared, _pk in columns)
    copy.execute(f"CREATE TABLE {STAGING}.{quote_identifier(table)} ({body})")


def move(conn: sqlite3.Connection, copy: sqlite3.Connection, table: str, redactor: Any,
         candidates: list[tuple[str, tuple[str, ...]]]) -> None:
    """Create `table`'s rebuilt form in the copy's main schema and move its staged rows there.

    `candidates`: archon's DDL texts for this name with their columns; the one the original extends
    (`ALTER TABLE ... ADD COLUMN` inserts into archon's text), else the one closest to it, is
    used (its CHECK lists are what doctor detects a release by), and the original's other columns are
    added under their placeholders."""
    final = redactor.name(table, "table")
    columns = [name for name, _type, _pk in _columns(copy, table, STAGING)]
    targets = {name: redactor.column_name(table, name) for name in columns}
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    original = " ".join(str(row[0] if row else "").split())
    created = False
    if candidates:
        text, known = max(reversed(candidates), key=lambda c: (
            _shared_words(c[0], original), _embedded(" ".join(c[0].split()), original),
            len(set(c[1]) & set(columns)), -len(c[1])))
        try:
            copy.execute(text)
            created = True
            declared = {name: declared for name, declared, _pk in _columns(conn, table)}
            for name in columns:
                if targets[name] not in known:
                    copy.execute(f"ALTER TABLE main.{quote_identifier(final)} ADD COLUMN {quote_identifier(targets[name])} "
                                 f"{affinity(declared.get(name))}")
            _insert(copy, table, final, targets)
            return
        except sqlite3.DatabaseError:
            if created:
                copy.execute(f"DROP TABLE main.{quote_identifier(final)}")
    copy.execute(_synthetic(conn, table, final, targets, redactor))
    _insert(copy, table, final, targets)


def _embedded(known: str, original: str) -> float:
    """How much of archon's text `known` the original keeps around what was added in between (SQLite
    adds a column's text after the last column), as a share: 1.0 when the original extends it."""
    head = len(os.path.commonprefix([known, original]))
    tail = len(os.path.commonprefix([known[::-1], original[::-1]]))
    return min(head + tail, len(known)) / max(len(known), 1)


def _shared_words(known: str, original: str) -> float:
    """How alike two texts are by their words (a CHECK list's literals count): what tells archon's
    own text of one release from another's when the original is written differently (archon's fresh
    start writes columns inline that the console's steps add by ALTER)."""
    a, b = set(re.findall(r"\w+", known)), set(re.findall(r"\w+", original))
    return len(a & b) / max(len(a | b), 1)


def _insert(copy: sqlite3.Connection, table: str, final: str, targets: dict[str, str]) -> None:
    try:
        copy.execute(f"SELECT rowid FROM main.{quote_identifier(final)} LIMIT 0")
        rowid = ["rowid"]
    except sqlite3.OperationalError:  # WITHOUT ROWID
        rowid = []
    into = ", ".join([*rowid, *(quote_identifier(t) for t in targets.values())])
    source = ", ".join([*rowid, *(quote_identifier(c) for c in targets)])
    copy.execute(f"INSERT INTO main.{quote_identifier(final)} ({into}) SELECT {source} FROM {STAGING}.{quote_identifier(table)}")
    copy.execute(f"DROP TABLE {STAGING}.{quote_identifier(table)}")


def _synthetic(conn: sqlite3.Connection, table: str, final: str, targets: dict[str, str], redactor: Any) -> str:
    """CREATE TABLE with placeholder names, affinities and the table's keys; no other text."""
    declared = {name: (declared_type, pk) for name, declared_type, pk in _columns(conn, table)}
    parts = [f"{quote_identifier(targets[name])} {affinity(declared.get(name, ('', 0))[0])}" for name in targets]
    pk = sorted((position, name) for name, (_t, position) in declared.items() if position and name in targets)
    if pk:
        parts.append("PRIMARY KEY (" + ", ".join(quote_identifier(targets[name]) for _p, name in pk) + ")")
    for index in conn.execute(f"PRAGMA index_list({quote_identifier(table)})").fetchall():
        if index[2] and index[3] == "u" and not index[4]:  # a UNIQUE constraint of the table
            names = [r[2] for r in conn.execute(f"PRAGMA index_info({quote_identifier(index[1])})").fetchall()]
            if names and all(n in targets for n in names):
                parts.append("UNIQUE (" + ", ".join(quote_identifier(targets[n]) for n in names) + ")")
    keys: dict[int, list[tuple]] = {}
    for row in conn.execute(f"PRAGMA foreign_key_list({quote_identifier(table)})").fetchall():
        keys.setdefault(row[0], []).append(row)
    for rows in keys.values():
        rows.sort(key=lambda r: r[1])
        parent = rows[0][2]
        if not all(r[3] in targets for r in rows):
            continue
        refs = ""
        if all(r[4] is not None for r in rows):
            refs = " (" + ", ".join(quote_identifier(redactor.column_name(parent, r[4])) for r in rows) + ")"
        parts.append("FOREIGN KEY (" + ", ".join(quote_identifier(targets[r[3]]) for r in rows) + ") REFERENCES "
                     + quote_identifier(redactor.name(parent, "table")) + refs)
    return f"CREATE TABLE main.{quote_identifier(final)} ({', '.join(parts)})"


def stand_in(copy: sqlite3.Connection, kind: str, name: str, table: str, redactor: Any,
             conn: sqlite3.Connection) -> None:
    """A bare object under an archon index or trigger name whose definition is not archon's: present
    (doctor counts and detects by name), with none of the original's text."""
    on = quote_identifier(redactor.name(table, "table"))
    if kind == "index":
        names = [r[2] for r in conn.execute(f"PRAGMA index_xinfo({quote_identifier(name)})").fetchall() if r[5] and r[2]]
        if not names:
            raise sqlite3.OperationalError("no columns")
        columns = ", ".join(quote_identifier(redactor.column_name(table, n)) for n in names)
        copy.execute(f"CREATE INDEX main.{quote_identifier(name)} ON {on} ({columns})")
    elif kind == "trigger":
        copy.execute(f"CREATE TRIGGER main.{quote_identifier(name)} BEFORE DELETE ON {on} BEGIN SELECT 1; END")


_HEAD = re.compile(r"(CREATE\s+(?:UNIQUE\s+)?(?:TRIGGER|INDEX)\s+)(\S+)", re.I)


def renamed_rule(copy: sqlite3.Connection, kind: str, name: str, redactor: Any, conn: sqlite3.Connection) -> bool:
    """A trigger or index that holds a rule of the console's 1.8.20 reconstruction under a name of its
    own (archon's, which the console does not know): in the copy, under a placeholder name, the
    console's text of that rule, so doctor recognises it there too (console/db/rules.py). Only when
    it enforces the rule as strongly (`same_strength`): a trigger that raises the same message under a
    condition of its own (`WHEN 0`) must not become the console's full-strength rule in the copy, so
    it stands in as `_conditioned`. None of the original's text is used."""
    from console.db.rules import rule_of, same_strength
    from console.services.doctor.checks_schema import reconstructed_rules

    rule = rule_of(conn, kind, name)
    texts = reconstructed_rules().get(rule)
    if not texts:
        return False
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)).fetchone()
    strong = [sql for sql in texts if same_strength(kind, row[0] if row else None, sql)]
    placeholder = "main." + quote_identifier(redactor.name(name, kind))
    if strong:
        copy.execute(_HEAD.sub(lambda m: m.group(1) + placeholder, strong[0], count=1))
    else:
        copy.execute(_conditioned(rule, placeholder))
    return True


def _conditioned(rule: tuple, placeholder: str) -> str:
    """A trigger of the same claim as `rule` (table, timing, event, columns, RAISE messages) under
    `WHEN 0`: what doctor reports as held with a condition the console's rule does not have, as it
    does for the original, with none of the original's text (its real condition is not shown)."""
    _kind, table, timing, event, columns, messages = rule
    of = f" OF {', '.join(quote_identifier(c) for c in sorted(columns))}" if columns else ""
    raises = " ".join(f"SELECT RAISE({how}, '{text.replace(chr(39), chr(39) * 2)}');"
                      for how, text in sorted(messages))
    return f"CREATE TRIGGER {placeholder} {timing} {event}{of} ON {quote_identifier(table)} WHEN 0 BEGIN {raises} END"


__all__ = ["STAGING", "affinity", "move", "renamed_rule", "stage", "stand_in"]
