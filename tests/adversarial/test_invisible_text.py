"""Text a reader cannot see, a terminal draws otherwise than Rich counts, or an encoder cannot write
(issue 17, finding 4, second round).

`test_escapes.py` and `test_terminal_doors.py` attack with what a terminal obeys (ESC, C1, bidi).
Here the attacker hides text instead: zero-width and other format characters, tag characters,
variation selectors, U+2028/2029 (a JSON Lines reader splitting with `str.splitlines` breaks
there), the Hangul fillers (Rich: 0 cells, terminals: 2), runs of thousands of combining marks
(unbounded by any width limit; they froze the TUI) and lone surrogates from a JSON escape (no
encoder can write them). The one sanitiser (`widgets/safe_text.py`) pictures them all, so every
output the sweep below reads is `is_clean`; JSON outputs keep the exact text as `\\uXXXX`. Also
here: every field of an audit and a watch line passes `one_line` (`console/text.py` `line`),
`approvals show` quotes text that is not JSON on one line, `y` and completion take one shell word
only, and a Latin-1 stdout never ends a command with UnicodeEncodeError.
"""

from __future__ import annotations

import io
import json
import re
import shlex
import shutil
import sqlite3
import subprocess
import time
import unicodedata
from datetime import datetime, timezone
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from console.cli.output import SafeStream, table
from console.text import cells, json_lines, json_text, one_line
from tests.adversarial.bounded import console, ended_cleanly, without_triggers
from tests.adversarial.hostile import poison, poison_ids
from tests.adversarial.json_shapes import poison_json
from widgets.clipboard import copy_refusal
from widgets.safe_text import MARK_RUN, UNSAFE, clean, is_clean, is_shell_word

CLASSES = {
    "zero-width": "\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff",
    "soft hyphen, Mongolian vowel separator": "\u00ad\u180e",
    "deprecated format": "\u206a\u206b\u206c\u206d\u206e\u206f",
    "interlinear annotation": "\ufff9\ufffa\ufffb",
    "tags": "\U000e0001\U000e0041\U000e007f",
    "joiner and variation selectors": "\u034f\ufe00\ufe0f\U000e0100\U000e01ef",
    "line and paragraph separators": "\u2028\u2029",
    "fillers": "\u3164\u115f\u1160\uffa0",
}
INVISIBLE = "".join(CLASSES.values()) + "Z" + "\u0301" * 60
MARKS_OVER = re.compile("[\u0300-\u036f]{%d,}" % (MARK_RUN + 1))


def _hidden(text: str) -> list[str]:
    return [c for c in text if UNSAFE.fullmatch(c)]


# --- the sanitiser ---------------------------------------------------------------------------------

def test_every_format_character_and_every_mark_of_this_python_is_covered():
    for code in range(0x110000):
        char = chr(code)
        category = unicodedata.category(char)
        if category in ("Cf", "Cs", "Zl", "Zp"):
            assert UNSAFE.fullmatch(char), f"U+{code:04X} ({category}) is not pictured"
        elif category in ("Mn", "Me"):
            assert UNSAFE.fullmatch(char * (MARK_RUN + 1)), f"U+{code:04X} ({category}) is not counted as a mark"


@pytest.mark.parametrize("name", CLASSES)
def test_each_class_is_pictured_and_json_keeps_it_exact(name):
    text = "id-" + CLASSES[name] + "-end"
    shown = clean(text)
    assert is_clean(shown) and "\u27e8" in shown and shown.startswith("id-") and shown.endswith("-end")
    assert len(one_line(text).splitlines()) == 1
    encoded = json_text({"v": text}, indent=None)
    assert json.loads(encoded)["v"] == text and is_clean(encoded) and len(encoded.splitlines()) == 1
    assert json_lines([{"v": text}]).count("\n") == 1 and len(json_lines([{"v": text}]).splitlines()) == 1


def test_a_run_of_combining_marks_is_one_picture_and_fast():
    text = "a" + "\u0301" * 100_000
    started = time.perf_counter()
    shown = clean(text)
    assert time.perf_counter() - started < 0.5
    assert shown == "a\u27e8+100000 marks\u27e9"
    assert clean("e\u0301") == "e\u0301" and clean("a" + "\u0301" * MARK_RUN) == "a" + "\u0301" * MARK_RUN
    assert json.loads(json_text(text)) == text  # JSON: every mark kept, escaped


