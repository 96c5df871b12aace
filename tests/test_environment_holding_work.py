"""Attack round on the stop and cleanup hand-offs: every record that places active work in an
environment holds it against a stop (`environment_queries.holding_work`, one query for the write,
`envs show` and the TUI's greying), a cleanup retry is never requested over archon's cleanup claim,
and a binding recorded under another project than its environment's is listed and refused alike.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.services.environment_queries import show_environment
from console.services.environment_rules import claim_options, cleanup_claim_blocks, lease_blocks_stop
from tests.environments_support import (
    add_env,
    add_project,
    add_service_run,
    add_validation,
    ago,
    console,
    dump,
    env_row,
    handle,
    raw,
    set_cleanup_claim,
)

pytestmark = pytest.mark.slow


@pytest.fixture
def db(make_db) -> Path:
    return make_db(projects=["p1"])


def _view(db: Path, env_id: str, **kwargs):
    with handle(db, read_only=True) as h:
        return show_environment(h, env_id, now=datetime.now(timezone.utc), **kwargs)


def test_an_unfinished_service_run_blocks_the_stop_hand_off(db):
    """Attack round 2, c2 (on main): a service run placed in the environment and not completed, with
    no binding, let `complete` write idle_stop_at = now "with no run holding it"."""
    conn = raw(db)
    add_env(conn, "env-8", "running")
    add_service_run(conn, "env-8", "svc-1")
    add_service_run(conn, "env-8", "svc-0", completed=True)  # a finished one holds nothing
    conn.close()
    assert console(db, "envs", "claim", "env-8", "--op", "stop").returncode == 0
    before = dump(db)
    done = console(db, "envs", "complete", "env-8")
    assert done.returncode == 1, done.stdout
    words = lease_blocks_stop((("service_run", "svc-1"),))
    assert "a service run is active (run svc-1)" in words and words in " ".join(done.stderr.split())
    assert "svc-0" not in done.stderr
    assert dump(db) == before and env_row(db, "env-8")["idle_stop_at"] is None
    for everywhere in (True, False):  # the CLI's read and the TUI's seek both see it, same words
        assert claim_options(_view(db, "env-8", everywhere=everywhere), "alice").why("complete") == words
    shown = console(db, "envs", "show", "env-8")
    assert "Other work placed in it, not finished:" in shown.stdout and "svc-1" in shown.stdout
    conn = raw(db)
    conn.execute("UPDATE service_run_details SET completed_at = '2026-11-01 10:00:00' WHERE execution_run_id = 'svc-1'")
    conn.commit() if conn.in_transaction else None
    conn.close()
    done = console(db, "envs", "complete", "env-8")
    assert done.returncode == 0, done.stderr
    assert env_row(db, "env-8")["idle_stop_at"] is not None


def test_an_unfinished_check_run_naming_the_environment_blocks_the_stop(db):
    """Check batches and attempts: the seeds do not show their placement JSON's keys, so any quoted
    occurrence of the environment's id in an unfinished one holds it (the safe side)."""
    conn = raw(db)
    add_env(conn, "env-c", "ready")
    conn.execute("INSERT INTO execution_runs (id, project_id) VALUES ('chk-1', 'p1')")
    conn.execute("PRAGMA ignore_check_constraints = ON")
    for trigger, in conn.execute("SELECT name FROM sqlite_master WHERE type = 'trigger' "
                                 "AND tbl_name = 'check_attempt_details'").fetchall():
        conn.execute(f"DROP TRIGGER {trigger}")  # only the columns this test reads matter here
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("INSERT INTO check_attempt_details (execution_run_id, batch_run_id, definition_id, "
                 "command_snapshot_json, definition_fingerprint, initial_workspace_identity_json, placement_json) "
                 "VALUES ('chk-1', 'chk-1', 'd', '{}', ?, '{}', ?)",
                 ("0" * 64, '{"environment":{"id":"env-c"}}'))
    conn.commit() if conn.in_transaction else None
    conn.close()
    assert console(db, "envs", "claim", "env-c", "--op", "stop").returncode == 0
    done = console(db, "envs", "complete", "env-c")
    assert done.returncode == 1 and "a check attempt is active (run chk-1)" in done.stderr
    assert claim_options(_view(db, "env-c"), "alice").why("complete") == lease_blocks_stop(
        (("check_attempt", "chk-1"),))
    tui = _view(db, "env-c", everywhere=False)  # the cursor path cannot seek these: it says so
    assert tui.holding_not_checked and "check runs" in tui.holding_not_checked
    conn = raw(db)
    conn.execute("UPDATE check_attempt_details SET outcome = 'passed' WHERE execution_run_id = 'chk-1'")
    conn.commit() if conn.in_transaction else None
    conn.close()
    assert console(db, "envs", "complete", "env-c").returncode == 0


