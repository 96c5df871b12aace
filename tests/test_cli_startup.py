"""What the two commands a shell runs most import (issue 11 item 5): start-up is most of their time.

Each command runs in a fresh interpreter that reports `sys.modules` at exit; no timing is asserted
(the figures are in the README's performance table), only that nothing a command does not need
is imported: the TUI's textual and rich, sqlite-utils, and the standard modules only some paths use
(tempfile and shutil's private copies, socket for claim ids, humanize for relative times).
"""

from __future__ import annotations

import sys
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cli_modules import modules_of
from tests.conftest import connect, pin_real_clock
from tests.approvals_helpers import live_request

NEVER = ("textual", "rich", "sqlite_utils", "tempfile", "socket")


@pytest.fixture
def db(db, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01 09:30:00")
    return db


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize("argv, also_never", [
    (["approvals", "list"], ("uuid",)),
    (["approvals", "list", "--json"], ("uuid", "humanize")),
])
def test_approvals_list_imports_only_what_it_needs(db, tmp_path, argv, also_never):
    loaded = top_level(modules_of(tmp_path, *argv, "--db", str(db)))
    assert "console" in loaded
    assert not loaded & {*NEVER, *also_never}, sorted(loaded & {*NEVER, *also_never})


def test_a_single_approve_imports_only_what_it_needs(db, tmp_path):
    live = live_request(db)
    loaded = top_level(modules_of(tmp_path, "approvals", "approve", live, "--as", "dave", "--db", str(db)))
    conn = connect(db, rows=False)
    try:  # the approval really was written (its event id made without uuid: console/services/base.py)
        assert conn.execute("SELECT status FROM approval_requests WHERE id = ?", (live,)).fetchone() == ("approved",)
    finally:
        conn.close()
    assert not loaded & {*NEVER, "humanize", "uuid"}, sorted(loaded & {*NEVER, "humanize", "uuid"})


def test_the_leftover_check_answers_from_names_alone(tmp_path):
    """Every start scans the temp directory once by name; the full check runs only on a match."""
    from console.db.files import leftovers_possible, temp_prefix

    assert not leftovers_possible(tmp_path)
    (tmp_path / "archon-console-notes.txt").write_text("a user's file with a similar name")
    (tmp_path / "unrelated").mkdir()
    assert leftovers_possible(tmp_path)  # a superset of our names: the full check then decides
    (tmp_path / "archon-console-notes.txt").unlink()
    assert not leftovers_possible(tmp_path)
    (tmp_path / f"{temp_prefix('ro', hidden=False)}abcd").mkdir()
    assert leftovers_possible(tmp_path)
    assert leftovers_possible(tmp_path / "missing")  # cannot tell: the full check decides


def test_a_named_action_builds_only_its_own_parser_and_anything_else_builds_them_all(capsys):
    """`approvals list` builds the list parser alone (argparse's cost is per argument); the family's
    help and an unknown action still see every action."""
    from console.cli.cli import main
    from console.cli.parser import build_parser
    from console.cli.commands.approvals import ACTIONS
    from console.cli.reference import subcommands

    def actions(argv):
        return sorted(subcommands(subcommands(build_parser(argv)).choices["approvals"]).choices)

    assert actions(["approvals", "list", "--db", "x.db"]) == ["list"]
    assert actions(["--db", "approve", "approvals", "--as", "list", "approve", "apr-1"]) == ["approve"]
    assert actions(["approvals"]) == actions(["approvals", "lst"]) == actions(None) == sorted(ACTIONS)
    from console.cli.commands.envs import ACTIONS as ENVS_ACTIONS

    def envs_actions(argv):
        return sorted(subcommands(subcommands(build_parser(argv)).choices["envs"]).choices)

    assert envs_actions(["envs", "list", "--db", "x.db"]) == ["list"]
    assert envs_actions(["envs"]) == envs_actions(None) == sorted(ENVS_ACTIONS)
    assert main(["approvals", "lst"]) == 2
    assert "choose from 'list', 'show', 'approve', 'deny', 'revoke', 'expire'" in capsys.readouterr().err


@given(st.one_of(
    st.timedeltas(min_value=timedelta(days=-3), max_value=timedelta(days=3)),
    st.timedeltas(min_value=timedelta(days=-800), max_value=timedelta(days=800)),
    st.timedeltas(),
))
@settings(max_examples=500, deadline=None)
def test_time_in_words_is_humanizes_naturaldelta(delta):
    """console/clock.py spells durations itself (importing humanize cost every command that prints a
    time a twentieth of its start); the words stay humanize's, for every duration."""
    import humanize

    from console.clock import duration

    seconds = abs(delta).total_seconds()
    assert duration(seconds) == humanize.naturaldelta(timedelta(seconds=seconds))