def test_a_lone_surrogate_is_pictured_and_escaped():
    text = json.loads('"x\\ud800y\\udfff"')
    assert clean(text) == "x\u27e8U+D800\u27e9y\u27e8U+DFFF\u27e9"
    clean(text).encode("utf-8")
    assert json.loads(json_text(text)) == text and json_text(text).encode("utf-8")


ALPHABET = (list("".join(CLASSES.values())) + ["\ud800", "\udc00", "\u0301", "\u20dd", "\u0489", "\x1b", "\u202e"]
            + list("ab \n\t[]$`;é界"))


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet=st.sampled_from(ALPHABET), max_size=40))
def test_the_sanitiser_bounds_and_pictures_every_new_class(text):
    shown = clean(text)
    assert is_clean(shown)
    shown.encode("utf-8")  # no lone surrogate left
    assert not MARKS_OVER.search(shown)
    assert len(shown) <= 12 * len(text)  # a picture per character at most: bounded
    flat = clean(text, one_line=True)
    assert is_clean(flat, allow_newlines=False) and len(flat.splitlines()) <= 1
    assert clean(shown) == shown  # pictures are final
    encoded = json_text({"v": text}, indent=None)
    # exact as JSON itself writes it (`json.dumps`: a high and a low surrogate side by side are a pair)
    assert json.loads(encoded)["v"] == json.loads(json.dumps(text)) and is_clean(encoded)
    encoded.encode("utf-8")
    latin = io.TextIOWrapper(io.BytesIO(), encoding="latin-1")
    SafeStream(latin).write(text + "\n")  # never raises, whatever the stream can encode
    assert cells(one_line(text, 10)) <= 10


def test_table_columns_are_measured_in_cells():
    text = table([["界界界", "x"], ["ab", "y"]], ["name", "k"])
    rows = text.splitlines()
    assert cells(rows[2][: rows[2].index("x")]) == cells(rows[3][: rows[3].index("y")])


# --- every command over a database whose every text, id and JSON value hides text -----------------

@pytest.fixture(scope="module")
def hidden_db(tmp_path_factory):
    from tests.tui.conftest import demo_file

    path = tmp_path_factory.mktemp("invisible") / "archon.db"
    shutil.copyfile(demo_file(tmp_path_factory, "current", 200), path)
    poison(path, INVISIBLE)
    poison_json(path, '{"note": "x\\ud800", "text": ' + json.dumps(INVISIBLE) + "}", only={"approval_requests"})
    poison_ids(path, "-" + CLASSES["zero-width"] + CLASSES["fillers"] + "\u2028")
    return path


def _first(path, sql: str) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql).fetchone()[0]
    finally:
        conn.close()


def _commands(path) -> list[list[str]]:
    request = _first(path, "SELECT id FROM approval_requests ORDER BY id")
    env = _first(path, "SELECT id FROM execution_environments ORDER BY id")
    project = _first(path, "SELECT id FROM projects ORDER BY id")
    out = []
    for fmt in ([], ["--json"]):
        out += [["approvals", "list", "--limit", "500", *fmt], ["approvals", "show", request, *fmt],
                ["envs", "list", *fmt], ["envs", "show", env, *fmt], ["projects", "list", *fmt],
                ["profiles", "list", project, *fmt], ["doctor", *fmt]]
    out += [["audit", "--format", f] for f in ("text", "jsonl", "csv")] + [["audit", "--json"]]
    return out


