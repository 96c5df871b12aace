"""Issue 21, items 10 and 11 (the parts about keys and pastes): Ctrl-C quits both consoles (asking
first only while a write is in flight); a multi-line paste into a reason keeps every line, and the
CLI's `--reason` stores the same text; a pasted id with whitespace around it passes the typed
confirmation."""

from __future__ import annotations

import asyncio
import threading

import pytest
from textual import events

from console.cli.cli import main
from console.models.results import ActionResult
from console.tui.interrupt import ASK
from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.reason import ReasonModal
from console.tui.screens.typed import TypedConfirmModal
from tests.conftest import pin_real_clock
from tests.tui.fleet_helpers import FixedLink, HostConfig, request_row
from tests.tui.pilot import (db, key_event, notifications, ready, record_notifications, select, send_keys,
                             wait_until)

pytestmark = pytest.mark.slow


# ---------------------------------------------------------------- Ctrl-C
async def interrupt(pilot) -> None:
    """Ctrl-C as the terminal sends it (not `send_keys`, which waits for a marker a quitting app drops)."""
    pilot.app.post_message(key_event("ctrl+c"))
    await pilot.pause()


async def test_ctrl_c_quits_the_console(demo_db, make_app):
    app = make_app(demo_db())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await send_keys(pilot, "/")  # even from a text box, whose own Ctrl-C copies
        await interrupt(pilot)
        await wait_until(pilot, lambda: app.return_code is not None, what="the app exiting")
    assert not any("ctrl+q" in n.message for n in notifications(app))


async def test_ctrl_c_asks_first_while_a_write_is_in_flight(demo_db, make_app):
    app = make_app(demo_db())
    gate = threading.Event()
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        app.screen.write_call(lambda: (gate.wait(30), ActionResult(True, "x", "done"))[1])
        await wait_until(pilot, lambda: app.writes_in_flight() == 1, what="the write running")
        await send_keys(pilot, "ctrl+c")
        await wait_until(pilot, lambda: any(n.message == ASK for n in notifications(app)), what="the question")
        assert app.return_code is None
        await interrupt(pilot)  # asked once: the second one quits
        await wait_until(pilot, lambda: app.return_code is not None, what="the app exiting")
        gate.set()


class HeldLink(FixedLink):
    """Approvals are answered only once `gate` is set: a decision stays in flight until then."""

    def __init__(self, hosts) -> None:
        super().__init__(hosts)
        self.gate = threading.Event()

    async def call(self, host, method, params):
        if method == "approvals.approve":
            await asyncio.get_running_loop().run_in_executor(None, self.gate.wait, 30)
        return await super().call(host, method, params)


@pytest.fixture
def fleet(monkeypatch, tmp_path):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2025-06-01 12:00:00")
    monkeypatch.setenv("ARCHON_CONSOLE_KEYMAP", str(tmp_path / "no-keymap.toml"))
    hello = {"archon_release": "1.10.0", "actor": "alice", "actor_source": "forced_command", "read_only": False}
    link = HeldLink({"eu1": ("ok", hello, [request_row("apr-1", "billing", "git_push", "2025-06-01 12:40:00",
                                                       "dave", {"remote": "origin", "branch": "main"})])})

    from console.tui.fleet_app import FleetConsole

    app = FleetConsole([HostConfig("eu1")], link, poll_seconds=3600)
    record_notifications(app)
    return app, link


async def test_ctrl_c_quits_the_fleet_console_and_asks_while_a_decision_is_out(fleet):
    app, link = fleet
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: getattr(app.screen, "selected", None) is not None, what="the row")
        await send_keys(pilot, "a")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal), what="the approve dialog")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: app.writes_in_flight() == 1, what="the decision sent")
        await send_keys(pilot, "ctrl+c")
        await wait_until(pilot, lambda: any(n.message == ASK for n in notifications(app)), what="the question")
        assert app.return_code is None
        link.gate.set()
        await wait_until(pilot, lambda: app.writes_in_flight() == 0, what="the answer")
        await interrupt(pilot)
        await wait_until(pilot, lambda: app.return_code is not None, what="the app exiting")


# ---------------------------------------------------------------- pastes
async def paste(pilot, text: str) -> None:
    pilot.app.post_message(events.Paste(text))  # as the terminal sends it: to the app, which hands it on
    await pilot.pause()


REASON = "pushed to the wrong remote\nsee the incident notes\n  indented third line"


async def test_a_multi_line_reason_is_kept_whole_as_the_cli_keeps_it(demo_db, make_app, monkeypatch, capsys):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000195")
        await send_keys(pilot, "d")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal), what="the deny dialog")
        await paste(pilot, REASON)
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: db(path, "SELECT status FROM approval_requests WHERE id='apr-00000195'")[0][0]
                         == "denied", what="denied")
    tui = db(path, "SELECT reason FROM approval_request_events WHERE approval_request_id='apr-00000195' "
                   "ORDER BY sequence DESC LIMIT 1")[0][0]
    assert tui == REASON
    pin_real_clock(monkeypatch, "2025-06-01 12:00:00")
    assert main(["--db", str(path), "--as", "alice", "approvals", "deny", "apr-00000192", "--reason", REASON]) == 0
    cli = db(path, "SELECT reason FROM approval_request_events WHERE approval_request_id='apr-00000192' "
                   "ORDER BY sequence DESC LIMIT 1")[0][0]
    assert cli == tui


@pytest.mark.parametrize("pasted", [" env-0013", "env-0013\n", "\tenv-0013 \r\n", "  env-0013  "])
async def test_a_pasted_id_with_whitespace_around_it_confirms(demo_db, make_app, pasted):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0013")
        await send_keys(pilot, "R")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal), what="the typed dialog")
        await paste(pilot, pasted)
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: db(path, "SELECT operation_kind FROM execution_environments "
                                                 "WHERE id='env-0013'")[0][0] == "retire", what="retired")


async def test_a_different_id_still_does_not_confirm(demo_db, make_app):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0013")
        await send_keys(pilot, "R")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal), what="the typed dialog")
        await paste(pilot, " env-001 3\n")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: "not the exact name" in str(app.screen.query_one("#typed-error").render()),
                         what="the refusal")
    assert db(path, "SELECT operation_kind FROM execution_environments WHERE id='env-0013'")[0][0] is None
