"""Refuse before the first write, not halfway (issue 8, rule 7).

Every condition that would make a later step fail is found before step 001 (and before the
snapshot): the upgrade and its plan refuse with exit 3, name the objects and what to do, and the
directory is byte-for-byte what it was (tests/untouched.py). On today's main each of these
databases got steps 001+ committed (and a snapshot) before a later step failed.
"""

from __future__ import annotations

import sqlite3

import pytest
from hypothesis import given, settings, strategies as st

from console.cli.cli import main
from console.db.migrations import preflight
from console.errors import EXIT_UNUSABLE, DatabaseUnusable
from console.services.upgrade.run import run_upgrade
from tests.untouched import fingerprint_dir
from tests.upgrade_helpers import FP, T0, connect, db_1820, db_1822, ledger_names


def _rename_away_check_attempts(path):
    """What a pre-1.8.20 archon's check-attempt migration did: RENAME to _legacy (SQLite rewrites
    the diagnostic parsers' foreign key to follow it), a new table, DROP the legacy one."""
    conn = connect(path)
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'check_attempt_details'").fetchone()[0]
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN")
    conn.execute("ALTER TABLE check_attempt_details RENAME TO check_attempt_details_legacy")
    conn.execute(sql)
    conn.execute("INSERT INTO check_attempt_details SELECT * FROM check_attempt_details_legacy")
    conn.execute("DROP TABLE check_attempt_details_legacy")
    conn.execute("COMMIT")
    conn.close()


def _orphan_parser_row(path):
    conn = connect(path)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(
        "INSERT INTO check_attempt_diagnostic_parsers (attempt_run_id, parser_id) VALUES ('run-gone', 'eslint')"
    )
    conn.close()


OLD_APPROVALS_WITHOUT_STATUS_CHECK = """CREATE TABLE approval_requests (
  id TEXT PRIMARY KEY, project_id TEXT NOT NULL, execution_run_id TEXT NOT NULL,
  action_kind TEXT NOT NULL, action_schema_version INTEGER NOT NULL, action_json TEXT NOT NULL,
  action_fingerprint TEXT NOT NULL, authority_schema_version INTEGER NOT NULL, authority_json TEXT NOT NULL,
  status TEXT NOT NULL DEFAULT 'pending', expires_at DATETIME NOT NULL, decision_at DATETIME,
  consumed_at DATETIME, created_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
  updated_at DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
  UNIQUE (id, project_id), UNIQUE (execution_run_id),
  CHECK (length(CAST(action_json AS BLOB)) BETWEEN 2 AND 16384)
)"""


def _approval_row_archons_text_rejects(path):
    """An older approvals table (no status CHECK) holding a status 1.8.22's table text rejects."""
    conn = connect(path)
    conn.execute("DROP TABLE approval_request_events")
    conn.execute("DROP TABLE approval_requests")
    conn.execute(OLD_APPROVALS_WITHOUT_STATUS_CHECK)
    conn.execute(
        "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
        "action_json, action_fingerprint, authority_schema_version, authority_json, status, expires_at) "
        "VALUES ('apr-odd', 'proj-1', 'proj-1-run-build', 'git_push', 1, '{}', ?, 1, '{}', 'on_hold', ?)",
        (FP, T0),
    )
    conn.close()


def _duplicate_activation_runs(path):
    """1.8.22 columns, but the unique activation-run index (step 019) missing and two tickets
    naming the same activation run."""
    conn = connect(path)
    conn.execute("DROP INDEX idx_build_sequence_tickets_activation_run")
    conn.execute(
        "UPDATE build_sequence_tickets SET activation_execution_run_id = 'proj-1-run-build' "
        "WHERE build_sequence_id = 'proj-1-seq-live' AND status = 'completed' OR ticket_id = 'proj-1-t4'"
    )
    conn.close()


