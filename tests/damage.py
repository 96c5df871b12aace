"""Builders of damaged archon databases, one anomaly each, for doctor's tests.

`healthy(path)` writes a small 1.10.0 database on which doctor finds no error and no warning;
every `damage_*` function adds exactly one anomaly the way it happens in the wild (a writer that
skipped an event, a trigger dropped by hand, a copy cut short, ...). Rows go in with archon's
triggers active wherever the anomaly allows it.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
from datetime import datetime, timedelta, timezone
from pathlib import Path

from console.clock import db_time
from tests.conftest import add_project, connect, make_schema

NOW = datetime(2026, 11, 1, 12, 0, tzinfo=timezone.utc)
FP = "a" * 64
SECRET_ACTOR = "Zelda Quasimodo"
SECRET_PATH = "/home/zelda-private/secret-repo"
SECRET_PAYLOAD = "git@private.example:zelda/hidden-branch"
SECRET_REASON = "because the auditor Quasimodo insisted"


def at(minutes: float) -> str:
    return db_time(NOW + timedelta(minutes=minutes))


def add_request(conn, request_id: str, *, status: str = "pending", expires: float = 60, created: float = -30,
                events: list[tuple] | None = None, decision: float | None = None, consumed: float | None = None,
                project: str = "p1", actor: str = "alice", action: str | None = None) -> None:
    """A request and its events; `events` = [(sequence, from, to), ...] (default: the creation event)."""
    run = f"run-{request_id}"
    conn.execute("INSERT INTO execution_runs (id, project_id) VALUES (?, ?)", (run, project))
    if decision is None and status in ("approved", "denied", "consumed"):
        decision = created + 1
    conn.execute(
        "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
        "action_json, action_fingerprint, authority_schema_version, authority_json, status, expires_at, "
        "decision_at, consumed_at, created_at, updated_at) VALUES (?, ?, ?, 'git_push', 1, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?)",
        (request_id, project, run, action or '{"remote": "origin", "branch": "main"}', FP,
         '{"granted_by": "policy"}', status, at(expires),
         at(decision) if decision is not None else None, at(consumed) if consumed is not None else None,
         at(created), at(created)),
    )
    if events is None:
        events = [(1, None, "pending")]
    for sequence, frm, to in events:
        conn.execute(
            "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
            "from_status, to_status, actor_classification, actor_reference, reason, created_at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (f"{request_id}:{sequence}", project, request_id, sequence, to, frm, to,
             "system" if frm is None else "human", None if frm is None else actor,
             None, at(created + sequence - 1)),
        )


def add_env(conn, env_id: str, state: str = "ready", project: str = "p1", **columns) -> None:
    values = {
        "id": env_id, "project_id": project, "provider_kind": "host", "provider_version": "1",
        "target_kind": "repo_root", "target_key": env_id, "target_workspace_path": f"/ws/{env_id}",
        "environment_revision": 1, "workspace_mode": "direct", "environment_validation_fingerprint": FP,
        "template_identity": "tpl", "lifecycle_state": state, "created_at": at(-600), "updated_at": at(-600),
        **columns,
    }
    conn.execute(
        f"INSERT INTO execution_environments ({', '.join(values)}) VALUES ({', '.join('?' for _ in values)})",
        list(values.values()),
    )


def add_lease(conn, env_id: str, run_id: str, project: str = "p1") -> None:
    conn.execute("INSERT INTO execution_runs (id, project_id) VALUES (?, ?)", (run_id, project))
    conn.execute(
        "INSERT INTO execution_environment_run_bindings (id, environment_id, execution_run_id, project_id, "
        "relationship, environment_revision, environment_validation_fingerprint, authority_json) "
        "VALUES (?, ?, ?, ?, 'execution', 1, ?, '{}')",
        (f"lease-{run_id}", env_id, run_id, project, FP),
    )


_TEMPLATE: dict[str, bytes] = {}


def healthy(path: Path, *, wal: bool = False) -> Path:
    """A small, clean 1.10.0 database: doctor reports only info findings on it.

    Built once per process, then copied (applying the 29 steps is the slow part)."""
    if "db" not in _TEMPLATE:
        import tempfile

        with tempfile.TemporaryDirectory() as scratch:
            _TEMPLATE["db"] = _build_healthy(Path(scratch) / "t.db").read_bytes()
    path.write_bytes(_TEMPLATE["db"])
    if wal:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA journal_mode = WAL")
        conn.close()
    return path


def _build_healthy(path: Path) -> Path:
    make_schema(path, "1.10.0")
    conn = connect(path)
    add_project(conn, "p1")
    add_project(conn, "p2", provider="docker_sandbox")
    add_request(conn, "req-open")
    add_request(conn, "req-approved", status="approved", events=[(1, None, "pending"), (2, "pending", "approved")])
    add_request(conn, "req-consumed", status="consumed", consumed=-20,
                events=[(1, None, "pending"), (2, "pending", "approved"), (3, "approved", "consumed")])
    add_env(conn, "env-ready")
    add_env(conn, "env-running", "running", idle_stop_at=at(30))
    add_lease(conn, "env-running", "run-lease-1")
    conn.close()
    return path


# --- one anomaly each: (function, expected finding id, expected count) --------------------------


def damage_pending_past_expiry(conn) -> None:
    add_request(conn, "req-overdue", expires=-5, created=-65)


def damage_approved_past_expiry(conn) -> None:
    add_request(conn, "req-stale-approval", status="approved", expires=-5, created=-65,
                events=[(1, None, "pending"), (2, "pending", "approved")])


def damage_event_gap(conn) -> None:
    add_request(conn, "req-gap", status="approved", events=[(1, None, "pending"), (3, "pending", "approved")])
    add_request(conn, "req-late-start", status="approved", events=[(2, None, "pending"), (3, "pending", "approved")])


def damage_status_mismatch(conn) -> None:
    add_request(conn, "req-silent-cancel", status="cancelled")  # cancelled without an event


def damage_decision_without_event(conn) -> None:
    # decided (decision_at set), then expired; the approval event itself is missing.
    add_request(conn, "req-undocumented", status="expired", decision=-20,
                events=[(1, None, "pending"), (2, "pending", "expired")])


def damage_stale_claim(conn) -> None:
    add_env(conn, "env-stale", operation_claim_id="console:bob@h:1", operation_kind="stop",
            operation_claimed_at=at(-60))


def damage_claim_on_retired(conn) -> None:
    add_env(conn, "env-retired-claim", "retired", operation_claim_id="console:bob@h:2",
            operation_kind="retire", operation_claimed_at=at(-2))


def damage_lease_on_closed(conn) -> None:
    add_env(conn, "env-gone")
    add_lease(conn, "env-gone", "run-lease-2")
    conn.execute("UPDATE execution_environments SET lifecycle_state = 'retired' WHERE id = 'env-gone'")


def damage_cleanup_stuck(conn) -> None:
    add_env(conn, "env-stuck", "cleanup_pending", cleanup_attempts=1)


def damage_cleanup_attempts(conn) -> None:
    add_env(conn, "env-tries", "cleanup_pending", cleanup_attempts=4, cleanup_retry_at=at(30))


def damage_cleanup_retry_overdue(conn) -> None:
    # past the 15-minute threshold: a retry due a few minutes ago is archon's normal polling delay
    add_env(conn, "env-retry-late", "cleanup_pending", cleanup_attempts=1, cleanup_retry_at=at(-30))


def damage_idle_stop_overdue(conn) -> None:
    add_env(conn, "env-idle", "running", idle_stop_at=at(-30))


def damage_retirement_overdue(conn) -> None:
    add_env(conn, "env-retire-late", "stopped", retirement_requested_at=at(-180))


def add_env_event(conn, env_id: str, sequence: int, event_type: str, frm: str | None, to: str | None,
                  metadata: str | None, minutes: float) -> None:
    conn.execute(
        "INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, event_type, from_state, "
        "to_state, actor_classification, actor_reference, metadata_json, created_at) "
        "VALUES (?, 'p1', ?, ?, ?, ?, ?, 'human', 'alice', ?, ?)",
        (f"{env_id}:{sequence}", env_id, sequence, event_type, frm, to, metadata, at(minutes)),
    )


def damage_console_state_changes(conn) -> None:
    """What `envs complete` on a reset wrote before the hand-off model: failed -> ready."""
    add_env(conn, "env-made-ready", "ready")
    add_env_event(conn, "env-made-ready", 1, "operation_claimed", "failed", "failed",
                  '{"operation_kind": "reset", "source": "archon-console"}', -40)
    add_env_event(conn, "env-made-ready", 2, "operation_completed", "failed", "ready",
                  '{"operation_kind": "reset", "claim_id": null, "source": "archon-console"}', -30)


def _without_triggers(conn, names: list[str], sql: str, params=()) -> None:
    saved = [conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (n,)).fetchone()[0]
             for n in names]
    for name in names:
        conn.execute(f"DROP TRIGGER {name}")
    conn.execute(sql, params)
    for text in saved:
        conn.execute(text)


PROJECT_GUARDS = [
    "validate_project_execution_profile_owner_update",
    "validate_project_execution_profile_projection_update",
]


def damage_active_revision_missing(conn) -> None:
    add_project(conn, "p-lost")
    conn.execute("DELETE FROM execution_profile_revisions WHERE project_id = 'p-lost'")


def damage_active_revision_foreign(conn) -> None:
    add_project(conn, "p-borrower", provider="docker_sandbox")
    _without_triggers(conn, PROJECT_GUARDS,
                      "UPDATE projects SET active_execution_profile_revision_id = 'p2:execution-profile:1' "
                      "WHERE id = 'p-borrower'")


def damage_provider_projection(conn) -> None:
    add_project(conn, "p-drift")
    _without_triggers(conn, PROJECT_GUARDS,
                      "UPDATE projects SET build_execution_provider = 'docker_sandbox' WHERE id = 'p-drift'")


def damage_fingerprint_mismatch(conn) -> None:
    conn.execute(
        "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, profile_json) "
        "VALUES ('p1:execution-profile:bad', 'p1', 99, 3, ?, '{\"provider_preference\": \"host\"}')",
        ("f" * 64,),
    )


def damage_profile_round_trip(conn) -> None:
    """A revision whose fingerprint recomputes but whose JSON the console would serialise otherwise."""
    profile_json = '{"provider_preference": "host"}'
    canonical = json.dumps(json.loads(profile_json), sort_keys=True, separators=(",", ":"))
    conn.execute(
        "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, profile_json) "
        "VALUES ('p1:execution-profile:spaced', 'p1', 98, 1, ?, ?)",
        (hashlib.sha256(canonical.encode()).hexdigest(), profile_json),
    )


def damage_missing_objects(conn) -> None:
    conn.execute("DROP TRIGGER validate_approval_request_status_transition")
    conn.execute("DROP INDEX idx_approval_requests_action_kind")


def damage_foreign_key(conn) -> None:
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute(
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, to_status, "
        "actor_classification) VALUES ('orphan-event', 'p1', 'req-vanished', 1, 'created', 'pending', 'system')"
    )
    conn.execute("PRAGMA foreign_keys = ON")


ANOMALIES = {
    "approvals.pending_past_expiry": (damage_pending_past_expiry, 1, "warning"),
    "approvals.approved_past_expiry": (damage_approved_past_expiry, 1, "warning"),
    "approvals.event_sequence": (damage_event_gap, 2, "error"),
    "approvals.status_mismatch": (damage_status_mismatch, 1, "error"),
    "approvals.decision_without_event": (damage_decision_without_event, 1, "error"),
    "environments.stale_claims": (damage_stale_claim, 1, "warning"),
    "environments.claims_on_dead": (damage_claim_on_retired, 1, "warning"),
    "environments.lease_on_closed": (damage_lease_on_closed, 1, "warning"),
    "environments.cleanup_stuck": (damage_cleanup_stuck, 1, "warning"),
    "environments.cleanup_attempts": (damage_cleanup_attempts, 1, "warning"),
    "environments.cleanup_retry_overdue": (damage_cleanup_retry_overdue, 1, "warning"),
    "environments.idle_stop_overdue": (damage_idle_stop_overdue, 1, "warning"),
    "environments.retirement_overdue": (damage_retirement_overdue, 1, "warning"),
    "environments.console_state_changes": (damage_console_state_changes, 1, "warning"),
    "projects.active_revision_missing": (damage_active_revision_missing, 1, "error"),
    "projects.active_revision_foreign": (damage_active_revision_foreign, 1, "error"),
    "projects.provider_projection": (damage_provider_projection, 1, "error"),
    "profiles.fingerprint_mismatch": (damage_fingerprint_mismatch, 1, "error"),
    "profiles.algorithm_evidence": (damage_profile_round_trip, 1, "warning"),
    "schema.missing_objects": (damage_missing_objects, 2, "error"),
    "foreign_keys.violations": (damage_foreign_key, 1, "error"),
}


def damaged(path: Path, finding_id: str) -> Path:
    healthy(path)
    conn = connect(path)
    ANOMALIES[finding_id][0](conn)
    conn.close()
    return path


# --- broken files --------------------------------------------------------------------------------


def truncated(path: Path) -> Path:
    healthy(path)
    size = path.stat().st_size
    with open(path, "r+b") as handle:
        handle.truncate(size // 2)
    return path


def corrupted_page(path: Path, table: str = "approval_requests") -> Path:
    """Overwrite the middle of `table`'s root page with garbage (header and schema stay intact)."""
    healthy(path)
    conn = sqlite3.connect(path)
    page_size = conn.execute("PRAGMA page_size").fetchone()[0]
    root = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchone()[0]
    conn.close()
    with open(path, "r+b") as handle:
        handle.seek((root - 1) * page_size)
        handle.write(b"\x0d\x00\x00\xff\xff\xff\xff" + b"\xa5" * 200)  # absurd cell count and content start
    return path


