"""Issue 8, rule 4: `$ARCHON_CONSOLE_NOW` freezes what is shown, never what is written.

Every write (approve, deny, revoke, expire, envs claim/release/complete, profiles activate) uses
the real clock, and says so while the variable is set. These tests use the real clock itself.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from console.clock import db_time, parse_time
from tests.approvals_helpers import add_project, add_request, connect, events
from tests.environments_support import add_env, raw
from tests.profiles_support import DOCKER, add_revision


def real_now() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def near_real_now(text) -> bool:
    at = parse_time(text)
    return at is not None and abs((at - real_now()).total_seconds()) < 30


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def db(make_db, monkeypatch):
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    path = make_db()
    conn = connect(path)
    add_project(conn, "p1")
    now = real_now()
    # expired 22 months ago by the real clock; live by a clock frozen 2 years back
    add_request(conn, "old", "p1", expires_at=now - timedelta(days=660), created_at=now - timedelta(days=661))
    add_request(conn, "live", "p1", expires_at=now + timedelta(days=1), created_at=now - timedelta(hours=1))
    add_request(conn, "live2", "p1", expires_at=now + timedelta(days=2), created_at=now - timedelta(hours=1))
    add_env(conn, "env-1", "ready")
    add_revision(conn, "p1", 2, DOCKER)
    conn.close()
    return path


@pytest.mark.slow
def test_a_frozen_past_clock_cannot_approve_what_really_expired(db, capsys, monkeypatch):
    frozen = real_now() - timedelta(days=700)
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", db_time(frozen))
    code, out, err = cli(capsys, "approvals", "approve", "old", "--as", "dave", "--db", db)
    assert code == 1 and "can no longer be approved" in err
    assert "this write used the real clock" in err and "$ARCHON_CONSOLE_NOW" in err
    row = connect(db).execute("SELECT status, decision_at, updated_at FROM approval_requests WHERE id = 'old'").fetchone()
    assert row["status"] == "expired" and row["decision_at"] is None and near_real_now(row["updated_at"])
    # a live request is approved at the real time, not 700 days ago
    code, out, _ = cli(capsys, "--json", "approvals", "approve", "live", "--as", "dave", "--db", db)
    [result] = json.loads(out)
    assert code == 0 and result["state"] == "approved" and "real clock" in result["clock_note"]
    row = connect(db).execute("SELECT decision_at, created_at FROM approval_requests WHERE id = 'live'").fetchone()
    assert near_real_now(row["decision_at"]) and row["decision_at"] >= row["created_at"]
    assert near_real_now(events(db, "live")[-1]["created_at"])


@pytest.mark.slow
def test_a_frozen_future_clock_expires_nothing_live(db, capsys, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2099-01-01 00:00:00")
    code, out, err = cli(capsys, "approvals", "expire", "--as", "ops", "--db", db)
    assert code == 0 and "Expired 1 request:" in out and "old expired" in out
    assert "live" not in out and "this write used the real clock" in err
    statuses = dict(connect(db).execute("SELECT id, status FROM approval_requests").fetchall())
    assert statuses == {"old": "expired", "live": "pending", "live2": "pending"}
    code, out, _ = cli(capsys, "--json", "approvals", "deny", "live", "--reason", "no", "--as", "erin", "--db", db)
    assert code == 0 and json.loads(out)[0]["state"] == "denied"  # not "expired at decision"


@pytest.mark.slow
def test_envs_and_profiles_write_the_real_time_and_say_so(db, capsys, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2020-01-01 00:00:00")
    code, out, err = cli(capsys, "envs", "claim", "env-1", "--op", "stop", "--as", "ops", "--db", db)
    assert code == 0 and "this write used the real clock" in err
    claimed = raw(db).execute("SELECT operation_claimed_at FROM execution_environments WHERE id = 'env-1'").fetchone()[0]
    assert near_real_now(claimed)
    code, out, _ = cli(capsys, "--json", "envs", "release", "env-1", "--as", "ops", "--db", db)
    assert code == 0 and "real clock" in json.loads(out)["clock_note"]
    code, out, err = cli(capsys, "profiles", "activate", "p1:execution-profile:r2", "--reason", "r", "--db", db)
    assert code == 0 and "this write used the real clock" in err
    at = raw(db).execute("SELECT created_at FROM execution_profile_audit_events WHERE event_type = 'revision_activated' "
                         "AND profile_revision_id = 'p1:execution-profile:r2'").fetchone()[0]
    assert near_real_now(at)


def test_reads_still_follow_the_frozen_clock(db, capsys, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", db_time(real_now() - timedelta(days=700)))
    code, out, err = cli(capsys, "--json", "approvals", "list", "--db", db)
    rows = {r["id"]: r for r in json.loads(out)}
    assert code == 0 and rows["old"]["overdue"] is False and err == ""  # shown as of the frozen instant


@pytest.mark.slow
def test_without_the_variable_nothing_is_added(db, capsys, monkeypatch):
    monkeypatch.delenv("ARCHON_CONSOLE_NOW", raising=False)
    code, out, err = cli(capsys, "--json", "approvals", "approve", "live", "--as", "dave", "--db", db)
    assert code == 0 and "clock_note" not in json.loads(out)[0] and err == ""


# ---------------------------------------------------------------- issue 17: a clock that is not a time
NOT_TIMES = ["nan", "inf", "-inf", "NaN", "2026-13-45", "2026-02-30 10:00:00", "1e300", "-1e300",
             "0001-01-01T00:00:00+01:00", "9999-12-31T23:59:59-01:00", "yesterday", " "]


@pytest.mark.slow
@pytest.mark.parametrize("value", NOT_TIMES)
@pytest.mark.parametrize("argv", [["projects", "list"], ["approvals", "list", "--json"],
                                  ["approvals", "expire"]], ids=" ".join)
def test_a_frozen_clock_that_is_not_a_time_is_a_usage_error(db, capsys, monkeypatch, value, argv):
    """`nan`/`inf` used to end in "unexpected ValueError" (exit 3) and `2026-13-45` was silently
    ignored (the real clock was shown). Now each is one sentence and exit 2, before anything runs."""
    if not value.strip():
        value = "\x7f"  # (an empty value means unset)
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", value)
    code, out, err = cli(capsys, "--db", db, *argv)
    assert code == 2, (out, err)
    text = json.loads(out)["error"] if "--json" in argv else err
    assert "$ARCHON_CONSOLE_NOW is not a time" in text and "unexpected" not in text
    if "--json" not in argv:
        assert err.count("\n") == 1 and out == ""


@pytest.mark.parametrize("value", NOT_TIMES + ["1e20", "1e11", "-1", "Infinity", "2026-11-01T09:30:00+99:00"])
def test_parse_time_never_raises(value):
    at = parse_time(value)
    assert at is None or at.tzinfo is not None


@settings(max_examples=500, deadline=None)
@given(st.one_of(st.text(max_size=40), st.floats().map(repr), st.integers().map(str),
                 st.datetimes().map(lambda d: d.isoformat()) | st.datetimes().map(lambda d: d.isoformat() + "+23:59")))
def test_parse_time_never_raises_on_any_text(value):
    at = parse_time(value)
    assert at is None or at.tzinfo is not None
