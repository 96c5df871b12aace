"""One hostile request must not break the approval workflow (issue 17, finding 3).

Python's `json` recurses once per nesting level, so 2 KB of `[` raised RecursionError in every
reader of database JSON (`approvals list` exit 3, `show`, `deny`, the TUI). The class is closed
where it starts: one bounded reader (widgets/safe_json.py) measures the depth before parsing, and
no other parse of database JSON remains (the AST test below). The sweep writes generated shapes
(depth up to 10,000, width, size) into every JSON column of archon's tables and runs every command.
"""

from __future__ import annotations

import ast
import json
import time
from itertools import count
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from console.cli.cli import main
from tests.adversarial.json_shapes import (
    DEEP_1100, deep_array, deep_mixed, deep_object, first_pending, json_shapes, large, poison_json,
    shape_text, unterminated,
)
from widgets.safe_json import MAX_DEPTH, TOO_DEEP, TOO_LARGE, UnreadableJson, limit_problem, read_json
from widgets.safe_text import is_clean

ROOT = Path(__file__).resolve().parents[2]
NOTE = "unparseable (nested too deeply)"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["--as", "mallory", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_normal_end(code: int, out: str, err: str, argv) -> None:
    """A normal end or a refusal in one sentence: never a traceback, never the last-line handler."""
    # `upgrade --plan` fails closed (exit 3) on a stored profile it cannot normalise, as designed.
    allowed = (0, 1, 3) if "upgrade" in argv else (0, 1)
    assert code in allowed, (argv[2:], code, err[-500:])
    for stream in (out, err):
        assert "Traceback" not in stream and "RecursionError" not in stream, argv
        assert "unexpected" not in stream, (argv, stream[-500:])
        assert is_clean(stream)
    if "--json" in argv:
        json.loads(out)


# --- the reader -----------------------------------------------------------------------------

@pytest.mark.parametrize("text, reason", [
    (deep_array(10_000), TOO_DEEP), (deep_object(10_000), TOO_DEEP), (deep_mixed(10_000), TOO_DEEP),
    (unterminated(10_000), TOO_DEEP), (DEEP_1100, TOO_DEEP), (large(300_000), TOO_LARGE),
    (large(300_000).encode(), TOO_LARGE),
])
def test_the_reader_refuses_what_is_over_its_limits(text, reason):
    with pytest.raises(UnreadableJson) as raised:
        read_json(text)
    assert raised.value.reason == reason and raised.value.over_limit
    assert str(raised.value) == f"unparseable ({reason})"


def test_brackets_inside_strings_do_not_count():
    text = json.dumps({"a": "[" * 5000, "b": "{" * 5000})
    assert limit_problem(text) is None
    assert read_json(text)["a"] == "[" * 5000
    assert read_json(deep_array(MAX_DEPTH)) == read_json(deep_array(MAX_DEPTH))
    with pytest.raises(UnreadableJson):
        read_json(deep_array(MAX_DEPTH + 1))


@pytest.mark.slow
@settings(max_examples=150, deadline=None)
@given(json_shapes())
def test_the_reader_never_raises_anything_else_and_what_it_returns_reserialises(shape):
    text = shape_text(shape)
    try:
        value = read_json(text)
    except UnreadableJson:
        return
    json.dumps(value, indent=2, sort_keys=True)  # bounded: what it returns is at most MAX_DEPTH deep


# --- one reader: no other parse of database JSON --------------------------------------------

# The parses of the console's own text, each named: (file, function).
OWN_TEXT = {
    ("console/demo/history.py", "_extra_projects"): "the demo generator's own check definitions",
    ("console/demo/projects.py", "write_projects"): "the demo generator's own check definitions",
    ("console/services/bundle.py", "write_bundle"): "the MANIFEST.json this bundle has just written",
    ("console/services/redaction.py", "_json_words"): "archon's default profiles in the console's own DDL",
}


def _parses(path: Path):
    """(function, line) of every json.loads / json.load / raw_decode / rich.json in a module."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    owner: dict[ast.AST, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for inner in ast.walk(node):
                owner.setdefault(inner, node.name) if inner is not node else None
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in ("json", "rich.json"):
            if node.module == "rich.json" or any(a.name in ("loads", "load", "JSONDecoder") for a in node.names):
                yield "<module>", node.lineno
        if isinstance(node, ast.Attribute) and (
            (node.attr in ("loads", "load") and isinstance(node.value, ast.Name) and node.value.id == "json")
            or node.attr in ("raw_decode", "from_data")
        ):
            yield owner.get(node, "<module>"), node.lineno


@pytest.mark.slow
def test_no_other_parse_of_database_json_remains():
    found = []
    for path in sorted([*ROOT.joinpath("console").rglob("*.py"), *ROOT.joinpath("widgets").rglob("*.py")]):
        rel = path.relative_to(ROOT).as_posix()
        if rel == "widgets/safe_json.py":
            continue
        for function, line in _parses(path):
            if (rel, function) not in OWN_TEXT:
                found.append(f"{rel}:{line} in {function}")
    assert not found, "parse database JSON with console.text.read_json (widgets/safe_json.py): " + ", ".join(found)


def test_the_allow_list_names_only_parses_that_exist():
    seen = {(path, fn) for path, _ in OWN_TEXT for fn, _ in _parses(ROOT / path)}
    assert set(OWN_TEXT) <= seen


# --- the instances of issue 17 (each failed on the unfixed code) ----------------------------

@pytest.fixture
def deep_db(demo_copy):
    path = demo_copy()
    poison_json(path, DEEP_1100, only={"approval_requests"})
    return path


def test_approvals_list_shows_a_deep_request(deep_db, capsys):
    code, out, err = run(capsys, "--db", str(deep_db), "approvals", "list")
    assert code == 0, err
    assert NOTE in out and "[[[" not in out


def test_approvals_show_names_the_problem(deep_db, capsys):
    request = first_pending(deep_db)
    code, out, err = run(capsys, "--db", str(deep_db), "approvals", "show", request)
    assert code == 0, err
    assert out.count(NOTE) >= 3  # the summary, the action and the authority
    assert "[[[" not in out


def test_deny_a_deep_request(deep_db, capsys):
    code, out, err = run(capsys, "--db", str(deep_db), "approvals", "deny", first_pending(deep_db),
                         "--reason", "hostile")
    assert code == 0, err
    assert "denied" in out


def test_approving_a_deep_request_fails_closed(deep_db, capsys):
    """Its requester is uncertain: refused unless confirmed, and the refusal says why."""
    request = first_pending(deep_db)
    code, out, err = run(capsys, "--db", str(deep_db), "approvals", "approve", request)
    assert code == 1 and f"its authority_json is {NOTE}" in err, err
    assert "[[[" not in err


@pytest.mark.slow
def test_a_deep_authority_that_names_the_approver_is_refused_even_when_confirmed(demo_copy, capsys):
    """Unreadable is uncertain, and an uncertain authority that mentions the approver anywhere (here
    10,000 levels down) is refused outright: the confirmation cannot override it."""
    path = demo_copy()
    poison_json(path, deep_object(10_000), only={"approval_requests"})
    code, out, err = main(["--db", str(path), "--as", "alice", "approvals", "approve", first_pending(path),
                           "--requester-unknown-ok"]), *capsys.readouterr()
    assert code == 1 and "names you (four-eyes rule)" in err, err


def test_four_eyes_reads_unclosed_strings_in_linear_time():
    """An authority that is one string never closed, full of escaped quotes: the string-literal scan
    restarted at every quote (quadratic: ~70 s at 200 KB); now every quote starts one match."""
    from console.services.four_eyes import check_approver

    authority = '{"requested_by": "mallory", "x": "' + '\\"' * 100_000
    started = time.monotonic()
    verdict = check_approver(authority, "mallory")
    assert time.monotonic() - started < 10  # generous: a loaded machine is far from quadratic
    assert verdict.self_approval  # the authority names the approver: refused outright


# --- every command, generated shapes in every JSON column -----------------------------------

def _commands(path: Path, pending: str, tmp: Path) -> list[list[str]]:
    db = ["--db", str(path)]
    return [
        [*db, "approvals", "list", "--limit", "500"],
        [*db, "approvals", "list", "--limit", "500", "--json"],
        [*db, "approvals", "list", "--search", "origin"],
        [*db, "approvals", "show", pending],
        [*db, "approvals", "show", pending, "--json"],
        [*db, "envs", "list"],
        [*db, "envs", "list", "--json"],
        [*db, "envs", "show", "env-0003"],
        [*db, "envs", "show", "env-0003", "--json"],
        [*db, "envs", "show", "env-0003", "--as-of", "2025-06-01 11:00"],
        [*db, "projects", "list"],
        [*db, "projects", "list", "--json"],
        [*db, "profiles", "list", "prj-atlas-api"],
        [*db, "profiles", "show", "prj-atlas-api", "r1"],
        [*db, "profiles", "show", "prj-atlas-api", "r1", "--json"],
        [*db, "profiles", "diff", "prj-atlas-api", "r1", "r2"],
        [*db, "audit"],
        [*db, "audit", "--format", "jsonl"],
        [*db, "audit", "--format", "csv", "--redact"],
        [*db, "doctor"],
        [*db, "doctor", "--json"],
        [*db, "doctor", "--bundle", str(tmp / f"{path.stem}.zip"), "--redact"],
        [*db, "upgrade", "--plan"],
        [*db, "approvals", "approve", pending],
        [*db, "approvals", "approve", pending, "--requester-unknown-ok", "--json"],
        [*db, "approvals", "deny", pending, "--reason", "hostile"],
        [*db, "approvals", "revoke", pending, "--reason", "hostile"],
        [*db, "envs", "claim", "env-0003", "--op", "stop"],
    ]


_COUNTER = count()


@pytest.mark.slow
@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(shape=json_shapes())
@example(shape=("deep_array", 1100))
@example(shape=("deep_object", 10_000))
@example(shape=("large", 300_000))
def test_every_command_survives_any_json_shape(demo_copy, tmp_path, capsys, shape):
    path = demo_copy(name=f"shape-{next(_COUNTER)}.db")
    columns = poison_json(path, shape_text(shape))
    assert ("approval_requests", "action_json") in columns and ("projects", "required_check_definition_ids") in columns
    pending = first_pending(path)
    out_dir = tmp_path / "bundles"  # a bundle is never written beside the database
    out_dir.mkdir(exist_ok=True)
    for argv in _commands(path, pending, out_dir):
        code, out, err = run(capsys, *argv)
        assert_normal_end(code, out, err, argv)


def test_a_watch_cursor_nested_too_deeply_is_a_usage_error(tmp_path, demo_copy, capsys):
    cursor = tmp_path / "cursor.json"
    cursor.write_text('{"rowid":' * 5000 + "1" + "}" * 5000)
    code, out, err = run(capsys, "--db", str(demo_copy()), "approvals", "watch", "--cursor", str(cursor))
    assert code == 2, err
    assert "Traceback" not in err and "unexpected" not in err


def test_hooks_get_the_stored_text_unparsed(deep_db):
    """The hook's stdin is the row as stored (console/services/watch.py `request_json`)."""
    import sqlite3

    from console.services.watch import request_json

    conn = sqlite3.connect(deep_db)
    try:
        row = request_json(conn, first_pending(deep_db))
    finally:
        conn.close()
    assert row["action_json"] == DEEP_1100
    json.dumps(row)  # what the hook's stdin gets: one string, no recursion
