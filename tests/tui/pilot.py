"""Driving the app through Pilot and reading the database afterwards: the pieces every flow test shares
(tests/tui/test_flows.py and the flow modules beside it import them from here, not from each other)."""

from __future__ import annotations

import asyncio
import sqlite3
import time
import unicodedata
import weakref

from textual import events
from textual.keys import KEY_NAME_REPLACEMENTS, REPLACED_KEYS, key_to_character
from textual.notifications import Notification, Notify

from widgets.lazy_table import LazyTable

_SENT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def wait_until(pilot, predicate, timeout: float = 30.0, what: str = "condition"):
    """Poll `predicate` between message rounds until it holds. `timeout` only bounds a test that is
    already failing; it is generous so a loaded machine (load 7-8 on 2 cores) never fails a test
    that would pass, and no test waits for it to run out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        try:
            if predicate():
                return
        except Exception:
            pass
    raise AssertionError(f"timed out waiting for {what}")


async def settle(pilot, app) -> None:
    """Everything a keypress started has finished: its messages handled, the workers they started
    complete, and their results handled. A test that asserts "nothing happened" waits on this, not
    on a fixed pause that a loaded machine can outlast."""
    for _ in range(2):
        await pilot.pause()
        await app.workers.wait_for_complete()
    await pilot.pause()


def table(app) -> LazyTable:
    return app.screen.query_one(LazyTable)


def field(row, key: str):
    """A field of a row or a detail, whether the screen holds a dict or a typed read model."""
    if row is None:
        return None
    return row.get(key) if isinstance(row, dict) else getattr(row, key, None)


async def ready(pilot, app, screen_cls):
    await wait_until(pilot, lambda: isinstance(app.screen, screen_cls) and table(app).visible_loaded,
                     what=f"{screen_cls.__name__} loaded")


async def select(pilot, app, key: str, detail_key: str = "id"):
    """Move the cursor to the row whose key is `key` and wait for its detail."""
    t = table(app)
    loaded = [t.row_at(i) for i in range(t.total or 0)]
    keys = [None if row is None else t.source.key(row) for row in loaded]
    if key in keys and keys.index(key) >= t.cursor:  # the downs it takes, sent as one burst
        target = keys.index(key)
        await send_keys(pilot, *["down"] * (target - t.cursor))
        await wait_until(pilot, lambda: t.cursor == target, what=f"the cursor on {key}")
    for _ in range(200):
        if t.cursor_key == key:
            break
        await pilot.press("down")
    assert t.cursor_key == key
    await wait_until(pilot, lambda: field(app.screen.detail, detail_key) == key, what=f"detail of {key}")


def db(path, sql, *params):
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def key_event(key: str) -> events.Key:
    """The Key event a terminal sends for `key`: a key name (`down`, `enter`) or a typed character,
    which Textual's input parser names as done here (`a`, `space`, `minus`, `full_stop`)."""
    if len(key) > 1:
        return events.Key(key, " " if key == "space" else key_to_character(REPLACED_KEYS.get(key, key)))
    if key.isalnum():
        return events.Key(key, key)
    name = unicodedata.name(key).lower().replace("-", "_").replace(" ", "_")
    return events.Key(KEY_NAME_REPLACEMENTS.get(name, name), key)


async def send_keys(pilot, *keys: str) -> None:
    """Press `keys` (key names or typed characters) as a terminal sends them: one Key message each
    to the app, which forwards it to the focused widget; a key nobody there handles bubbles up
    through the widget's ancestors to the app, which runs its binding. Return when every key has
    come all the way through. What the keys started is the caller's to wait for (`settle`,
    `wait_until`).

    `pilot.press` waits for the process to go idle after every key (about 0.1 s a key, much more
    on a loaded machine). The message queues keep the keys in order, so this waits once, on a
    condition: a marker sent behind the keys along the same path (the focused widget, each of its
    ancestors, the app) has arrived."""
    app = pilot.app
    for key in keys:
        app.post_message(key_event(key))
    through = asyncio.Event()

    def hop(path: list) -> None:
        if path:
            path[0].call_later(hop, path[1:])
        else:
            through.set()
    app.call_later(lambda: hop(list((app.focused or app.screen).ancestors_with_self)))
    await asyncio.wait_for(through.wait(), timeout=30)


async def type_text(pilot, text: str):
    """Type `text` into the focused widget, key by key (see `send_keys`), and let what it started
    run (a pause: one round of every queue, then an idle process)."""
    await pilot.pause()  # a dialog just opened has set its focus
    await send_keys(pilot, *text)
    await pilot.pause()


def record_notifications(app) -> list[Notification]:
    """From now on, every notification Textual takes from `app`: `App.notify` posts each as a `Notify`
    message (after the console's own `notify` has cleaned it, widgets/terminal_guard.py), and this
    list keeps each one posted, in order. Textual keeps the ones on screen only in a private attribute
    (`App._notifications`). make_app records from the start."""
    sent: list[Notification] = []
    post_message = app.post_message

    def recording(message) -> bool:
        if isinstance(message, Notify):
            sent.append(message.notification)
        return post_message(message)

    app.post_message = recording
    _SENT[app] = sent
    return sent


def notifications(app) -> list[Notification]:
    """Every notification the app raised so far (`record_notifications`)."""
    return _SENT[app]


# ---------------------------------------------------------------- shared by several test modules
def notes(app) -> list[str]:
    """The text of every notification so far."""
    return [str(n.message) for n in notifications(app)]


def stack(app) -> list[str]:
    """The screen stack by class name, bottom first."""
    return [type(s).__name__ for s in app.screen_stack]


async def command(pilot, app, text: str) -> None:
    """Type `:text` Enter as a person does."""
    await pilot.press("colon")
    await wait_until(pilot, lambda: type(app.screen).__name__ == "CommandLine", what="the command line")
    await send_keys(pilot, *text)
    await pilot.press("enter")


def detail_text(app) -> str:
    """The detail pane's head as painted text."""
    from textual.widgets import Static

    return str(app.screen.query_one("#detail-head", Static).render())


def upgrade_planned(app):
    """A condition: the upgrade screen is up and has its plan."""
    from console.tui.screens.upgrade import UpgradeScreen

    return lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None


def plan_text(screen) -> str:
    """The upgrade screen's plan as plain text."""
    rendered = screen._render_plan(screen.plan)
    return "".join(getattr(r, "plain", "") for r in getattr(rendered, "renderables", [rendered]))
