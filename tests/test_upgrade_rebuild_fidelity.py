"""Rebuilds keep what archon keeps (issue 8, rule 5).

* check_attempt_details is rebuilt from the database's own stored text with only the outcome list
  substituted: a line the console never saw (archon's table has one between its last FOREIGN KEY
  and its first CHECK) and a column it does not know survive, with their data.
* After a rebuild, the triggers (and indexes) archon re-creates unconditionally carry the
  release's text, not the older text the database held before (a synthetic 1.8.21 shape).
"""

from __future__ import annotations

import re
import sqlite3

import pytest

from console.db.migrations.base import statements_by_name
from console.db.migrations.profile_triggers import release_revision_triggers
from console.db.migrations.steps import approval_ddl
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import add_old_approval_tables, connect, db_1820, db_1822, make_schema

pytestmark = pytest.mark.slow

UNSEEN_LINE = "UNIQUE (batch_run_id, definition_id, execution_run_id)"


def _sql(path, name):
    conn = sqlite3.connect(path)
    try:
        row = conn.execute("SELECT sql FROM sqlite_master WHERE name = ?", (name,)).fetchone()
        return row[0] if row else None
    finally:
        conn.close()


def _without_name_and_outcomes(sql: str) -> str:
    body = sql.split("(", 1)[1]
    return re.sub(r"outcome IN \([^()]*\)", "outcome IN (...)", body)


def _rebuild_by_hand(conn, table: str, new_sql: str) -> None:
    """Swap a table's text the way archon's own recipe does (foreign keys off, triggers aside)."""
    triggers = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND sql LIKE ?", (f"%{table}%",)
    ).fetchall()
    indexes = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL", (table,)
    ).fetchall()
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN")
    for name, _sql_text in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    cols = ", ".join(r[1] for r in conn.execute(f'PRAGMA table_info("{table}")'))
    conn.execute(new_sql.replace(f"CREATE TABLE {table} (", f"CREATE TABLE {table}_handmade (", 1))
    conn.execute(f"INSERT INTO {table}_handmade ({cols}) SELECT {cols} FROM {table}")
    conn.execute(f"DROP TABLE {table}")
    conn.execute(f"ALTER TABLE {table}_handmade RENAME TO {table}")
    for (sql,) in indexes:
        conn.execute(sql)
    for _name, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.execute("PRAGMA foreign_keys = ON")


def test_check_attempt_rebuilds_keep_the_unseen_line_and_unknown_columns(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    conn = connect(path)
    stored = _sql(path, "check_attempt_details").replace("CREATE TABLE IF NOT EXISTS", "CREATE TABLE")
    last_fk = stored.index("ON DELETE RESTRICT,", stored.rindex("FOREIGN KEY")) + len("ON DELETE RESTRICT,")
    handmade = (stored[:last_fk] + f"\n    {UNSEEN_LINE}," + stored[last_fk:]).replace(
        "output_retention_state          TEXT NOT NULL DEFAULT 'retained',",
        "output_retention_state          TEXT NOT NULL DEFAULT 'retained',\n    archon_attempt_note TEXT,",
    )
    _rebuild_by_hand(conn, "check_attempt_details", handmade)
    conn.execute("UPDATE check_attempt_details SET archon_attempt_note = 'kept:' || execution_run_id")
    before = conn.execute(
        "SELECT execution_run_id, archon_attempt_note, outcome FROM check_attempt_details ORDER BY 1"
    ).fetchall()
    conn.close()
    assert UNSEEN_LINE in _sql(path, "check_attempt_details")

    run_upgrade(path, force=True)

    after_sql = _sql(path, "check_attempt_details")
    assert UNSEEN_LINE in after_sql  # the line between the last FOREIGN KEY and the first CHECK
    assert "archon_attempt_note TEXT" in after_sql
    assert "'ambiguous_process_loss', 'environment_loss'" in after_sql
    # Only the outcome list (and the name) changed: the rest of the stored text is byte for byte,
    # apart from the column step 027 adds (SQLite writes it after the last column).
    added = ', "placement_json" TEXT'
    assert added in after_sql
    assert _without_name_and_outcomes(after_sql.replace(added, "")) == _without_name_and_outcomes(handmade)
    conn = connect(path)
    assert conn.execute(
        "SELECT execution_run_id, archon_attempt_note, outcome FROM check_attempt_details ORDER BY 1"
    ).fetchall() == before
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


OLD_IDENTITY_TRIGGER = """CREATE TRIGGER preserve_approval_request_identity
  BEFORE UPDATE OF id, project_id, action_json ON approval_requests
  BEGIN
    SELECT RAISE(ABORT, 'Approval requests are immutable');
  END"""
OLD_INDEX = "CREATE INDEX idx_approval_requests_project_created ON approval_requests(project_id, created_at)"


def test_action_limit_rebuild_installs_the_release_text_of_its_triggers(tmp_path):
    """A 1.8.21 shape: approval tables of the older limit whose trigger and index texts differ."""
    path = db_1822(tmp_path / "archon.db", legacy_profile=False)
    conn = connect(path)
    conn.execute("DROP TABLE approval_request_events")
    conn.execute("DROP TABLE approval_requests")
    add_old_approval_tables(conn, requests=4)
    conn.execute("DROP TRIGGER preserve_approval_request_identity")
    conn.execute(OLD_IDENTITY_TRIGGER)
    conn.execute("DROP INDEX idx_approval_requests_project_created")
    conn.execute(OLD_INDEX)
    conn.close()

    run_upgrade(path, force=True)

    release = statements_by_name(approval_ddl.REBUILD_TRIGGERS_AND_INDEXES)
    assert len(release) == 6
    for name, text in release.items():
        assert _sql(path, name) == text, name
    assert "Approval requests are immutable" not in str(release)


OLD_REVISION_TRIGGER = """CREATE TRIGGER preserve_execution_profile_revision
  BEFORE UPDATE ON execution_profile_revisions
  BEGIN
    SELECT RAISE(ABORT, 'Profile revisions cannot change');
  END"""


def test_revision_rebuilds_install_the_release_text_of_the_revision_triggers(tmp_path):
    """A 1.8.21 shape: the revisions table of schema 1 only, with an older trigger text."""
    path = make_schema(tmp_path / "archon.db", "1.8.22")
    conn = connect(path)
    stored = _sql(path, "execution_profile_revisions").replace("CREATE TABLE IF NOT EXISTS", "CREATE TABLE")
    _rebuild_by_hand(conn, "execution_profile_revisions", stored.replace("schema_version IN (1, 2)", "schema_version IN (1)"))
    conn.execute("DROP TRIGGER preserve_execution_profile_revision")
    conn.execute(OLD_REVISION_TRIGGER)
    conn.close()
    assert "schema_version IN (1)" in _sql(path, "execution_profile_revisions")

    run_upgrade(path, force=True)

    assert _sql(path, "preserve_execution_profile_revision") == release_revision_triggers(3)[
        "preserve_execution_profile_revision"
    ]
    for name, text in release_revision_triggers(3).items():
        assert _sql(path, name) == text, name
