"""The support engineer's view and the detail panes (issue 21, items 10 and 12).

- The SUPPORT header keeps, by priority, the mode, the release (never dropped), the clock, the
  database's name and the actor, on every screen, at 80x24 and 120x40.
- A snapshot is shown as of the newest time its database records (the default in `inspect`), `@`
  switches every screen to now and back, and the header says which clock is in use; every screen
  asks the one clock (console/clock.py `ScreenClock`), never the running clock behind it.
- Every key/value pane and JSON pane wraps a long value under its value column (a hanging indent).
- Relative times in every detail pane age with the screen's tick, without a database change.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sqlite3
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from console import clock as clock_module
from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.profiles import ProfilesScreen
from console.tui.screens.registry import SCREENS
from tests.tui.conftest import NOW, make_ctx
from tests.tui.pilot import db, ready, record_notifications, select, settle, wait_until
from widgets.lazy_table import LazyTable

pytestmark = pytest.mark.slow

SIZES = [(80, 24), (120, 40)]
size_ids = pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
ORIGINAL = Path("/srv/customers/acme-corporation/production/archon-primary/archon.db")
DAY_LATER = NOW + timedelta(days=1)


def lines(app) -> list[str]:
    """The terminal's text, line by line."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


def pane_lines(app, selector: str) -> list[str]:
    """What the terminal shows of one widget of the detail pane, line by line (the part scrolled
    into view)."""
    region = app.screen.query_one(selector).content_region.intersection(
        app.screen.query_one("#detail").content_region)
    strips = app.screen._compositor.render_strips()
    return [strips[y].crop(region.x, region.right).text.rstrip() for y in range(region.y, region.bottom)]


def support_app(path: Path, *, taken_at: datetime = DAY_LATER, actor: str = "alice", clock=None):
    """`inspect` as the command starts it: the snapshot read-only, the real clock a day after the file."""
    from console.cli.commands.inspect import prepare_inspection
    from console.tui.app import ArchonConsole

    inspection = prepare_inspection(path, path.parent / "kept", now=taken_at)
    support = dataclasses.replace(inspection.support, original=ORIGINAL)
    ctx = dataclasses.replace(make_ctx(inspection.snapshot, actor=actor, read_only=True),
                              clock=clock or clock_module.fixed_clock(taken_at))
    app = ArchonConsole(ctx, support, start="approvals", poll_seconds=3600)
    record_notifications(app)
    return app


def live_app(path: Path, start: str, clock):
    """The console on a live database whose reading clock is `clock`."""
    from console.tui.app import ArchonConsole

    app = ArchonConsole(dataclasses.replace(make_ctx(path), clock=clock), start=start, poll_seconds=3600)
    record_notifications(app)
    return app


# ---------------------------------------------------------------- the header
@size_ids
@pytest.mark.parametrize("entry", SCREENS, ids=lambda e: e.name)
async def test_the_support_header_keeps_mode_release_clock_name_and_actor_by_priority(demo_db, make_app, entry,
                                                                                       size):
    make_app  # the test's keymap and clipboard environment
    path = demo_db()
    app = support_app(path, actor="support-engineer")
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        if entry.name != "approvals":
            app.navigate(entry.name, "atlas-api" if entry.argument else None)
            await wait_until(pilot, lambda: app.screen.COMMAND == entry.name and app.screen.query("#db-label"),
                             what=f"the {entry.name} screen")
        await pilot.pause()
        header = lines(app)[1]
        assert "SUPPORT" in header, header  # the mode
        assert "archon 1.10.0" in header, header  # the release: support's first question
        assert f"as of {app.session.now():%Y-%m-%d %H:%M}Z" in header, header  # the clock times are shown against
        assert app.session.now() < DAY_LATER
        assert "archon.db" in header, header
        if size[0] >= 120:
            assert "as support-engineer" in header, header
        # Dropped least important first: nothing shown that ranks below something left out.
        shown = [part in header for part in ("archon 1.10.0", "as of 2025", "archon.db", "as support-engineer",
                                             "snapshot")]
        assert shown == sorted(shown, reverse=True), header


# ---------------------------------------------------------------- the clock
def expiry_cells(app) -> list[str]:
    t = app.screen.query_one(LazyTable)
    rows = [t.row_at(i) for i in range(min(t.total or 0, 20))]
    return [app.screen._render_expiry(r).plain for r in rows if r is not None]


