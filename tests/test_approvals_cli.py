"""`archon-console approvals ...` and `projects list`: output, JSON, exit codes, hostile data."""

from __future__ import annotations

import json

import pytest

from console.cli.cli import main
from tests.conftest import pin_real_clock
from tests.approvals_helpers import add_request, connect, dump, events, status_of


@pytest.fixture
def db(db, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01 09:30:00")
    monkeypatch.delenv("ARCHON_CONSOLE_ACTOR", raising=False)
    return db


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_table_is_aligned_with_humanized_times(db, capsys):
    code, out, err = run(capsys, "approvals", "list", "--db", db)
    assert code == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].split() == ["ID", "PROJECT", "KIND", "STATUS", "EXPIRES", "REQUESTER", "ACTION"]
    assert lines[2].startswith("apr-7") and "3 minutes ago (overdue)" in lines[2]
    assert "in 12 minutes" in lines[3]
    # aligned: every column starts at the same offset on every line
    col = lines[0].index("STATUS")
    assert all(line[col:].startswith(("pending", "-------", "STATUS")) for line in lines[:8])


def test_list_json_is_an_array_keyed_by_column_names_plus_derived_fields(db, capsys):
    code, out, _ = run(capsys, "--json", "approvals", "list", "--status", "all", "--limit", "3", "--db", db)
    rows = json.loads(out)
    assert code == 0 and [r["id"] for r in rows] == ["apr-7", "apr-1", "apr-4"]
    assert {"id", "project_id", "execution_run_id", "action_kind", "action_json", "authority_json", "status",
            "expires_at", "decision_at", "consumed_at", "created_at", "updated_at",
            "expires_in_seconds", "overdue"} <= set(rows[0])
    assert rows[0]["overdue"] is True and rows[1]["expires_in_seconds"] == 720


def test_list_filters_on_the_command_line(db, capsys):
    def ids(*extra):
        code, out, _ = run(capsys, "approvals", "list", "--json", "--db", db, *extra)
        assert code == 0
        return [r["id"] for r in json.loads(out)]

    assert ids("--project", "Web") == ["apr-4"]
    assert ids("--kind", "custom_check") == ["apr-2"]
    assert ids("--expiring-within", "15") == ["apr-7", "apr-1"]
    assert ids("--status", "approved,denied") == ["apr-5", "apr-6"]
    assert ids("--search", "lint") == ["apr-2"]
    assert ids("--limit", "1") == ["apr-7"]


@pytest.mark.parametrize("argv", [
    ["approvals", "list", "--status", "maybe"],
    ["approvals", "list", "--kind", "rm"],
    ["approvals", "list", "--limit", "0"],
    ["approvals", "list", "--expiring-within", "soon"],
    ["approvals", "deny", "apr-1"],              # reason required
    ["approvals", "revoke", "apr-5", "apr-6", "--reason", "x"],
    ["approvals"],
    ["approvals", "approve"],
])
def test_usage_errors_exit_2_and_write_nothing(db, capsys, argv):
    before = dump(db)
    code, _, err = run(capsys, *argv, "--db", db)
    assert code == 2 and err
    assert dump(db) == before


def test_approve_batch_reports_each_id_and_exits_1_when_any_is_refused(db, capsys):
    code, out, err = run(capsys, "approvals", "approve", "apr-1", "apr-3", "--as", "carol", "--db", db)
    assert code == 1
    assert out.strip() == "apr-1 approved."
    assert "refused: apr-3 was requested by carol" in err
    assert status_of(db, "apr-1") == "approved" and status_of(db, "apr-3") == "pending"


def test_action_json_prints_one_object_per_id(db, capsys):
    code, out, _ = run(capsys, "approvals", "approve", "apr-1", "apr-6", "--json", "--as", "dave", "--db", db)
    results = json.loads(out)
    assert code == 1
    assert [(r["id"], r["ok"], r["state"]) for r in results] == [("apr-1", True, "approved"), ("apr-6", False, "denied")]
    assert all(isinstance(r["message"], str) and r["message"] for r in results)
    assert "already denied by carol 4 minutes ago" in results[1]["message"]


def test_repeat_exits_0_and_says_so(db, capsys):
    assert run(capsys, "approvals", "deny", "apr-2", "--reason", "no", "--as", "dave", "--db", db)[0] == 0
    before = dump(db)
    code, out, _ = run(capsys, "approvals", "deny", "apr-2", "--reason", "no", "--as", "dave", "--db", db)
    assert code == 0 and "already denied by you" in out and "nothing changed" in out
    assert dump(db) == before


