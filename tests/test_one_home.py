"""One home per concept (issue 19, item 3): each of these once had two to five definitions that
drifted apart in spelling, and each test here fails as soon as a second one appears.

- time in words: console/clock.py (`duration`, `relative`, `ago`), the only user of humanize's
  `naturaldelta`;
- the approval statuses and the status filter: console/models/approvals.py (`STATUSES`,
  `OPEN_STATUSES`, `parse_status_filter`);
- the `--json` error object: console/cli/output.py `error_json`;
- a dialog watching its row: `Watched`, given when the dialog is built (console/tui/screens/confirm.py);
- the TOML settings files: console/small_files.py `read_toml`.
"""

from __future__ import annotations

import ast
import inspect
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from console.clock import ago, duration, relative
from console.errors import UsageError
from console.models.approvals import STATUSES, parse_status_filter

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted([*ROOT.joinpath("console").rglob("*.py"), *ROOT.joinpath("widgets").rglob("*.py")])


def _trees():
    for path in SOURCES:
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(encoding="utf-8"))


def _where(predicate) -> list[str]:
    return [f"{name}:{node.lineno}" for name, tree in _trees() for node in ast.walk(tree) if predicate(node)]


def _line(where: str) -> str:
    name, number = where.rsplit(":", 1)
    return ROOT.joinpath(name).read_text(encoding="utf-8").splitlines()[int(number) - 1].strip()


def _names(node: ast.AST) -> set[str]:
    """Names and attributes a node mentions (`humanize.naturaldelta` -> {'humanize', 'naturaldelta'})."""
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {
        n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)} | {
        a.name.split(".")[-1] for n in ast.walk(node) if isinstance(n, (ast.Import, ast.ImportFrom)) for a in n.names}


# --- time in words ---------------------------------------------------------------------------

def test_only_the_clock_puts_time_into_words():
    found = [w for w in _where(lambda n: isinstance(n, (ast.Name, ast.Attribute, ast.alias))
                               and "naturaldelta" in {getattr(n, "id", None), getattr(n, "attr", None),
                                                      getattr(n, "name", None)})
             if not w.startswith("console/clock.py:")]
    assert not found, f"time in words outside console/clock.py: {found}"
    defined = [w for w in _where(lambda n: isinstance(n, ast.FunctionDef) and n.name in ("relative", "ago", "duration"))
               if not w.startswith("console/clock.py:")]
    assert not defined, f"a second relative/ago/duration: {defined}"


NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize("offset, cli, screen, sentence", [
    (0, "in a moment", "now", "just now"),
    (30, "in 30 seconds", "in 30 seconds", "just now"),
    (-30, "30 seconds ago", "30 seconds ago", "30 seconds ago"),
    (300, "in 5 minutes", "in 5 minutes", "in 5 minutes"),
    (-7200, "2 hours ago", "2 hours ago", "2 hours ago"),
])
def test_each_spelling_of_a_relative_time_is_kept(offset, cli, screen, sentence):
    """The commands', the screens' and the services' sentences' spellings, as they were before the
    three algorithms became one (CLI tables and screenshots did not change)."""
    at = NOW + timedelta(seconds=offset)
    assert relative(at.strftime("%Y-%m-%d %H:%M:%S"), NOW) == cli
    assert relative(at, NOW, unknown="—", present="now") == screen
    assert ago(at.isoformat(), NOW) == sentence


def test_unknown_times_keep_their_words():
    assert relative(None, NOW) == "-" and relative("soon", NOW) == "-"
    assert relative(None, NOW, unknown="—", present="now") == "—"
    assert ago("garbage", NOW) == "at an unknown time"
    assert duration(None) == duration(float("inf")) == "an unknown time"
    assert duration(-5) == "a moment" and duration(900) == "15 minutes"


# --- approval statuses -----------------------------------------------------------------------

