"""A schema name cannot change the SQL it is spliced into (issue 17, finding 9b).

A table named `x" WHERE 0 UNION ALL ... WITH RECURSIVE ...` once turned `doctor --bundle`'s row
count into an endless query that ignored SIGTERM. Every name now passes console/db/sql.py
`quote_identifier`. Names built from every character that ends or escapes an identifier or a
statement (`"`, `]`, backtick, `'`, newline, control characters, `--`, `;`) are put in every schema
position (table, column, index, trigger, view) of a real archon database, and every command that
reads the schema runs on it in a bounded process (tests/adversarial/bounded.py).
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.db.sql import quote_identifier
from tests import damage
from tests.adversarial.bounded import console, ended_cleanly

pytestmark = pytest.mark.slow

PIECES = ['"', "]", "[", "`", "'", "\n", "\r", "\t", "\x01", "\x1b", "\x7f", "--", ";", "/*", " ", "x", "é"]
FIXED_NAMES = ['a"b', 'a""', "a]b", "[a", "a`b", "a'b", "a\nb", "a\x01\x1fb", "a--b", "a;b", '";--', "x'); --"]
# Spliced unquoted, this name ends the statement's FROM and appends a query that never ends.
INJECTION = ('x" WHERE 0 UNION ALL SELECT count(*) FROM (WITH RECURSIVE c(i) AS (SELECT 1 UNION ALL '
             'SELECT i + 1 FROM c) SELECT i FROM c) --')


def plant(path: Path, name: str, n: int) -> None:
    """`name` as a table (with a column, an index, a trigger and a view), as a column of archon's
    tables, as an index on one of them and as a trigger on one of them."""
    q = quote_identifier
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    conn.execute(f"CREATE TABLE {q(name)} ({q(name)} TEXT, b)")
    conn.execute(f"INSERT INTO {q(name)} VALUES (?, 1)", (name,))
    conn.execute(f"CREATE INDEX {q(name + ' idx')} ON {q(name)} ({q(name)})")
    conn.execute(f"CREATE VIEW {q(name + ' view')} AS SELECT {q(name)} AS {q(name)} FROM {q(name)}")
    conn.execute(f"CREATE TRIGGER {q(name + ' trg')} AFTER INSERT ON {q(name)} BEGIN SELECT 1; END")
    for table in ("projects", "approval_requests", "approval_request_events", "execution_environments"):
        conn.execute(f"ALTER TABLE {table} ADD COLUMN {q(name + str(n))} TEXT")
    conn.execute(f"CREATE INDEX {q(name + ' on projects')} ON projects ({q(name + str(n))})")
    conn.execute(f"CREATE TRIGGER {q(name + ' on requests')} AFTER UPDATE ON approval_requests BEGIN SELECT 1; END")
    conn.execute("COMMIT")
    conn.close()


COMMANDS = [
    ["doctor"], ["doctor", "--json"], ["doctor", "--full"],
    ["upgrade", "--plan"],
    ["projects", "list"], ["approvals", "list"], ["approvals", "show", "req-open", "--json"],
    ["envs", "list"], ["envs", "show", "env-ready"], ["audit"],
]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory) -> Path:
    return damage.healthy(tmp_path_factory.mktemp("healthy") / "archon.db")


def _sweep(healthy: Path, work: Path, names: list[str]) -> None:
    db = work / "db" / "archon.db"
    db.parent.mkdir(parents=True, exist_ok=True)
    for old in db.parent.glob("archon.db*"):
        old.unlink()
    shutil.copyfile(healthy, db)
    plant(db, "x", 0)  # INJECTION's FROM "x" must exist for the injected query to run
    for n, name in enumerate(names, start=1):
        plant(db, name, n)
    for argv in COMMANDS:
        ended_cleanly(console("--db", str(db), *argv, timeout=60))
    for redact in ([], ["--redact"]):
        bundle = work / f"bundle{len(redact)}.zip"
        bundle.unlink(missing_ok=True)
        result = console("doctor", str(db), "--bundle", str(bundle), *redact, timeout=60)
        ended_cleanly(result)
        assert result.returncode in (0, 1), result.stderr
        with zipfile.ZipFile(bundle) as archive:
            counts = json.loads(archive.read("row_counts.json")) if "row_counts.json" in archive.namelist() else None
        if counts is not None and not redact:
            for name in names:
                assert counts.get(name) == 1, (name, counts.get(name))


def test_the_injected_recursive_query_never_runs(healthy, tmp_path):
    """Issue 17 9b: this table name made `doctor --bundle` run for ever."""
    _sweep(healthy, tmp_path, [INJECTION])


def test_names_that_end_identifiers_and_statements(healthy, tmp_path):
    _sweep(healthy, tmp_path, FIXED_NAMES)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.sampled_from(PIECES), min_size=1, max_size=6).map("".join), min_size=1, max_size=3,
                unique_by=str.lower))
def test_generated_names_in_every_schema_position(healthy, tmp_path, names):
    names = [n for n in names if n.lower() not in ("x",)]
    _sweep(healthy, tmp_path, names or ["a\"b"])


async def test_every_screen_reads_a_schema_of_hostile_names(healthy, tmp_path, make_app):
    """The TUI (read-only, as `inspect` opens it) lists, shows and checks the same database."""
    from tests.adversarial.tui import open_screen

    db = tmp_path / "archon.db"
    shutil.copyfile(healthy, db)
    plant(db, "x", 0)
    for n, name in enumerate([INJECTION, *FIXED_NAMES], start=1):
        plant(db, name, n)
    app = make_app(db, read_only=True, start="approvals")
    async with app.run_test(size=(160, 50)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        for command in ("envs", "projects", "project p1", "doctor", "upgrade", "approvals"):
            await open_screen(pilot, command)
            await app.workers.wait_for_complete()
            await pilot.pause()
            for key in ("down", "enter", "escape"):
                await pilot.press(key)
            assert app.is_running, command
        assert app.return_code is None