@pytest.mark.slow
def test_no_cli_output_carries_hidden_text(hidden_db, tmp_path, capsys):
    seen = ""
    for argv in _commands(hidden_db):
        code = main(["--db", str(hidden_db), "--as", "mallory", *argv])
        captured = capsys.readouterr()
        where = " ".join(argv)
        assert code in (0, 1), (where, captured.err[-500:])
        assert is_clean(captured.out) and is_clean(captured.err), (where, _hidden(captured.out + captured.err)[:5])
        captured.out.encode("utf-8")
        if "--json" in argv or "jsonl" in argv:
            for chunk in ([captured.out] if argv[0] != "audit" else captured.out.splitlines()):
                json.loads(chunk)  # exact JSON; JSON Lines split only at their own line ends
        seen += captured.out
    # Not vacuous: the hidden text was there, pictured or escaped.
    assert "\u27e8U+200B\u27e9" in seen and "\u27e8U+3164\u27e9" in seen and "marks\u27e9" in seen
    assert "\\u200b" in seen and "\\ud800" in seen


@pytest.mark.slow
def test_a_latin1_stdout_gets_escapes_not_an_error(hidden_db):
    for argv in (["approvals", "list"], ["approvals", "list", "--json"], ["audit", "--format", "text"]):
        result = console("--db", str(hidden_db), *argv, env={"PYTHONIOENCODING": "latin-1"}, timeout=60)
        ended_cleanly(result)
        assert result.returncode == 0 and "UnicodeEncodeError" not in result.stderr
        assert "\\u27e8" in result.stdout or "\\u200b" in result.stdout


@pytest.mark.slow
async def test_the_tui_paints_hidden_text_as_pictures(hidden_db, tmp_path, make_app):
    from tests.adversarial.tui import _assert_screen_clean
    from tests.adversarial.tui import open_screen

    path = tmp_path / "archon.db"
    shutil.copyfile(hidden_db, path)
    app = make_app(path, start="approvals")
    seen: list[str] = []
    async with app.run_test(size=(160, 50)) as pilot:
        await _assert_screen_clean(pilot, app, "approvals", seen)
        await pilot.press("down", "down")
        await _assert_screen_clean(pilot, app, "approvals moved", seen)
        for command in ("envs", "projects"):
            await open_screen(pilot, command)
            await _assert_screen_clean(pilot, app, command, seen)
    assert any("\u27e8U+200B\u27e9" in text for text in seen)


MARKS_IN_NAME = 20_000


@pytest.mark.slow
async def test_a_project_name_of_combining_marks_draws_at_once(demo_copy, make_app):
    """F11: 'a' + 20,000 U+0301 as a project name took the TUI about a minute to draw."""
    from console.tui.screens.approvals import ApprovalsScreen
    from tests.tui.pilot import wait_until
    from widgets.lazy_table import LazyTable

    path = demo_copy()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE projects SET name = ?", ("a" + "\u0301" * MARKS_IN_NAME,))
    conn.commit()
    conn.close()
    app = make_app(path, start="approvals")
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen)
                         and app.screen.query_one(LazyTable).cursor_key, timeout=20, what="the queue drawn")
        def painted() -> str:
            return "".join(s.text for strip in app.screen._compositor.render_strips() for s in strip)

        await wait_until(pilot, lambda: "marks\u27e9" in painted(), timeout=20, what="the name drawn as a picture")


# --- lines built from several fields -------------------------------------------------------------

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=timezone.utc)


def test_every_field_of_an_audit_line_is_one_line():
    from console.cli.commands.audit import _text_line

    for kind in ("approval", "environment", "profile"):
        event = SimpleNamespace(at="2026-12-01T11:00:00Z", event_type="t\nFORGED", kind=kind + "\nFORGED",
                                from_state="a\nFORGED", to_state="b\u2028FORGED", actor="x\nFORGED",
                                actor_class="human\n2026-12-01 11:00:00  FORGED", project_id="p\nFORGED",
                                subject_id="s\rFORGED", reason="r\nFORGED", os_account="erin\n@vm FORGED")
        text = _text_line(event, NOW)
        assert "\n" not in text and "\r" not in text and is_clean(text, allow_newlines=False), text


def test_every_field_of_a_watch_line_is_one_line():
    from console.cli.watch_delivery import change_line as _line

    for change in ("new", "approved"):
        event = SimpleNamespace(at="2026-12-01T11:00:00Z", change=change, request_id="r\nFORGED",
                                project_name="n\nFORGED", project_id="p", kind="k\nFORGED",
                                expires_at="2026-12-02T11:00:00Z", actor="a\nFORGED",
                                actor_class="human\n2026-12-01 11:00:00  approved  FORGED", reason="r\u2029FORGED",
                                os_account="erin\n@vm FORGED")
        text = _line(event, NOW)
        assert "\n" not in text and is_clean(text, allow_newlines=False), text


