"""Nothing the console itself does writes to the file while its upgrade runs (atk18 upgrade2 finding 11).

The upgrade screen runs the upgrade in a child process and passes the TUI's own pid in
`others_ignored`, so the per-step holder check does not count this console's connection. On main,
the operator could switch screens during the run and approve, claim or activate from that very
connection: writes the holder check cannot see, landing on a schema between two steps. Now
`Session.hold_writes` greys and refuses every screen's write actions for the whole run, and the
connection is `query_only` underneath.

The run is held part-way by a condition the test controls (no sleeps): the screen's progress
callback waits on an event at the first migration tick, so the worker, and with it the hold,
stays until the test lets it go.
"""

from __future__ import annotations

import sqlite3

import pytest

from console.tui.screens.approvals import ApprovalsScreen, decision_greying
from console.tui.screens.base import UPGRADE_REASON, ConsoleScreen
from console.tui.screens.error import ErrorModal
from console.tui.screens.reason import ReasonModal
from console.tui.screens.registry import SCREENS
from console.tui.screens.typed import TypedConfirmModal
from console.tui.screens.upgrade import UpgradeScreen
from tests.tui.pilot import db, notifications, ready, table, type_text, wait_until
from tests.tui.upgrade_hold import held_run

pytestmark = pytest.mark.slow

ARGUMENTS = {"project": "atlas-api"}  # screens that need one to open


async def _approvable(pilot, app) -> str:
    """Put the cursor on a request the row's own rules let alice approve without a typed
    confirmation (only the upgrade stands in the way), and return its id."""
    for _ in range(40):
        await wait_until(pilot, lambda: app.screen.detail is not None
                         and app.screen.detail.id == table(app).cursor_key, what="a request's detail")
        detail = app.screen.detail
        if "approve" not in decision_greying(detail) and not (detail.confirm or {}).get("approve"):
            return detail.id
        await pilot.press("down")
    pytest.fail("no request alice can approve in the first 40 rows")


def _notified(app, text: str) -> bool:
    return any(text in str(n.message) for n in notifications(app))


async def test_no_write_while_the_upgrade_runs_and_writes_come_back_after(demo_db, make_app, monkeypatch):
    path = demo_db(release="1.8.22", requests=20)
    reached, release = held_run(monkeypatch)
    app = make_app(path, start="upgrade")
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None,
                             timeout=15)
            await pilot.press("U")
            await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal))
            await type_text(pilot, path.name)
            await pilot.press("enter")
            await wait_until(pilot, reached.is_set, timeout=60, what="the upgrade's first step")

            # Mid-run: the operator switches to the approval queue from the command line.
            await pilot.press("colon")
            await type_text(pilot, "approvals")
            await pilot.press("enter")
            await ready(pilot, app, ApprovalsScreen)
            request_id = await _approvable(pilot, app)
            before = db(path, "SELECT status, decision_at FROM approval_requests WHERE id = ?", request_id)
            assert app.screen.check_action("approve", ()) is None
            assert app.screen.unavailable()["approve"] == UPGRADE_REASON
            await pilot.press("a")  # refused with the reason, no dialog
            await wait_until(pilot, lambda: _notified(app, "an upgrade is running"), what="the reason")
            assert isinstance(app.screen, ApprovalsScreen)

            # Past the greying (a write already asked for): the one write path refuses it too.
            app.screen._run_decision("approve", [request_id], "mid-upgrade", bulk=False)
            await wait_until(pilot, lambda: isinstance(app.screen, ErrorModal), what="the refusal")
            assert "an upgrade is running" in str(app.screen.error)
            await pilot.press("escape")
            # And under both: the connection itself refuses to write.
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                app.session.run(lambda h: h.conn.execute(
                    "UPDATE approval_requests SET status = status WHERE id = ?", (request_id,)))
            assert db(path, "SELECT status, decision_at FROM approval_requests WHERE id = ?", request_id) == before

            release.set()
            await wait_until(pilot, lambda: not app.session.upgrading and any(
                isinstance(s, UpgradeScreen) and s.plan is not None and s.plan.up_to_date
                for s in app.screen_stack), timeout=60, what="upgrade finished")
            await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen)
                             and app.screen.detail is not None and app.screen.detail.id == request_id
                             and "approve" not in app.screen.unavailable(),
                             what=f"approve offered again ({app.screen}: {app.screen.unavailable()})", timeout=15)
            assert app.screen.check_action("approve", ()) is True
            await pilot.press("a")
            await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
            await pilot.press("enter")
            await wait_until(pilot, lambda: db(path, "SELECT status FROM approval_requests WHERE id = ?",
                                               request_id)[0][0] == "approved", what="approved after the run")
    finally:
        release.set()
    assert db(path, "SELECT count(*) FROM _sqlite_migrations")[0][0] == 29


