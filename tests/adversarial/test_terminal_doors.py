"""Database names and ids never steer the terminal, and never reach a clipboard raw (issue 17, finding 4).

`test_escapes.py` poisons the text columns. Here the attacker owns the names: every id and key
column (requests, environments, projects, claims, revisions, runs), a table, a column, an index and
a trigger carry an OSC title change, `ESC [201~` (the end of a shell's bracketed paste) followed
by a command and a line break, a C1 CSI, bidi controls and markup. On every screen, after every
key that can show a toast or copy, nothing Textual holds or paints may carry a byte a terminal
obeys: the app's and the screen's titles, every notification, every painted cell, the clipboard.
The mechanism is `widgets/terminal_guard.py`; the AST checks at the end keep callers from going
around it.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.cells import cell_len
from rich.segment import Segment
from textual.color import Color
from textual.command import CommandList

from tests.adversarial.hostile import HOSTILE_ID, HOSTILE_TABLE, poison, poison_ids, poison_schema
from tests.tui.pilot import key_event, notifications, record_notifications, send_keys, settle, type_text, wait_until
from widgets.safe_text import is_clean

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def poisoned_names(tmp_path_factory):
    from tests.tui.conftest import demo_file

    path = tmp_path_factory.mktemp("hostile-names") / "archon.db"
    shutil.copyfile(demo_file(tmp_path_factory, "current", 200), path)
    poison(path)
    poisoned = poison_ids(path)
    assert {("approval_requests", "id"), ("execution_environments", "operation_claim_id"),
            ("projects", "id"), ("execution_profile_revisions", "id")} <= set(poisoned)
    poison_schema(path)
    return path


@pytest.fixture
def hostile_copy(poisoned_names, tmp_path):
    # The file's own name is hostile too: it is shown in the header and the badge bar.
    path = tmp_path / "user\x1b]2;PATHPWN\x07\u202e.db"
    shutil.copyfile(poisoned_names, path)
    return path


def _painted(app) -> list[str]:
    return [segment.text for strip in app.screen._compositor.render_strips() for segment in strip]


SEEN: list[str] = []  # what the sweep saw: painted text and toasts, for its not-vacuous check


def unsafe_left(app, where: str) -> list[str]:
    """Every place Textual could send database text to the terminal or a clipboard, checked."""
    bad = []
    painted = _painted(app)  # rendering the screen is the costly part: once per check
    SEEN.extend(painted + messages(app))
    titles = {"app.title": app.title, "app.sub_title": app.sub_title,
              "screen.title": app.screen.title or "", "screen.sub_title": app.screen.sub_title or ""}
    bad += [f"{where}: {name} {value!r}" for name, value in titles.items()
            if not is_clean(value, allow_newlines=False)]
    for note in notifications(app):
        for value in (note.message, note.title):
            if not is_clean(value):
                bad.append(f"{where}: notification {value!r}")
    bad += [f"{where}: painted {text!r}" for text in painted if not is_clean(text, allow_newlines=False)]
    clip = app.clipboard or ""
    if clip and not is_clean(clip, allow_newlines=clip.lstrip().startswith(("{", "["))):
        bad.append(f"{where}: clipboard {clip!r}")
    return bad


def messages(app) -> list[str]:
    return [note.message for note in notifications(app)]


async def open_doctor(pilot, app):
    from console.tui.screens.doctor import DoctorScreen
    from textual.widgets import DataTable
    from widgets.lazy_table import LazyTable

    await wait_until(pilot, lambda: app.screen.query(LazyTable), timeout=10, what="start screen")
    screen = DoctorScreen()
    app.push_screen(screen)
    await wait_until(pilot, lambda: screen.report is not None
                     and screen.query_one("#findings", DataTable).row_count > 0, timeout=30, what="doctor")
    return screen


# --- the reported instances (each failed on main before terminal_guard) ------------------------

async def test_enter_on_a_finding_about_a_hostile_table_does_not_retitle_the_terminal(hostile_copy, make_app):
    from textual.widgets import DataTable

    app = make_app(hostile_copy)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await open_doctor(pilot, app)
        index = next(i for i, f in enumerate(screen.findings)
                     if any(row.get("table") == HOSTILE_TABLE for row in f.rows))
        screen.query_one("#findings", DataTable).move_cursor(row=index)
        screen.query_one("#findings", DataTable).focus()
        await pilot.press("enter")
        await wait_until(pilot, lambda: any("No screen lists rows of" in m for m in messages(app)),
                         what="the refusal toast")
        assert unsafe_left(app, "doctor enter") == []
        assert any("tbl\u241b]2;FKPWN\u2407" in m for m in messages(app))  # shown, pictured


async def test_a_hostile_key_that_is_not_in_the_list_is_named_safely(hostile_copy, make_app):
    from console.tui.screens.approvals import ApprovalsScreen
    from console.tui.screens.doctor import DoctorScreen
    from widgets.lazy_table import LazyTable

    app = make_app(hostile_copy)
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: app.screen.query(LazyTable), timeout=10, what="start screen")
        app.push_screen(ApprovalsScreen(jump_to="apr-missing" + HOSTILE_ID))
        await wait_until(pilot, lambda: any("is not in this list" in m for m in messages(app)),
                         timeout=10, what="not in this list")
        doctor = DoctorScreen()
        app.push_screen(doctor)
        await pilot.pause()
        doctor.post_message(DoctorScreen.Resolved("projects", "prj-gone" + HOSTILE_ID, None))
        await wait_until(pilot, lambda: any("is gone" in m for m in messages(app)), what="is gone")
        assert unsafe_left(app, "jump") == []


async def test_y_refuses_a_hostile_id_and_Y_copies_it_escaped(hostile_copy, make_app):
    from console.tui.screens.approvals import ApprovalsScreen
    from widgets.lazy_table import LazyTable

    app = make_app(hostile_copy, start="approvals")
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen)
                         and app.screen.query_one(LazyTable).cursor_key, timeout=10, what="a request")
        ident = app.screen.query_one(LazyTable).cursor_key
        assert ident.endswith(HOSTILE_ID)
        await pilot.press("y")
        await wait_until(pilot, lambda: any("not copied" in m for m in messages(app)), what="the refusal")
        assert app.clipboard == ""
        assert any("control character" in m and "Y copies" in m for m in messages(app))
        await pilot.press("Y")
        await wait_until(pilot, lambda: app.clipboard, what="the JSON copy")
        assert "\x1b" not in app.clipboard and "\\u001b" in app.clipboard
        assert json.loads(app.clipboard)["id"] == ident  # exact, once parsed
        assert unsafe_left(app, "copy") == []


async def test_the_clipboard_door_refuses_whatever_the_caller(hostile_copy, make_app):
    app = make_app(hostile_copy)
    async with app.run_test(size=(120, 40)) as pilot:
        app.copy_to_clipboard("id" + HOSTILE_ID)  # Textual's own door (its text selection uses it)
        await settle(pilot, app)
        assert app.clipboard == ""
        app.notify("x[b]" + HOSTILE_ID, title=HOSTILE_ID, markup=True)
        app.title = HOSTILE_ID
        app.sub_title = HOSTILE_ID
        app.screen.title = HOSTILE_ID
        await settle(pilot, app)
        assert unsafe_left(app, "direct") == []
        assert any("[b]" in m for m in messages(app))  # markup shown as written, not parsed


@pytest.mark.parametrize("suffix", [HOSTILE_ID, "[b]x[/b][@click=app.quit]q"])
async def test_the_palette_shows_hostile_project_ids_as_written(poisoned_names, tmp_path_factory, tmp_path,
                                                                make_app, suffix):
    from tests.tui.conftest import demo_file

    path = tmp_path / "archon.db"
    if suffix == HOSTILE_ID:
        shutil.copyfile(poisoned_names, path)
    else:  # markup alone, which Textual parses where the controls above made it give up
        shutil.copyfile(demo_file(tmp_path_factory, "current", 200), path)
        poison_ids(path, suffix)
    app = make_app(path, start="upgrade")
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot, app)
        await pilot.press("ctrl+p")
        await type_text(pilot, "project")
        await wait_until(pilot, lambda: "profiles of project" in "".join(_painted(app)), what="project hits")
        assert unsafe_left(app, "palette") == []
        hits = [str(option.prompt) for option in app.screen.query_one(CommandList).options]
        # The help line is not markup: the id's `[@click=app.quit]` is shown, not made a link.
        helps = [hit.split("profiles of project")[1] for hit in hits if "profiles of project" in hit]
        assert helps and all(suffix[-12:].replace("\r", "\u240d") in line for line in helps), helps[:3]


# --- the sweep: every screen, every key that toasts or copies ----------------------------------

UNSAFE_CHARS_FOR_COPY = "\x00\x07\x1b\x7f\x85\x9b\u200e\u202e\u2066"

# Keys that leave the console, or type into a box (then every later key would be typed text).
NOT_PRESSED = {"escape", "q", "colon", "question_mark", "f1", "ctrl+t", "ctrl+p", "ctrl+c", "ctrl+q", "tab",
               "shift+tab", "slash", "p"}


async def _back_to(pilot, app, screen) -> None:
    """Close what a key opened (a dialog, a pushed screen) until `screen` is on top again."""
    for _ in range(6):
        if app.screen is screen:
            return
        await send_keys(pilot, "escape")
        await settle(pilot, app)
    assert app.screen is screen, f"could not get back to {screen!r} from {app.screen!r}"


async def _every_key(pilot, app, where: str) -> list[str]:
    """Press every key the screen binds (and `y`, `Y`, `w`), checking after each and after what it
    opened; then come back."""
    screen = app.screen
    keys = sorted(key for key in screen.active_bindings if key not in NOT_PRESSED)
    bad = []
    for key in ["y", "Y", "w", *keys, "down", "y", "Y"]:
        await send_keys(pilot, key)  # the terminal's path; `settle` is the wait for what it started
        await settle(pilot, app)
        bad += unsafe_left(app, f"{where} {key}")
        if app.screen is not screen:
            bad += unsafe_left(app, f"{where} {key} -> {type(app.screen).__name__}")
            await _back_to(pilot, app, screen)
    return bad


@pytest.mark.parametrize("read_only", [False, True])
async def test_no_screen_or_key_lets_a_hostile_name_through(hostile_copy, make_app, read_only):
    from tests.adversarial.tui import open_screen
    from textual.widgets import DataTable

    SEEN.clear()
    app = make_app(hostile_copy, read_only=read_only, start="approvals")
    async with app.run_test(size=(160, 50)) as pilot:
        await settle(pilot, app)
        bad = await _every_key(pilot, app, "approvals")
        for command in ("envs", "projects", "upgrade"):
            await open_screen(pilot, command)
            await settle(pilot, app)
            bad += await _every_key(pilot, app, command)
        await open_screen(pilot, "projects")
        await settle(pilot, app)
        await pilot.press("enter")  # a project's profiles: its exact id, line break and all, is found
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ProfilesScreen", what="profiles")
        await settle(pilot, app)
        assert type(app.screen).__name__ == "ProfilesScreen", app.screen
        bad += await _every_key(pilot, app, "profiles")
        screen = await open_doctor(pilot, app)
        bad += await _every_key(pilot, app, "doctor")
        findings = screen.query_one("#findings", DataTable)
        # Enter on each finding (its rows' tables and ids are hostile); read-only shows the same.
        for index in range(0 if read_only else len(screen.findings)):
            findings.focus()
            findings.move_cursor(row=index)
            await settle(pilot, app)
            await send_keys(pilot, "y", "Y", "enter")
            await settle(pilot, app)
            bad += unsafe_left(app, f"doctor enter {screen.findings[index].id}")
            if app.screen is not screen:
                bad += await _every_key(pilot, app, f"from doctor {screen.findings[index].id}")
                await _back_to(pilot, app, screen)
        svg = app.export_screenshot()
        if not is_clean(svg):
            bad.append("the SVG export")
    assert bad == []
    # Not vacuous: hostile ids and the hostile table were shown (pictured), and `y` was refused.
    seen = "".join(SEEN)
    assert "\u241b]2;IDPWN\u2407" in seen and "FKPWN" in seen and "The id was not copied" in seen


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(UNSAFE_CHARS_FOR_COPY) + list("ab \n\r\t{}\"\\é")), max_size=20))
def test_the_clipboard_takes_only_what_a_shell_cannot_run(text):
    from widgets.clipboard import CopyRefused, copy, copy_refusal, json_text

    if copy_refusal(text) is None:
        assert is_clean(text, allow_newlines=False) and "\r" not in text
    else:
        with pytest.raises(CopyRefused):
            copy(None, text)  # refused before any clipboard is touched
    escaped = json_text({"id": text, "nested": [text]})
    assert copy_refusal(escaped, structural_lines=True) is None and escaped.isascii()
    assert json.loads(escaped)["id"] == text


# --- the filter, and the doors in the code ------------------------------------------------------

UNSAFE_CHARS = "\x00\x07\x08\x0b\x0d\x1b\x7f\x85\x9b\u200e\u202e\u2066\u2069"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(alphabet=st.sampled_from(list(UNSAFE_CHARS) + list("ab[]; ␛界")), max_size=12),
                max_size=6))
def test_the_filter_leaves_no_control_and_keeps_the_width(texts):
    segments = [Segment(text) for text in texts]
    from widgets.terminal_guard import CleanFilter

    out = CleanFilter().apply(segments, Color(0, 0, 0))
    assert all(is_clean(s.text) for s in out)
    assert sum(cell_len(s.text) for s in out) == sum(cell_len(t) for t in texts)


def _sources():
    for package in ("console", "widgets"):
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path, ast.parse(path.read_text(), str(path))


def _name(func: ast.expr) -> str:
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _builds_a_string(node: ast.expr) -> bool:
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _builds_a_string(node.left) or _builds_a_string(node.right) or isinstance(node.left, ast.Constant)
    return isinstance(node, ast.Call) and _name(node.func) in ("format", "str", "join")


# Textual parses a plain `str` given to these as markup (`[@click=...]` runs an action).
MARKUP_SINKS = {"Static", "Label", "update", "add_row", "add_column", "update_cell", "Hit", "DiscoveryHit",
                "from_markup", "render_markup", "Content"}


def test_no_widget_gets_a_markup_string_built_from_data():
    bad = []
    for path, tree in _sources():
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            name = _name(node.func)
            for keyword in node.keywords:
                if keyword.arg == "markup" and not (isinstance(keyword.value, ast.Constant)
                                                    and keyword.value.value is False):
                    bad.append(f"{path.relative_to(ROOT)}:{node.lineno} markup= is not False")
            if name in MARKUP_SINKS and name != "update":
                args = node.args[:1] if name not in ("Hit",) else node.args[1:2]
                bad += [f"{path.relative_to(ROOT)}:{node.lineno} {name}(a built str)"
                        for arg in args if _builds_a_string(arg)]
            if name in ("update", "add_row", "update_cell"):
                bad += [f"{path.relative_to(ROOT)}:{node.lineno} {name}(a built str)"
                        for arg in node.args if isinstance(arg, ast.JoinedStr)]
    assert bad == []


def test_the_clipboard_and_the_app_have_one_door_each():
    bad = []
    for path, tree in _sources():
        rel = str(path.relative_to(ROOT))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                if "pyperclip" in names and rel != "widgets/clipboard.py":
                    bad.append(f"{rel}:{node.lineno} imports pyperclip")
                if getattr(node, "module", None) == "textual.widgets" and rel != "widgets/safe_widgets.py":
                    raw = {"Static", "Label", "DataTable"} & {a.name for a in node.names}
                    if raw:
                        bad.append(f"{rel}:{node.lineno} imports textual's {sorted(raw)} (use widgets/safe_widgets.py)")
            if isinstance(node, ast.Call) and _name(node.func) in ("Hit", "DiscoveryHit") \
                    and any(k.arg == "help" for k in node.keywords):
                bad.append(f"{rel}:{node.lineno} a palette hit's help= (Textual parses it as markup)")
            if isinstance(node, ast.Call) and _name(node.func) == "copy_to_clipboard" \
                    and rel not in ("widgets/clipboard.py", "widgets/terminal_guard.py"):
                bad.append(f"{rel}:{node.lineno} calls copy_to_clipboard")
            if isinstance(node, ast.ClassDef):
                bases = [_name(b) for b in node.bases]
                if "App" in bases and "GuardedApp" not in bases:
                    bad.append(f"{rel}:{node.lineno} an App without GuardedApp")
                if "Screen" in bases and "SafeTitles" not in bases:
                    bad.append(f"{rel}:{node.lineno} a Screen without SafeTitles")
    assert bad == []


async def test_the_console_widgets_show_a_str_as_written():
    from textual.app import App

    from widgets.safe_widgets import DataTable, Static
    from widgets.terminal_guard import GuardedApp

    class Probe(GuardedApp, App):
        def compose(self):
            yield Static("s[@click=app.quit]q[/]\x1b]2;X\x07", id="one")
            yield DataTable(id="table")

    app = Probe()
    record_notifications(app)
    async with app.run_test(size=(100, 10)) as pilot:
        table = app.query_one(DataTable)
        table.add_column("c[b]x")
        table.add_row("[b]cell[/b]\x1b[201~")
        app.query_one("#one", Static).update("u[@click=app.quit]q[/]\u202e")
        await settle(pilot, app)
        painted = "".join(_painted(app))
        assert "u[@click=app.quit]q[/]⟨U+202E⟩" in painted and "[b]cell[/b]␛[201~" in painted
        assert "c[b]x" in painted and unsafe_left(app, "probe") == []


async def test_ctrl_c_quits_with_no_hint_of_textuals_own(demo_copy, make_app):
    """Textual's own Ctrl-C answer was a hint in markup ("Press [b]ctrl+q[/b]..."); Ctrl-C now quits
    (console/tui/interrupt.py), so no such hint is ever shown, plain or not."""
    app = make_app(demo_copy())
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot, app)
        app.post_message(key_event("ctrl+c"))  # as the terminal sends it: a quitting app drops send_keys' marker
        await wait_until(pilot, lambda: app.return_code is not None, what="the console quitting")
        assert not any("to quit the app" in m or "[b]" in m for m in messages(app))