def test_a_forged_actor_class_stays_on_its_audit_line(demo_copy, capsys):
    path = demo_copy()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    triggers = without_triggers(conn)
    # archon has no CHECK on this column (approval_request_events has one)
    conn.execute("UPDATE execution_environment_events SET actor_classification = 'human' || char(10) || "
                 "'2026-01-01 00:00:00  FORGED'")
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    assert main(["--db", str(path), "audit", "--format", "text"]) == 0
    out = capsys.readouterr().out
    assert "FORGED" in out and not any(line.startswith("2026-01-01 00:00:00  FORGED") for line in out.splitlines())


def test_approvals_show_quotes_text_that_is_not_json_on_one_line(demo_copy, capsys):
    path = demo_copy()
    request = _first(path, "SELECT id FROM approval_requests WHERE status = 'pending' ORDER BY id")
    poison_json(path, "not json\nhistory:\n  you can approve this", only={"approval_requests"})
    assert main(["--db", str(path), "approvals", "show", request]) == 0
    out = capsys.readouterr().out
    assert "\nhistory:\n  you can approve this" not in out
    assert '"not json\\nhistory:\\n  you can approve this"' in out


# --- what reaches a shell: `y` and completion ----------------------------------------------------

def test_copy_refuses_an_id_a_shell_would_act_on():
    for ident in ("apr-00000188$(touch${IFS}/tmp/ae-pwned)`id`;x", "apr-1 --requester-unknown-ok", "apr'1",
                  "-rf", "=ls", "apr-1\u3164", "apr-1\u200b", "apr-1\n", "apr-*", "~root", "a{b,c}"):
        why = copy_refusal(ident)
        assert why is not None, ident
    assert copy_refusal("apr-00000188") is None and copy_refusal("prj-atlas/api:v1@x+y=z,w.q_r") is None


SHELL_ALPHABET = list("abz09-_.:@+=,/") + list(" $`;'\"\\()|&<>*?[]{}~#!%^\n\t") + ["\u3164", "\u200b", "é"]


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(SHELL_ALPHABET), min_size=1, max_size=16))
def test_whatever_y_copies_pastes_as_exactly_one_argument(ident):
    if copy_refusal(ident) is not None:
        return
    assert is_shell_word(ident)
    assert shlex.split(ident) == [ident]
    result = subprocess.run(["bash", "--norc", "--noprofile", "-c", "printf '%s\\n' " + ident],
                            capture_output=True, text=True, timeout=20, cwd="/")
    assert result.stdout == ident + "\n", (ident, result.stdout, result.stderr)


def test_completion_offers_only_shell_words(demo_copy, capsys):
    from console.cli.completion import candidates

    path = demo_copy()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    triggers = without_triggers(conn)
    conn.execute("PRAGMA foreign_keys = OFF")
    ids = [r[0] for r in conn.execute("SELECT id FROM approval_requests ORDER BY id LIMIT 5")]
    for old, ident in zip(ids, ("apr-zz\n", "apr-zz\u3164", "apr-zz$(id)", "apr-zz\u200b", "apr-zzok")):
        conn.execute("UPDATE approval_requests SET id = ? WHERE id = ?", (ident, old))
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    found = candidates(["--db", str(path), "approvals", "show", "apr-zz"])
    assert found == ["apr-zzok"], found
    assert main(["__complete", "bash", f"archon-console --db {path} approvals show apr-zz", " \t\n\"'@><=;|&(:"]) == 0
    assert capsys.readouterr().out == "apr-zzok\n"


def test_the_shell_word_test_is_whole_and_ascii():
    assert not is_shell_word("apr-1\n") and not is_shell_word("apr\u3164") and not is_shell_word("")
    assert not is_shell_word("apr\u0661")  # an Arabic-Indic digit is a \w digit, not ASCII
    assert is_shell_word("apr-1")