@size_ids
async def test_a_day_old_snapshot_counts_down_as_of_its_newest_write_and_at_switches_to_now(demo_db, make_app,
                                                                                           size):
    """A customer's file copied a day after archon last wrote it: `inspect` shows it as its owner saw
    it (countdowns, the detail's expiry), `@` shows it against now (everything expired), and back."""
    make_app
    path = demo_db()
    newest = max(datetime.fromisoformat(t).replace(tzinfo=timezone.utc) for (t,) in db(
        path, "SELECT max(created_at) FROM approval_request_events UNION SELECT max(updated_at) FROM approval_requests"))
    app = support_app(path)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        assert app.session.now() == newest  # the newest time the database records, not the copy's day
        cells = expiry_cells(app)
        assert any(c not in ("expired", "—") for c in cells), cells  # a day later every one read "expired"
        pending = next(r for r in (app.screen.query_one(LazyTable).row_at(i) for i in range(20))
                       if r is not None and app.screen._render_expiry(r).plain not in ("expired", "—"))
        await select(pilot, app, pending.id)
        await wait_until(pilot, lambda: "expires in " in str(app.screen.query_one("#detail-head").render()),
                         what="the detail's expiry as of the snapshot")
        assert f"as of {newest:%Y-%m-%d %H:%M}Z" in lines(app)[1]

        await pilot.press("@")
        await wait_until(pilot, lambda: all(c in ("expired", "—") for c in expiry_cells(app)), what="now: expired")
        await wait_until(pilot, lambda: re.search(r"expires +(a day|\d+ hours) ago",
                                                  str(app.screen.query_one("#detail-head").render())),
                         what="the detail's expiry against now")
        assert "as of now" in lines(app)[1]
        assert app.session.now() == DAY_LATER

        await pilot.press("@")
        await wait_until(pilot, lambda: "expires in " in str(app.screen.query_one("#detail-head").render()),
                         what="back to the snapshot's time")
        assert f"as of {newest:%Y-%m-%d %H:%M}Z" in lines(app)[1]


async def test_a_live_database_has_no_clock_key(demo_db, make_app):
    app = make_app(demo_db(), start="approvals")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        before = app.session.now()
        await pilot.press("@")
        await settle(pilot, app)
        assert app.session.now() == before and not app.session.clock.as_of
        assert "as of" not in lines(app)[1]
        assert "@" not in lines(app)[-1]  # not offered in the footer


STATEMENT = "SELECT id, created_at FROM approval_requests"  # `:sql` shows rows once asked for some


async def test_every_screen_asks_the_one_clock(demo_db, make_app, monkeypatch):
    """The class: no screen reads the running clock behind the screens' clock. Over a snapshot shown
    "as of" its time, every screen (and every detail pane, and every service a screen reads through)
    is visited; any call of the context's clock or of console/clock.py's running clocks, wherever a
    module bound them, is a screen that would show another time than the header says."""
    make_app
    path = demo_db()
    calls: list[str] = []

    def recording(name):
        def clock():
            calls.append(f"{name}: {sys._getframe(1).f_code.co_filename}:{sys._getframe(1).f_lineno}")
            return DAY_LATER
        return clock

    for module in list(sys.modules.values()):
        for name in ("system_clock", "real_clock"):
            if getattr(module, name, None) is getattr(clock_module, name):
                monkeypatch.setattr(module, name, recording(name))
    app = support_app(path, clock=recording("the context's clock"))
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        for entry in SCREENS:
            if entry.name != "approvals":
                argument = STATEMENT if entry.name == "sql" else "atlas-api" if entry.argument else None
                app.navigate(entry.name, argument)
                await wait_until(pilot, lambda: app.screen.COMMAND == entry.name, what=entry.name)
            tables = app.screen.query(LazyTable)
            if tables:
                await wait_until(pilot, lambda: tables.first().visible_loaded, what=f"{entry.name} rows")
                for _ in range(3):
                    await pilot.press("down")
            await settle(pilot, app)
            getattr(app.screen, "tick", lambda: None)()  # the screen's tick, now rather than waited for
    assert calls == []


# ---------------------------------------------------------------- hanging indent
LONG_COMMAND = "./scripts/migrate " + " ".join(f"--flag-number-{i}=value-{i}" for i in range(12))


def edit(path: Path, table: str, sql: str, *params) -> None:
    """A change archon's triggers forbid (a request's action is immutable), made on the test's copy
    with the table's triggers set aside for it and put back as they were."""
    conn = sqlite3.connect(path)
    try:
        with conn:
            triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = ?",
                                    (table,)).fetchall()
            for name, _ in triggers:
                conn.execute(f'DROP TRIGGER "{name}"')
            conn.execute(sql, params)
            for _, trigger_sql in triggers:
                conn.execute(trigger_sql)
    finally:
        conn.close()


def _continuations_hang(pane: list[str], key_pattern: str) -> list[str]:
    """Lines after a key line that are not another key line start under the key line's value."""
    bad, value_at = [], None
    for line in pane:
        match = re.match(key_pattern, line)
        if match:
            value_at = match.end()
        elif value_at is not None and line.strip():
            indent = len(line) - len(line.lstrip(" "))
            if indent != value_at:
                bad.append(f"{line!r} starts at {indent}, not under the value at {value_at}")
        else:
            value_at = None
    return bad


