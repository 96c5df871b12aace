"""A dialog pushed while Textual holds repaints (a batch: every Footer recompose opens one) reaches the
terminal when the batch ends, without a resize (issue 21 item 7: the Refused dialog that did not paint
until the terminal was resized; widgets/no_lost_frames.py says why).

These tests wait with `asyncio.sleep`, never `pilot.pause`: `Pilot.pause` runs the current screen's
update itself (`Screen._on_timer_update`), which paints exactly what the app alone would not, so a
Pilot wait hides this class of defect."""

from __future__ import annotations

import asyncio
import importlib
import inspect
import pkgutil
import time

import pytest
from textual.app import App

import console.tui
from console.errors import Refusal
from console.tui.screens.error import ErrorModal
from console.tui.screens.projects import OverviewScreen
from tests.tui.pilot import ready, settle
from widgets.key_footer import KeyFooter
from widgets.no_lost_frames import NoLostFrames

pytestmark = pytest.mark.slow


def record_frames(app) -> list[tuple[object, bool]]:
    """(screen, written) for every frame the app sends: written is False when `App._display` drops
    it because a batch holds repaints."""
    frames: list[tuple[object, bool]] = []
    real = app._display

    def display(screen, renderable):
        if renderable is not None:
            frames.append((screen, not app._batch_count))
        return real(screen, renderable)

    app._display = display
    return frames


async def until(predicate, what: str, timeout: float = 30.0) -> None:
    """Wait for a condition without touching the app (see the module docstring)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await asyncio.sleep(0.02)
        if predicate():
            return
    raise AssertionError(f"timed out waiting for {what}")


def idle(app, screen) -> bool:
    """`screen` and its widgets have nothing queued, and no Footer is recomposing."""
    nodes = [screen, *screen.walk_children()]
    return all(n._message_queue.empty() for n in nodes) and not any(
        f.lock.is_locked for s in app.screen_stack for f in s.query(KeyFooter))


async def quiet(app, screen) -> None:
    """`screen` is mounted and laid out, and nothing else is under way."""
    await until(lambda: screen.is_mounted and screen.size == app.size, what="the dialog laid out")
    await app.workers.wait_for_complete()
    await until(lambda: idle(app, screen), what="no messages left")


@pytest.mark.parametrize("held_for", [1, 3])  # rounds of messages the batch outlasts the push by
async def test_a_dialog_pushed_while_repaints_are_held_paints_when_they_resume(demo_db, make_app, held_for):
    app = make_app(demo_db(), start="projects")
    frames = record_frames(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        await settle(pilot, app)
        with app.batch_update():
            app.screen.show_error(Refusal("No project 'nosuch' in this database."))
            modal = app.screen
            assert isinstance(modal, ErrorModal)
            await until(lambda: (modal, False) in frames, what="the dialog's held frame")
            for _ in range(held_for):
                await quiet(app, modal)
            assert modal._message_queue.empty()  # nothing queued for the dialog would wake it
        # The end of the batch itself wakes the dialog's screen to draw again what was dropped: nothing
        # else may come (a static dialog over a quiet screen gets no message until a key or a resize).
        assert modal._repaint_required and not modal._message_queue.empty()
        await until(lambda: (modal, True) in frames, what="the dialog on the terminal after the batch")


def console_apps() -> list[type]:
    found = []
    for info in pkgutil.iter_modules(console.tui.__path__, "console.tui."):
        module = importlib.import_module(info.name)
        found += [v for v in vars(module).values()
                  if inspect.isclass(v) and issubclass(v, App) and v is not App and v.__module__ == module.__name__]
    return found


def test_every_console_app_keeps_its_frames():
    apps = console_apps()
    assert {a.__name__ for a in apps} >= {"ArchonConsole", "FleetConsole"}
    for app_class in apps:
        mro = app_class.__mro__
        assert NoLostFrames in mro and mro.index(NoLostFrames) < mro.index(App), app_class
