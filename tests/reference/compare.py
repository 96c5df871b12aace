"""Object-by-object and row-by-row comparison of two archon databases, with named differences.

Tables are compared by their columns (name, type, NOT NULL, default, key, in order), CHECK
expressions, foreign keys and UNIQUE constraints; indexes and triggers by their text with
whitespace collapsed; triggers also by their RAISE messages. The console's own bookkeeping tables
are left out. Rows are compared table by table, with timestamps written "now" masked.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

CONSOLE_TABLES = ("_archon_console_ledger", "_sqlite_migrations")
NOW_FROM = "2025-01-01 00:00:00"
_RAISE = re.compile(r"RAISE\s*\(\s*ABORT\s*,\s*'((?:[^']|'')*)'\s*\)", re.I)


def squash(sql: str) -> str:
    text = re.sub(r"\s+", " ", sql.strip())
    text = re.sub(r"\s*([(),])\s*", r"\1", text)
    text = re.sub(r"^CREATE (UNIQUE )?(TABLE|INDEX|TRIGGER) IF NOT EXISTS ", r"CREATE \1\2 ", text, flags=re.I)
    return text.replace('"', "")


def checks(sql: str) -> list[str]:
    """Every CHECK (...) expression in a CREATE TABLE text, whitespace collapsed."""
    out, i = [], 0
    upper = sql.upper()
    while True:
        i = upper.find("CHECK", i)
        if i < 0:
            return sorted(out)
        j = sql.find("(", i)
        if j < 0 or sql[i + 5:j].strip():
            i += 5
            continue
        depth, k, quoted = 0, j, False
        while k < len(sql):
            c = sql[k]
            if c == "'":
                quoted = not quoted
            elif not quoted and c == "(":
                depth += 1
            elif not quoted and c == ")":
                depth -= 1
                if depth == 0:
                    break
            k += 1
        out.append(squash(sql[j + 1:k]))
        i = k


def schema(conn: sqlite3.Connection) -> dict[str, dict]:
    objects: dict[str, dict] = {}
    for kind, name, table, sql in conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY name"
    ):
        if name in CONSOLE_TABLES or table in CONSOLE_TABLES:
            continue
        if kind == "table":
            objects[f"table {name}"] = {
                "columns": [tuple(r[1:6]) for r in conn.execute(f'PRAGMA table_xinfo("{name}")')],
                "checks": checks(sql or ""),
                "foreign keys": sorted(tuple(r[2:]) for r in conn.execute(f'PRAGMA foreign_key_list("{name}")')),
                "unique": sorted(
                    tuple(c[2] for c in conn.execute(f'PRAGMA index_info("{idx[1]}")'))
                    for idx in conn.execute(f'PRAGMA index_list("{name}")') if idx[3] in ("u", "pk")
                ),
            }
        elif kind == "index" and sql:
            objects[f"index {name}"] = {"on": table, "sql": squash(sql)}
        elif kind == "trigger":
            objects[f"trigger {name}"] = {
                "on": table, "sql": squash(sql),
                "raise": [m.replace("''", "'") for m in _RAISE.findall(sql)],
            }
    return objects


def schema_of(path: Path) -> dict[str, dict]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return schema(conn)
    finally:
        conn.close()


def schema_differences(actual: dict, expected: dict) -> list[str]:
    """'object: what differs (expected ..., actual ...)' for every object that differs."""
    out = []
    for name in sorted(set(actual) | set(expected)):
        if name not in actual:
            out.append(f"{name}: missing (reference has it)")
            continue
        if name not in expected:
            out.append(f"{name}: extra (the reference has no such object)")
            continue
        a, e = actual[name], expected[name]
        for key in e:
            if a.get(key) == e[key]:
                continue
            if key == "columns":
                a_names, e_names = [c[0] for c in a[key]], [c[0] for c in e[key]]
                missing = [c for c in e_names if c not in a_names]
                extra = [c for c in a_names if c not in e_names]
                if missing:
                    out.append(f"{name}: columns missing {missing}")
                if extra:
                    out.append(f"{name}: columns extra {extra}")
                for ec in e[key]:
                    ac = next((c for c in a[key] if c[0] == ec[0]), None)
                    if ac and ac != ec:
                        out.append(f"{name}: column {ec[0]} declared {ac[1:]} (reference {ec[1:]})")
                if not missing and not extra and a_names != e_names:
                    out.append(f"{name}: column order {a_names} (reference {e_names})")
            elif key in ("checks", "foreign keys", "unique"):
                missing = [x for x in e[key] if x not in a[key]]
                extra = [x for x in a[key] if x not in e[key]]
                if missing:
                    out.append(f"{name}: {key} missing {missing}")
                if extra:
                    out.append(f"{name}: {key} extra {extra}")
            else:
                out.append(f"{name}: {key} differs:\n      actual    {a.get(key)!r}\n      reference {e[key]!r}")
    return out


def rows(conn: sqlite3.Connection, table: str) -> list[tuple]:
    columns = [r[1] for r in conn.execute(f'PRAGMA table_info("{table}")')]
    result = []
    for row in conn.execute(f'SELECT {", ".join(chr(34) + c + chr(34) for c in columns)} FROM "{table}"'):
        result.append(tuple(
            (c, "<now>" if isinstance(v, str) and re.fullmatch(r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(\.\d+)?Z?", v)
             and v >= NOW_FROM else v)
            for c, v in zip(columns, row)
        ))
    return sorted(result, key=repr)


def row_differences(actual: Path, expected: Path, tables: list[str] | None = None) -> list[str]:
    a = sqlite3.connect(f"file:{actual}?mode=ro", uri=True)
    e = sqlite3.connect(f"file:{expected}?mode=ro", uri=True)
    try:
        names = tables or sorted(
            r[0] for r in e.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
        )
        out = []
        for table in names:
            if not a.execute("SELECT 1 FROM sqlite_master WHERE name = ?", (table,)).fetchone():
                continue
            common = [c for c in (r[1] for r in e.execute(f'PRAGMA table_info("{table}")'))
                      if c in {r[1] for r in a.execute(f'PRAGMA table_info("{table}")')}]
            ra = [tuple(x for x in row if x[0] in common) for row in rows(a, table)]
            re_ = [tuple(x for x in row if x[0] in common) for row in rows(e, table)]
            only_a = [r for r in ra if r not in re_]
            only_e = [r for r in re_ if r not in ra]
            for r in only_e:
                out.append(f"rows {table}: reference has {dict(r)}, console does not")
            for r in only_a:
                out.append(f"rows {table}: console has {dict(r)}, reference does not")
        return out
    finally:
        a.close()
        e.close()


def report(title: str, differences: list[str]) -> str:
    return f"{title}: {len(differences)} difference(s)\n  - " + "\n  - ".join(differences)
