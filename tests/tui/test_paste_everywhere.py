"""A multi-line paste into any of the console's text boxes keeps every line (issue 21 item 10, one
step on from the reason box): Textual's `Input` kept the first line and dropped the rest silently, so
a SQL statement pasted over three lines ran as its first line and an id pasted after a blank line
arrived as nothing. Every box is a `LineInput` (widgets/line_input.py); this walks each one a
person can reach, as a terminal pastes (one bracketed `Paste` event to the app)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, strategies as st
from rich.text import Text
from textual import events
from textual.widgets import Input

from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.typed import TypedConfirmModal
from tests.tui.pilot import notifications, ready, send_keys, wait_until
from widgets.line_input import LineInput, drop_line_comments

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
PASTE = "  apr-00000188\n\n  and more \n"


async def paste(pilot, text: str) -> None:
    pilot.app.post_message(events.Paste(text))
    await pilot.pause()


async def focused_input(pilot, app) -> Input:
    await wait_until(pilot, lambda: isinstance(app.focused, Input), what="a text box focused")
    return app.focused


@pytest.mark.parametrize("opener", ["colon", "slash", "p"])
async def test_a_paste_into_the_command_line_and_the_filters_keeps_every_line(demo_db, make_app, opener):
    app = make_app(demo_db())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await send_keys(pilot, opener)
        box = await focused_input(pilot, app)
        box.value = ""
        await paste(pilot, PASTE)
        await wait_until(pilot, lambda: box.value == "apr-00000188 and more", what=f"the paste ({box.value!r})")
        assert any("joined" in str(n.message) for n in notifications(app))  # said, not silent


async def test_a_pasted_statement_runs_whole_in_the_sql_prompt(demo_db, make_app):
    app = make_app(demo_db(), start="sql")
    async with app.run_test(size=(120, 40)) as pilot:
        box = await focused_input(pilot, app)
        await paste(pilot, "SELECT id -- the key\nFROM tickets\nWHERE id > 0 /* -- kept */\nORDER BY id\n")
        assert box.value == "SELECT id FROM tickets WHERE id > 0 /* -- kept */ ORDER BY id"


async def test_a_pasted_id_after_a_blank_line_passes_the_typed_confirmation(demo_db, make_app):
    app = make_app(demo_db())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        results = []
        app.push_screen(TypedConfirmModal("Retire", Text("x"), expected="env-atlas-1"), results.append)
        box = await focused_input(pilot, app)
        await paste(pilot, "\n env-atlas-1\n")
        assert box.value == "env-atlas-1"
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: results, what="the confirmation")
        assert results[0] is not None


def test_every_text_box_in_the_console_is_a_line_input():
    """No `Input(...)` built, and no class derived from `Input`, outside widgets/line_input.py."""
    offenders = []
    for path in [*ROOT.joinpath("console").rglob("*.py"), *ROOT.joinpath("widgets").rglob("*.py")]:
        if path.name == "line_input.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "Input":
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} builds Input")
            if isinstance(node, ast.ClassDef) and any(getattr(b, "id", None) == "Input" for b in node.bases):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} derives from Input")
    assert not offenders, offenders


@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=12), min_size=1, max_size=5))
def test_joining_keeps_every_non_blank_line(lines):
    text = "\n".join(lines)
    joined = LineInput().joined(text)
    assert "\n" not in joined and "\r" not in joined
    words = " ".join(text.split())
    assert " ".join(joined.split()) == words


@pytest.mark.parametrize("sql, kept", [
    ("SELECT 1 -- one\nFROM t", "SELECT 1 \nFROM t"),
    ("SELECT '--not a comment' FROM t", "SELECT '--not a comment' FROM t"),
    ('SELECT "a--b" FROM [c--d] -- gone', 'SELECT "a--b" FROM [c--d] '),
    ("SELECT 'it''s' -- x\n", "SELECT 'it''s' \n"),
])
def test_line_comments_go_before_the_lines_are_joined(sql, kept):
    assert drop_line_comments(sql) == kept
