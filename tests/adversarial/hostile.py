"""Putting hostile text into every text column of a real archon database (for the escape tests).

Archon's own triggers forbid editing events and decided requests, so they are set aside while the
text is written and put back unchanged afterwards: the console then reads a database whose shape,
guards and release markers are archon's, and whose strings are an attacker's.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

# One of each thing a terminal obeys: an OSC 52 clipboard write, a title change, a screen clear,
# BEL, a C1 CSI, DEL, a bidi override and isolate, and Rich markup that would run an action.
HOSTILE = ("w\x1b]52;c;cHduZWQ=\x07\x1b]2;HIJACKED\x07\x1b[2J\x9b31m\x7f"
           "\u202eevil\u202c\u2066x\u2069[@click=app.quit]q[/]\r\x08")


def poison(path: Path, hostile: str = HOSTILE) -> dict[str, list[str]]:
    """Append `hostile` to every text value the console can show; returns table -> poisoned columns."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = OFF")
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    done: dict[str, list[str]] = {}
    conn.execute("BEGIN IMMEDIATE")
    for name, _ in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE '\\_%' ESCAPE '\\'")]
    for table in tables:
        keys = {r[3] for r in conn.execute(f'PRAGMA foreign_key_list("{table}")')}
        for cid, column, decl, _notnull, _default, pk in conn.execute(f'PRAGMA table_info("{table}")').fetchall():
            if pk or column in keys or column == "id":
                continue
            for expression in (f'"{column}" || ?', f"json_set(\"{column}\", '$.note', ?)"):
                conn.execute("SAVEPOINT one")
                try:
                    conn.execute(f'UPDATE "{table}" SET "{column}" = {expression} '
                                 f'WHERE typeof("{column}") = \'text\'', (hostile,))
                except sqlite3.DatabaseError:
                    conn.execute("ROLLBACK TO one")
                    conn.execute("RELEASE one")
                    continue
                conn.execute("RELEASE one")
                done.setdefault(table, []).append(column)
                break
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    return done


# What an id or a schema name can carry: an OSC title change ended by BEL, the end of a shell's
# bracketed paste followed by a command and a line break (Enter), a C1 CSI, a bidi override, markup.
HOSTILE_ID = "\x1b]2;IDPWN\x07\x1b[201~touch /tmp/pwned\n\x9b1m\u202e\u2067[@click=app.quit]q\r"
HOSTILE_TABLE = "tbl\x1b]2;FKPWN\x07"


def poison_ids(path: Path, suffix: str = HOSTILE_ID) -> list[tuple[str, str]]:
    """Append `suffix` to every id: primary and foreign keys, `id` and `*_id` columns. The same
    suffix everywhere keeps every reference pointing at its row. Returns the (table, column) pairs."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = OFF")
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    done: list[tuple[str, str]] = []
    conn.execute("BEGIN IMMEDIATE")
    for name, _ in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    tables = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE '\\_%' ESCAPE '\\'")]
    for table in tables:
        keys = {r[3] for r in conn.execute(f'PRAGMA foreign_key_list("{table}")')}
        for _cid, column, _decl, _notnull, _default, pk in conn.execute(f'PRAGMA table_info("{table}")').fetchall():
            if not (pk or column in keys or column == "id" or column.endswith("_id")):
                continue
            conn.execute("SAVEPOINT one")
            try:
                conn.execute(f'UPDATE "{table}" SET "{column}" = "{column}" || ? '
                             f'WHERE typeof("{column}") = \'text\'', (suffix,))
            except sqlite3.DatabaseError:
                conn.execute("ROLLBACK TO one")
                conn.execute("RELEASE one")
                continue
            conn.execute("RELEASE one")
            done.append((table, column))
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    return done


def poison_schema(path: Path, name: str = HOSTILE_TABLE, suffix: str = HOSTILE_ID) -> None:
    """A table, column, index and trigger named by an attacker, with a foreign-key violation
    doctor reports (the finding names the table and the row)."""
    q = '"' + name.replace('"', '""') + '"'
    column = '"col' + suffix.replace('"', '""') + '"'
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(f"CREATE TABLE {q} (id TEXT PRIMARY KEY, {column} TEXT, "
                 "project_id TEXT REFERENCES projects(id))")
    conn.execute(f"INSERT INTO {q} VALUES (?, ?, ?)", ("row" + suffix, "v" + suffix, "gone" + suffix))
    conn.execute(f'CREATE INDEX "idx{suffix}" ON {q} ({column})')
    conn.execute(f'CREATE TRIGGER "trg{suffix}" AFTER INSERT ON {q} BEGIN SELECT 1; END')
    conn.close()
