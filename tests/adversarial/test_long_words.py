"""A refusal echoes what was typed, and a very long word came back whole: a 5,000-character word
as a command, an action, an option, a choice, a help topic, a check, a status, a project or a
release was printed in full by every refusal (issue 21's "hostile input in the typo itself"). Every
refusal the CLI says passes console/cli/output.py `bounded_words`, text and --json."""

from __future__ import annotations

import json
import re

import pytest

from console.cli.cli import main

WORD = "w" * 4000 + "END"
ARGVS = [[WORD], ["approvals", WORD], ["envs", "list", "--state", WORD], ["approvals", "list", f"--{WORD}"],
         ["help", WORD], ["doctor", "--check", WORD], ["approvals", "list", "--status", WORD],
         ["approvals", "show", WORD], ["approvals", "list", "--project", WORD], ["upgrade", "--to", WORD],
         ["envs", "show", WORD], ["profiles", "list", WORD], ["approvals", "list", "--view", WORD]]


@pytest.mark.parametrize("argv", ARGVS, ids=lambda a: " ".join(w if len(w) < 20 else "WORD" for w in a))
@pytest.mark.parametrize("as_json", [False, True])
def test_a_very_long_word_is_echoed_shortened(demo_copy, capsys, argv, as_json):
    code = main(["--db", str(demo_copy()), *argv] + (["--json"] if as_json else []))
    out, err = capsys.readouterr()
    said = out if as_json else err
    assert code in (1, 2, 3), (code, said[:300])
    if as_json:
        json.loads(out)
    assert len(said) < 2500, said[:300]  # on main: the whole word, 4,003 characters and more
    assert WORD not in said and "w" * 300 not in said and "…" in said, said[:300]
    if "END" not in said:  # shortened where it was said (console/text.py one_line), not by bounded_words
        return
    assert re.search(r"…\(4,0\d\d characters\)…", said), said[:300]  # (counted with its quotes)