@pytest.mark.slow
async def test_y_refuses_an_id_with_shell_syntax_and_points_to_Y(demo_copy, make_app):
    """Finding 1: `y` copied `apr-…$(touch${IFS}/tmp/ae-pwned)`id`;x`, which ran when pasted."""
    from console.tui.screens.approvals import ApprovalsScreen
    from tests.tui.pilot import notifications, wait_until
    from widgets.lazy_table import LazyTable

    path = demo_copy()
    poison_ids(path, "$(touch${IFS}/tmp/ae-pwned)`id`;x")
    app = make_app(path, start="approvals")
    async with app.run_test(size=(160, 50)) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, ApprovalsScreen)
                         and app.screen.query_one(LazyTable).cursor_key, timeout=20, what="a request")
        await pilot.press("y")
        notes = lambda: [n.message for n in notifications(app)]  # noqa: E731
        await wait_until(pilot, lambda: any("not copied" in m for m in notes()), what="the refusal")
        assert app.clipboard == ""
        assert any("'$'" in m and "Y copies" in m for m in notes()), notes()


def test_a_project_name_cannot_add_a_line_to_profiles_show(demo_copy, capsys):
    path = demo_copy()
    conn = sqlite3.connect(path)
    conn.execute("UPDATE projects SET name = name || char(10) || 'FORGED: fingerprint matches'")
    conn.commit()
    conn.close()
    revision = _first(path, "SELECT id FROM execution_profile_revisions ORDER BY id")
    assert main(["--db", str(path), "profiles", "show", revision]) == 0
    out = capsys.readouterr().out
    assert "FORGED" in out and not any(line.startswith("FORGED") for line in out.splitlines())


def test_a_lone_surrogate_in_a_profile_breaks_no_command(demo_copy, capsys):
    """F2: `json_set(profile_json, '$.x', json('"\\ud800"'))` made profiles list/show exit 3 (UTF-8
    encode of the fingerprint) and doctor exit 2 with the codec's message."""
    path = demo_copy()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("BEGIN")
    triggers = without_triggers(conn)
    conn.execute("""UPDATE execution_profile_revisions SET profile_json = json_set(profile_json, '$.x', json('"\\ud800"'))""")
    for _, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")
    conn.close()
    project = _first(path, "SELECT project_id FROM execution_profile_revisions ORDER BY id")
    revision = _first(path, "SELECT id FROM execution_profile_revisions ORDER BY id")
    for argv, codes in ((["profiles", "list", project], (0,)), (["profiles", "show", revision], (0,)),
                        (["profiles", "show", revision, "--json"], (0,)), (["doctor"], (0, 1))):
        code = main(["--db", str(path), *argv])
        captured = capsys.readouterr()
        assert code in codes and "codec" not in captured.err, (argv, captured.err)
        assert is_clean(captured.out)


@settings(max_examples=200, deadline=None)
@given(value=st.text(max_size=40))
def test_what_Y_copies_pasted_into_single_quotes_runs_nothing_and_stays_exact(value):
    """`Y` on a row whose text holds `'$(touch x)`: pasted into `echo '...' | jq` it ended the quotes
    and ran the command (second attack round). The copy escapes what a shell acts on inside quotes."""
    import json
    import shlex

    from widgets.clipboard import json_text

    copied = json_text({"action": value})
    assert not set("'$`!") & set(copied)
    assert shlex.split(f"echo '{copied}'")[1] == copied  # one argument, as copied
    assert json.loads(copied) == {"action": value}


@pytest.mark.parametrize("jamo", ["\u1161", "\u11a8", "\u11ff", "\ud7b0", "\ud7fb"])
def test_a_lone_hangul_vowel_or_final_is_pictured_and_invisible_to_four_eyes(jamo):
    """`erin` + U+1161 took no cell on the terminal, so an approver read it as erin, and four-eyes let
    erin approve it (second attack round). Decomposed Korean keeps its letters."""
    import unicodedata

    from console.services.four_eyes import canonical_name

    assert not is_clean("erin" + jamo) and clean("erin" + jamo).startswith("erin\u27e8U+")
    assert canonical_name("erin" + jamo) == "erin"
    korean = unicodedata.normalize("NFD", "한국어")
    assert clean(korean) == korean and is_clean(korean)
