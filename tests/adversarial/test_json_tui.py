"""The TUI and hostile JSON (issue 17, finding 3): a request nested 1,100 deep made the console exit 1
at start with a 136 KB Rich traceback that printed every frame's local variables (database content)
on the operator's terminal.

Two mechanisms: every screen reads database JSON through the bounded reader (the Pilot sweep opens
every screen, the detail panes and search on databases whose every JSON column holds a generated
shape), and whatever still escapes ends in one sentence and exit 3 (`ArchonConsole._handle_exception`),
tried in a real terminal with failures injected where a screen, a worker and a timer run.
"""

from __future__ import annotations

import os
import re
import select
import subprocess
import sys
import time
from itertools import count
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings

from tests.adversarial.json_shapes import DEEP_1100, json_shapes, poison_json, shape_text
from tests.adversarial.tui import open_screen
from tests.tui.pilot import send_keys, type_text

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
SECRET = "SECRET-FROM-THE-DATABASE"
NOTE = "unparseable (nested too deeply)"


def _in_terminal(argv: list[str], *, keys: bytes = b"", wait_for: bytes = b"apr-", timeout: float = 60):
    """Run `python argv...` on a real pty; once `wait_for` was drawn, type `keys`. Returns (exit
    code, everything written to the terminal)."""
    primary, secondary = os.openpty()
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40",
           "ARCHON_CONSOLE_CONFIG": "/nonexistent", "ARCHON_CONSOLE_KEYMAP": "/nonexistent"}
    env.pop("ARCHON_CONSOLE_DEBUG", None)
    proc = subprocess.Popen([sys.executable, *argv], stdin=secondary, stdout=secondary, stderr=secondary,
                            cwd=ROOT, env=env, start_new_session=True)
    os.close(secondary)
    seen = b""
    typed = not keys
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            if select.select([primary], [], [], 0.1)[0]:
                try:
                    chunk = os.read(primary, 65536)
                except OSError:
                    chunk = b""
                if not chunk and proc.poll() is not None:
                    break
                seen += chunk
            elif proc.poll() is not None:
                break
            if not typed and wait_for in seen:
                os.write(primary, keys)
                typed = True
        if proc.poll() is None:
            proc.kill()
            proc.wait()
            pytest.fail(f"the console did not end; it wrote: {seen[-2000:]!r}")
    finally:
        os.close(primary)
    return proc.returncode, seen


_ANSI = re.compile(r"\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\\\)|[@-Z\\\\-_])")


def _visible(seen: bytes) -> str:
    return seen.decode("utf-8", "replace")


@pytest.fixture
def deep_db(demo_copy):
    path = demo_copy()
    poison_json(path, DEEP_1100, only={"approval_requests"})
    return path


def test_the_tui_starts_on_a_deep_request_and_quits_normally(deep_db):
    """Failed on the unfixed code: exit 1 at start, a Rich traceback with locals."""
    code, seen = _in_terminal(["-m", "console", "--db", str(deep_db)], keys=b"q", wait_for=b"unparseable")
    text = _visible(seen)
    assert "Traceback" not in text and "RecursionError" not in text
    assert code == 0, text[-2000:]
    assert "[[[[" not in text


INJECT = """
import sys
from console.tui import app
from console.cli.cli import main

SECRET = {secret!r}

def fail(*args, **kwargs):
    database_text = SECRET  # a local variable, as Textual's traceback would print it
    raise RuntimeError(database_text)

{patch}
sys.exit(main(sys.argv[1:]))
"""

# Where code runs in the app: a handler at start, what a worker's result is drawn with, a timer,
# and a key's action (each: the patch, and the key typed once the list is drawn).
PATCHES = {
    "on_mount": ("app.ArchonConsole.on_mount = fail", b""),
    "worker result": ("from widgets import json_view\njson_view.JsonView.show = fail", b""),
    "timer": ("app.ArchonConsole._poll = fail", b""),
    "key": ("app.ArchonConsole.action_help = fail", b"?"),
}


@pytest.mark.parametrize("where", sorted(PATCHES))
def test_whatever_escapes_ends_in_one_sentence_and_exit_3(demo_copy, where):
    patch, keys = PATCHES[where]
    script = INJECT.format(secret=SECRET, patch=patch)
    code, seen = _in_terminal(["-c", script, "--db", str(demo_copy())], keys=keys)
    text = _visible(seen)
    assert code == 3, text[-3000:]
    assert "Traceback" not in text and "database_text" not in text and SECRET not in text
    # After the console left the alternate screen: one sentence, not a 136 KB traceback.
    after = " ".join(_ANSI.sub("", _visible(seen.rsplit(b"\x1b[?1049l", 1)[-1])).split())
    assert after == ("archon-console: the console stopped on an unexpected RuntimeError; nothing further "
                     "was written. Rerun with ARCHON_CONSOLE_DEBUG=1 to see where it happened."), after


# --- every screen, generated shapes in every JSON column ------------------------------------

_COUNTER = count()


async def _settled(app, pilot) -> None:
    """Until no worker runs (a worker's refusal is the screen's to show, so its error is not raised)."""
    await pilot.pause()
    deadline = time.monotonic() + 60
    while any(worker.is_running for worker in app.workers) and time.monotonic() < deadline:
        await pilot.pause(0.02)
    await pilot.pause()


async def _tour(app, pilot) -> list[str]:
    """Every screen, its detail pane, and search, as an operator would open them."""
    from console.tui.screens.approvals import ApprovalsScreen

    await pilot.pause()
    await _settled(app, pilot)
    assert isinstance(app.screen, ApprovalsScreen)
    shown = []
    for key in ("down", "up", "enter", "escape", "end"):
        await send_keys(pilot, key)  # the terminal's path; `_settled` waits for what it started
        await _settled(app, pilot)
    shown.append(str(app.screen.query_one("#detail-action").render()))
    await pilot.press("slash")
    await type_text(pilot, "origin")
    await pilot.press("enter")
    await _settled(app, pilot)
    for command in ("envs", "projects", "project prj-atlas-api", "doctor", "upgrade"):
        await open_screen(pilot, command)
        await _settled(app, pilot)
        for key in ("down", "enter", "w"):
            await send_keys(pilot, key)
            await _settled(app, pilot)
        await pilot.press("escape")
    return shown


# Each example tours every screen (~15 s): the explicit shapes are the classes (deep, deep objects,
# too large); the generated one varies depth, width and size from run to run.
@settings(max_examples=1, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=json_shapes())
@example(shape=("deep_array", 1100))
@example(shape=("deep_object", 10_000))
@example(shape=("large", 300_000))
async def test_every_screen_survives_any_json_shape(demo_copy, make_app, shape):
    path = demo_copy(name=f"screen-{next(_COUNTER)}.db")
    poison_json(path, shape_text(shape))
    app = make_app(path, start="approvals")
    async with app.run_test(size=(160, 50)) as pilot:  # an exception in the app fails the test here
        shown = await _tour(app, pilot)
    if shape == ("deep_array", 1100):
        assert any(NOTE in text for text in shown), shown


def test_the_json_pane_shows_a_bounded_head_of_a_wide_document():
    """Highlighting 80,000 lines took 11 s on the UI thread; the pane shows the first lines and the count."""
    from rich.console import Console

    from tests.adversarial.json_shapes import wide
    from widgets.json_view import MAX_LINES, json_renderable

    console = Console(width=80)
    lines = console.render_lines(json_renderable(wide(80_000)), console.options)
    assert len(lines) == MAX_LINES + 1
    assert "".join(segment.text for segment in lines[-1]).strip() == f"… {80_002 - MAX_LINES} more lines"
