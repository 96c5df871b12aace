"""The screens we photograph: shared by the snapshot tests and `make screenshots`.

Each scene starts the app on the seeded demo database with the clock frozen, drives it with
keys, and waits until every worker has delivered (table pages, detail panes) before the picture.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import Callable

from widgets.lazy_table import LazyTable


@dataclass(frozen=True)
class Scene:
    name: str
    start: str
    keys: tuple[str, ...] = ()
    ready: Callable[[object], bool] = lambda app: True
    release: str = "current"
    read_only: bool = False
    navigate: tuple[str, str] | None = None
    final: tuple[str, ...] = ()  # pressed once the detail pane has loaded (dialogs)
    env: tuple[tuple[str, str], ...] = ()  # set before the app is made (NO_COLOR is read then)
    act: Callable[[object], None] | None = None  # called with the app once the keys are pressed


def _table_ready(app) -> bool:
    tables = app.screen.query(LazyTable)
    return bool(tables) and tables.first().visible_loaded and not tables.first()._pending


def _detail_ready(app) -> bool:
    if not _table_ready(app):
        return False
    screen = app.screen
    row = screen.query_one(LazyTable).cursor_row
    detail = getattr(screen, "detail", None)
    return row is not None and detail is not None and _id(detail) == _id(row)


def _id(row) -> object:
    """A row's or a detail's id, whether the screen holds a dict or a typed read model."""
    return row.get("id") if isinstance(row, dict) else row.id


def _modal_over(name: str) -> Callable[[object], bool]:
    return lambda app: type(app.screen).__name__ == name


def _request_arrives(app) -> None:
    """What the app posts when the poll finds a new pending request (console/tui/app.py)."""
    from console.services.watch import QueueChange

    change = QueueChange("new", "apr-00000201", "prj-billing-worker", "billing-worker", "git_push", None,
                         "pending", "archon", "system", None, "2025-06-01T12:00:00Z", "2025-06-01T13:00:00Z",
                         "apr-00000201:1", 1)
    app.post_message(app.PendingChanged((change,), 13))


def _toast_shown(app) -> bool:
    return bool(app.screen.query("Toast"))


SCENES: tuple[Scene, ...] = (
    Scene("approvals", "approvals", ("down", "down"), _detail_ready),
    Scene("approvals-approve-dialog", "approvals", ("down", "down"), _modal_over("ReasonModal"), final=("a",)),
    Scene("approvals-read-only", "approvals", ("down", "down"), _detail_ready, read_only=True),
    Scene("approvals-no-color", "approvals", ("down", "down", "down", "down", "down", "down", "down", "down"),
          _detail_ready, env=(("NO_COLOR", "1"),)),
    Scene("environments", "envs", ("down", "down", "down", "down"), _detail_ready),
    Scene("environments-takeover", "envs", ("down", "down", "down", "down"), _modal_over("TypedConfirmModal"), final=("t",)),
    Scene("projects", "projects", (), _table_ready),
    Scene("profiles", "projects", ("down",), lambda app: _table_ready(app) and getattr(app.screen, "project", None) is not None,
          navigate=("project", "atlas-api")),
    Scene("upgrade", "upgrade", (), lambda app: getattr(app.screen, "plan", None) is not None, release="1.8.22"),
    Scene("help", "approvals", ("question_mark",), _modal_over("HelpScreen")),
    Scene("doctor", "doctor", (), lambda app: getattr(app.screen, "report", None) is not None),
    Scene("approvals-saved-view", "projects", (), _table_ready,
          navigate=("approvals", "status=pending kind=custom_check expiring<120")),
    Scene("approvals-new-request", "projects", (), _toast_shown, act=_request_arrives),
)


FREE_BYTES = 42 * 1024**3


def fixed_free_space(call_isolated: Callable) -> Callable:
    """`call_isolated` whose plans report FREE_BYTES free: the plan is made in a child process,
    where patching `free_bytes` does not reach, and the real free space changes the picture."""
    def call(function: str, *args, **kwargs):
        result = call_isolated(function, *args, **kwargs)
        if hasattr(result, "free_bytes"):
            result = dataclasses.replace(result, free_bytes=FREE_BYTES)
        return result
    return call


async def settle(pilot, app, scene: Scene, timeout: float = 30.0) -> None:
    """Drive the scene and wait for its workers; then no cursor blink, no animation."""
    app.animation_level = "none"

    async def wait(predicate) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            await pilot.pause(0.02)
            try:
                if predicate(app):
                    return
            except Exception:
                pass
        raise AssertionError(f"scene {scene.name} never settled")

    first = _table_ready if scene.start not in ("upgrade", "doctor") else scene.ready
    await wait(first)
    if scene.navigate:
        before = app.screen
        app.navigate(*scene.navigate)  # resolved in a thread, then pushed: wait for the new screen
        await wait(lambda app: app.screen is not before and _table_ready(app))
    for key in scene.keys:
        await pilot.press(key)
        await pilot.pause()
    if scene.act is not None:
        scene.act(app)
    if scene.final:
        await wait(_detail_ready)
        for key in scene.final:
            await pilot.press(key)
    await wait(scene.ready)
    for widget in app.screen.query("Input, TextArea"):  # TextArea: the reason box (screens/reason.py)
        widget.cursor_blink = False
    # The footer greys keys from the loaded row; its refresh is scheduled after the detail arrives,
    # so ask for it now and let it run, or the picture depends on which came first.
    app.screen.refresh_bindings()
    await pilot.wait_for_scheduled_animations()
    await pilot.pause()

