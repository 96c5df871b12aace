"""Driving the app through Pilot and reading the database afterwards: the pieces every flow test shares
(tests/tui/test_flows.py and the flow modules beside it import them from here, not from each other)."""

from __future__ import annotations

import sqlite3
import time
import weakref

from textual.notifications import Notification, Notify

from widgets.lazy_table import LazyTable

_SENT: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


async def wait_until(pilot, predicate, timeout: float = 5.0, what: str = "condition"):
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


async def type_text(pilot, text: str):
    for ch in text:
        await pilot.press("space" if ch == " " else ch)


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