def test_the_status_list_is_spelled_once():
    seven = set(STATUSES)

    def lists_them(node: ast.AST) -> bool:
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return False
        words = {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
        return seven <= words

    # The demo's SMALL_ORDER is not the list but an order of its own: which status a small demo
    # database shows first (console/demo/approvals.py).
    found = [w for w in _where(lists_them) if not w.startswith("console/models/approvals.py:")]
    found = [w for w in found if not (w.startswith("console/demo/approvals.py:") and _line(w).startswith("SMALL_ORDER = "))]
    assert not found, f"the seven approval statuses spelled outside console/models/approvals.py: {found}"


def test_the_status_filter_is_parsed_once():
    parsers = [w for w in _where(lambda n: isinstance(n, ast.FunctionDef)
                                 and n.name in ("parse_statuses", "_statuses", "parse_status_filter")
                                 and "parse_status_filter" not in _names(n) - {n.name})
               if not w.startswith("console/models/approvals.py:")]
    assert not parsers, f"a second parser of a status filter: {parsers}"


def test_every_status_filter_says_the_same():
    assert parse_status_filter("Pending, approved,pending") == ("pending", "approved")
    assert parse_status_filter("all") is None and parse_status_filter("") is None
    with pytest.raises(UsageError) as refused:
        parse_status_filter("pending,maybe")
    said = str(refused.value)
    assert said.startswith("Unknown status maybe: use pending, approved") and said.endswith("or all.")


@pytest.mark.parametrize("argv", [["approvals", "list", "--status", "maybe"],
                                  ["approvals", "watch", "--status", "maybe"],
                                  ["approvals", "list", "--view", "x", "--status", "maybe"]])
def test_the_cli_refuses_a_status_in_the_one_sentence(argv, tmp_path, capsys, monkeypatch):
    from console.cli.cli import main
    from console.services import views

    monkeypatch.setenv("ARCHON_CONSOLE_VIEWS", str(tmp_path / "views.toml"))
    views.save("x", views.parse("approvals", "status=pending"))
    from tests import damage

    db = damage.healthy(tmp_path / "archon.db")
    assert main(["--db", str(db), *argv]) == 2
    err = capsys.readouterr().err
    assert "Unknown status maybe: use pending, approved, denied, cancelled, expired, invalidated, consumed" in err
    with pytest.raises(UsageError, match="Unknown status maybe: use pending"):
        views.parse("approvals", "status=maybe")


def test_the_kind_list_is_spelled_once():
    both = {"git_push", "custom_check"}

    def lists_them(node: ast.AST) -> bool:
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return False
        return both <= {e.value for e in node.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}

    # Migration steps are archon's DDL, released and checksummed; the demo writes rows of each kind.
    found = [w for w in _where(lists_them) if not w.startswith(("console/models/approvals.py:",
                                                                  "console/db/migrations/", "console/demo/"))]
    assert not found, f"the approval kinds spelled outside console/models/approvals.py: {found}"


@pytest.mark.parametrize("argv", [["approvals", "list", "--kind", "rm_rf"],
                                  ["approvals", "watch", "--kind", "rm_rf"],
                                  ["approvals", "list", "--view", "x", "--kind", "rm_rf"]])
def test_the_cli_refuses_a_kind_in_the_one_sentence(argv, tmp_path, capsys, monkeypatch):
    from console.cli.cli import main
    from console.services import views

    monkeypatch.setenv("ARCHON_CONSOLE_VIEWS", str(tmp_path / "views.toml"))
    views.save("x", views.parse("approvals", "status=pending"))
    from tests import damage

    db = damage.healthy(tmp_path / "archon.db")
    assert main(["--db", str(db), *argv]) == 2
    assert "Unknown kind 'rm_rf'; use git_push or custom_check." in capsys.readouterr().err
    with pytest.raises(UsageError, match="Unknown kind 'rm_rf'; use git_push or custom_check."):
        views.parse("approvals", "kind=rm_rf")


# --- the --json error object -----------------------------------------------------------------

def test_the_json_error_object_is_built_once():
    def error_object(node: ast.AST) -> bool:
        if not isinstance(node, ast.Dict):
            return False
        keys = {k.value for k in node.keys if isinstance(k, ast.Constant)}
        return {"ok", "error"} <= keys

    found = [w for w in _where(error_object) if not w.startswith("console/cli/output.py:")]
    assert not found, f"a --json error object built outside console/cli/output.py error_json: {found}"


def test_the_json_error_object_keeps_its_shape():
    from console.cli.output import error_json

    assert list(error_json("no", "do this", 1, id="x")) == ["ok", "error", "hint", "exit", "wrote", "id"]
    assert list(error_json("no", None, 3, path="p")) == ["ok", "error", "hint", "exit", "path"]
    # doctor adds its own `reason` (and upgrade its `message`) after the common keys
    assert error_json("no", None, 3, reason="no", findings=[]) == {
        "ok": False, "error": "no", "hint": None, "exit": 3, "reason": "no", "findings": []}


# --- a dialog watching its row ---------------------------------------------------------------

def test_a_dialog_watches_its_row_one_way():
    from console.tui.screens.confirm import ActionModal

    assert "watch_key" not in inspect.signature(ActionModal.__init__).parameters
    assert not any(isinstance(v, property) and v.fset is not None for v in vars(ActionModal).values()), \
        "no compatibility setter: a dialog gets Watched(key, action, seen) when it is built"
    found = _where(lambda n: (isinstance(n, ast.keyword) and n.arg == "watch_key")
                   or (isinstance(n, ast.Attribute) and n.attr == "watch_key"))
    assert not found, f"watch_key is gone; use watching=Watched(...): {found}"


# --- TOML settings files ---------------------------------------------------------------------

def test_settings_files_are_read_by_one_loader():
    found = [w for w in _where(lambda n: isinstance(n, (ast.Import, ast.ImportFrom))
                               and ("tomllib" in {a.name for a in n.names} or getattr(n, "module", None) == "tomllib"))
             if not w.startswith("console/small_files.py:")]
    assert not found, f"TOML read outside console/small_files.py read_toml: {found}"


@pytest.mark.parametrize("reader, what", [
    ("from console.services.views import load as read", "the saved views"),
    ("from console.tui.keymap import load_keymap as read", "the keymap"),
    ("from console.tui.attention import load_notify_config as read", "the notification settings"),
])
@pytest.mark.parametrize("body, why", [
    (b"[broken\n", "it is not valid TOML"),
    (b"\xff\xfe[x]\n", "it is not UTF-8 text"),
])
def test_every_settings_file_says_what_is_wrong_the_same_way(tmp_path, reader, what, body, why):
    namespace: dict = {}
    exec(reader, namespace)
    path = tmp_path / "settings.toml"
    path.write_bytes(body)
    warning = namespace["read"](path)[1]
    assert warning.startswith(f"Ignored {what} in {path}: {why}"), warning
    assert warning.count(";") >= 1 and warning.endswith(".")
