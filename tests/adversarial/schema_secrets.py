"""Secrets planted in every schema position of a real archon database (DEFAULT, CHECK, column
type and name, foreign names, virtual-table module, trigger body, partial-index WHERE, view): shared
by the redaction tests and the streaming bundle's golden comparison."""

from __future__ import annotations

import sqlite3


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _lit(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def plant_schema_secrets(db, tag: str = "") -> dict[str, str]:
    """A secret in every schema position the tester used (and the names of foreign objects), each
    made unique by `tag` (which may hold quotes, spaces and dashes); returns position -> secret."""
    s = {p: f"{p}{tag}zq" for p in ("S1DEFAULT", "S2COLNAME", "S3CHECK", "S4PARENT", "S4TABLE", "S5MODULE",
                                    "S6TRIGGER", "S7INDEX", "S8FOREIGNCOL", "S9ONFOREIGN", "S10TYPE", "S11VIEW")}
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = OFF")
    url = _lit("https://hooks.example/" + s["S1DEFAULT"])
    conn.execute(f"ALTER TABLE projects ADD COLUMN notify_url TEXT DEFAULT {url}")
    conn.execute(f"ALTER TABLE projects ADD COLUMN {_q(s['S2COLNAME'])} TEXT")
    conn.execute(f"UPDATE projects SET {_q(s['S2COLNAME'])} = 'x'")
    conn.execute(f"ALTER TABLE projects ADD COLUMN pin {_q(s['S10TYPE'])} CHECK (pin <> {_lit(s['S3CHECK'])})")
    conn.execute(f"CREATE TABLE {_q(s['S4PARENT'])} (id TEXT PRIMARY KEY)")
    conn.execute(f"CREATE TABLE {_q(s['S4TABLE'])} (id TEXT PRIMARY KEY, {_q(s['S8FOREIGNCOL'])} TEXT "
                 f"REFERENCES {_q(s['S4PARENT'])}(id))")
    conn.execute(f"INSERT INTO {_q(s['S4TABLE'])} VALUES ('row1', 'nope')")
    conn.execute(f"CREATE VIEW {_q(s['S11VIEW'])} AS SELECT {_lit(s['S11VIEW'])} AS x")
    conn.execute("PRAGMA writable_schema = ON")
    conn.execute("INSERT INTO sqlite_master (type, name, tbl_name, rootpage, sql) VALUES ('table', 'vt', 'vt', 0, ?)",
                 (f"CREATE VIRTUAL TABLE vt USING {_q(s['S5MODULE'])}(a)",))
    conn.execute("PRAGMA writable_schema = OFF")
    conn.close()
    conn = sqlite3.connect(db, isolation_level=None)  # a fresh schema (the virtual table is unreadable)
    trigger = "validate_project_build_execution_provider_insert"
    conn.execute(f"DROP TRIGGER {trigger}")
    conn.execute(f"CREATE TRIGGER {trigger} BEFORE INSERT ON projects WHEN NEW.build_execution_provider NOT IN "
                 f"('host', 'docker_sandbox') BEGIN SELECT RAISE(ABORT, {_lit(s['S6TRIGGER'])}); END")
    index, sql = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'index' "
                              "AND tbl_name = 'approval_requests' AND sql IS NOT NULL LIMIT 1").fetchone()
    conn.execute(f"DROP INDEX {index}")
    conn.execute(f"{sql} WHERE status <> {_lit(s['S7INDEX'])}")
    (index2,) = conn.execute("SELECT name FROM sqlite_master WHERE type = 'index' "
                             "AND tbl_name = 'execution_environments' AND sql IS NOT NULL LIMIT 1").fetchone()
    conn.execute(f"DROP INDEX {index2}")
    conn.execute(f"CREATE TABLE {_q(s['S9ONFOREIGN'])} (x)")
    conn.execute(f"CREATE INDEX {index2} ON {_q(s['S9ONFOREIGN'])} (x)")
    conn.close()
    return s
