"""What every command shares: global options anywhere, exit codes, no textual outside the TUI."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from console.cli.cli import main
from tests.conftest import pin_real_clock
from tests.approvals_helpers import events, live_request, status_of


@pytest.fixture
def db(db, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01 09:30:00")
    return db


@pytest.mark.parametrize("argv", [
    ["--db", "{db}", "--as", "dave", "--json", "approvals", "approve", "apr-1"],
    ["approvals", "--db", "{db}", "--as", "dave", "--json", "approve", "apr-1"],
    ["approvals", "approve", "apr-1", "--db", "{db}", "--as", "dave", "--json"],
    ["--json", "approvals", "approve", "--as", "dave", "apr-1", "--db", "{db}"],
])
def test_global_options_work_before_or_after_the_subcommand(db, capsys, argv):
    code = main([a.format(db=db) for a in argv])
    out = capsys.readouterr().out
    assert code == 0
    assert json.loads(out)[0]["state"] == "approved"
    assert events(db, "apr-1")[-1]["actor_reference"] == "dave"


def test_read_only_given_after_the_subcommand_is_honoured(db, capsys):
    assert main(["approvals", "approve", "apr-1", "--db", str(db), "--read-only"]) == 1
    assert status_of(db, "apr-1") == "pending"


def test_a_global_option_before_the_command_is_not_reset_by_the_subparser(db, capsys):
    assert main(["--read-only", "approvals", "approve", "apr-1", "--db", str(db)]) == 1
    assert status_of(db, "apr-1") == "pending"


@pytest.mark.parametrize("content", [None, b"", b"not a database at all, just text" * 10])
def test_unusable_database_exits_3_and_is_left_as_it_was(tmp_path, capsys, content):
    path = tmp_path / "broken.db"
    if content is not None:
        path.write_bytes(content)
    for argv in (["approvals", "list"], ["approvals", "approve", "x", "--as", "d"], ["projects", "list"]):
        assert main([*argv, "--db", str(path)]) == 3
        assert "Traceback" not in capsys.readouterr().err
    if content is None:
        assert not path.exists()
    else:
        assert path.read_bytes() == content


def test_sqlite_file_that_is_not_archon_exits_3(tmp_path, capsys):
    import sqlite3

    path = tmp_path / "other.db"
    sqlite3.connect(path).execute("CREATE TABLE t (x)").connection.close()
    assert main(["approvals", "list", "--db", str(path)]) == 3


def test_unknown_command_is_a_usage_error(capsys):
    assert main(["approvals", "frobnicate"]) == 2
    assert main(["--no-such-option", "projects", "list"]) == 2


def test_cli_commands_do_not_import_textual(db):
    live = live_request(db)
    script = (
        "import sys\n"
        "from console.cli.cli import main\n"
        f"codes = [main(['approvals', 'list', '--db', {str(db)!r}]), main(['projects', 'list', '--db', {str(db)!r}]),\n"
        f"         main(['approvals', 'approve', {live!r}, '--as', 'dave', '--db', {str(db)!r}])]\n"
        "assert codes == [0, 0, 0], codes\n"
        "loaded = sorted(m for m in sys.modules if m == 'textual' or m.startswith(('textual.', 'rich')))\n"
        "assert not loaded, loaded\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr


@pytest.mark.slow
def test_exit_codes_from_a_real_process(db):
    live = live_request(db)

    def code(*argv):
        return subprocess.run([sys.executable, "-m", "console", *argv, "--db", str(db)],
                              capture_output=True, text=True, timeout=60).returncode

    assert code("approvals", "approve", live, "--as", "dave") == 0
    assert code("approvals", "approve", live, "--as", "dave") == 0      # no-op repeat
    assert code("approvals", "deny", live, "--as", "erin", "--reason", "x") == 1
    assert code("approvals", "deny", live) == 2
    assert subprocess.run([sys.executable, "-m", "console", "approvals", "list", "--db", str(db) + ".missing"],
                          capture_output=True, timeout=60).returncode == 3