def _active_profile_no_backfill_can_read(path):
    conn = connect(path)
    conn.execute(
        "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
        "profile_json, created_at) VALUES ('proj-2:odd', 'proj-2', 2, 1, ?, ?, ?)",
        ("c" * 64, '{"provider_preference":"docker_sandbox","eligible_workloads":"everything"}', T0),
    )
    conn.execute(
        "UPDATE projects SET active_execution_profile_revision_id = 'proj-2:odd', "
        "build_execution_provider = 'docker_sandbox' WHERE id = 'proj-2'"
    )
    conn.close()


def _check_attempt_row(column: str, value: str):
    """A check_attempt_details row outside a CHECK the rebuilt table keeps (018 and 028 build it from
    the table's own text), written past it as `PRAGMA ignore_check_constraints` lets a writer do:
    the rebuild's copy stops on it (upgrade2 finding 3)."""
    def damage(path):
        conn = connect(path)
        conn.execute("PRAGMA ignore_check_constraints = ON")
        guards = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' "
                              "AND tbl_name = 'check_attempt_details'").fetchall()
        for name, _sql in guards:  # a writer without them (the immutability guard refuses the edit)
            conn.execute(f'DROP TRIGGER "{name}"')
        changed = conn.execute(
            f"UPDATE check_attempt_details SET {column} = ? WHERE rowid = (SELECT min(rowid) FROM check_attempt_details)",
            (value,)).rowcount
        for _name, sql in guards:
            conn.execute(sql)
        conn.close()
        assert changed == 1
    return damage


def _commented_check(comment: str, then=None):
    """check_attempt_details' retention CHECK rewritten with a comment inside it (the table text a
    hostile or hand-edited file holds; 018 and 028 rebuild from it): the preflight's reading of the
    CHECK must not lose it to the parenthesis in the comment (attack round 3, finding 2)."""
    def damage(path):
        conn = sqlite3.connect(path, isolation_level=None)
        old = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'check_attempt_details'").fetchone()[0]
        new = old.replace("CHECK (output_retention_state IN ('retained', 'expired'))",
                          f"CHECK (output_retention_state IN ('retained', 'expired') {comment})")
        assert new != old
        version = conn.execute("PRAGMA schema_version").fetchone()[0]
        conn.execute("PRAGMA writable_schema = ON")
        conn.execute("UPDATE sqlite_master SET sql = ? WHERE name = 'check_attempt_details'", (new,))
        conn.execute(f"PRAGMA schema_version = {version + 1}")
        conn.execute("PRAGMA writable_schema = OFF")
        conn.close()
        if then is not None:
            then(path)
    return damage


def _view_naming_a_missing_table(path):
    conn = connect(path)
    conn.execute("CREATE VIEW attempt_report AS SELECT * FROM check_attempt_archive")
    conn.close()


