"""Running the upgrade: adoption with --force, the ledger it leaves, the backfills and sweeps it
performs, rebuilds that lose no CASCADE child, and a second run that writes nothing."""

from __future__ import annotations

import sqlite3
from datetime import datetime, timezone

import pytest
import sqlite_utils
from sqlite_utils.migrations import Migrations

from console import __version__
from console.cli.cli import main
from console.db.detect import detect_shape
from console.db.migrations.registry import MIGRATIONS
from console.services.upgrade.model import UpgradeProgress
from console.services.upgrade.plan import plan_upgrade
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import (
    add_old_approval_tables,
    connect,
    db_1820,
    db_1822,
    dump,
    fingerprint_dir,
    ledger_names,
    sha256,
)

pytestmark = pytest.mark.slow

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
ALL_IDS = [m.id for m in MIGRATIONS]


def _rows(path, sql, params=()):
    conn = sqlite3.connect(path)
    try:
        return [tuple(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def _count(path, table):
    return _rows(path, f'SELECT count(*) FROM "{table}"')[0][0]


def test_adopting_a_1820_database(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    before_dump = dump(path)
    events: list[UpgradeProgress] = []
    result = run_upgrade(path, force=True, now=NOW, progress=events.append)
    assert result.status == "upgraded" and result.applied == ALL_IDS
    assert result.release_after == "1.10.0"

    # The ledger: sqlite-utils' own table, readable by sqlite-utils, plus our side table.
    db = sqlite_utils.Database(path)
    assert [m.name for m in Migrations("archon-console").applied(db)] == ALL_IDS
    fresh = sqlite_utils.Database(memory=True)
    Migrations("x").ensure_migrations_table(fresh)
    ours = {r[0]: r[1] for r in db.execute("SELECT name, sql FROM sqlite_master WHERE name LIKE '%sqlite_migrations%'")}
    theirs = {r[0]: r[1] for r in fresh.execute("SELECT name, sql FROM sqlite_master WHERE name LIKE '%sqlite_migrations%'")}
    assert ours == theirs
    side = _rows(path, "SELECT name, position, safety, checksum, target_release, snapshot_path, snapshot_sha256, "
                       "tool_version, applied_at FROM _archon_console_ledger ORDER BY position")
    assert [r[0] for r in side] == ALL_IDS
    assert [r[1] for r in side] == list(range(1, 30))
    assert [(r[2], r[3]) for r in side] == [(m.safety, m.checksum) for m in MIGRATIONS]
    assert {(r[4], r[5], r[6], r[7], r[8]) for r in side} == {
        ("1.10.0", result.snapshot_path, result.snapshot_sha256, __version__, "2026-05-01 12:00:00")
    }

    # The snapshot: named by the injected time, verified, identical to the database before.
    snap = tmp_path / "archon.db.pre-upgrade-20260501T120000Z.sqlite3"
    assert result.snapshot_path == str(snap)
    assert sha256(snap) == result.snapshot_sha256
    assert dump(snap) == before_dump
    assert _rows(snap, "PRAGMA journal_mode") == [("delete",)]

    kinds = [e.kind for e in events]
    assert kinds[0] == "snapshot" and kinds[-1] == "done"
    migrations = [e for e in events if e.kind == "migration"]
    assert [(e.done, e.total) for e in migrations] == [(n, 29) for n in range(1, 30)]


def test_second_upgrade_is_up_to_date_and_writes_nothing(tmp_path, capsys):
    path = db_1820(tmp_path / "archon.db", wal=True)
    assert main(["--db", str(path), "upgrade", "--force"]) == 0
    capsys.readouterr()
    before = fingerprint_dir(tmp_path)
    assert main(["--db", str(path), "upgrade"]) == 0
    assert main(["--db", str(path), "upgrade", "--force"]) == 0
    assert "Up to date" in capsys.readouterr().out
    assert fingerprint_dir(tmp_path) == before


def test_sweep_fails_active_and_cancels_queued_work(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, force=True, now=NOW)
    assert _rows(path, "SELECT ticket_id, status FROM build_sequence_tickets WHERE build_sequence_id = 'proj-1-seq-live' "
                       "ORDER BY position") == [("proj-1-t1", "completed"), ("proj-1-t2", "failed"), ("proj-1-t3", "cancelled")]
    assert _rows(path, "SELECT id, status FROM build_sequences ORDER BY id") == [
        ("proj-1-seq-done", "completed"), ("proj-1-seq-live", "failed"),
        ("proj-2-seq-done", "completed"), ("proj-2-seq-live", "failed"),
    ]


def test_1820_profile_backfill_ids_and_events(tmp_path):
    """Straight to 1.10.0, as archon 1.10.0's own start: revision 1 in schema 3 and its `:created`
    event, nothing of 1.8.22's path (issue 18, finding 4)."""
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, force=True, now=NOW)
    revisions = _rows(path, "SELECT id, revision, schema_version FROM execution_profile_revisions "
                            "WHERE project_id = 'proj-2' ORDER BY revision")
    assert revisions == [("proj-2:execution-profile:1", 1, 3)]
    events = _rows(path, "SELECT id, event_type, profile_revision_id, previous_profile_revision_id "
                         "FROM execution_profile_audit_events WHERE project_id = 'proj-2' ORDER BY rowid")
    assert events == [("proj-2:execution-profile:1:created", "revision_created", "proj-2:execution-profile:1", None)]
    active = _rows(path, "SELECT active_execution_profile_revision_id FROM projects ORDER BY id")
    assert [row[0] for row in active] == [f"proj-{i}:execution-profile:1" for i in range(1, len(active) + 1)]


def test_1820_profile_backfill_ids_and_events_through_1_8_22(tmp_path):
    """With a stop at 1.8.22 (its start ran first), the chained history: `:1` in schema 2, then `:v3`."""
    path = db_1820(tmp_path / "archon.db")
    run_upgrade(path, target="1.8.22", force=True, now=NOW)
    run_upgrade(path, force=True, now=NOW)
    revisions = _rows(path, "SELECT id, revision, schema_version FROM execution_profile_revisions "
                            "WHERE project_id = 'proj-2' ORDER BY revision")
    assert revisions[:2] == [("proj-2:execution-profile:1", 1, 2), ("proj-2:execution-profile:v3", 2, 3)]
    events = _rows(path, "SELECT id, event_type, profile_revision_id, previous_profile_revision_id "
                         "FROM execution_profile_audit_events WHERE project_id = 'proj-2' ORDER BY rowid")
    assert events[:2] == [
        ("proj-2:execution-profile:1:created", "revision_created", "proj-2:execution-profile:1", None),
        ("proj-2:execution-profile:v3:schema-backfill", "revision_activated",
         "proj-2:execution-profile:v3", "proj-2:execution-profile:1"),
    ]


@pytest.mark.parametrize("via_1822", [False, True])
def test_1822_profile_backfill_ids_and_events(tmp_path, via_1822):
    """proj-1 runs on a schema-1 revision: straight to 1.10.0, 021 moves it to `:v3`; with a stop at
    1.8.22, 006 moves it to `:v2` first and 021 then to `:v3`; every move audited."""
    path = db_1822(tmp_path / "archon.db")
    events_before = _rows(path, "SELECT * FROM execution_profile_audit_events ORDER BY id")
    if via_1822:
        run_upgrade(path, target="1.8.22", force=True, now=NOW)
    run_upgrade(path, force=True, now=NOW)
    ids = [r[0] for r in _rows(path, "SELECT id FROM execution_profile_revisions WHERE project_id = 'proj-1' "
                                     "ORDER BY revision")]
    events = _rows(path, "SELECT id, profile_revision_id, previous_profile_revision_id "
                         "FROM execution_profile_audit_events WHERE project_id = 'proj-1' ORDER BY rowid")
    if via_1822:
        assert ids[:4] == ["proj-1:execution-profile:1", "proj-1:legacy",
                           "proj-1:execution-profile:v2", "proj-1:execution-profile:v3"]
        assert ("proj-1:execution-profile:v2:v2-backfill", "proj-1:execution-profile:v2", "proj-1:legacy") in events
        moved_from = "proj-1:execution-profile:v2"
    else:
        assert ids[:3] == ["proj-1:execution-profile:1", "proj-1:legacy", "proj-1:execution-profile:v3"]
        assert not any(":v2" in event[0] for event in events)
        moved_from = "proj-1:legacy"
    assert ("proj-1:execution-profile:v3:schema-backfill", "proj-1:execution-profile:v3", moved_from) in events
    # 020 rebuilt execution_profile_revisions: every audit event (its CASCADE child) survived.
    after = set(_rows(path, "SELECT * FROM execution_profile_audit_events"))
    assert set(events_before) <= after
    sql = _rows(path, "SELECT sql FROM sqlite_master WHERE name = 'execution_profile_revisions'")[0][0]
    assert "schema_version IN (1, 2, 3)" in sql
    # Queued and active tickets had a selection, so the 009 replay swept nothing.
    assert _rows(path, "SELECT count(*) FROM build_sequence_tickets WHERE status IN ('failed', 'cancelled')") == [(0,)]


@pytest.mark.parametrize("versioned", [False, True])
def test_approval_rebuild_keeps_every_cascade_child(tmp_path, versioned):
    """An approval table of the older action_json limit, with events (ON DELETE CASCADE): the
    rebuild turns foreign keys off before BEGIN, so not one event is lost."""
    path = db_1820(tmp_path / "archon.db")
    if versioned:
        run_upgrade(path, target="1.8.20", force=True, now=NOW)
    conn = connect(path)
    add_old_approval_tables(conn, requests=30, events_each=4)
    conn.close()
    requests = _rows(path, "SELECT * FROM approval_requests ORDER BY id")
    events = _rows(path, "SELECT * FROM approval_request_events ORDER BY id")
    plan = plan_upgrade(path)
    assert {s.id: s.rows for s in plan.pending}["014-approval-requests-rebuild-action-limit"] == 30
    run_upgrade(path, force=True, now=NOW)
    assert _rows(path, "SELECT * FROM approval_requests ORDER BY id") == requests
    assert _rows(path, "SELECT * FROM approval_request_events ORDER BY id") == events
    sql = _rows(path, "SELECT sql FROM sqlite_master WHERE name = 'approval_requests'")[0][0]
    assert "BETWEEN 2 AND 65536" in sql
    triggers = {r[0] for r in _rows(path, "SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                          "AND tbl_name = 'approval_requests'")}
    assert triggers == {"preserve_approval_request_identity", "preserve_approval_request_decision_evidence",
                        "validate_approval_request_status_transition"}
    assert _rows(path, "PRAGMA foreign_key_check") == []


def test_check_attempt_rebuilds_keep_children_and_sqlite_sequence(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    parsers = _rows(path, "SELECT * FROM check_attempt_diagnostic_parsers ORDER BY attempt_run_id")
    sequence = _rows(path, "SELECT * FROM sqlite_sequence")
    assert parsers and sequence == [("archon_misc_log", 3)]
    run_upgrade(path, force=True, now=NOW)
    assert _rows(path, "SELECT * FROM check_attempt_diagnostic_parsers ORDER BY attempt_run_id") == parsers
    assert _rows(path, "SELECT * FROM sqlite_sequence") == sequence
    assert _count(path, "check_attempt_details") == 4
    assert "environment_loss" in _rows(path, "SELECT sql FROM sqlite_master WHERE name = 'check_attempt_details'")[0][0]


def test_stepwise_upgrade_by_release(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    first = run_upgrade(path, target="1.8.20", force=True, now=NOW)
    assert first.applied == ALL_IDS[:1] and first.release_after == "1.8.20"
    second = run_upgrade(path, target="1.8.22", force=True, now=NOW)  # 009 needs it
    assert second.applied == ALL_IDS[1:19] and second.release_after == "1.8.22"
    plan = plan_upgrade(path)
    # Versioned, and nothing destructive is left; but the profile rows are the console's own, which
    # prove nothing about archon's schema-3 profiles (issue 18, finding 5).
    assert [r for r in plan.force_reasons if "unverified" not in r] == []
    assert plan.force_required and "are not evidence" in plan.force_reasons[0]
    third = run_upgrade(path, force=True, now=NOW)
    assert third.applied == ALL_IDS[19:]
    assert ledger_names(path) == ALL_IDS
    targets = [r[0] for r in _rows(path, "SELECT target_release FROM _archon_console_ledger ORDER BY position")]
    assert targets == ["1.8.20"] + ["1.8.22"] * 18 + ["1.10.0"] * 10
    snaps = {r[0] for r in _rows(path, "SELECT DISTINCT snapshot_path FROM _archon_console_ledger")}
    assert len(snaps) == 3  # one snapshot per run (suffixed: same second)


def test_snapshot_dir(tmp_path):
    path = db_1820(tmp_path / "archon.db")
    where = tmp_path / "snaps"
    where.mkdir()
    result = run_upgrade(path, force=True, snapshot_dir=where, now=NOW)
    assert result.snapshot_path == str(where / "archon.db.pre-upgrade-20260501T120000Z.sqlite3")
    assert sorted(p.name for p in where.iterdir()) == [
        "archon.db.pre-upgrade-20260501T120000Z.sqlite3",
        "archon.db.pre-upgrade-20260501T120000Z.sqlite3.sha256",  # its manifest (snapshot_manifest.py)
    ]
    assert not list(tmp_path.glob("archon.db.pre-upgrade-*"))


@pytest.mark.parametrize("release", ["1.8.20", "1.8.22"])
def test_upgrading_demo_databases(tmp_path, release):
    from console.demo.writer import generate

    path = tmp_path / "archon.db"
    generate(path, release=release, requests=300, seed=3, now="2026-04-01T00:00:00Z")
    counts_before = {t: _count(path, t) for t in ("approval_requests", "approval_request_events",
                                                   "execution_environments", "check_attempt_details")
                     if _rows(path, "SELECT 1 FROM sqlite_master WHERE name = ?", (t,))}
    result = run_upgrade(path, force=True, now=NOW)
    assert result.applied == ALL_IDS and result.release_after == "1.10.0"
    for table, count in counts_before.items():
        assert _count(path, table) == count
    conn = sqlite3.connect(path)
    shape = detect_shape(conn)
    conn.close()
    assert shape.release == "1.10.0" and shape.ledger == tuple(ALL_IDS)
    # Every live project points at a revision of its own at the current schema version.
    orphans = _rows(path, "SELECT p.id FROM projects p LEFT JOIN execution_profile_revisions r "
                          "ON r.id = p.active_execution_profile_revision_id AND r.project_id = p.id "
                          "WHERE p.deletion_started_at IS NULL AND (r.id IS NULL OR r.schema_version <> 3)")
    assert orphans == []
    if release == "1.8.20":
        created = _rows(path, "SELECT count(*) FROM execution_profile_audit_events WHERE id LIKE '%:execution-profile:1:created'")
        assert created[0][0] == _count(path, "projects")
    assert _rows(path, "PRAGMA foreign_key_check") == []
    assert _rows(path, "PRAGMA integrity_check") == [("ok",)]
