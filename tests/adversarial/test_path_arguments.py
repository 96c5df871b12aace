"""Every path a person types on the command line is said, when it cannot be used, in one sentence
about that path as typed (issue 21 item 12's class: a refusal that fits how the user got there).

`doctor '~nosuch/x.db'`, `inspect`, `restore`, `upgrade --snapshot-dir`, `doctor --bundle` and
`inspect --keep-snapshot` with a `~user` that names nobody ended in "unexpected RuntimeError: Could
not determine home directory" (exit 3), while `--db` and `--cursor` said it in one sentence; a
symlink loop given to `inspect` or `restore` did the same ("Symlink loop from ..."), and a dangling
link given to `inspect` was reported as its target, a path the user never typed. Now every path
argument is read by console/cli/options.py `user_path` (or console/db/paths.py itself), and
`inspect`/`restore` check the path as given before resolving it.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys

import pytest

from console.cli import reference
from console.cli.cli import main

NOBODY = "~nobody-of-this-test-xq/x"
PATH_METAVARS = {"PATH", "DIR", "FILE", "OUT.zip", "SNAPSHOT"}

# (command, option or positional dest) -> the argv that gives it NOBODY; DB is the demo database.
ARGV = {
    ("", "--db"): ["--db", NOBODY, "approvals", "list"],
    ("approvals watch", "--cursor"): ["approvals", "watch", "--db", "DB", "--cursor", NOBODY],
    ("demo", "path"): ["demo", NOBODY],
    ("doctor", "path"): ["doctor", NOBODY],
    ("doctor", "--bundle"): ["doctor", "DB", "--bundle", NOBODY],
    ("inspect", "path"): ["inspect", NOBODY, "--no-tui", "--keep-snapshot", "KEEP"],
    ("inspect", "--keep-snapshot"): ["inspect", "DB", "--no-tui", "--keep-snapshot", NOBODY],
    ("restore", "snapshot"): ["--db", "DB", "restore", NOBODY, "--plan"],
    ("upgrade", "--snapshot-dir"): ["--db", "DB", "upgrade", "--plan", "--snapshot-dir", NOBODY],
    ("serve", "--policy"): ["serve", "--stdio", "--policy", NOBODY],
}


def _path_arguments() -> set[tuple[str, str]]:
    """Every argument of the whole parser that takes a path (by its metavar), once per command (the
    global options count once, under the top level)."""
    full = reference.full_parser()
    found = set()
    for command in [reference.Command((), full, ""), *reference.walk(full)]:
        for action in command.parser._actions:
            if action.metavar in PATH_METAVARS and action.help != argparse.SUPPRESS:
                name = action.option_strings[0] if action.option_strings else action.dest
                found.add(("" if name == "--db" else command.name, name))
    return found


def test_every_path_argument_is_tried():
    """A new path argument without a line in ARGV fails here: it must be tried like the others."""
    assert _path_arguments() == set(ARGV)


@pytest.mark.parametrize("where", sorted(ARGV), ids=lambda w: f"{w[0] or 'global'} {w[1]}")
@pytest.mark.parametrize("as_json", [False, True])
def test_a_home_that_names_nobody_is_one_usage_sentence(demo_copy, tmp_path, capsys, where, as_json):
    db = demo_copy()
    argv = [{"DB": str(db), "KEEP": str(tmp_path / "kept")}.get(word, word) for word in ARGV[where]]
    code = main(argv + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    said = out if as_json else err
    assert code == 2, (argv, out, err)  # on main: 3, "unexpected RuntimeError" for most of them
    assert "starts with ~ but names no home directory" in said and "unexpected" not in said, said
    assert NOBODY in said


@pytest.mark.parametrize("where", sorted(ARGV), ids=lambda w: f"{w[0] or 'global'} {w[1]}")
@pytest.mark.parametrize("empty", ["", " "])
def test_an_empty_path_is_one_usage_sentence(demo_copy, tmp_path, where, empty):
    """An empty path (an unset shell variable) is refused as `--db ""` always was: on main `doctor ""`
    checked the --db database instead, `--cursor ""` kept no cursor, `--snapshot-dir ""` wrote beside the
    database, and `inspect ""`/`restore ""` said ". is a directory", a path nobody typed."""
    db = demo_copy()
    argv = [{"DB": str(db), "KEEP": str(tmp_path / "kept"), NOBODY: empty}.get(word, word) for word in ARGV[where]]
    before = sorted(p.name for p in tmp_path.iterdir())
    # A real process with a bound: on main `approvals watch --cursor ""` watched for ever without a cursor.
    proc = subprocess.run([sys.executable, "-m", "console", *argv], stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=60)
    code, err = proc.returncode, proc.stderr
    assert code == 2, (argv, err)
    assert err.startswith(f"archon-console: {where[1] if where[1].startswith('--') else where[1].upper()} "
                          "was given an empty path."), err
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # nothing written first


@pytest.fixture
def links(tmp_path):
    (tmp_path / "loop-a").symlink_to(tmp_path / "loop-b")
    (tmp_path / "loop-b").symlink_to(tmp_path / "loop-a")
    (tmp_path / "dangling.db").symlink_to(tmp_path / "nowhere.db")
    return tmp_path


@pytest.mark.parametrize("link, says", [("loop-a", "is a loop of symbolic links"),
                                        ("dangling.db", "is a symbolic link to nothing")])
@pytest.mark.parametrize("command", ["doctor", "inspect", "restore", "--db"])
def test_a_link_that_leads_nowhere_is_said_of_the_path_given(demo_copy, links, capsys, link, says, command):
    db = demo_copy()
    given = str(links / link)
    argv = {"doctor": ["doctor", given],
            "inspect": ["inspect", given, "--no-tui", "--keep-snapshot", str(links / "kept")],
            "restore": ["--db", str(db), "restore", given, "--plan"],
            "--db": ["--db", given, "approvals", "list"]}[command]
    code = main(argv)
    err = capsys.readouterr().err
    assert code == 3, err
    assert err.startswith(f"archon-console: {given} {says}"), err  # on main: inspect/restore crashed or named the target
    assert "unexpected" not in err and "nowhere.db" not in err
    assert not os.path.exists(links / "kept")  # nothing was copied first


def test_a_serve_policy_named_that_is_not_there_refuses_the_session(tmp_path):
    """`serve --policy PATH` (the admin's forced command) with a path that names nothing served as if
    the host had no rules: a typo in the path dropped `read_only = true` silently. Now the session is
    refused (exit 3) before the channel exists; only the default place may be absent."""
    missing = tmp_path / "serve-polcy.toml"
    env = {k: v for k, v in os.environ.items() if not k.startswith("SSH_")}
    proc = subprocess.run([sys.executable, "-m", "console", "serve", "--stdio", "--policy", str(missing)],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 3, proc.stderr  # on main: 0, a session served without the policy
    assert proc.stdout == ""
    assert f"The serve policy {missing} named by --policy does not exist" in proc.stderr


def _unusable(tmp_path, kind: str):
    path = tmp_path / f"{kind}.db"
    if kind == "directory":
        path.mkdir()
    elif kind == "empty":
        path.write_bytes(b"")
    elif kind == "not-sqlite":
        path.write_text("hello\n")
    elif kind == "fifo":
        os.mkfifo(path)
    elif kind == "loop":
        path.symlink_to(path)
    return path


@pytest.mark.parametrize("kind", ["directory", "empty", "not-sqlite", "fifo", "loop", "missing"])
@pytest.mark.parametrize("command", [["approvals", "list"], ["--read-only", "envs", "list"], ["doctor"]])
def test_a_database_the_user_did_not_type_says_where_it_came_from(tmp_path, monkeypatch, capsys, kind, command):
    """`ARCHON_DB_PATH=/tmp archon-console approvals list` said "/tmp is a directory, not a database
    file." and nothing about where /tmp came from (only a missing file said so). Every refusal of the
    database file now says it (console/db/paths.py `chosen_by`); a path typed with --db does not."""
    path = _unusable(tmp_path, kind)
    monkeypatch.setenv("ARCHON_DB_PATH", str(path))
    assert main(command) == 3
    err = capsys.readouterr().err
    assert err.startswith(f"archon-console: ") and str(path) in err, err
    assert "ARCHON_DB_PATH names it" in err, err  # on main: only for a missing file
    monkeypatch.setenv("ARCHON_DB_PATH", str(tmp_path / "another.db"))  # the path is told apart by where it is
    assert main(["--db", str(path), *command]) == 3
    assert "ARCHON_DB_PATH" not in capsys.readouterr().err


@pytest.mark.parametrize("variable, where", [("ARCHON_CONSOLE_VIEWS", "console.services.views:views_path"),
                                             ("ARCHON_CONSOLE_KEYMAP", "console.tui.keymap:keymap_path"),
                                             ("ARCHON_CONSOLE_CONFIG", "console.tui.attention:config_path")])
def test_a_settings_path_from_the_environment_with_a_home_of_nobody_is_one_sentence(monkeypatch, variable, where):
    """The console's own settings files named by the environment: `~nobody/...` stopped the console
    (and `--view`) with "unexpected RuntimeError: Could not determine home directory" on main."""
    import importlib

    from console.errors import UsageError

    module, function = where.split(":")
    monkeypatch.setenv(variable, NOBODY)
    with pytest.raises(UsageError) as refused:
        getattr(importlib.import_module(module), function)()
    assert refused.value.reason == f"{variable} {NOBODY!r} starts with ~ but names no home directory on this machine."
