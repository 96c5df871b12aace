"""An approval or environment id typed wrong gets "did you mean" (issue 21 item 7's class, one step
from the command words): `approvals show 00000188` (the `apr-` left out), `apr-0000188` (a zero
dropped) or `envs show env-3` said only "No approval request" / "There is no environment". Every
command that takes an id is given real ids mangled as fingers do; the refusal names the id meant
(console/services/resolve.py `near_ids`, found through the primary key only)."""

from __future__ import annotations

import json
import sqlite3

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.cli import main

APPROVALS = [["approvals", "show", "{}"], ["approvals", "show", "{}", "--as-of", "2026-01-01"],
             ["approvals", "approve", "{}"], ["approvals", "deny", "{}", "--reason", "typo"],
             ["approvals", "revoke", "{}", "--reason", "typo"]]
ENVIRONMENTS = [["envs", "show", "{}"], ["envs", "claim", "{}", "--op", "stop"], ["envs", "release", "{}"],
                ["envs", "complete", "{}"]]


def _mangle(word: str, how: int) -> str:
    head, _, number = word.partition("-")
    if how == 0:
        return number  # the prefix left out
    if how == 1:
        return f"{head}-{number.lstrip('0')}"  # the zeros left out
    if how == 2:
        return word[:-1] + "x" + word[-1]  # a stray letter
    return f"{head}-{number[1:]}"  # one zero dropped


def test_every_id_typo_on_every_command_names_the_id_meant(demo_copy, capsys):
    db = demo_copy()
    conn = sqlite3.connect(db)
    ids = {"approval": [r[0] for r in conn.execute("SELECT id FROM approval_requests ORDER BY id")],
           "environment": [r[0] for r in conn.execute("SELECT id FROM execution_environments ORDER BY id")]}
    conn.close()
    before = db.read_bytes()
    checked: list = []

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.sampled_from(["approval", "environment"]), st.data(), st.integers(0, 3), st.booleans())
    def run(kind, data, how, as_json):
        meant = data.draw(st.sampled_from(ids[kind]))
        typed = _mangle(meant, how)
        if typed in ids[kind] or not typed:
            return
        command = data.draw(st.sampled_from(APPROVALS if kind == "approval" else ENVIRONMENTS))
        argv = ["--db", str(db), *[w.replace("{}", typed) for w in command]] + (["--json"] if as_json else [])
        code = main(argv)
        out, err = capsys.readouterr()
        said = out if as_json else err + out
        if as_json:
            value = json.loads(out)
            said = json.dumps(value)
        assert code == 1, (argv, out, err)
        assert "Did you mean" in said, (argv, said)
        assert meant in said.split("Did you mean", 1)[1].split("?", 1)[0], (argv, said)
        checked.append(argv)

    run()
    assert len(checked) >= 20
    assert db.read_bytes() == before  # every typo refused: nothing written
