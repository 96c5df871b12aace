"""'As of': a request's and an environment's state at a past moment, from their events."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest

from console.errors import Refusal
from console.services.history import approval_as_of, environment_as_of, format_as_of
from tests import damage

T = damage.NOW


@pytest.fixture
def conn(tmp_path):
    db = damage.healthy(tmp_path / "archon.db")
    c = damage.connect(db)
    # created at -30 min, expires at +60; approved at -29 by alice, consumed at -28.
    yield c
    c.close()


def test_approval_before_during_and_after(conn):
    early = approval_as_of(conn, "req-consumed", T - timedelta(minutes=40))
    assert not early.exists and early.state is None
    assert "did not exist yet" in format_as_of(early)

    pending = approval_as_of(conn, "req-consumed", T - timedelta(minutes=29, seconds=30))
    assert pending.state == "pending" and pending.current_state == "consumed"
    assert [e["sequence"] for e in pending.events] == [1] and pending.later_events == 2
    assert pending.seconds_to_expiry == 89 * 60 + 30  # what the approver saw: 1h29m30s left

    approved = approval_as_of(conn, "req-consumed", T - timedelta(minutes=29))  # the event's own second
    assert approved.state == "approved" and approved.later_events == 1
    text = format_as_of(approved)
    assert "state then: approved   (now: consumed)" in text
    assert "expiry then: in 1h29m" in text
    assert "#2 " in text and "pending -> approved by alice" in text
    assert "(1 later event(s) not shown" in text


def test_overdue_is_shown_as_such(conn):
    damage.add_request(conn, "req-late", expires=-5, created=-65)
    view = approval_as_of(conn, "req-late", T)
    assert view.state == "pending" and view.seconds_to_expiry == -300
    assert "OVERDUE by 5m00s" in format_as_of(view)
    assert approval_as_of(conn, "req-late", T).to_json()["seconds_to_expiry"] == -300


def test_unknown_ids_are_refused(conn):
    with pytest.raises(Refusal):
        approval_as_of(conn, "nope", T)
    with pytest.raises(Refusal):
        environment_as_of(conn, "nope", T)


def test_environment_from_events_and_claim(conn):
    damage.add_env(conn, "env-h", "stopped", created_at=damage.at(-120))

    def event(seq, frm, to, minutes, kind=None, meta=None):
        conn.execute(
            "INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, event_type, "
            "from_state, to_state, actor_reference, metadata_json, created_at) VALUES (?, 'p1', 'env-h', ?, ?, ?, ?, ?, ?, ?)",
            (f"e{seq}", seq, kind or "state", frm, to, "carol", json.dumps(meta) if meta else None, damage.at(minutes)),
        )

    event(1, None, "ready", -110)
    event(2, "ready", "running", -90)
    event(3, "running", "running", -50, "operation_claimed", {"operation_kind": "stop", "claim_id": "console:carol@h:1"})
    event(4, "running", "stopped", -40, "operation_completed", {"operation_kind": "stop", "claim_id": None})
    at_45 = environment_as_of(conn, "env-h", T - timedelta(minutes=45))
    assert at_45.state == "running" and at_45.claim["kind"] == "stop" and at_45.later_events == 1
    assert "claim then: stop by console:carol@h:1" in format_as_of(at_45)
    now = environment_as_of(conn, "env-h", T)
    assert now.state == "stopped" and now.claim is None and now.current_state == "stopped"


def test_environment_without_events_uses_timestamps(conn):
    damage.add_env(conn, "env-t", "stopped", created_at=damage.at(-100), ready_at=damage.at(-90),
                   stopped_at=damage.at(-10))
    view = environment_as_of(conn, "env-t", T - timedelta(minutes=50))
    assert view.state == "ready" and any("timestamps" in n for n in view.notes)


# --- the CLI: `approvals show ID --as-of TIME`, `envs show ID --as-of TIME` ------------------------


@pytest.fixture
def cli(tmp_path, monkeypatch, capsys):
    """Run the CLI at NOW (12:00 UTC) on a fresh healthy database; returns (exit code, stdout)."""
    from console.cli.cli import main

    monkeypatch.setenv("ARCHON_CONSOLE_NOW", T.isoformat())
    db = damage.healthy(tmp_path / "archon.db")

    def run(*argv: str) -> tuple[int, str]:
        code = main([*argv[:2], "--db", str(db), *argv[2:]])
        out = capsys.readouterr()
        return code, out.out + out.err

    run.db = db
    return run


def test_what_did_the_approver_see_at_1130(cli):
    # req-consumed: created 11:30, approved 11:31 by alice, consumed 11:32, expires 13:00.
    code, out = cli("approvals", "show", "req-consumed", "--as-of", "11:30:30")
    assert code == 0
    assert "approval request req-consumed as of 2026-11-01 11:30:30 UTC" in out
    assert "state then: pending   (now: consumed)" in out
    assert "expiry then: in 1h29m" in out
    assert "events so far (1):" in out and "(2 later event(s) not shown" in out

    code, out = cli("approvals", "show", "req-consumed", "--as-of", "2026-11-01 11:31")
    assert code == 0 and "state then: approved" in out and "pending -> approved by alice" in out

    code, out = cli("approvals", "show", "req-consumed", "--as-of", "2026-11-01T11:29:00Z")
    assert code == 0 and "did not exist yet" in out


def test_as_of_json_is_the_reconstruction(cli):
    code, out = cli("approvals", "show", "req-consumed", "--as-of", "2026-11-01 11:31:30", "--json")
    data = json.loads(out)
    assert code == 0
    assert data["kind"] == "approval" and data["state"] == "approved" and data["current_state"] == "consumed"
    assert [e["sequence"] for e in data["events"]] == [1, 2] and data["later_events"] == 1
    assert data["seconds_to_expiry"] == 88 * 60 + 30


def test_a_time_of_day_later_than_now_means_yesterday(cli):
    code, out = cli("approvals", "show", "req-consumed", "--as-of", "13:00")
    assert code == 0 and "as of 2026-10-31 13:00:00 UTC" in out and "did not exist yet" in out


def test_envs_show_as_of(cli):
    conn = damage.connect(cli.db)
    damage.add_env(conn, "env-h", "stopped", created_at=damage.at(-120))
    for seq, frm, to, minutes, kind, meta in (
        (1, None, "ready", -110, "state", None),
        (2, "running", "running", -50, "operation_claimed", {"operation_kind": "stop", "claim_id": "console:carol@h:1"}),
        (3, "running", "stopped", -40, "operation_completed", {"operation_kind": "stop", "claim_id": None}),
    ):
        conn.execute(
            "INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, event_type, "
            "from_state, to_state, actor_reference, metadata_json, created_at) VALUES (?, 'p1', 'env-h', ?, ?, ?, ?, "
            "'carol', ?, ?)", (f"e{seq}", seq, kind, frm, to, json.dumps(meta) if meta else None, damage.at(minutes)))
    conn.close()
    code, out = cli("envs", "show", "env-h", "--as-of", "11:15")
    assert code == 0
    assert "environment env-h as of 2026-11-01 11:15:00 UTC" in out
    assert "state then: running   (now: stopped)" in out
    assert "claim then: stop by console:carol@h:1" in out
    code, out = cli("envs", "show", "env-h", "--as-of", "11:25", "--json")
    data = json.loads(out)
    assert data["state"] == "stopped" and data["claim"] is None


def test_as_of_refusals(cli):
    code, out = cli("approvals", "show", "req-consumed", "--as-of", "yesterday-ish")
    assert code == 2 and "is not a time" in out and "Traceback" not in out
    code, out = cli("approvals", "show", "req-consumed", "--as-of", "25:00")
    assert code == 2
    code, out = cli("approvals", "show", "nope", "--as-of", "11:00")
    assert code == 1 and "No approval request 'nope'" in out
    code, out = cli("envs", "show", "nope", "--as-of", "11:00")
    assert code == 1 and "No execution environment 'nope'" in out
