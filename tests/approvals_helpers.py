"""Rows for approval tests, written the way archon writes them (no tests in this module).

Requests are inserted as `pending` with a creation event (sequence 1, from NULL to pending), and
moved on by archon-style UPDATEs plus events, so every database obeys archon's triggers.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tests.conftest import add_project as shared_add_project
from tests.conftest import connect

NOW = datetime(2026, 11, 1, 9, 30, tzinfo=timezone.utc)


def ts(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def add_project(conn: sqlite3.Connection, project_id: str, name: str | None = None, *, deleting: str | None = None) -> None:
    """Approval tests' projects are named by their id and live under /srv (tests/conftest.py `add_project`)."""
    shared_add_project(conn, project_id, name or project_id, repo=f"/srv/{project_id}", deleting=deleting)


def add_request(
    conn: sqlite3.Connection,
    request_id: str,
    project_id: str = "p1",
    *,
    expires_at: datetime | str | None = None,
    kind: str = "git_push",
    action: dict | str | None = None,
    authority: dict | str | None = None,
    created_at: datetime | None = None,
    event_type: str = "requested",
) -> None:
    run_id = f"run-{request_id}"
    conn.execute("INSERT INTO execution_runs (id, project_id) VALUES (?, ?)", (run_id, project_id))
    action = action if action is not None else {"remote": "origin", "branch": "main", "commit": "abc123"}
    authority = authority if authority is not None else {"requested_by": "alice"}
    action_text = action if isinstance(action, str) else json.dumps(action)  # str: the text as archon wrote it
    expires = expires_at if expires_at is not None else NOW + timedelta(hours=2)
    created = ts(created_at or NOW - timedelta(minutes=30))
    conn.execute(
        "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
        "action_json, action_fingerprint, authority_schema_version, authority_json, expires_at, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, 1, ?, ?, 1, ?, ?, ?, ?)",
        (
            request_id, project_id, run_id, kind, action_text,
            hashlib.sha256(action_text.encode()).hexdigest(),
            authority if isinstance(authority, str) else json.dumps(authority),
            ts(expires) if isinstance(expires, datetime) else expires, created, created,
        ),
    )
    add_event(conn, request_id, project_id, None, "pending", event_type=event_type, actor="archon", kind="system", at=created)


def add_event(conn, request_id, project_id, from_status, to_status, *, event_type, actor, kind="human", reason=None, at=None):
    seq = conn.execute(
        "SELECT COALESCE(MAX(sequence), 0) + 1 FROM approval_request_events WHERE approval_request_id = ?",
        (request_id,),
    ).fetchone()[0]
    conn.execute(
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
        "from_status, to_status, actor_classification, actor_reference, reason, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (str(uuid.uuid4()), project_id, request_id, seq, event_type, from_status, to_status, kind, actor, reason,
         at or ts(NOW)),
    )


def archon_move(conn, request_id, to_status, *, actor="bob", kind="human", at: datetime | None = None, event_type=None, reason=None):
    """Move a request as archon (or another approver) would: UPDATE + event in one transaction."""
    at_text = ts(at or NOW - timedelta(minutes=4))
    row = conn.execute("SELECT project_id, status, decision_at FROM approval_requests WHERE id = ?", (request_id,)).fetchone()
    conn.execute("BEGIN IMMEDIATE")
    sets = "status = ?, updated_at = ?"
    values = [to_status, at_text]
    if to_status in ("approved", "denied") and row["decision_at"] is None:
        sets += ", decision_at = ?"
        values.append(at_text)
    if to_status == "consumed":
        sets += ", consumed_at = ?"
        values.append(at_text)
    conn.execute(f"UPDATE approval_requests SET {sets} WHERE id = ?", (*values, request_id))
    add_event(conn, request_id, row["project_id"], row["status"], to_status,
              event_type=event_type or f"request_{to_status}", actor=actor, kind=kind, reason=reason, at=at_text)
    conn.execute("COMMIT")


def dump(path: Path) -> list[str]:
    """Everything in the database as SQL text: equal dumps mean nothing was written."""
    conn = sqlite3.connect(path)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def status_of(path: Path, request_id: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT status FROM approval_requests WHERE id = ?", (request_id,)).fetchone()[0]
    finally:
        conn.close()


def events(path: Path, request_id: str) -> list[sqlite3.Row]:
    conn = connect(path)
    try:
        return conn.execute(
            "SELECT * FROM approval_request_events WHERE approval_request_id = ? ORDER BY sequence", (request_id,)
        ).fetchall()
    finally:
        conn.close()


def seed(conn: sqlite3.Connection) -> None:
    """The rows of conftest's `db`: projects p1 ('Payments') and p2 ('Web'), and requests apr-1..apr-3
    pending in p1 (apr-3 requested by carol), apr-4 pending in p2, apr-5 approved by bob, apr-6 denied
    by carol, apr-7 pending but overdue; use it as `make_db(fill=seed, cached=True)`."""
    add_project(conn, "p1", "Payments")
    add_project(conn, "p2", "Web")
    add_request(conn, "apr-1", "p1", expires_at=NOW + timedelta(minutes=12))
    add_request(conn, "apr-2", "p1", expires_at=NOW + timedelta(hours=3), kind="custom_check",
                action={"command": ["make", "lint"]})
    add_request(conn, "apr-3", "p1", expires_at=NOW + timedelta(hours=1, minutes=30), authority={"requester": "carol"})
    add_request(conn, "apr-4", "p2", expires_at=NOW + timedelta(minutes=40))
    add_request(conn, "apr-5", "p1", expires_at=NOW + timedelta(hours=5))
    archon_move(conn, "apr-5", "approved", actor="bob")
    add_request(conn, "apr-6", "p2", expires_at=NOW + timedelta(hours=5))
    archon_move(conn, "apr-6", "denied", actor="carol", reason="not now")
    add_request(conn, "apr-7", "p1", expires_at=NOW - timedelta(minutes=3))


def live_request(path) -> str:
    """A request pending by the real clock: a subprocess writes with the real clock (console/clock.py)."""
    conn = connect(path)
    add_request(conn, "apr-live", "p1", expires_at=datetime(2099, 1, 1, tzinfo=timezone.utc))
    conn.close()
    return "apr-live"


def set_authority(path, request_id: str, text: str) -> None:
    """Archon's identity trigger forbids this UPDATE; lift it for the fixture only."""
    conn = sqlite3.connect(path)
    try:
        name = "preserve_approval_request_identity"
        sql = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (name,)).fetchone()[0]
        conn.execute(f"DROP TRIGGER {name}")
        conn.execute("UPDATE approval_requests SET authority_json = ? WHERE id = ?", (text, request_id))
        conn.execute(sql)
        conn.commit()
    finally:
        conn.close()
