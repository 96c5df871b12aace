"""`archon-console envs ...` end to end: JSON shapes, exit codes, global options anywhere."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from console.cli.cli import main
from tests.conftest import pin_real_clock
from tests.environments_support import add_env, add_lease, dump, env_row, raw, release_lease


@pytest.fixture
def db(make_db, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01T09:30:00Z")
    monkeypatch.delenv("ARCHON_CONSOLE_STALE_MINUTES", raising=False)
    path = make_db(projects=["p1"])
    conn = raw(path)
    for state in ("ready", "running", "stopped", "cleanup_pending"):
        add_env(conn, f"env-{state}", state)
    add_lease(conn, "env-running", "run-1")
    conn.execute("UPDATE execution_environments SET failure_message = ? WHERE id = 'env-stopped'",
                 ("[bold]x\x1b[2J[/bold]",))
    conn.close()
    return path


def cli(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_list_json_has_columns_and_derived_fields(db, capsys):
    code, out, _ = cli(capsys, "envs", "list", "--db", db, "--json")
    assert code == 0
    rows = json.loads(out)
    assert [r["id"] for r in rows] == ["env-cleanup_pending", "env-ready", "env-running", "env-stopped"]
    running = rows[2]
    for key in ("lifecycle_state", "operation_claim_id", "idle_stop_at", "cleanup_retry_at",
                "claim_age_seconds", "stale", "active_lease_count", "admits_leases", "admission_reason"):
        assert key in running
    assert running["active_lease_count"] == 1 and running["admits_leases"] is False


def test_global_options_before_or_after_the_subcommand(db, capsys):
    code, out, _ = cli(capsys, "--db", db, "--as", "alice", "--json", "envs", "claim", "env-ready", "--op", "stop")
    assert code == 0 and json.loads(out)["ok"] is True
    code, out, _ = cli(capsys, "envs", "claim", "env-ready", "--op", "stop", "--json", "--as", "alice", "--db", db)
    result = json.loads(out)
    assert code == 0 and result["noop"] is True and result["id"] == "env-ready" and result["state"] == "ready"


def test_refusal_is_exit_1_with_one_json_object_and_nothing_written(db, capsys):
    cli(capsys, "envs", "claim", "env-ready", "--op", "stop", "--as", "alice", "--db", db)
    before = dump(db)
    code, out, _ = cli(capsys, "envs", "claim", "env-ready", "--op", "retire", "--as", "bob", "--db", db, "--json")
    assert code == 1
    result = json.loads(out)
    assert result["ok"] is False and "claimed for stop by alice" in result["message"]
    code, _, err = cli(capsys, "envs", "claim", "env-ready", "--op", "retire", "--as", "bob", "--db", db)
    # the declared holder and the OS account that took the claim (docs/decisions.md, D21)
    assert code == 1 and err.startswith("archon-console: env-ready is claimed for stop by alice (OS ")
    assert dump(db) == before


def test_takeover_via_cli_with_stale_after_option(db, capsys, monkeypatch):
    cli(capsys, "envs", "claim", "env-ready", "--op", "stop", "--as", "alice", "--db", db)
    pin_real_clock(monkeypatch, "2026-11-01T09:35:00Z")
    code, _, err = cli(capsys, "envs", "claim", "env-ready", "--op", "stop", "--as", "bob", "--db", db,
                       "--takeover", "--reason", "stuck")
    assert code == 1 and "fresh claim" in err
    code, out, _ = cli(capsys, "envs", "claim", "env-ready", "--op", "stop", "--as", "bob", "--db", db,
                       "--takeover", "--reason", "stuck", "--stale-after", "4")
    assert code == 0 and "taken over" in out
    code, out, _ = cli(capsys, "--db", db, "envs", "list", "--stale", "--stale-after", "4", "--json")
    assert [r["id"] for r in json.loads(out)] == []
    monkeypatch.setenv("ARCHON_CONSOLE_STALE_MINUTES", "0")
    pin_real_clock(monkeypatch, "2026-11-01T09:36:00Z")
    code, out, _ = cli(capsys, "--db", db, "envs", "list", "--stale", "--json")
    assert [r["id"] for r in json.loads(out)] == ["env-ready"]


def test_complete_and_release_via_cli(db, capsys):
    cli(capsys, "envs", "claim", "env-cleanup_pending", "--op", "cleanup_retry", "--as", "alice", "--db", db)
    code, out, _ = cli(capsys, "envs", "complete", "env-cleanup_pending", "--as", "alice", "--db", db, "--json")
    assert code == 0 and json.loads(out)["state"] == "cleanup_pending"
    assert env_row(db, "env-cleanup_pending")["cleanup_retry_at"] == "2026-11-01 09:30:00"
    cli(capsys, "envs", "claim", "env-stopped", "--op", "retire", "--as", "alice", "--db", db)
    code, out, _ = cli(capsys, "envs", "release", "env-stopped", "--as", "alice", "--db", db)
    assert code == 0 and "Released your retire claim" in out
    code, out, _ = cli(capsys, "envs", "release", "env-stopped", "--as", "alice", "--db", db)
    assert code == 0 and "already released" in out


def test_read_only_usage_and_unusable_exit_codes(db, capsys, tmp_path):
    before = dump(db)
    code, _, err = cli(capsys, "--read-only", "envs", "claim", "env-ready", "--op", "stop", "--db", db)
    assert code == 1 and "read-only" in err
    assert dump(db) == before
    assert cli(capsys, "envs", "claim", "env-ready", "--op", "explode", "--db", db)[0] == 2
    assert cli(capsys, "envs", "--db", db)[0] == 2
    assert cli(capsys, "envs", "release", "env-ready", "--db", db, "--stale-after", "-1")[0] == 2
    (tmp_path / "junk.db").write_text("not a database")
    assert cli(capsys, "envs", "list", "--db", tmp_path / "junk.db")[0] == 3


def test_text_output_is_a_table_without_control_characters(db, capsys):
    cli(capsys, "envs", "claim", "env-ready", "--op", "stop", "--as", "alice", "--db", db)
    code, out, _ = cli(capsys, "envs", "list", "--db", db)
    assert code == 0
    header = out.splitlines()[0].split()
    assert header[:4] == ["ID", "PROJECT", "STATE", "CLAIM"]
    assert "stop by alice" in out and "a moment ago" in out
    code, out, _ = cli(capsys, "envs", "show", "env-stopped", "--db", db)
    assert code == 0 and "\x1b" not in out and "[bold]x\u241b[2J[/bold]" in out
    assert "Timeline:" in out and "Active execution leases:" in out


def test_list_paging_text_hint(db, capsys):
    code, out, _ = cli(capsys, "envs", "list", "--limit", "2", "--db", db)
    assert "more with --after env-ready" in out
    code, out, _ = cli(capsys, "envs", "list", "--limit", "2", "--after", "env-ready", "--db", db, "--json")
    assert [r["id"] for r in json.loads(out)] == ["env-running", "env-stopped"]


def test_envs_commands_do_not_import_textual(db):
    code = (
        "import sys; from console.cli.cli import main; "
        f"rc = main(['envs', 'list', '--db', {str(db)!r}, '--json']); "
        "assert 'textual' not in sys.modules, 'textual imported'; sys.exit(rc)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr


def test_complete_on_a_reset_claim_is_exit_1_and_writes_nothing(db, capsys):
    """Regression (issue 8, rule 2): on main this exited 0 and moved the environment to ready."""
    cli(capsys, "envs", "claim", "env-stopped", "--op", "reset", "--as", "alice", "--db", db)
    before = dump(db)
    code, _, err = cli(capsys, "envs", "complete", "env-stopped", "--as", "alice", "--db", db)
    assert code == 1 and "a reset claim cannot be completed" in err
    assert "archon-console envs release env-stopped" in err
    code, out, _ = cli(capsys, "envs", "complete", "env-stopped", "--as", "alice", "--db", db, "--json")
    result = json.loads(out)
    assert code == 1 and result["ok"] is False and "release" in result["message"]
    assert dump(db) == before and env_row(db, "env-stopped")["lifecycle_state"] == "stopped"
    code, out, _ = cli(capsys, "envs", "release", "env-stopped", "--as", "alice", "--db", db)
    assert code == 0


def test_complete_stop_via_cli_hands_off_and_show_says_so(db, capsys, monkeypatch):
    """Regression (issue 8, rule 2): `envs complete` on a stop claim printed `running -> stopped`."""
    cli(capsys, "envs", "claim", "env-running", "--op", "stop", "--as", "alice", "--db", db)
    conn = raw(db)
    release_lease(conn, "run-1")  # archon ended the run: a stop may be handed off now
    conn.close()
    code, out, _ = cli(capsys, "envs", "complete", "env-running", "--as", "alice", "--db", db, "--json")
    result = json.loads(out)
    assert code == 0 and result["state"] == "running" and result["handoff"]["column"] == "idle_stop_at"
    row = env_row(db, "env-running")
    assert row["lifecycle_state"] == "running" and row["idle_stop_at"] == "2026-11-01 09:30:00"
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2026-11-01T09:32:00Z")
    code, out, _ = cli(capsys, "envs", "show", "env-running", "--db", db)
    assert code == 0
    assert "stop requested 2 minutes ago; archon's idle-stop sweep performs it" in out
    assert "overdue" not in out
    code, out, _ = cli(capsys, "envs", "show", "env-running", "--db", db, "--json")
    [handoff] = json.loads(out)["pending_handoffs"]
    assert (handoff["kind"], handoff["since"], handoff["overdue"]) == ("stop", "2026-11-01T09:30:00.000Z", False)  # --json: the one time form
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2026-11-01T10:30:00Z")
    code, out, _ = cli(capsys, "envs", "show", "env-running", "--db", db)
    assert "stop requested an hour ago" in out and "overdue: archon not running?" in out
    code, out, _ = cli(capsys, "envs", "list", "--db", db, "--json")
    assert [r["id"] for r in json.loads(out) if r["pending_handoffs"]] == ["env-running"]


def test_help_describes_the_hand_off(capsys):
    main(["envs", "complete", "--help"])
    out = capsys.readouterr().out
    assert "never changes the lifecycle state" in out and "idle_stop_at = now" in out
    assert "-> stopped" not in out and "-> ready" not in out
