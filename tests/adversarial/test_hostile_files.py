"""A hostile database file cannot exhaust memory or time, and a signal stops any statement (issue 17,
finding 9 a and c, and the deadline).

Every command runs in its own process under `ulimit -v` 1 GB and a timeout (tests/adversarial/
bounded.py); exceeding either fails the test. The mechanisms: every connection is opened with a
4 MB value limit, a per-statement deadline and an interrupt on SIGINT/SIGTERM/SIGHUP
(console/db/limits.py); reads name their stored columns, so a generated column is never computed
(console/db/sql.py); a request's events are read a page at a time (services/approval_queue.py).
"""

from __future__ import annotations

import json
import shutil
import signal
import time
from pathlib import Path

import pytest

from tests import damage
from tests.tui.pilot import wait_until
from tests.adversarial.bounded import (
    add_endless_triggers,
    add_events,
    add_generated_columns,
    add_oversize_value,
    console,
    cpu_seconds,
    ended_cleanly,
    holds_write_lock,
    popen,
)

pytestmark = pytest.mark.slow

READS = [
    ["projects", "list"], ["projects", "list", "--json"],
    ["approvals", "list"], ["approvals", "list", "--json"], ["approvals", "list", "--status", "all"],
    ["approvals", "show", "req-open"], ["approvals", "show", "req-open", "--json"],
    ["approvals", "show", "req-open", "--as-of", "2099-01-01 00:00"],
    ["envs", "list"], ["envs", "list", "--json"], ["envs", "show", "env-ready"], ["envs", "show", "env-ready", "--json"],
    ["profiles", "list", "p1"], ["profiles", "show", "p1:execution-profile:1"],
    ["audit"], ["audit", "--json"],
    ["doctor"], ["doctor", "--json"], ["upgrade", "--plan"],
]
WRITES = [
    ["--as", "bob", "approvals", "approve", "req-open", "--reason", "ok"],
    ["--as", "bob", "approvals", "deny", "req-open", "--reason", "no"],
    ["--as", "bob", "approvals", "expire"],
    ["--as", "bob", "envs", "claim", "env-ready", "--op", "stop"],
]


@pytest.fixture(scope="module")
def healthy(tmp_path_factory) -> Path:
    return damage.healthy(tmp_path_factory.mktemp("healthy") / "archon.db")


@pytest.fixture
def db(healthy, make_db) -> Path:
    return make_db(template=healthy)


def test_a_generated_column_is_never_computed(db):
    """Issue 17 9a: `ALTER TABLE projects ADD COLUMN zz ... printf('%.*c', 300000000, 'x')` once took
    `projects list` (and `approvals list`) past 2.6 GB."""
    add_generated_columns(db, ("projects",))
    result = console("--db", str(db), "projects", "list")
    assert result.returncode == 0, result.stderr
    assert "p1" in result.stdout and "p2" in result.stdout
    doctor = console("--db", str(db), "doctor", "--json")
    found = {f["id"]: f for f in json.loads(doctor.stdout)["findings"]}
    assert "projects.zz" in found["schema.generated_columns"]["found"]


def test_a_value_over_the_limit_is_one_sentence(db):
    add_oversize_value(db, "projects", "name")
    result = console("--db", str(db), "projects", "list")
    assert result.returncode == 3, (result.returncode, result.stderr[-500:], len(result.stdout))
    assert result.stderr.startswith("archon-console: a value in table projects is larger than 4,194,304 bytes")
    ended_cleanly(result)


def test_a_request_with_many_events_shows_a_page(db):
    """Issue 17 9c: 300,000 events on one request made `approvals show` print 29 MB."""
    add_events(db, "req-open", 20_000)
    text = console("--db", str(db), "approvals", "show", "req-open")
    assert text.returncode == 0, text.stderr
    assert len(text.stdout) < 100_000
    assert "…and 19,801 earlier events (only the newest 200 are shown" in text.stdout
    shown = console("--db", str(db), "approvals", "show", "req-open", "--json")
    data = json.loads(shown.stdout)
    assert len(data["events"]) == 200 and data["events_total"] == 20_001 and data["events_truncated"] is True
    assert data["events"][-1]["reason"] == "note 19999"  # the newest page, oldest first
    as_of = console("--db", str(db), "approvals", "show", "req-open", "--as-of", "2099-01-01 00:00")
    assert as_of.returncode == 0 and len(as_of.stdout) < 100_000, as_of.stderr


