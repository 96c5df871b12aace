"""Database text never steers the terminal (issue 9, finding 2).

Every text column of a demo database carries hostile strings (OSC 52 clipboard writes, title
changes, screen clears, C1 controls, bidi overrides, Rich markup); every CLI command and every
screen is run on it; nothing that reaches the terminal may hold a byte below 0x20 other than
newline and tab, DEL, a C1 control or a bidi control.
"""

from __future__ import annotations

import io
import json
import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from console.cli.output import SafeStream
from tests.adversarial.hostile import HOSTILE, poison
from tests.adversarial.tui import _assert_screen_clean, open_screen
from tests.tui.pilot import send_keys, settle, wait_until
from widgets.safe_text import clean, is_clean

READ_COMMANDS = [
    ["approvals", "list", "--limit", "500"],
    ["approvals", "list", "--limit", "500", "--json"],
    ["approvals", "show", "apr-00000001"],
    ["approvals", "show", "apr-00000001", "--json"],
    ["envs", "list"],
    ["envs", "list", "--json"],
    ["envs", "show", "env-0003"],
    ["envs", "show", "env-0003", "--json"],
    ["projects", "list"],
    ["projects", "list", "--json"],
    ["profiles", "list", "prj-atlas-api"],
    ["doctor"],
    ["doctor", "--json"],
    ["upgrade", "--plan"],
]
# Refusals quote database text on stderr: a claim held by someone else names the holder.
WRITE_COMMANDS = [
    ["envs", "claim", "env-0003", "--op", "stop"],
    ["envs", "release", "env-0003"],
    ["envs", "complete", "env-0003"],
    ["approvals", "approve", "apr-00000001"],
    ["approvals", "deny", "apr-00000002", "--reason", "no"],
]

CONTROLS = "\x00\x07\x08\x0b\x0c\x0d\x1b\x7f\x85\x9b\u200e\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


@pytest.fixture(scope="module")
def poisoned(tmp_path_factory):
    from tests.tui.conftest import demo_file

    path = tmp_path_factory.mktemp("hostile") / "archon.db"
    shutil.copyfile(demo_file(tmp_path_factory, "current", 200), path)
    poisoned_columns = poison(path)
    assert "operation_claim_id" in poisoned_columns["execution_environments"]
    assert "reason" in poisoned_columns["approval_request_events"]
    return path


def run(argv, capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("argv", READ_COMMANDS + WRITE_COMMANDS, ids=lambda a: " ".join(a))
def test_no_cli_output_can_steer_the_terminal(poisoned, tmp_path, capsys, argv):
    path = tmp_path / "archon.db"
    shutil.copyfile(poisoned, path)
    code, out, err = run(["--db", str(path), "--as", "mallory", *argv], capsys)
    assert code in (0, 1, 2, 3), err
    assert "Traceback" not in err
    assert is_clean(out), [c for c in out if not is_clean(c)][:5]
    assert is_clean(err), [c for c in err if not is_clean(c)][:5]
    if "--json" in argv and code == 0:
        json.loads(out)  # still exact JSON: the controls are \\u escapes, not pictures


def test_json_keeps_the_exact_text(poisoned, capsys):
    code, out, _ = run(["--db", str(poisoned), "envs", "show", "env-0003", "--json"], capsys)
    assert code == 0
    assert HOSTILE in json.loads(out)["operation_claim_id"]


def test_say_filters_messages_with_newlines_too(capsys):
    from console.cli.output import say

    say("first line\nsecond \x1b]2;HIJACKED\x07 line")
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\x07" not in out and "first line\nsecond" in out


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list(CONTROLS) + list("ab[]/@=;\n\t")), max_size=30))
def test_the_sanitiser_leaves_nothing_a_terminal_obeys(text):
    assert is_clean(clean(text))
    assert is_clean(clean(text, one_line=True), allow_newlines=False)
    stream = io.StringIO()
    SafeStream(stream).write(text)
    assert is_clean(stream.getvalue())


# --- the TUI ---------------------------------------------------------------------------------

@pytest.mark.slow
@pytest.mark.parametrize("read_only", [False, True])
async def test_no_screen_shows_a_control_character(poisoned, tmp_path, make_app, read_only):
    from console.tui.screens.approvals import ApprovalsScreen

    path = tmp_path / "archon.db"
    shutil.copyfile(poisoned, path)
    app = make_app(path, read_only=read_only, start="approvals")
    seen: list[str] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen), what="the queue")
        assert isinstance(app.screen, ApprovalsScreen)
        await _assert_screen_clean(pilot, app, "approvals", seen)
        await send_keys(pilot, "down", "down", "end")
        await _assert_screen_clean(pilot, app, "approvals after moving", seen)
        await send_keys(pilot, "w")  # why greyed: reasons quote who decided
        await _assert_screen_clean(pilot, app, "approvals why", seen)
        for command in ("envs", "projects", "project prj-atlas-api", "doctor", "upgrade"):
            await open_screen(pilot, command)
            await _assert_screen_clean(pilot, app, command, seen)
            await send_keys(pilot, "down", "down", "down")
            await _assert_screen_clean(pilot, app, f"{command} after moving", seen)
            await send_keys(pilot, "w")
            await _assert_screen_clean(pilot, app, f"{command} why", seen)
    # Not vacuous: the hostile text was on screen, pictured.
    assert any("HIJACKED" in text for text in seen)
    assert any("\u27e8U+202E\u27e9" in text for text in seen)
