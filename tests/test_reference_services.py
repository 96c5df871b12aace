"""Every console write on archon's own 1.10.0 databases, then archon's next start: nothing undone.

Both reference variants of 1.10.0 (created fresh, and upgraded in place from 1.8.20 through 1.8.22)
get a few projects, profile revisions, approval requests and environments. Each case runs one
service write, then `archon_start(conn, "1.10.0")` (the reference replay of archon's start-up).
Archon's start must leave every table exactly as the console left it: no revision re-activated
away, no audit event added, no state moved. Rule 2's hand-off is checked on the write itself.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from console.db import execution_profiles as profiles
from console.db.connect import open_database
from console.errors import Refusal
from console.services import approvals, profiles as profile_service
from console.services.approval_expiry import expire_overdue
from console.services import environment_claims
from tests.reference import builder, compare, rows

RULE2 = "issue 8 rule 2: envs complete writes lifecycle_state ({}) instead of handing off to archon"
STALE = "2024-03-01 10:00:00"
LIVE = "2099-01-01 00:00:00"


def _now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def _env(conn, env_id: str, state: str, **extra) -> None:
    values = {
        "id": env_id, "project_id": "proj-2", "provider_kind": "host", "provider_version": "1",
        "target_kind": "repo_root", "target_key": env_id, "target_workspace_path": "/srv/repo2",
        "environment_revision": 1, "workspace_mode": "direct", "environment_validation_fingerprint": rows.FP,
        "template_identity": "tmpl:1", "lifecycle_state": state, "created_at": rows.T0, "updated_at": rows.T0, **extra,
    }
    conn.execute(f"INSERT INTO execution_environments ({', '.join(values)}) VALUES ({', '.join('?' * len(values))})",
                 tuple(values.values()))


def _revision(conn, rev_id: str, profile: dict, schema_version: int) -> None:
    number = conn.execute("SELECT MAX(revision) + 1 FROM execution_profile_revisions WHERE project_id = 'proj-2'").fetchone()[0]
    conn.execute(
        "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, profile_json, "
        "created_at) VALUES (?, 'proj-2', ?, ?, ?, ?, ?)",
        (rev_id, number, schema_version, profiles.fingerprint(profile), profiles.serialize(profile), rows.T0),
    )


def populate_1100(conn) -> None:
    """Rows on top of populate_1820_rows: revisions to activate, requests to decide, environments to claim."""
    conn.execute("BEGIN")
    _revision(conn, "proj-2:old-schema-2", {"eligible_workloads": ["build", "review"], "provider_preference": "host"}, 2)
    _revision(conn, "proj-2:without-chat-build", {
        "check_template_policy": {"agent": None, "mode": "project_commands"},
        "eligible_workloads": ["build", "check", "review"], "provider_preference": "host"}, 3)
    _revision(conn, "proj-2:docker-current", profiles.create("docker_sandbox", 3), 3)
    requests = (("pending", LIVE, '{"requested_by":"alice"}'), ("pending", LIVE, '{"requested_by":"alice"}'),
                ("pending", STALE, '{"requested_by":"alice"}'), ("approved", LIVE, '{"requested_by":"alice"}'),
                ("pending", LIVE, '{"requested_by": "alice",}'), ("pending", LIVE, '{"requested_by":"alice\u200b"}'),
                ("pending", LIVE, '["alice"]'))
    for i, (status, expires, authority) in enumerate(requests):
        run = f"proj-1-apr-run-{i}"
        conn.execute("INSERT INTO execution_runs (id, project_id, kind, status, created_at) "
                     "VALUES (?, 'proj-1', 'build', 'running', ?)", (run, rows.T0))
        conn.execute(
            "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
            "action_json, action_fingerprint, authority_schema_version, authority_json, status, expires_at, "
            "decision_at, created_at, updated_at) VALUES (?, 'proj-1', ?, 'git_push', 1, '{}', ?, 1, ?, ?, ?, ?, ?, ?)",
            (f"apr-{i}", run, rows.FP, authority, status, expires,
             rows.T0 if status == "approved" else None, rows.T0, rows.T0),
        )
    _env(conn, "env-stop", "ready")
    _env(conn, "env-retire", "ready")
    _env(conn, "env-reset", "failed", failed_at=rows.T0)
    _env(conn, "env-cleanup", "cleanup_pending", cleanup_pending_at=rows.T0)
    _env(conn, "env-stale", "ready", operation_claim_id="console:mallory:0", operation_kind="stop",
         operation_claimed_at=STALE)
    conn.execute("COMMIT")


def _populate(conn, release):
    if release == "1.8.20":
        rows.populate_1820_rows(conn)
    if release == "1.10.0":
        populate_1100(conn)


@pytest.fixture(scope="module", params=["fresh", "upgraded"])
def template(request, tmp_path_factory):
    path = tmp_path_factory.mktemp("ref1100") / f"{request.param}.db"
    if request.param == "fresh":
        builder.fresh(path, "1.10.0")
        conn = builder.connect(path)
        rows.populate_1820_rows(conn)
        populate_1100(conn)
        conn.close()
    else:
        builder.upgraded(path, "1.10.0", populate=_populate)
        conn = builder.connect(path)
        builder.archon_start(conn, "1.10.0")  # a running archon has started at least once on its rows
        conn.close()
    return path


@pytest.fixture
def db(template, make_db):
    return make_db(template=template)


def write(path: Path, action) -> None:
    with open_database(path) as handle:
        result = action(handle, _now())
    assert result.ok, result.message


def _claimed(op, env_id):
    return lambda h, now: environment_claims.claim(h, env_id, op, "dave", now=now)


def _complete(op, env_id):
    def run(h, now):
        environment_claims.claim(h, env_id, op, "dave", now=now)
        return environment_claims.complete(h, env_id, "dave", now=now)
    return run


def _released(h, now):
    environment_claims.claim(h, "env-stop", "stop", "dave", now=now)
    return environment_claims.release(h, "env-stop", "dave", now=now)


def _activate(rev_id):
    return lambda h, now: profile_service.activate(h, rev_id, "dave", reason="roll back", now=now)


WRITES = {
    "approve": lambda h, now: approvals.approve(h, "apr-0", actor="dave", reason="ok", now=now),
    "deny": lambda h, now: approvals.deny(h, "apr-1", actor="dave", reason="no", now=now),
    "revoke": lambda h, now: approvals.revoke(h, "apr-3", actor="dave", reason="changed my mind", now=now),
    "expire": lambda h, now: expire_overdue(h, actor="dave", now=now)[0],
    "claim stop": _claimed("stop", "env-stop"),
    "claim retire": _claimed("retire", "env-retire"),
    "claim reset": _claimed("reset", "env-reset"),
    "claim cleanup_retry": _claimed("cleanup_retry", "env-cleanup"),
    # "console:mallory:0" lacks the console's `@host`: not a claim the console created, so the holder is named
    "take over": lambda h, now: environment_claims.claim(h, "env-stale", "stop", "dave", now=now, takeover=True, reason="stale",
                                           confirm_holder="console:mallory:0"),
    "release": _released,
    "release stale (take over)": lambda h, now: environment_claims.release(h, "env-stale", "dave", now=now, takeover=True,
                                                             reason="stale", confirm_holder="console:mallory:0"),
    "complete stop": _complete("stop", "env-stop"),
    "complete retire": _complete("retire", "env-retire"),
    "claim reset, then release (reset has no completion)": lambda h, now: (
        _claimed("reset", "env-reset")(h, now), environment_claims.release(h, "env-reset", "dave", now=now))[1],
    "complete cleanup_retry": _complete("cleanup_retry", "env-cleanup"),
    "activate current-schema revision": _activate("proj-2:docker-current"),
    "activate schema-2 revision": _activate("proj-2:old-schema-2"),
    "activate revision lacking chat_build": _activate("proj-2:without-chat-build"),
}
# Rule 3: the console refuses what archon's next start would undo, so these write nothing.
REFUSED = {"activate schema-2 revision", "activate revision lacking chat_build"}


def _snapshot(path: Path) -> dict:
    import sqlite3

    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return {t: compare.rows(conn, t) for t in tables}
    finally:
        conn.close()


def _changes(before: dict, after: dict) -> list[str]:
    out = []
    for table in sorted(set(before) | set(after)):
        old, new = before.get(table, []), after.get(table, [])
        out += [f"{table}: archon removed or changed {dict(r)}" for r in old if r not in new]
        out += [f"{table}: archon added or changed to {dict(r)}" for r in new if r not in old]
    return out


@pytest.mark.slow
@pytest.mark.parametrize("name", list(WRITES))
def test_archon_next_start_keeps_what_the_console_wrote(db, name):
    before_write = _snapshot(db)
    if name in REFUSED:
        from console.errors import Refusal

        with pytest.raises(Refusal, match="would replace it at its next start|would fail"):
            write(db, WRITES[name])
        assert _snapshot(db) == before_write, f"{name} was refused but wrote"
        return
    write(db, WRITES[name])
    written = _snapshot(db)
    assert written != before_write, f"{name} wrote nothing"
    conn = builder.connect(db)
    builder.archon_start(conn, "1.10.0")
    conn.close()
    changed = _changes(written, _snapshot(db))
    assert not changed, compare.report(f"archon's start after console {name}", changed)


@pytest.mark.parametrize("op, env_id", [
    ("stop", "env-stop"),
    ("retire", "env-retire"),
])
def test_complete_hands_off_without_writing_lifecycle_state(db, op, env_id):
    """Rule 2: the console cannot stop or delete a container, so completing leaves the state to archon."""
    import sqlite3

    write(db, _complete(op, env_id))
    conn = sqlite3.connect(db)
    state, idle_stop, requested, claim = conn.execute(
        "SELECT lifecycle_state, idle_stop_at, retirement_requested_at, operation_claim_id "
        "FROM execution_environments WHERE id = ?", (env_id,)).fetchone()
    conn.close()
    assert claim is None
    assert state == "ready", f"{env_id}: console wrote lifecycle_state {state!r}"
    assert (idle_stop if op == "stop" else requested) is not None


def test_reset_has_no_completion(db):
    write(db, _claimed("reset", "env-reset"))
    with open_database(db) as handle:
        try:
            result = environment_claims.complete(handle, "env-reset", "dave", now=_now())
        except Exception:  # a refusal is the wanted outcome
            return
    conn = builder.connect(db)
    state = conn.execute("SELECT lifecycle_state FROM execution_environments WHERE id = 'env-reset'").fetchone()[0]
    conn.close()
    assert state == "failed" and not result.ok, f"complete on a reset claim moved env-reset to {state!r}"


def test_archon_start_is_idempotent_on_both_variants(db):
    """The harness itself: a start on an untouched reference database changes nothing."""
    before = _snapshot(db)
    conn = builder.connect(db)
    builder.archon_start(conn, "1.10.0")
    conn.close()
    assert not _changes(before, _snapshot(db))


def test_now_is_real_clock():
    assert abs((_now() - datetime.now(timezone.utc)).total_seconds()) < timedelta(seconds=5).total_seconds()


@pytest.mark.parametrize("request_id, authority", [
    pytest.param("apr-0", "well-formed"),
    pytest.param("apr-4", "malformed JSON"),
    pytest.param("apr-5", "name with a zero-width space"),
    pytest.param("apr-6", "a list"),
])
def test_requester_cannot_approve_own_request(db, request_id, authority):
    with open_database(db) as handle:
        with pytest.raises(Refusal):
            approvals.approve(handle, request_id, actor="alice", reason="mine", now=_now())
