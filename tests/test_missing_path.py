"""A database path that names nothing (issue 21, item 12): `doctor bad/missing.db` said "Pass --db PATH"
although a path was passed. Every way a path is given (a command's own PATH, --db, $ARCHON_DB_PATH,
the default place) is refused with the path and what is wrong with it, and told how to name another
only where that is the way it was named (console/db/paths.py `no_database`).
"""

from __future__ import annotations

import json

import pytest

from console.cli.cli import main


def _positional(tmp_path, path):
    return {
        "doctor PATH": ["doctor", str(path)],
        "inspect PATH": ["inspect", str(path), "--keep-snapshot", str(tmp_path / "kept"), "--no-tui"],
        "--db": ["--db", str(path), "approvals", "list"],
        "--db upgrade --plan": ["--db", str(path), "upgrade", "--plan"],
    }



def _wrong(tmp_path):
    """Three ways a path names nothing, with what the refusal must say is wrong."""
    (tmp_path / "a-file").write_text("not a directory")
    return {
        "no such directory": (tmp_path / "bad" / "missing.db", f"there is no directory {tmp_path / 'bad'}"),
        "no such file": (tmp_path / "missing.db", f"there is no file missing.db in {tmp_path}"),
        "a file for a directory": (tmp_path / "a-file" / "x.db", f"{tmp_path / 'a-file'} is a file, not a directory"),
    }


@pytest.mark.parametrize("wrong", ["no such directory", "no such file", "a file for a directory"])
@pytest.mark.parametrize("how", ["doctor PATH", "inspect PATH", "--db", "--db upgrade --plan"])
def test_a_path_given_is_named_with_what_is_wrong(tmp_path, monkeypatch, capsys, how, wrong):
    monkeypatch.delenv("ARCHON_DB_PATH", raising=False)
    path, what = _wrong(tmp_path)[wrong]
    assert main(_positional(tmp_path, path)[how]) == 3
    err = capsys.readouterr().err
    first, hint = err.strip().splitlines()
    assert str(path) in first or str(path.resolve()) in first, first
    assert what in first or what.replace(str(tmp_path), str(tmp_path.resolve())) in first, first
    assert "--db" not in err and "ARCHON_DB_PATH" not in err  # a path was given: nothing to pass
    assert hint == "Check the path given. The console never creates a database."


def test_json_carries_the_same_sentence(tmp_path, capsys):
    path = tmp_path / "bad" / "missing.db"
    assert main(["--json", "doctor", str(path)]) == 3
    answer = json.loads(capsys.readouterr().out)
    assert answer["error"] == f"No database at {path}: there is no directory {tmp_path / 'bad'}."
    assert "--db" not in answer["hint"]


def test_a_path_not_given_says_how_to_give_one(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("ARCHON_DB_PATH", raising=False)
    assert main(["approvals", "list"]) == 3
    err = capsys.readouterr().err
    assert f"there is no directory {tmp_path / '.archon'}" in err
    assert "That is the default place; pass --db PATH or set ARCHON_DB_PATH." in err
    monkeypatch.setenv("ARCHON_DB_PATH", str(tmp_path / "env.db"))
    assert main(["approvals", "list"]) == 3
    err = capsys.readouterr().err
    assert f"there is no file env.db in {tmp_path}" in err
    assert "ARCHON_DB_PATH names it" in err
