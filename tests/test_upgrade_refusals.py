"""Every way `upgrade` fails closed: its own sentence, its exit code, the file byte-for-byte the same.

Exit 3 (the database is divergent or unknown): a ledger naming an unknown step, a gap, a
reordering, a changed checksum, an unversioned shape of no known release, a shape or ledger newer
than the target. Exit 1 (a rule said no, nothing written): --force missing, read-only mode, the
writer lock busy, no space for the snapshot.
"""

from __future__ import annotations

import sqlite3

import pytest

from console.cli.cli import main
from console.db import snapshot as snapshots
from console.db.snapshot_check import SnapshotFailed
from console.errors import EXIT_REFUSED, EXIT_UNUSABLE, Refusal
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import connect, db_1820, db_1822, fingerprint_dir, make_schema


def _versioned(tmp_path, target="current"):
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target=target, force=True)
    for snap in tmp_path.glob("*.pre-upgrade-*"):
        snap.unlink()
    return path


def _edit(path, *statements):
    conn = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        conn.execute(statement)
    conn.close()


def _refused(tmp_path, capsys, path, args, code, words):
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "upgrade", *args]) == code
    err = capsys.readouterr().err
    assert words in err, err
    assert fingerprint_dir(tmp_path) == before
    return err


LEDGER_EDITS = {
    "unknown-id": (
        ["INSERT INTO _sqlite_migrations (migration_set, name, applied_at) "
         "VALUES ('archon-console', '030-from-the-future', '2026-01-01 00:00:00')"],
        "newer than this console",
    ),
    "gap": (
        ["DELETE FROM _sqlite_migrations WHERE name LIKE '005-%'",
         "DELETE FROM _archon_console_ledger WHERE name LIKE '005-%'"],
        "skips step 005-profile-backfill-initial (a gap)",
    ),
    "reordered": (
        ["UPDATE _sqlite_migrations SET name = 'tmp' WHERE name LIKE '003-%'",
         "UPDATE _sqlite_migrations SET name = '003-profile-tables' WHERE name LIKE '004-%'",
         "UPDATE _sqlite_migrations SET name = '004-profile-revisions-rebuild-v2' WHERE name = 'tmp'"],
        "out of order",
    ),
    "checksum": (
        ["UPDATE _archon_console_ledger SET checksum = '" + "0" * 64 + "' WHERE name LIKE '012-%'"],
        "checksum changed",
    ),
    "side-row-missing": (
        ["DELETE FROM _archon_console_ledger WHERE name LIKE '007-%'"],
        "incomplete at step 007",
    ),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", sorted(LEDGER_EDITS))
@pytest.mark.parametrize("args", [["--plan"], ["--force"]])
def test_divergent_ledgers_fail_closed(tmp_path, capsys, case, args):
    path = _versioned(tmp_path, target="1.8.22")  # 013 steps still pending, so an upgrade would run
    statements, words = LEDGER_EDITS[case]
    _edit(path, *statements)
    _refused(tmp_path, capsys, path, args, EXIT_UNUSABLE, words)


def test_unknown_unversioned_shape(tmp_path, capsys):
    """1.8.20 with a table only 1.10.0 creates, but nothing of 1.8.22: not a release archon made."""
    path = make_schema(tmp_path / "archon.db", "1.8.20")
    from console.db.migrations.steps import s023_service_run_details

    conn = connect(path)
    s023_service_run_details.up(conn)
    conn.close()
    _refused(tmp_path, capsys, path, ["--force"], EXIT_UNUSABLE, "matches no known archon release")


@pytest.mark.slow
def test_intermediate_1_8_21_shape_is_adopted_and_upgraded(tmp_path, capsys):
    """docs/decisions.md, Q16: 1.8.22 everywhere except an approval table of an older action limit (the
    shape a pre-release left) is a valid starting point; 1.8.22's rebuild step widens it."""
    path = make_schema(tmp_path / "archon.db", "1.8.22")
    from tests.upgrade_helpers import add_old_approval_tables

    conn = connect(path)
    conn.execute("DROP TABLE approval_request_events")
    conn.execute("DROP TABLE approval_requests")
    add_old_approval_tables(conn, requests=0)
    conn.close()
    from console.db.detect import detect_shape

    probe = connect(path)
    shape = detect_shape(probe)
    probe.close()
    assert shape.intermediate and "1.8.21" in shape.reason
    assert main(["--db", str(path), "upgrade", "--force"]) == 0
    capsys.readouterr()
    after = connect(path)
    sql = after.execute("SELECT sql FROM sqlite_master WHERE name = 'approval_requests'").fetchone()[0]
    assert "BETWEEN 2 AND 65536" in sql
    assert detect_shape(after).release == "1.10.0"
    after.close()


def test_shape_newer_than_this_console(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db")
    _edit(path, "CREATE TABLE execution_profile_revisions (id TEXT, schema_version INTEGER CHECK (schema_version IN (1, 2, 3, 4)))")
    _refused(tmp_path, capsys, path, ["--force"], EXIT_UNUSABLE, "newer than this console")


def test_never_downgrades_an_unversioned_database(tmp_path, capsys):
    path = db_1822(tmp_path / "archon.db")
    _refused(tmp_path, capsys, path, ["--force", "--to", "1.8.20"], EXIT_UNUSABLE, "never downgrades")


@pytest.mark.slow
def test_never_downgrades_a_versioned_database(tmp_path, capsys):
    path = _versioned(tmp_path)
    _refused(tmp_path, capsys, path, ["--to", "1.8.22"], EXIT_UNUSABLE, "never downgrades")


@pytest.mark.slow
def test_ledger_contradicting_the_schema(tmp_path, capsys):
    path = _versioned(tmp_path, target="1.8.22")
    _edit(path, "DROP TABLE build_setup_evidence")
    _refused(tmp_path, capsys, path, ["--force"], EXIT_UNUSABLE, "contradict")


def test_adoption_without_force_prints_the_plan_and_writes_nothing(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db")
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "upgrade"]) == EXIT_REFUSED
    captured = capsys.readouterr()
    assert "009-build-sequence-incomplete-sweep" in captured.out  # the plan
    assert "needs --force" in captured.err
    assert fingerprint_dir(tmp_path) == before


@pytest.mark.slow
def test_destructive_step_on_a_versioned_database_needs_force(tmp_path, capsys):
    path = _versioned(tmp_path, target="1.8.20")
    _refused(tmp_path, capsys, path, [], EXIT_REFUSED, "009-build-sequence-incomplete-sweep is historical-destructive")


def test_read_only_mode_refuses(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db")
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "--read-only", "upgrade", "--force"]) == EXIT_REFUSED
    assert "read-only" in capsys.readouterr().err
    assert fingerprint_dir(tmp_path) == before


def test_busy_writer_lock_refuses(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    before = fingerprint_dir(tmp_path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")
    try:
        with pytest.raises(Refusal, match="busy"):
            run_upgrade(path, force=True, busy_timeout_ms=100)
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert fingerprint_dir(tmp_path) == before


def test_no_space_for_the_snapshot(tmp_path, monkeypatch):
    path = db_1820(tmp_path / "archon.db")
    before = fingerprint_dir(tmp_path)
    monkeypatch.setattr(snapshots, "free_bytes", lambda directory: 1024)
    with pytest.raises(SnapshotFailed, match="Not enough free space"):
        run_upgrade(path, force=True)
    assert fingerprint_dir(tmp_path) == before


def test_missing_snapshot_dir(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    before = fingerprint_dir(tmp_path)
    with pytest.raises(Refusal, match="does not exist"):
        run_upgrade(path, force=True, snapshot_dir=tmp_path / "nope")
    assert fingerprint_dir(tmp_path) == before
