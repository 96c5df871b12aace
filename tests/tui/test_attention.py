"""The TUI tells the approver when a request arrives: toast, bell, OSC 9/777 and the window title."""

from __future__ import annotations

import asyncio
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st
from textual.worker import Worker, WorkerState

from console.tui.attention import (Attention, NotifyConfig, load_notify_config, osc777, osc9, title_sequence,
                               wants_osc777)
from console.tui.screens.projects import OverviewScreen
from tests.tui.pilot import notifications, ready, wait_until
from widgets.safe_text import is_clean

# Another process doing what archon does when an agent asks: a run, a request, its first event.
ASK = """
import sqlite3, sys, hashlib, json
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("BEGIN IMMEDIATE")
project = sys.argv[3]
for rid in sys.argv[2].split(","):
    action = json.dumps({"remote": "origin", "branch": "main", "commit": "abc"})
    conn.execute("INSERT INTO execution_runs (id, project_id) VALUES (?, ?)", ("run-" + rid, project))
    conn.execute(
        "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
        "action_json, action_fingerprint, authority_schema_version, authority_json, expires_at, created_at, "
        "updated_at) VALUES (?, ?, ?, 'git_push', 1, ?, ?, 1, '{\\"requested_by\\": \\"agent\\"}', "
        "'2025-06-01 13:00:00', '2025-06-01 12:00:00', '2025-06-01 12:00:00')",
        (rid, project, "run-" + rid, action, hashlib.sha256(action.encode()).hexdigest()))
    conn.execute(
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
        "to_status, actor_classification, actor_reference, created_at) VALUES (?, ?, ?, 1, 'requested', "
        "'pending', 'system', 'archon', '2025-06-01 12:00:00')", (rid + ":1", project, rid))
conn.execute("COMMIT")
"""


def ask(path, ids: str, project: str = "prj-atlas-api") -> None:
    subprocess.run([sys.executable, "-c", ASK, str(path), ids, project], check=True)


@pytest.fixture
def quiet_config(monkeypatch, tmp_path):
    monkeypatch.setenv("ARCHON_CONSOLE_CONFIG", str(tmp_path / "none.toml"))
    monkeypatch.delenv("TERM_PROGRAM", raising=False)
    monkeypatch.setenv("TERM", "xterm-256color")


def record(app) -> tuple[list[str], list[str]]:
    """Capture what would reach the terminal (a headless app writes nothing itself)."""
    sent: list[str] = []
    bells: list[str] = []
    app.attention._write = sent.append
    app.bell = lambda: bells.append("bell")
    return sent, bells


def count_polls(app) -> list[Worker]:
    """The polls the app has finished, each added once the app has handled what the poll posted
    (its worker's end comes through the app's queue behind the poll's own messages). A test that
    proves "no second bell" waits for more polls, not for a duration."""
    done: list[Worker] = []

    def seen(message) -> None:
        if isinstance(message, Worker.StateChanged) and message.worker.group == "poll" \
                and message.state in (WorkerState.SUCCESS, WorkerState.ERROR):
            done.append(message.worker)
    app.message_signal.subscribe(app, seen, immediate=True)
    return done


async def two_more_polls(pilot, polls: list[Worker]) -> None:
    seen = len(polls)
    await wait_until(pilot, lambda: len(polls) >= seen + 2, what="two more polls", timeout=20)