def test_no_cleanup_retry_over_archons_cleanup_claim(db):
    """Attack round 2, c3 (on main): `claim --op cleanup_retry` and `complete` went ahead while
    archon's cleanup worker held a two-minute-old cleanup claim."""
    conn = raw(db)
    add_env(conn, "env-9", "cleanup_pending")
    add_env(conn, "env-10", "cleanup_pending")
    set_cleanup_claim(conn, "env-9", "archon-cleanup-worker:3", ago(2))
    conn.close()
    before = dump(db)
    done = console(db, "envs", "claim", "env-9", "--op", "cleanup_retry")
    assert done.returncode == 1, done.stdout
    row = env_row(db, "env-9")
    words = cleanup_claim_blocks(row["cleanup_claim_id"], row["cleanup_claimed_at"])
    assert "archon's cleanup worker holds a cleanup claim" in words and words in " ".join(done.stderr.split())
    assert dump(db) == before
    assert claim_options(_view(db, "env-9"), "alice").why("cleanup_retry") == words
    # claimed first, then archon's worker claims the cleanup: completing is refused the same way
    assert console(db, "envs", "claim", "env-10", "--op", "cleanup_retry").returncode == 0
    conn = raw(db)
    set_cleanup_claim(conn, "env-10", "archon-cleanup-worker:4", ago(1))
    conn.close()
    before = dump(db)
    done = console(db, "envs", "complete", "env-10")
    assert done.returncode == 1 and "archon's cleanup worker holds a cleanup claim" in done.stderr
    assert dump(db) == before and env_row(db, "env-10")["cleanup_retry_at"] is None
    row = env_row(db, "env-10")
    assert claim_options(_view(db, "env-10"), "alice").why("complete") == cleanup_claim_blocks(
        row["cleanup_claim_id"], row["cleanup_claimed_at"])


def test_a_binding_under_another_project_is_listed_and_the_tui_says_what_it_leaves(db):
    """Attack round 2, c1 (on main): a binding archon wrote before its identity trigger, under another
    project than its environment's, was missing from `envs show` and greying enabled `complete`."""
    conn = raw(db)
    add_project(conn, "p2")
    add_env(conn, "env-7", "ready")
    sql = conn.execute("SELECT sql FROM sqlite_master WHERE name = "
                       "'validate_execution_environment_binding_identity'").fetchone()[0]
    conn.execute("DROP TRIGGER validate_execution_environment_binding_identity")  # a row from before 1.8.22
    add_validation(conn, "env-7", "val-7", project_id="p2")
    conn.execute(sql)
    conn.commit() if conn.in_transaction else None
    conn.close()
    assert console(db, "envs", "claim", "env-7", "--op", "stop").returncode == 0
    shown = console(db, "envs", "show", "env-7")
    assert "val-7" in shown.stdout
    words = lease_blocks_stop((("validation", "val-7"),))
    assert claim_options(_view(db, "env-7"), "alice").why("complete") == words
    done = console(db, "envs", "complete", "env-7")
    assert done.returncode == 1 and words in " ".join(done.stderr.split())
    tui = _view(db, "env-7", everywhere=False)  # the cursor's seek: states what only the write checks
    assert tui.holding_not_checked and "another project" in tui.holding_not_checked