def test_actor_comes_from_the_environment_when_as_is_not_given(db, capsys, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_ACTOR", "erin")
    assert run(capsys, "approvals", "approve", "apr-1", "--db", db)[0] == 0
    assert events(db, "apr-1")[-1]["actor_reference"] == "erin"


def test_revoke_and_expire(db, capsys):
    code, out, _ = run(capsys, "approvals", "revoke", "apr-5", "--reason", "leak", "--as", "dave", "--db", db)
    assert code == 0 and "revoked" in out and status_of(db, "apr-5") == "invalidated"
    code, out, _ = run(capsys, "approvals", "expire", "--json", "--db", db)
    assert code == 0 and [(r["id"], r["state"]) for r in json.loads(out)] == [("apr-7", "expired")]
    code, out, _ = run(capsys, "approvals", "expire", "--db", db)
    assert code == 0 and out.startswith("Nothing to expire")


def test_overdue_approval_exits_1_but_the_expiry_is_committed(db, capsys):
    code, _, err = run(capsys, "approvals", "approve", "apr-7", "--as", "dave", "--db", db)
    assert code == 1 and "marked expired" in err
    assert status_of(db, "apr-7") == "expired"


@pytest.mark.parametrize("argv", [
    ["approvals", "approve", "apr-1"],
    ["approvals", "deny", "apr-1", "--reason", "x"],
    ["approvals", "revoke", "apr-5", "--reason", "x"],
    ["approvals", "expire"],
])
def test_read_only_refuses_every_write(db, capsys, argv):
    before = dump(db)
    code, _, err = run(capsys, "--read-only", *argv, "--as", "dave", "--db", db)
    assert code == 1 and "read-only" in err
    assert dump(db) == before


def test_read_only_json_action_still_answers_per_id(db, capsys):
    code, out, _ = run(capsys, "approvals", "approve", "apr-1", "apr-2", "--read-only", "--json", "--db", db)
    assert code == 1
    assert [(r["id"], r["ok"]) for r in json.loads(out)] == [("apr-1", False), ("apr-2", False)]


def test_reason_too_long_is_refused_on_the_command_line(db, capsys):
    code, _, err = run(capsys, "approvals", "deny", "apr-1", "--reason", "x" * 2001, "--as", "dave", "--db", db)
    assert code == 1 and "2001 bytes" in err and status_of(db, "apr-1") == "pending"


def test_actor_too_long_is_refused(db, capsys):
    code, _, err = run(capsys, "approvals", "approve", "apr-1", "--as", "x" * 201, "--db", db)
    assert code == 1 and "200 bytes" in err and status_of(db, "apr-1") == "pending"


def test_show_prints_history_and_what_you_can_do(db, capsys):
    code, out, _ = run(capsys, "approvals", "show", "apr-6", "--as", "dave", "--db", db)
    assert code == 0
    assert "denied" in out and "carol" in out and "not now" in out and '"branch": "main"' in out
    code, out, _ = run(capsys, "approvals", "show", "apr-6", "--json", "--db", db)
    shown = json.loads(out)
    assert shown["action"]["branch"] == "main" and [e["to_status"] for e in shown["events"]] == ["pending", "denied"]
    code, _, err = run(capsys, "approvals", "show", "missing", "--db", db)
    assert code == 1 and "No approval request 'missing'" in err


HOSTILE_ID = "apr-\x1b[2J\x1b]0;owned\x07[bold red]x[/]"


def test_markup_and_control_characters_in_data_are_printed_literally(db, capsys):
    conn = connect(db)
    add_request(conn, HOSTILE_ID, "p1", kind="custom_check",
                action={"command": "echo \x1b[31m[@click=app.quit]boom\x9b"},
                authority={"requested_by": "mallory\x1b[0m[link=http://x]"})
    conn.close()
    for argv in (["approvals", "list"], ["approvals", "show", HOSTILE_ID], ["projects", "list"]):
        code, out, err = run(capsys, *argv, "--db", db)
        assert code == 0
        for ch in ("\x1b", "\x07", "\x9b"):
            assert ch not in out and ch not in err
    code, out, _ = run(capsys, "approvals", "list", "--db", db)
    assert "[bold red]x[/]" in out and "[@click=app.quit]boom" in out  # markup is shown as text
    code, out, err = run(capsys, "approvals", "approve", HOSTILE_ID, "--as", "dave", "--db", db)
    assert code == 0 and "\x1b" not in out and "[bold red]x[/]" in out
    code, out, _ = run(capsys, "approvals", "list", "--json", "--status", "approved", "--db", db)
    assert HOSTILE_ID in [r["id"] for r in json.loads(out)]  # JSON keeps the exact value, escaped


def test_projects_list_table_and_json(db, capsys):
    code, out, _ = run(capsys, "projects", "list", "--db", db)
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:4] == ["ID", "NAME", "PROVIDER", "PROFILE"]
    assert any(line.startswith("p1") and "4 (1 < 1 h, 1 overdue)" in line and "#1 (schema 3)" in line for line in lines)
    code, out, _ = run(capsys, "projects", "list", "--json", "--db", db)
    projects = {p["id"]: p for p in json.loads(out)}
    assert projects["p1"]["pending_approvals"] == 4
    assert projects["p1"]["pending_expiring_within_hour"] == 1
    assert projects["p1"]["pending_overdue"] == 1
    assert projects["p2"]["claims_held"] == 0 and projects["p2"]["active_revision"] == 1


def test_list_on_a_1_8_20_database_says_upgrade_required(schema_db, capsys, monkeypatch):
    path = schema_db("1.8.20")
    code, _, err = run(capsys, "approvals", "list", "--db", path)
    assert code == 1 and "upgrade required" in err