CASES = {
    "missing-parent": (db_1820, _rename_away_check_attempts, "check_attempt_details_legacy",
                       "check_attempt_diagnostic_parsers"),
    "foreign-key-check": (db_1820, _orphan_parser_row, "run-gone", "foreign_keys.violations"),
    "rebuild-rejects-rows": (db_1822, _approval_row_archons_text_rejects, "apr-odd", "status IN"),
    "unique-index": (db_1822, _duplicate_activation_runs, "idx_build_sequence_tickets_activation_run",
                     "proj-1-run-build"),
    "profile-backfill": (db_1822, _active_profile_no_backfill_can_read, "proj-2:odd",
                         "006-profile-backfill-schema-v2"),
    "own-text-rebuild-018": (db_1820, _check_attempt_row("output_retention_state", "pruned"),
                             "018-check-attempt-outcome-ambiguous", "output_retention_state IN", "proj-1-run-a1"),
    "own-text-rebuild-028": (db_1822, _check_attempt_row("output_retention_state", "pruned"),
                             "028-check-attempt-outcome-environment-loss", "output_retention_state IN"),
    # accepted by 028's outcome list, not by 018's, which the copy of step 018 meets first
    "own-text-rebuild-outcome": (db_1820, _check_attempt_row("outcome", "environment_loss"),
                                 "018-check-attempt-outcome-ambiguous", "CHECK (outcome IS NULL OR outcome IN"),
    "own-text-rebuild-comment": (db_1820, _commented_check("/* ( */", _check_attempt_row("output_retention_state", "pruned")),
                                 "018-check-attempt-outcome-ambiguous", "output_retention_state IN", "proj-1-run-a1"),
    "own-text-rebuild-line-comment": (db_1820, _commented_check("-- (\n", _check_attempt_row("output_retention_state", "pruned")),
                                      "018-check-attempt-outcome-ambiguous", "output_retention_state IN"),
    "schema": (db_1820, _view_naming_a_missing_table, "018-check-attempt-outcome-ambiguous",
               "check_attempt_archive"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("args", [["--force"], ["--plan"]])
def test_each_condition_refuses_before_the_first_write(tmp_path, capsys, case, args):
    build, damage, *words = CASES[case]
    path = build(tmp_path / "archon.db")
    damage(path)
    before = fingerprint_dir(tmp_path)

    assert main(["--db", str(path), "upgrade", *args]) == EXIT_UNUSABLE

    err = capsys.readouterr().err
    assert "stops before the first write" in err and "Nothing was written" in err, err
    for word in words:
        assert word in err, (word, err)
    assert fingerprint_dir(tmp_path) == before  # no step, no ledger, no snapshot
    assert ledger_names(path) == []


def test_a_healthy_database_has_no_blockers(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    conn = sqlite3.connect(path)
    from console.db.migrations.registry import MIGRATIONS

    assert preflight.find_blockers(conn, MIGRATIONS) == []
    conn.close()


def test_preflight_is_made_again_under_the_writer_lock(tmp_path, monkeypatch):
    """A blocker appearing between the plan and the lock still stops the run before the snapshot."""
    path = db_1820(tmp_path / "archon.db")
    calls = []
    real = preflight.find_blockers

    def second_time_blocked(conn, pending):
        calls.append(len(pending))
        if len(calls) == 1:
            return real(conn, pending)
        return [preflight.Blocker("test.late", ("late_table",), "late_table appeared", "Look at it.")]

    # decide.py imports it when something is pending (a plan of an up-to-date file loads no preflight)
    monkeypatch.setattr(preflight, "find_blockers", second_time_blocked)
    before = fingerprint_dir(tmp_path)
    with pytest.raises(DatabaseUnusable, match="late_table appeared"):
        run_upgrade(path, force=True)
    assert len(calls) == 2
    assert fingerprint_dir(tmp_path) == before


def test_every_rebuild_step_has_a_preflight_decision():
    from console.db.migrations.registry import MIGRATIONS

    rebuilds = {m.id for m in MIGRATIONS if m.rebuild}
    assert rebuilds == set(preflight.REBUILT_TABLES)


def test_check_expressions_skip_literals():
    sql = "CREATE TABLE t (a TEXT CHECK (a <> 'CHECK (x)'), \"check\" INT, CHECK ((a IN ('(', ')'))))"
    assert preflight.check_expressions(sql) == ["a <> 'CHECK (x)'", "(a IN ('(', ')'))"]


@settings(max_examples=200, deadline=None)
@given(noise=st.lists(st.sampled_from(["/* ( */", "/* ) */", "-- ( )\n", "OR x = 'a(b'", "OR x <> 'c)''d'",
                                       'OR "x" = \'(\'', "OR [x] = ')'", " ", "AND (1)", "AND ((2))"]), max_size=6))
def test_a_check_expression_is_read_whole_whatever_its_literals_and_comments_hold(noise):
    """Parentheses inside string literals, quoted names and comments are not the expression's
    (attack round 3, finding 2): what is read is exactly what the CHECK holds, and SQLite can
    evaluate it."""
    body = "x IN ('retained', 'expired') " + " ".join(noise)
    if "--" in body and not body.endswith("\n"):
        body += "\n"
    sql = f"CREATE TABLE t (x TEXT CHECK ({body}), y INT CHECK (y > 0))"
    assert preflight.check_expressions(sql) == [body, "y > 0"]
    conn = sqlite3.connect(":memory:")
    conn.execute(sql)
    conn.execute("SELECT count(*) FROM t WHERE NOT (" + body + ")").fetchone()
    conn.close()