def test_a_statement_over_its_budget_ends_in_one_sentence(db):
    add_endless_triggers(db)
    started = time.monotonic()
    result = console("--db", str(db), "--as", "bob", "approvals", "approve", "req-open", "--reason", "ok",
                     env={"ARCHON_CONSOLE_STATEMENT_SECONDS": "1"}, timeout=60)
    assert result.returncode == 3, result.stderr
    assert "a database statement ran longer than 1 seconds and was stopped" in result.stderr
    assert time.monotonic() - started < 30
    ended_cleanly(result)


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT], ids=lambda s: s.name)
def test_a_signal_stops_a_running_statement(db, signum):
    """A signal used to wait for the statement to end (for ever, on a hostile file)."""
    add_endless_triggers(db)
    proc = popen("--db", str(db), "--as", "bob", "approvals", "approve", "req-open", "--reason", "ok")
    try:
        deadline = time.monotonic() + 60
        while not holds_write_lock(db):  # the approval's transaction, inside the endless trigger
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the approval never started"
        busy = cpu_seconds(proc.pid) + 0.2
        while cpu_seconds(proc.pid) < busy:  # well inside the statement: its progress handler has run many times
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "the approval never got busy"
            time.sleep(0.02)
        sent = time.monotonic()
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert time.monotonic() - sent < 15  # promptly, not after the endless statement: generous under load
    assert proc.returncode == (130 if signum == signal.SIGINT else 128 + signum), err
    assert "Traceback" not in err
    assert ("interrupted" if signum == signal.SIGINT else f"stopped by {signum.name}") in err
    assert not holds_write_lock(db)


HOSTILE_FILES = {
    "generated-columns": lambda p: add_generated_columns(p, expression="zeroblob(300000000)"),
    "oversize-request": lambda p: add_oversize_value(p, "approval_requests", "action_json"),
    "oversize-event": lambda p: add_oversize_value(p, "approval_request_events", "reason"),
    "oversize-environment": lambda p: add_oversize_value(p, "execution_environments", "target_key"),
    "oversize-profile": lambda p: add_oversize_value(p, "execution_profile_revisions", "profile_json"),
    "oversize-project": lambda p: add_oversize_value(p, "projects", "name"),
    "many-events": lambda p: add_events(p, "req-open", 20_000),
    "endless-triggers": lambda p: add_endless_triggers(p),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_FILES))
def test_every_command_survives_a_hostile_file(healthy, tmp_path, kind):
    """The sweep: every command on every kind of hostile file ends normally or in one sentence."""
    db = tmp_path / "archon.db"
    shutil.copyfile(healthy, db)
    HOSTILE_FILES[kind](db)
    for argv in READS + WRITES:
        result = console("--db", str(db), *argv, env={"ARCHON_CONSOLE_STATEMENT_SECONDS": "3"})
        try:
            ended_cleanly(result)
        except AssertionError as exc:
            raise AssertionError(f"{kind}: {' '.join(argv)}: {exc}") from None


async def test_the_detail_pane_shows_a_page_of_many_events(db, make_app):
    """Issue 17 9c: the TUI froze ~75 s at 1.6 GB on a request with 300,000 events."""
    from console.tui.screens.approvals import ApprovalsScreen
    from widgets.timeline import Timeline

    add_events(db, "req-open", 20_000)
    app = make_app(db, read_only=True, start="approvals")
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen) and app.screen.detail is not None,
                         timeout=60, what="the detail pane filled")
        assert app.screen.detail.id == "req-open" and len(app.screen.detail.events) == 200
        def shown() -> str:
            return str(app.screen.query_one("#detail-events", Timeline).render())

        # the timeline paints after the detail arrives
        await wait_until(pilot, lambda: "…and" in shown(), timeout=60, what="the timeline painted")
        assert "…and 19,801 earlier events" in shown()
