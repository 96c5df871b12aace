"""Doctor: one damaged database per anomaly, the exact findings, and the exit codes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.cli.cli import main
from console.db.readonly import ro_uri
from console.services.doctor import CHECKS, PREFIX_TO_CHECK, run_doctor
from tests import damage
from tests.untouched import Holder, fingerprint_dir, without_shm


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", damage.NOW.isoformat())


def doctor(capsys, *argv: str) -> tuple[int, str]:
    code = main(["doctor", *argv])
    out = capsys.readouterr()
    return code, out.out + out.err


def problems(report) -> list[tuple[str, int]]:
    return [(f.id, f.count) for f in report.findings if f.severity != "info"]


def test_healthy_database_has_only_facts(tmp_path, capsys):
    db = damage.healthy(tmp_path / "archon.db")
    report = run_doctor(db, now=damage.NOW)
    assert problems(report) == []
    assert {"database.info", "schema.release", "ledger.state"} <= set(report.ids())
    assert report.exit_code() == 0 and report.exit_code(strict=True) == 0
    code, out = doctor(capsys, str(db))
    assert code == 0
    assert "0 error(s), 0 warning(s)" in out


# A stored fingerprint that does not recompute is also evidence against the console's algorithms.
ALSO_CONTRADICTS_EVIDENCE = {"profiles.fingerprint_mismatch": [("profiles.algorithm_evidence", 1)]}


@pytest.mark.parametrize("finding_id", sorted(damage.ANOMALIES))
def test_each_anomaly_gives_exactly_its_finding(tmp_path, capsys, finding_id):
    _build, expected_count, severity = damage.ANOMALIES[finding_id]
    db = damage.damaged(tmp_path / "archon.db", finding_id)
    report = run_doctor(db, now=damage.NOW)
    also = ALSO_CONTRADICTS_EVIDENCE.get(finding_id, [])
    assert sorted(problems(report)) == sorted([(finding_id, expected_count)] + also)
    finding = report.finding(finding_id)
    assert finding.severity == severity
    assert finding.why and finding.what_to_do and str(expected_count) in finding.found
    assert len(finding.rows) == expected_count and all(r["table"] and r["id"] for r in finding.rows)
    code, out = doctor(capsys, str(db))
    assert code == (1 if severity == "error" else 0)
    assert f"[{severity.upper()}] {finding_id}" in out
    code_strict, _ = doctor(capsys, str(db), "--strict")
    assert code_strict == 1


def test_finding_rows_name_the_rows(tmp_path):
    db = damage.damaged(tmp_path / "archon.db", "approvals.event_sequence")
    finding = run_doctor(db, now=damage.NOW).finding("approvals.event_sequence")
    assert finding.rows == [{"table": "approval_requests", "id": "req-gap"},
                            {"table": "approval_requests", "id": "req-late-start"}]
    assert "req-gap (2 events, highest 3)" in finding.found


def test_stale_threshold_is_an_option(tmp_path, capsys):
    db = damage.damaged(tmp_path / "archon.db", "environments.stale_claims")  # claimed 60 minutes ago
    assert problems(run_doctor(db, now=damage.NOW, stale_after=damage.timedelta(minutes=90))) == []
    code, out = doctor(capsys, str(db), "--stale-minutes", "90", "--strict")
    assert code == 0


def test_check_selects_checks_and_findings(tmp_path, capsys):
    db = damage.healthy(tmp_path / "archon.db")
    conn = damage.connect(db)
    damage.damage_stale_claim(conn)
    damage.damage_event_gap(conn)
    conn.close()
    report = run_doctor(db, now=damage.NOW, checks=["environments"])
    assert report.checks_run == ["environments"] and report.ids() == ["environments.stale_claims"]
    report = run_doctor(db, now=damage.NOW, checks=["approvals.event_sequence", "database.info"])
    assert report.checks_run == ["file", "approvals"]
    assert sorted(report.ids()) == ["approvals.event_sequence", "database.info"]
    with pytest.raises(ValueError, match="Unknown check"):
        run_doctor(db, now=damage.NOW, checks=["nonsense"])
    code, out = doctor(capsys, str(db), "--check", "nonsense")
    assert code == 2


def test_json_output_has_the_same_findings(tmp_path, capsys):
    db = damage.damaged(tmp_path / "archon.db", "approvals.status_mismatch")
    code, out = doctor(capsys, str(db), "--json")
    data = json.loads(out)
    assert code == 1 and data["exit_code"] == 1 and data["usable"] is True
    ids = [f["id"] for f in data["findings"] if f["severity"] != "info"]
    assert ids == ["approvals.status_mismatch"]
    item = next(f for f in data["findings"] if f["id"] == "approvals.status_mismatch")
    assert set(item) >= {"id", "severity", "title", "found", "why", "what_to_do", "rows", "count"}
    assert item["rows"] == [{"table": "approval_requests", "id": "req-silent-cancel"}]


# --- files the console cannot use ------------------------------------------------------------


def test_truncated_file(tmp_path, capsys):
    db = damage.truncated(tmp_path / "archon.db")
    report = run_doctor(db, now=damage.NOW)
    assert report.exit_code() == 3 and not report.usable
    assert [f for f in report.ids() if f != "database.info"] == ["file.truncated", "database.unreadable", "integrity.failed"]
    assert "217,088 missing" in report.finding("file.truncated").found
    code, out = doctor(capsys, str(db))
    assert code == 3 and "[ERROR] file.truncated" in out


def test_corrupted_page(tmp_path, capsys):
    db = damage.corrupted_page(tmp_path / "archon.db")
    report = run_doctor(db, now=damage.NOW)
    assert problems(report) == [("foreign_keys.unchecked", 1), ("approvals.failed", 1), ("constraints.unchecked", 1),
                               ("integrity.failed", 1)]
    assert "malformed" in report.finding("integrity.failed").found
    assert doctor(capsys, str(db))[0] == 1
    assert run_doctor(db, now=damage.NOW, full=True).finding("integrity.failed").title.startswith(
        "PRAGMA integrity_check")


def test_non_archon_sqlite(tmp_path, capsys):
    db = damage.not_archon(tmp_path / "notes.db")
    report = run_doctor(db, now=damage.NOW)
    assert problems(report) == [("database.not_archon", 1)]
    code, out = doctor(capsys, str(db))
    assert code == 3 and "not an archon database" in out


def test_not_sqlite_at_all_is_one_sentence(tmp_path, capsys):
    db = damage.not_sqlite(tmp_path / "notes.db")
    code, out = doctor(capsys, str(db))
    assert code == 3
    assert out.strip().splitlines() == [f"archon-console: {db} is not a SQLite database (its header is wrong)."]
    code, out = doctor(capsys, str(db), "--json")
    assert code == 3 and json.loads(out)["usable"] is False
    assert doctor(capsys, str(tmp_path / "missing.db"))[0] == 3


def test_database_from_a_newer_console(tmp_path, capsys):
    db = damage.from_newer_console(tmp_path / "archon.db")
    report = run_doctor(db, now=damage.NOW)
    assert problems(report) == [("ledger.unknown_steps", 1)]
    assert "030-future-step-from-a-newer-console" in report.finding("ledger.unknown_steps").found
    code, out = doctor(capsys, str(db))
    assert code == 3 and "newer archon-console" in out


def test_versioned_ledger_is_reported(tmp_path):
    db = damage.from_newer_console(tmp_path / "archon.db")
    conn = damage.connect(db)
    conn.execute("DELETE FROM _sqlite_migrations WHERE name LIKE '030-%'")
    conn.execute("UPDATE _archon_console_ledger SET checksum = 'x' WHERE name = '003-profile-tables'")
    conn.close()
    report = run_doctor(db, now=damage.NOW)
    assert problems(report) == [("ledger.checksum_mismatch", 1)]
    assert "29 step(s) recorded" in report.finding("ledger.state").found


def test_older_release_lists_pending_steps(schema_db):
    db = schema_db("1.8.22")
    report = run_doctor(db, now=damage.NOW)
    assert problems(report) == []
    assert report.finding("schema.release").found.startswith("archon 1.8.22 shape")
    from console.db.migrations.registry import MIGRATIONS

    assert report.finding("migrations.pending").count == sum(m.release == "1.10.0" for m in MIGRATIONS) == 10


# --- doctor never writes ---------------------------------------------------------------------


@pytest.mark.parametrize("wal", [False, True], ids=["rollback", "wal"])
def test_doctor_leaves_the_file_alone(tmp_path, capsys, wal):
    db = damage.damaged(tmp_path / "archon.db", "approvals.event_sequence")
    if wal:
        conn = damage.connect(db)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
    before = fingerprint_dir(tmp_path)
    assert doctor(capsys, str(db), "--full")[0] == 1
    assert fingerprint_dir(tmp_path) == before


def test_doctor_on_a_live_wal_database_sees_the_wal(tmp_path, capsys):
    db = damage.healthy(tmp_path / "archon.db", wal=True)
    with Holder(db, "hold", rows=10):
        conn = damage.connect(db)  # a second process's commit, also only in the -wal
        damage.damage_status_mismatch(conn)
        conn.close()
        before = without_shm(fingerprint_dir(tmp_path))
        report = run_doctor(db, now=damage.NOW)
        assert without_shm(fingerprint_dir(tmp_path)) == before  # read in place (issue 11 item 1)
    assert problems(report) == [("approvals.status_mismatch", 1)]
    assert report.opened == "in place (WAL, mode=ro)"


def test_every_check_has_a_name(tmp_path):
    """`--check NAME` runs that check alone, every finding says which check made it, and every
    finding id (each anomaly's, and those of a healthy file) selects its own check."""
    assert list(CHECKS) == ["file", "integrity", "foreign_keys", "schema", "ledger", "approvals",
                            "environments", "profiles", "constraints"]
    assert ro_uri(Path("/x y/a.db")).startswith("file:/x%20y/a.db?mode=ro")
    db = damage.healthy(tmp_path / "archon.db")
    everything = run_doctor(db, now=damage.NOW)
    assert everything.checks_run == list(CHECKS)
    for name in CHECKS:
        alone = run_doctor(db, checks=[name], now=damage.NOW)
        assert alone.checks_run == [name]
        assert [f.id for f in alone.findings] == [f.id for f in everything.findings if f.check == name]
    for finding_id in [*damage.ANOMALIES, *everything.ids()]:
        head = finding_id.split(".", 1)[0]
        group = PREFIX_TO_CHECK.get(head, head)
        assert group in CHECKS, finding_id
    kept = run_doctor(db, checks=["database.info"], now=damage.NOW)
    assert kept.checks_run == ["file"] and kept.ids() == ["database.info"]
    with pytest.raises(ValueError, match="Unknown check"):
        run_doctor(db, checks=["no_such_check"], now=damage.NOW)


# --- the fast approvals/foreign-key scans: every route gives the same exact findings -------------
#
# Doctor runs its long scans on worker connections when the file is stable (a private copy of a
# WAL file, an immutable open), in one read transaction on the main connection for a rollback file
# opened in place, and on the caller's own connection for an ArchonDatabase. Each shape below is
# checked on all three routes.


def _run_three_ways(db: Path) -> list[list[tuple[str, int, str]]]:
    from console.db.connect import open_database

    def shape(report):
        return [(f.id, f.count, f.found) for f in report.findings if f.severity != "info"]

    results = [shape(run_doctor(db, now=damage.NOW))]  # rollback file, in place
    handle = open_database(db, read_only=True)
    try:
        results.append(shape(run_doctor(handle, now=damage.NOW)))  # the caller's connection
    finally:
        handle.conn.close()
    conn = damage.connect(db)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.close()
    results.append(shape(run_doctor(db, now=damage.NOW)))  # WAL: private copy, worker connections
    return results


def _status_shapes(conn) -> None:
    # an event appended without the status change: status matches an earlier event, not the last
    damage.add_request(conn, "req-stale-status", status="approved", events=[
        (1, None, "pending"), (2, "pending", "approved"), (3, "approved", "consumed")])
    # the status matches no event at all
    damage.add_request(conn, "req-phantom", status="denied", events=[(1, None, "pending")], decision=-10)


def test_status_mismatch_shapes(tmp_path):
    db = damage.healthy(tmp_path / "archon.db")
    conn = damage.connect(db)
    _status_shapes(conn)
    conn.close()
    for result in _run_three_ways(db):
        assert [(i, c) for i, c, _f in result] == [("approvals.status_mismatch", 2),
                                                   ("approvals.decision_without_event", 1)]
        found = dict((i, f) for i, _c, f in result)["approvals.status_mismatch"]
        assert "req-phantom (status denied, last event pending)" in found
        assert "req-stale-status (status approved, last event consumed)" in found
        assert found.index("req-phantom") < found.index("req-stale-status")  # by id


def test_orphan_events_are_counted_then_listed(tmp_path):
    """Events whose (request, project) has no request: one under a missing request, one whose
    request exists but in another project. Found by counting groups, listed by foreign_key_check."""
    db = damage.healthy(tmp_path / "archon.db")
    conn = damage.connect(db)
    conn.execute("PRAGMA foreign_keys = OFF")
    for eid, project, request in (("orphan-1", "p1", "req-vanished"), ("orphan-2", "p2", "req-open")):  # sequence 1 of req-open is taken: use 7
        conn.execute(
            "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
            "to_status, actor_classification) VALUES (?, ?, ?, ?, 'created', 'pending', 'system')",
            (eid, project, request, 1 if eid == "orphan-1" else 7))
    conn.close()
    for result in _run_three_ways(db):
        assert [(i, c) for i, c, _f in result] == [("foreign_keys.violations", 2)]
        assert "orphan-1, orphan-2" in result[0][2]


def test_the_request_pass_covers_every_id_range(tmp_path):
    """The request pass is cut into id ranges: events of a missing request below the lowest id, above
    the highest (a blob sorts after all text) and on a range's bound are all counted, and a request
    with a NULL id (its own range) is a request without events."""
    db = damage.healthy(tmp_path / "archon.db")
    conn = damage.connect(db)
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("PRAGMA ignore_check_constraints = ON")
    ids = [r[0] for r in conn.execute("SELECT id FROM approval_requests ORDER BY id")]
    project = conn.execute("SELECT project_id FROM approval_requests LIMIT 1").fetchone()[0]
    for eid, request in (("low", ""), ("high", b"\xff"), ("bound", ids[len(ids) // 3] + "\x00")):
        conn.execute(
            "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
            "to_status, actor_classification) VALUES (?, ?, ?, 1, 'created', 'pending', 'system')",
            (f"orphan-{eid}", project, request))
    conn.execute("CREATE TEMP TABLE r AS SELECT * FROM approval_requests WHERE id = ?", (ids[0],))
    conn.execute("UPDATE r SET id = NULL, execution_run_id = 'run-of-a-null-id'")
    conn.execute("INSERT INTO approval_requests SELECT * FROM r")
    conn.commit()
    conn.close()
    for result in _run_three_ways(db):
        found = {i: (c, f) for i, c, f in result}
        assert found["foreign_keys.violations"][0] >= 3
        assert "orphan-low" in found["foreign_keys.violations"][1]
        assert "orphan-high" in found["foreign_keys.violations"][1]
        assert "orphan-bound" in found["foreign_keys.violations"][1]
        assert "None (status " in found["approvals.status_mismatch"][1]


def test_event_sequences_and_decisions_on_every_route(tmp_path):
    db = damage.healthy(tmp_path / "archon.db")
    conn = damage.connect(db)
    damage.damage_event_gap(conn)
    damage.damage_decision_without_event(conn)
    damage.damage_pending_past_expiry(conn)
    damage.damage_approved_past_expiry(conn)
    conn.close()
    expected = [("approvals.pending_past_expiry", 1), ("approvals.approved_past_expiry", 1),
                ("approvals.event_sequence", 2), ("approvals.decision_without_event", 1)]
    results = _run_three_ways(db)
    for result in results:
        assert [(i, c) for i, c, _f in result] == expected
    assert results[0] == results[1] == results[2]


def test_foreign_keys_alone_still_checks_events(tmp_path):
    db = damage.damaged(tmp_path / "archon.db", "foreign_keys.violations")
    report = run_doctor(db, now=damage.NOW, checks=["foreign_keys"])
    assert problems(report) == [("foreign_keys.violations", 1)]


# --- requests handed to archon (issue 8, rule 2) ---------------------------------------------------


def test_a_handed_off_stop_is_info_then_warns_past_the_threshold(tmp_path):
    """The console's own completion: INFO while archon has time, WARN ("archon not running?") after.

    On main the console wrote `stopped` instead, and doctor had nothing to say."""
    from console.db.connect import open_database
    from console.services.environment_claims import claim, complete

    db = damage.healthy(tmp_path / "archon.db")
    with open_database(db) as handle:
        claim(handle, "env-ready", "stop", "alice", now=damage.NOW)
        claim(handle, "env-running", "retire", "alice", now=damage.NOW)
        complete(handle, "env-ready", "alice", now=damage.NOW)
        complete(handle, "env-running", "alice", now=damage.NOW)
    soon = run_doctor(db, now=damage.NOW + damage.timedelta(minutes=2))
    assert problems(soon) == []
    info = soon.finding("environments.handoffs_pending")
    assert info.severity == "info" and info.count == 2
    assert "env-ready (stop requested 2 minutes ago; archon's idle-stop sweep performs it)" in info.found
    assert "env-running (retirement requested 2 minutes ago; archon's retirement path" in info.found
    assert "once the run holding its execution lease ends" in info.found  # env-running has a lease
    later = run_doctor(db, now=damage.NOW + damage.timedelta(minutes=25))
    assert problems(later) == [("environments.idle_stop_overdue", 1)]
    finding = later.finding("environments.idle_stop_overdue")
    assert "env-ready (stop requested 25 minutes ago" in finding.found and "Archon not running?" in finding.why
    assert later.finding("environments.handoffs_pending").count == 1  # the retirement waits for its run
    assert run_doctor(db, now=damage.NOW + damage.timedelta(minutes=25),
                      stale_after=damage.timedelta(hours=1)).finding("environments.idle_stop_overdue") is None
    assert later.finding("environments.console_state_changes") is None  # a hand-off changes no state


def test_old_console_completions_are_listed_with_what_to_check(tmp_path):
    db = damage.damaged(tmp_path / "archon.db", "environments.console_state_changes")
    conn = damage.connect(db)
    damage.add_env(conn, "env-said-stopped", "stopped")
    damage.add_env_event(conn, "env-said-stopped", 1, "operation_completed", "running", "stopped",
                         '{"operation_kind": "stop", "source": "archon-console"}', -20)
    damage.add_env(conn, "env-archon-stopped", "stopped")  # archon's own transition: not the console's
    damage.add_env_event(conn, "env-archon-stopped", 1, "stopped", "running", "stopped", None, -20)
    conn.close()
    finding = run_doctor(db, now=damage.NOW).finding("environments.console_state_changes")
    assert finding.count == 2 and finding.severity == "warning"
    assert [r["id"] for r in finding.rows] == ["env-made-ready", "env-said-stopped"]
    assert "env-made-ready (failed -> ready at 2026-11-01 11:30:00, now ready)" in finding.found
    assert "the provider may still run the container" in finding.why
    assert "archon now places runs on it" in finding.why


def test_the_doctor_screen_asks_the_service_for_a_revisions_project(tmp_path):
    """Screens write no SQL (issue 12): the jump from a revision to its project is a service read."""
    from console.db.connect import open_database
    from console.services.doctor import project_to_open

    source = (Path(__file__).resolve().parents[1] / "console" / "tui" / "screens" / "doctor.py").read_text()
    assert "execute(" not in source and "SELECT" not in source and "console.db" not in source
    db = damage.healthy(tmp_path / "archon.db")
    with open_database(db, read_only=True) as handle:
        revision, project = handle.conn.execute(
            "SELECT id, project_id FROM execution_profile_revisions ORDER BY id LIMIT 1").fetchone()
        assert project_to_open(handle, "execution_profile_revisions", revision) == project
        assert project_to_open(handle, "execution_profile_revisions", "no-such-revision") is None
        assert project_to_open(handle, "projects", project) == project
        assert project_to_open(handle, "projects", "no-such-project") is None