def not_archon(path: Path) -> Path:
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE notes (id INTEGER PRIMARY KEY, body TEXT)")
    conn.execute("INSERT INTO notes (body) VALUES ('hello')")
    conn.commit()
    conn.close()
    return path


def not_sqlite(path: Path) -> Path:
    path.write_text("this is a text file, not a database\n" * 20)
    return path


def from_newer_console(path: Path) -> Path:
    """A database whose ledger names a step this console has never heard of."""
    from console.db import ledger
    from console.db.migrations.registry import MIGRATIONS

    healthy(path)
    conn = connect(path)
    conn.execute("BEGIN IMMEDIATE")
    for position, migration in enumerate(MIGRATIONS, start=1):
        ledger.record(conn, migration, position=position, target_release="1.10.0", now=NOW)
    conn.execute(
        "INSERT INTO _sqlite_migrations (migration_set, name, applied_at) VALUES ('archon-console', ?, ?)",
        ("030-future-step-from-a-newer-console", at(0)),
    )
    conn.execute("COMMIT")
    conn.close()
    return path


def with_secrets(path: Path) -> Path:
    """Anomalies whose rows carry names, paths and payloads, for the redaction test."""
    healthy(path)
    conn = connect(path)
    add_project(conn, "p-secret", name="Project " + SECRET_ACTOR, repo=SECRET_PATH)
    add_request(conn, "req-secret", status="approved", expires=-5, created=-65, project="p-secret",
                actor=SECRET_ACTOR, action='{"remote": "%s", "branch": "zelda-feature"}' % SECRET_PAYLOAD,
                events=[(1, None, "pending"), (2, "pending", "approved")])
    conn.execute(
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, from_status, "
        "to_status, actor_classification, actor_reference, reason, created_at) VALUES "
        "('req-secret:3', 'p-secret', 'req-secret', 3, 'note', 'approved', 'approved', 'human', ?, ?, ?)",
        (SECRET_ACTOR, SECRET_REASON, at(-60)),
    )
    add_env(conn, "env-secret", project="p-secret", target_workspace_path=SECRET_PATH + "/ws",
            operation_claim_id=f"console:{SECRET_ACTOR}@laptop:1", operation_kind="stop",
            operation_claimed_at=at(-60))
    conn.close()
    return path