def _cases():
    for entry in SCREENS:
        actions = sorted(entry.screen_class().WRITE_ACTIONS)
        for action in actions:
            yield pytest.param(entry.name, action, id=f"{entry.name}-{action}")


def test_every_screen_with_writes_is_covered():
    """Every ConsoleScreen subclass that writes is reachable from the registry (so `_cases` sees it)."""
    registered = {entry.screen_class() for entry in SCREENS}
    seen, todo = set(), list(ConsoleScreen.__subclasses__())
    while todo:
        cls = todo.pop()
        if cls not in seen:
            seen.add(cls)
            todo.extend(cls.__subclasses__())
    writers = {cls for cls in seen if cls.WRITE_ACTIONS}
    assert writers and writers <= registered


@pytest.mark.parametrize("name, action", list(_cases()))
async def test_every_write_action_is_unavailable_while_an_upgrade_runs(demo_db, make_app, name, action):
    """Generated over every screen's WRITE_ACTIONS: held, each is greyed with the reason and, run
    anyway (the key bypassing the Footer), writes nothing; released, the hold no longer greys it."""
    path = demo_db()
    start = f"{name} {ARGUMENTS[name]}" if name in ARGUMENTS else name
    app = make_app(path, start=start)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ConsoleScreen)
                         and type(app.screen).COMMAND == name, timeout=15)
        screen = app.screen
        dump = "\n".join(sqlite3.connect(path).iterdump())
        with app.session.hold_writes():
            assert screen.unavailable()[action] == UPGRADE_REASON
            assert screen.check_action(action, ()) is None
            await screen.run_action(action)
            await pilot.pause()
            assert type(app.screen) is type(screen)  # no dialog opened
        assert "\n".join(sqlite3.connect(path).iterdump()) == dump
        assert screen.unavailable().get(action) != UPGRADE_REASON


def test_the_hold_ends_however_the_run_ends(demo_db, make_app):
    """A run that fails (here: an exception inside the hold) leaves writes allowed again."""
    app = make_app(demo_db())
    with pytest.raises(RuntimeError):
        with app.session.hold_writes():
            assert app.session.upgrading
            with pytest.raises(sqlite3.OperationalError, match="readonly"):
                app.session.run(lambda h: h.conn.execute("UPDATE approval_requests SET status = status WHERE 0"))
            raise RuntimeError("the child died")
    assert not app.session.upgrading
    app.session.run(lambda h: h.conn.execute("UPDATE approval_requests SET status = status WHERE 0"))
    app.session.close()



async def test_doctor_waits_while_an_upgrade_runs(demo_db, make_app, monkeypatch):
    """Doctor runs in a child process: another user of the file, which the upgrade's per-step holder
    check would take for archon and stop the upgrade part-way for (attack round 3, finding 5). While
    the console's own upgrade runs, the doctor screen starts no child and says why; r runs it after."""
    from console.tui import session as session_module
    from console.tui.screens.doctor import DoctorScreen

    started = []
    real = session_module.call_isolated

    def counted(function, *args, **kwargs):
        started.append(function)
        return real(function, *args, **kwargs)

    monkeypatch.setattr(session_module, "call_isolated", counted)
    path = demo_db()
    app = make_app(path, start="approvals")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        with app.session.hold_writes():
            app.push_screen(DoctorScreen())
            await wait_until(pilot, lambda: isinstance(app.screen, DoctorScreen), timeout=15)
            await pilot.pause()
            summary = str(app.screen.query_one("#doctor-summary").render())
            assert "Doctor waits" in summary and UPGRADE_REASON in summary
            assert not any("doctor" in f for f in started)
        await pilot.press("r")
        await wait_until(pilot, lambda: app.screen.report is not None, timeout=60)
        assert any("doctor" in f for f in started)


def test_no_child_process_starts_while_the_upgrade_runs(demo_db, make_app):
    """The class behind the doctor screen's wait: any child a screen starts (a plan on a second
    upgrade screen, doctor) would be another holder of the file. `Session.isolated` refuses them all
    while the upgrade runs, and starts them again after."""
    from console.errors import Refusal

    app = make_app(demo_db())
    try:
        with app.session.hold_writes():
            for function in ("console.services.upgrade.plan:plan_upgrade", "console.services.doctor:run_doctor"):
                with pytest.raises(Refusal, match="an upgrade is running"):
                    app.session.isolated(function, app.session.db_path)
        assert app.session.isolated("console.services.upgrade.plan:plan_upgrade", app.session.db_path).path
    finally:
        app.session.close()