@size_ids
@pytest.mark.parametrize("screen", ["approvals", "envs", "project"])
async def test_detail_values_wrap_under_their_value_column(demo_db, make_app, screen, size):
    """Every key/value pane: a value longer than the pane continues under the value, never at
    column 0 under the keys; JSON too: `"command":` keeps its value beside it, and the value's
    continuation lines start under its first character."""
    path = demo_db()
    edit(path, "approval_requests", "UPDATE approval_requests SET action_json = ? WHERE id = 'apr-00000191'",
         json.dumps({"command": LONG_COMMAND, "cwd": "/srv"}))
    edit(path, "execution_environments", "UPDATE execution_environments SET failure_message = ? WHERE id = 'env-0004'",
         LONG_COMMAND)
    app = make_app(path, start={"approvals": "approvals", "envs": "envs", "project": "project atlas-api"}[screen])
    keys = {"approvals": ("status", "project", "kind", "action", "requester", "expires", "created", "decided",
                          "fingerprint", "run", "approve", "deny", "revoke"),
            "envs": ("state", "project", "provider", "leases", "claim", "retirement", "idle stop", "cleanup",
                     "last used", "created", "failure", "handed off", "work", "stop", "retire", "takeover",
                     "complete", "release"),
            "project": ("revision", "schema", "provider", "created", "activated", "fingerprint")}[screen]
    key_pattern = r"^ *(?:" + "|".join(re.escape(k) for k in keys) + r") "
    async with app.run_test(size=size) as pilot:
        if screen == "approvals":
            await ready(pilot, app, ApprovalsScreen)
            await select(pilot, app, "apr-00000191")  # pending, past its expiry
        elif screen == "envs":
            await ready(pilot, app, EnvironmentsScreen)
            await select(pilot, app, "env-0004")
        else:
            await ready(pilot, app, ProfilesScreen)
            await wait_until(pilot, lambda: str(app.screen.query_one("#detail-head").render()).strip(),
                             what="a revision's head")
        await settle(pilot, app)
        head = pane_lines(app, "#detail-head")
        assert any(re.match(key_pattern, line) for line in head), head
        wrapped = [line for line in head[1:] if line.strip() and not re.match(key_pattern, line)]
        if screen != "project" or size[0] >= 120:  # a revision's fingerprint fits 80 columns
            assert wrapped, head  # some value is longer than the pane at this size
        assert _continuations_hang(head[1:], key_pattern) == []
        if screen == "approvals":
            app.screen.query_one("#detail").scroll_to_widget(app.screen.query_one("#detail-action"), top=True,
                                                             animate=False)
            await settle(pilot, app)
            action = pane_lines(app, "#detail-action")
            assert any(line.strip().startswith("--flag-number") for line in action), action  # it did wrap
            value_at = next(line.index('"command": ') + len('"command": ') for line in action if '"command": ' in line)
            continued = [line for line in action if "--flag-number" in line and '"command": ' not in line]
            assert continued and all(len(line) - len(line.lstrip(" ")) == value_at for line in continued), action


# ---------------------------------------------------------------- ageing
class MovableClock:
    def __init__(self, at: datetime) -> None:
        self.at = at

    def __call__(self) -> datetime:
        return self.at


@pytest.mark.parametrize("screen, row, phrase, moved", [
    ("approvals", "apr-00000200", r"expires +(in \S+ \S+)", timedelta(hours=-3)),
    ("envs", "env-0004", r"last used (\S+ \S+ ago)", timedelta(minutes=30)),
    ("project", None, r"created (\S+ \S+ ago)", timedelta(days=90)),
])
async def test_relative_times_in_the_detail_pane_age_with_the_tick(demo_db, make_app, screen, row, phrase, moved):
    """"3m ago" keeps counting while the pane stays open: nothing in the database changes, the clock
    moves, and the screen's tick draws the pane again from it."""
    make_app
    path = demo_db()
    moving = MovableClock(NOW)
    app = live_app(path, {"approvals": "approvals", "envs": "envs", "project": "project atlas-api"}[screen], moving)
    async with app.run_test(size=(120, 40)) as pilot:
        if row is not None:
            await ready(pilot, app, {"approvals": ApprovalsScreen, "envs": EnvironmentsScreen}[screen])
            await select(pilot, app, row)
        else:
            await ready(pilot, app, ProfilesScreen)

        def shown() -> str | None:
            found = re.search(phrase, str(app.screen.query_one("#detail-head").render()))
            return found.group(1) if found else None

        await wait_until(pilot, lambda: shown() is not None, what=f"{phrase} in the detail")
        before = shown()
        moving.at = NOW + moved
        await wait_until(pilot, lambda: shown() not in (None, before), what=f"{before!r} to age")


# ---------------------------------------------------------------- the picture
@size_ids
def test_support_snapshot_picture(demo_db, make_app, snap_compare, size):
    """`inspect` on a day-old file: the header (mode, release, clock, name, actor, snapshot) and the
    queue and detail as of the file's newest write. Update with `--snapshot-update`."""
    from tests.tui.scenes import Scene, settle as settle_scene

    make_app
    app = support_app(demo_db(), actor="support-engineer")

    def detail_shown(app) -> bool:
        row = app.screen.query_one(LazyTable).cursor_row
        return row is not None and app.screen.detail is not None and app.screen.detail.id == row.id

    async def run_before(pilot):
        await settle_scene(pilot, app, Scene("support", "approvals", ("down", "down"), detail_shown))

    assert snap_compare(app, terminal_size=size, run_before=run_before)
