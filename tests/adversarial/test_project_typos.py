"""A project name typed wrong gets "did you mean" wherever a project is typed (issue 21 item 7's
class, one step from the command words): `approvals list --project atlas-ap` said only "No project
'atlas-ap'". Every command that takes a project (console/services/resolve.py `resolve_project`, and
`PROJECT:N` in console/services/profiles.py) is given every demo project's name and id mangled as
fingers do; the refusal names the project meant, and stays one sanitised sentence."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.cli import main

# Every way to name a project on the command line; {} is the typed project.
COMMANDS = [
    ["approvals", "list", "--project", "{}"],
    ["approvals", "watch", "--project", "{}"],
    ["audit", "--project", "{}"],
    ["envs", "list", "--project", "{}"],
    ["profiles", "list", "{}"],
    ["profiles", "show", "{}:1"],
    ["profiles", "activate", "{}", "1", "--reason", "typo"],
]


def _mangle(word: str, how: int, at: int) -> str:
    at %= max(1, len(word) - 1)
    if how == 0:  # a letter dropped
        return word[:at] + word[at + 1:]
    if how == 1 and len(word) > 2:  # two neighbours swapped
        return word[:at] + word[at + 1] + word[at] + word[at + 2:]
    if how == 2:  # the shift key
        return word.upper()
    return word[:-2]  # not finished


@pytest.fixture
def projects(demo_copy):
    db = demo_copy()
    conn = sqlite3.connect(db)
    rows = conn.execute("SELECT id, name FROM projects").fetchall()
    conn.close()
    return db, rows


def test_every_project_typo_on_every_command_names_the_project_meant(projects, capsys):
    db, rows = projects
    labels = {label for row in rows for label in row}

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.sampled_from(COMMANDS), st.sampled_from(rows), st.booleans(), st.integers(0, 3), st.integers(0, 40),
           st.booleans())
    def run(command, row, by_name, how, at, as_json):
        meant = row[1] if by_name else row[0]
        typed = _mangle(meant, how, at)
        if typed in labels or len(typed) < 3 or not typed.isprintable():
            return  # names another project, or too little to go on
        argv = ["--db", str(db), *[word.replace("{}", typed) for word in command]] + (["--json"] if as_json else [])
        code = main(argv)
        out, err = capsys.readouterr()
        said = json.loads(out)["error"] + " " + (json.loads(out)["hint"] or "") if as_json else err
        assert code in (1, 2), (argv, code, out, err)
        assert "Did you mean" in said, (argv, said)
        suggested = said.split("Did you mean", 1)[1].split("?", 1)[0]
        assert row[0] in suggested or row[1] in suggested, (argv, said)
        assert "Traceback" not in err and "unexpected" not in said
        checked.append(argv)

    checked: list = []
    run()
    assert len(checked) >= 20, checked  # the typos that name nothing else were most of them


@pytest.mark.parametrize("command, saved, typed", [
    (["approvals", "list"], "pending-mine", "pending-mne"), (["approvals", "list"], "pending-mine", "pendng-mine"),
    (["envs", "list"], "ready-envs", "redy-envs"), (["envs", "list"], "ready-envs", "ready"),
])
def test_a_saved_view_typed_wrong_names_the_view_meant(demo_copy, tmp_path, monkeypatch, capsys, command, saved, typed):
    """`--view NAME` is typed too: on main "No saved view 'pending-mne' (...)" without the near one."""
    from console.services import views

    monkeypatch.setenv("ARCHON_CONSOLE_VIEWS", str(tmp_path / "views.toml"))
    views.save(saved, views.parse("approvals" if command[0] == "approvals" else "envs",
                                  "status=pending" if command[0] == "approvals" else "state=ready"))
    views.save("other-view", views.parse("approvals", "kind=git_push"))
    code = main(["--db", str(demo_copy()), *command, "--view", typed])
    err = capsys.readouterr().err
    assert code == 2 and f"Did you mean {saved}?" in err, err
