"""The demo database: shape per release, determinism, coverage of states, archon's guards.

Each release is generated once per module (they are read-only afterwards); tests that need
their own file use tmp_path.
"""

from __future__ import annotations

import hashlib
import json
import re
import sqlite3
from datetime import datetime, timezone

import pytest

from console.cli.cli import main
from console.clock import parse_time
from console.db import execution_profiles
from console.db.detect import detect_shape
from console.db.migrations.registry import MIGRATIONS
from console.db.migrations.runner import apply_all
from console.demo.writer import generate
from console.errors import Refusal, UsageError
from tests.conftest import connect

NOW = "2026-05-01T12:00:00Z"
NOW_DT = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
STATUSES = {"pending", "approved", "denied", "cancelled", "expired", "invalidated", "consumed"}
STATES = {"queued", "preparing", "ready", "running", "stopped", "retiring", "cleanup_pending",
          "retired", "failed", "unavailable"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """release -> path of a default-sized demo database."""
    root = tmp_path_factory.mktemp("demo")
    paths = {}
    for release in ("1.8.20", "1.8.22", "current"):
        paths[release] = root / f"{release}.db"
        generate(paths[release], release=release, now=NOW)
    return paths


def columns(conn, table):
    return {row[1] for row in conn.execute(f"PRAGMA table_info({table})")}


# --- shape -------------------------------------------------------------------------------------

@pytest.mark.parametrize("release, expected", [("1.8.20", "1.8.20"), ("1.8.22", "1.8.22"),
                                               ("current", "1.10.0")])
def test_release_shape_is_detected_without_a_ledger(demo, release, expected):
    conn = connect(demo[release])
    shape = detect_shape(conn)
    assert shape.release == expected, shape.reason
    assert not shape.has_ledger_table and shape.ledger == ()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


def test_older_releases_hold_only_their_own_tables_and_columns(demo):
    old = connect(demo["1.8.20"])
    tables = {r[0] for r in old.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not tables & {"approval_requests", "execution_profile_revisions", "service_run_details"}
    assert "active_execution_profile_revision_id" not in columns(old, "projects")
    middle = connect(demo["1.8.22"])
    assert "operation_claim_id" not in columns(middle, "execution_environments")
    assert middle.execute("SELECT count(*) FROM approval_requests").fetchone()[0] == 200


def test_no_wall_clock_time_leaks_in(demo):
    """Every stored time is relative to the frozen clock: nothing after it, nothing from today."""
    conn = connect(demo["current"])
    limit = "2026-05-02 12:00:00"  # idle stops, expiries and retries may lie hours ahead
    for table, in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
        for column in columns(conn, table):
            if column.endswith("_at"):
                late = conn.execute(
                    f"SELECT count(*) FROM {table} WHERE {column} > ? OR {column} < '2025-12-01'",
                    (limit,),
                ).fetchone()[0]
                assert late == 0, f"{table}.{column}"


# --- determinism and refusal -------------------------------------------------------------------

@pytest.mark.slow
def test_same_seed_and_clock_give_the_same_file(tmp_path):
    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    generate(a, now=NOW, requests=300)
    generate(b, now=NOW, requests=300)
    generate(c, now=NOW, requests=300, seed=8)
    dump = lambda p: list(sqlite3.connect(p).iterdump())  # noqa: E731
    assert dump(a) == dump(b)
    assert dump(a) != dump(c)


@pytest.mark.slow
def test_frozen_environment_clock_is_the_default(tmp_path, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW)
    summary = generate(tmp_path / "env.db", requests=30)
    assert summary.now == NOW_DT
    generate(tmp_path / "explicit.db", requests=30, now=NOW)
    dump = lambda p: list(sqlite3.connect(p).iterdump())  # noqa: E731
    assert dump(tmp_path / "env.db") == dump(tmp_path / "explicit.db")


def test_refuses_to_overwrite_an_existing_file(tmp_path):
    path = tmp_path / "archon.db"
    path.write_bytes(b"precious")
    with pytest.raises(Refusal):
        generate(path, now=NOW)
    assert path.read_bytes() == b"precious"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archon.db"]
    generate(path, now=NOW, overwrite=True)
    assert detect_shape(sqlite3.connect(path)).release == "1.10.0"


def test_bad_arguments_are_usage_errors(tmp_path):
    with pytest.raises(UsageError):
        generate(tmp_path / "x.db", release="1.9.0", now=NOW)
    with pytest.raises(UsageError):
        generate(tmp_path / "x.db", now="not a time")
    assert not (tmp_path / "x.db").exists()


def test_cli_writes_refuses_and_overwrites(tmp_path, capsys):
    path = tmp_path / "cli.db"
    assert main(["demo", str(path), "--now", NOW, "--requests", "40", "--release", "1.8.22"]) == 0
    out = capsys.readouterr().out
    assert "1.8.22" in out and "approval_requests" in out
    assert main(["demo", str(path), "--now", NOW]) == 1
    assert "already exists" in capsys.readouterr().err
    assert main(["demo", str(path), "--now", NOW, "--overwrite", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["release"] == "1.10.0" and summary["counts"]["approval_requests"] == 200
    other = tmp_path / "ro.db"
    assert main(["demo", str(other), "--read-only"]) == 1
    assert not other.exists()


# --- approvals ---------------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["1.8.22", "current"])
def test_every_approval_status_with_consistent_history(demo, release):
    conn = connect(demo[release])
    assert {r[0] for r in conn.execute("SELECT DISTINCT status FROM approval_requests")} == STATUSES
    check_approval_histories(conn)


def check_approval_histories(conn):
    events: dict[str, list] = {}
    for row in conn.execute("SELECT * FROM approval_request_events ORDER BY approval_request_id, sequence"):
        events.setdefault(row["approval_request_id"], []).append(row)
    requests = conn.execute("SELECT * FROM approval_requests").fetchall()
    assert len(events) == len(requests)
    for request in requests:
        history = events[request["id"]]
        assert [e["sequence"] for e in history] == list(range(1, len(history) + 1))
        first = history[0]
        assert (first["from_status"], first["to_status"], first["actor_classification"]) == (
            None, "pending", "system")
        assert first["created_at"] == request["created_at"]
        for before, after in zip(history, history[1:]):
            assert after["from_status"] == before["to_status"]
            assert after["created_at"] >= before["created_at"]
            assert after["event_type"] == after["to_status"]
        assert history[-1]["to_status"] == request["status"]
        assert request["updated_at"] == history[-1]["created_at"]
        decisions = [e for e in history if e["to_status"] in ("approved", "denied")]
        if decisions:
            assert decisions[0]["actor_classification"] == "human"
            assert request["decision_at"] == decisions[0]["created_at"]
            authority = json.loads(request["authority_json"])
            assert decisions[0]["actor_reference"] != authority["requested_by"]  # four eyes
        else:
            assert request["decision_at"] is None
        if request["status"] == "consumed":
            assert history[-1]["actor_classification"] == "action_executor"
            assert request["consumed_at"] == history[-1]["created_at"]
        if request["status"] == "expired":
            assert history[-1]["created_at"] >= request["expires_at"]
        assert request["created_at"] < request["expires_at"]


def test_payloads_are_realistic_and_fingerprinted(demo):
    conn = connect(demo["current"])
    kinds = set()
    for row in conn.execute("SELECT * FROM approval_requests"):
        action = json.loads(row["action_json"])
        authority = json.loads(row["authority_json"])
        assert row["action_fingerprint"] == hashlib.sha256(row["action_json"].encode()).hexdigest()
        assert authority["run_id"] == row["execution_run_id"]
        kinds.add(row["action_kind"])
        if row["action_kind"] == "git_push":
            assert re.fullmatch(r"[0-9a-f]{40}", action["commit"])
            assert action["force"] is False and action["ref"].startswith("refs/heads/")
        else:
            assert isinstance(action["command"], list) and action["timeout_seconds"] > 0
    assert kinds == {"git_push", "custom_check"}
    requesters = {json.loads(r[0])["requested_by"] for r in conn.execute(
        "SELECT authority_json FROM approval_requests WHERE status = 'pending'")}
    assert "alice" in requesters and any(r.startswith("agent:") for r in requesters)


def test_pending_expiries_span_overdue_to_hours_ahead(demo):
    conn = connect(demo["current"])
    offsets = [
        (parse_time(r[0]) - NOW_DT).total_seconds()
        for r in conn.execute("SELECT expires_at FROM approval_requests WHERE status = 'pending'")
    ]
    assert any(o < 0 for o in offsets)
    assert sum(1 for o in offsets if 0 < o <= 3600) >= 4
    assert any(o > 4 * 3600 for o in offsets)
    approved_overdue = conn.execute(
        "SELECT count(*) FROM approval_requests WHERE status = 'approved' AND expires_at < ?",
        ("2026-05-01 12:00:00",)).fetchone()[0]
    assert approved_overdue == 0


def test_untrusted_strings_are_present(demo):
    conn = connect(demo["current"])
    names = {r[0] for r in conn.execute("SELECT name FROM projects")}
    assert "[@click=app.quit]x[/]" in names
    texts = [json.dumps(json.loads(r[0])) for r in conn.execute("SELECT action_json FROM approval_requests")]
    assert any("\\u001b[2J" in t and "[red]markup[/red]" in t for t in texts)


def test_each_request_has_its_own_run(demo):
    conn = connect(demo["current"])
    orphans = conn.execute(
        "SELECT count(*) FROM approval_requests r LEFT JOIN execution_runs x"
        " ON x.id = r.execution_run_id AND x.project_id = r.project_id WHERE x.id IS NULL"
    ).fetchone()[0]
    assert orphans == 0


# --- profiles ----------------------------------------------------------------------------------

@pytest.mark.parametrize("release, version", [("1.8.22", 2), ("current", 3)])
def test_profile_history(demo, release, version):
    conn = connect(demo[release])
    revisions = conn.execute("SELECT * FROM execution_profile_revisions").fetchall()
    for row in revisions:
        assert row["fingerprint"] == execution_profiles.fingerprint_json(row["profile_json"])
        assert row["schema_version"] == version
    older_active = 0
    for project in conn.execute("SELECT * FROM projects"):
        mine = [r for r in revisions if r["project_id"] == project["id"]]
        assert len(mine) >= 2
        assert sorted(r["revision"] for r in mine) == list(range(1, len(mine) + 1))
        active = next(r for r in mine if r["id"] == project["active_execution_profile_revision_id"])
        assert json.loads(active["profile_json"])["provider_preference"] == project["build_execution_provider"]
        older_active += active["revision"] < max(r["revision"] for r in mine)
        assert conn.execute(
            "SELECT count(*) FROM execution_profile_audit_events WHERE project_id = ?"
            " AND event_type = 'revision_created'", (project["id"],)).fetchone()[0] == len(mine)
        last = conn.execute(
            "SELECT profile_revision_id FROM execution_profile_audit_events WHERE project_id = ?"
            " AND event_type = 'revision_activated' ORDER BY created_at DESC LIMIT 1",
            (project["id"],)).fetchone()
        if last is not None:
            assert last[0] == active["id"]
    assert older_active >= 1
    deleting = conn.execute("SELECT count(*) FROM projects WHERE deletion_started_at IS NOT NULL")
    assert deleting.fetchone()[0] == 1


# --- environments ------------------------------------------------------------------------------

@pytest.mark.parametrize("release", ["1.8.20", "1.8.22", "current"])
def test_every_lifecycle_state_with_its_timeline(demo, release):
    conn = connect(demo[release])
    envs = conn.execute("SELECT * FROM execution_environments").fetchall()
    assert {e["lifecycle_state"] for e in envs} == STATES
    for env in envs:
        events = conn.execute(
            "SELECT * FROM execution_environment_events WHERE environment_id = ? ORDER BY sequence",
            (env["id"],)).fetchall()
        assert [e["sequence"] for e in events] == list(range(1, len(events) + 1))
        assert events[0]["from_state"] is None and events[0]["to_state"] == "queued"
        assert events[-1]["to_state"] == env["lifecycle_state"]
        assert all(b["created_at"] >= a["created_at"] for a, b in zip(events, events[1:]))
    leases = conn.execute(
        "SELECT e.lifecycle_state FROM execution_environment_run_bindings b JOIN execution_environments e"
        " ON e.id = b.environment_id WHERE b.relationship = 'execution' AND b.released_at IS NULL"
    ).fetchall()
    assert leases and {r[0] for r in leases} <= {"ready", "running"}


def test_current_release_has_claims_idle_stops_and_cleanup_retries(demo):
    conn = connect(demo["current"])
    now = "2026-05-01 12:00:00"
    stale = "2026-05-01 11:45:00"
    claims = conn.execute(
        "SELECT operation_kind, operation_claimed_at, operation_claim_id, lifecycle_state"
        " FROM execution_environments WHERE operation_claim_id IS NOT NULL").fetchall()
    assert {c[0] for c in claims} == {"stop", "retire", "reset", "cleanup_retry"}
    assert any(c[1] < stale for c in claims) and any(c[1] >= stale for c in claims)
    assert any(c[2].startswith("archon-worker:") for c in claims)
    assert not {c[3] for c in claims} & {"retired", "failed"}
    one = lambda sql: conn.execute(sql, (now,)).fetchone()[0]  # noqa: E731
    assert one("SELECT count(*) FROM execution_environments WHERE lifecycle_state = 'running'"
               " AND idle_stop_at < ?") >= 1
    assert one("SELECT count(*) FROM execution_environments WHERE cleanup_retry_at > ?") >= 1
    assert conn.execute("SELECT max(cleanup_attempts) FROM execution_environments").fetchone()[0] >= 3
    assert conn.execute("SELECT count(*) FROM execution_environments WHERE lifecycle_state = 'retiring'"
                        " AND retirement_requested_at IS NOT NULL").fetchone()[0] >= 1


# --- work and upgrades -------------------------------------------------------------------------

def test_build_sequences_match_each_release(demo):
    old = connect(demo["1.8.20"])
    assert old.execute("SELECT count(*) FROM build_sequence_tickets t JOIN build_sequences s"
                       " ON s.id = t.build_sequence_id WHERE s.status = 'active'"
                       " AND t.status IN ('queued', 'active')").fetchone()[0] > 0
    new = connect(demo["current"])
    assert new.execute("SELECT count(*) FROM build_sequence_tickets WHERE status IN ('queued', 'active')"
                       " AND execution_profile_selection_reason IS NULL").fetchone()[0] == 0
    assert new.execute("SELECT count(*) FROM check_attempt_details").fetchone()[0] > 0


@pytest.mark.parametrize("release", ["1.8.20", "1.8.22"])
def test_older_demo_databases_migrate_to_current(tmp_path, release):
    path = tmp_path / "old.db"
    generate(path, release=release, now=NOW, requests=50)
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    apply_all(conn, MIGRATIONS)
    assert detect_shape(conn).release == "1.10.0"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert conn.execute("SELECT count(*) FROM projects WHERE active_execution_profile_revision_id = ''"
                        ).fetchone()[0] == 0


# --- sizes -------------------------------------------------------------------------------------

@pytest.mark.parametrize("count", [0, 1, 7, 12])
def test_small_request_counts(tmp_path, count):
    path = tmp_path / "small.db"
    summary = generate(path, now=NOW, requests=count, projects=1, environments=3)
    conn = connect(path)
    assert summary.counts["approval_requests"] == count
    statuses = {r[0] for r in conn.execute("SELECT status FROM approval_requests")}
    if count >= 7:
        assert statuses == STATUSES
    check_approval_histories(conn)
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []


@pytest.mark.slow
def test_moderate_size(tmp_path):
    path = tmp_path / "moderate.db"
    seen = []
    summary = generate(path, now=NOW, requests=20_000,
                       progress=lambda stage, done, total: seen.append((stage, done, total)))
    assert summary.counts["approval_requests"] == 20_000
    assert summary.counts["execution_runs"] > 20_000
    assert 2.0 < summary.counts["approval_request_events"] / 20_000 < 3.0
    assert seen[-1] == ("approval requests", 20_000, 20_000)
    conn = connect(path)
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    pending = conn.execute("SELECT count(*) FROM approval_requests WHERE status = 'pending'").fetchone()[0]
    assert pending > 300
    # Status agrees with the last event, and sequences are contiguous, for every request.
    mismatched = conn.execute(
        "SELECT count(*) FROM approval_requests r JOIN approval_request_events e"
        " ON e.approval_request_id = r.id AND e.sequence = (SELECT max(sequence)"
        " FROM approval_request_events WHERE approval_request_id = r.id)"
        " WHERE e.to_status <> r.status").fetchone()[0]
    assert mismatched == 0
    gaps = conn.execute(
        "SELECT count(*) FROM (SELECT approval_request_id, max(sequence) m, count(*) c"
        " FROM approval_request_events GROUP BY approval_request_id) WHERE m <> c").fetchone()[0]
    assert gaps == 0


@pytest.mark.parametrize("release, seed", [("1.8.20", 7), ("1.8.22", 7), ("1.8.22", 3),
                                           ("current", 7), ("current", 0), ("current", 1),
                                           ("current", 2)])
def test_replaying_the_release_steps_changes_nothing(tmp_path, release, seed):
    """Archon re-runs its migrations at every start; a database it left behind is a fixed point."""
    from console.db.migrations.registry import migrations_through

    path = tmp_path / "replay.db"
    generate(path, release=release, now=NOW, requests=60, projects=10, seed=seed)
    conn = sqlite3.connect(path, isolation_level=None)
    before = sorted(conn.iterdump())  # archon drops and re-creates some triggers: order moves
    conn.execute("PRAGMA foreign_keys = ON")
    apply_all(conn, migrations_through(release))
    after = sorted(conn.iterdump())
    assert [line for line in after if line not in before] == []
    assert after == before


@pytest.mark.slow
def test_a_failed_run_leaves_nothing_behind(tmp_path, monkeypatch):
    """Written under a temporary name and renamed at the end: a failure mid-way, even with
    --overwrite, leaves the directory as it was."""
    import console.demo.approvals as approvals

    path = tmp_path / "archon.db"
    path.write_bytes(b"previous demo")
    broken = list(approvals.FEATURED)
    broken[-1] = ("bogus", *broken[-1][1:])  # a status archon's CHECK refuses
    monkeypatch.setattr(approvals, "FEATURED", tuple(broken))
    with pytest.raises(sqlite3.IntegrityError):
        generate(path, now=NOW, requests=30_000, overwrite=True)
    assert path.read_bytes() == b"previous demo"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["archon.db"]