@pytest.mark.slow
async def test_a_new_request_is_announced_on_any_screen(demo_db, make_app, quiet_config):
    path = demo_db()
    app = make_app(path, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        sent, bells = record(app)
        polls = count_polls(app)
        await ready(pilot, app, OverviewScreen)
        await wait_until(pilot, lambda: any(s.startswith("\x1b]2;") for s in sent), what="the first title", timeout=20)
        before = int(app.attention.last_title.split("· ")[1].split()[0])
        sent.clear()
        await asyncio.to_thread(ask, path, "apr-brand-new")
        await wait_until(pilot, lambda: bells, what="the bell", timeout=20)
        toasts = [n for n in notifications(app)]
        assert any("apr-brand-new" in n.message and n.title == "Approval needed" for n in toasts)
        assert osc9("Approval needed: apr-brand-new in atlas-api (git_push)") in sent
        assert "\x1b]9;archon-console: Approval needed: apr-brand-new in atlas-api (git_push)\x07" in sent
        assert title_sequence(f"archon · {before + 1} pending") in sent
        assert not any(s.startswith("\x1b]777;") for s in sent)  # xterm: OSC 9 only
        assert isinstance(app.screen, OverviewScreen)  # nothing navigated away
        # already pending at start is no news; one arrival, one bell
        await two_more_polls(pilot, polls)
        assert bells == ["bell"]


@pytest.mark.slow
async def test_several_at_once_are_one_notification(demo_db, make_app, quiet_config):
    path = demo_db()
    app = make_app(path, start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        sent, bells = record(app)
        polls = count_polls(app)
        await ready(pilot, app, OverviewScreen)
        await asyncio.to_thread(ask, path, "apr-x1,apr-x2,apr-x3,apr-x4,apr-x5")
        await wait_until(pilot, lambda: bells, what="the bell", timeout=20)
        await two_more_polls(pilot, polls)
        assert bells == ["bell"]
        message = [n for n in notifications(app) if n.title == "5 approvals needed"][0].message
        assert "apr-x1" in message and "and 2 more" in message


@pytest.mark.slow
async def test_quiet_keeps_only_the_title(demo_db, make_app, monkeypatch, quiet_config):
    import argparse

    path = demo_db()
    app = make_app(path, start="projects")
    # --quiet as the CLI passes it
    from console.tui.attention import load_notify_config as load

    app.attention.config = load(quiet=True)[0]
    async with app.run_test(size=(120, 40)) as pilot:
        sent, bells = record(app)
        polls = count_polls(app)
        await ready(pilot, app, OverviewScreen)
        await asyncio.to_thread(ask, path, "apr-silent")
        await wait_until(pilot, lambda: any("pending" in s for s in sent), what="the title", timeout=20)
        await two_more_polls(pilot, polls)
        assert bells == [] and not any(s.startswith("\x1b]9;") for s in sent)
        assert not any(n.title == "Approval needed" for n in notifications(app))
    assert argparse  # the flag itself: tests/test_cli_reference.py keeps the README's option list honest


def test_sequences_cannot_be_ended_early_by_database_text():
    hostile = "x\x07\x1b]2;owned\x1b\\;y\u202e\x9c"
    for sequence in (osc9(hostile), osc777(hostile, hostile), title_sequence(hostile)):
        body = sequence[2:-1]  # between "ESC ]" and the final BEL
        assert "\x07" not in body and "\x1b" not in body and "\x9c" not in body
        assert is_clean(body)
    assert osc777("a;b", "c;d") == "\x1b]777;notify;archon-console: a,b;c,d\x07"


@given(st.text(max_size=400), st.text(max_size=400))
def test_every_desktop_notification_names_the_console_first(title, body):
    """Issue 17: the words of a desktop notification come from the database and are shown outside
    the terminal; each starts with `archon-console:`, however long or hostile the text."""
    assert osc9(f"{title}: {body}").startswith("\x1b]9;archon-console: ")
    assert osc777(title, body).startswith("\x1b]777;notify;archon-console: ")


def test_osc777_only_where_the_terminal_speaks_it():
    assert wants_osc777("auto", {"TERM_PROGRAM": "WezTerm"})
    assert wants_osc777("auto", {"TERM": "foot"})
    assert not wants_osc777("auto", {"TERM": "xterm-256color"})
    assert wants_osc777("both", {}) and not wants_osc777("off", {"TERM_PROGRAM": "WezTerm"})


def test_config_file_switches_each_and_reports_mistakes(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('[notify]\nbell = false\ndesktop = "osc777"\n')
    config, warning = load_notify_config(path)
    assert warning is None and config == NotifyConfig(bell=False, desktop="osc777")
    assert load_notify_config(path, quiet=True)[0] == NotifyConfig(toast=False, bell=False, desktop="off")
    path.write_text('[notify]\nbell = "loud"\n')
    config, warning = load_notify_config(path)
    assert config == NotifyConfig() and "notify.bell must be true or false" in warning
    path.write_text("[notify\n")
    assert "Ignored the notification settings" in load_notify_config(path)[1]


def test_title_is_pushed_once_and_restored():
    sent: list[str] = []
    attention = Attention(NotifyConfig(), sent.append, environ={})
    attention.count(3)
    attention.count(3)
    attention.count(2)
    attention.restore()
    assert sent == ["\x1b[22;0t", title_sequence("archon · 3 pending"), title_sequence("archon · 2 pending"),
                    "\x1b[23;0t"]
