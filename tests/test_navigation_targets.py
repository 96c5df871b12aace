"""`navigation.resolve_target` (issue 21 item 7): whatever was typed and whatever the projects are
called, a `:` command's target is one of three answers, and what it opens names a real project."""

from __future__ import annotations

import sqlite3
import types

from hypothesis import HealthCheck, given, settings, strategies as st

from console.services.navigation import resolve_target

NAMES = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=12)


def _handle(tmp_path, projects):
    path = tmp_path / "nav.db"
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    conn.execute("DROP TABLE IF EXISTS projects")
    conn.execute("CREATE TABLE projects (id TEXT PRIMARY KEY, name TEXT, deletion_started_at TEXT)")
    conn.executemany("INSERT OR IGNORE INTO projects (id, name) VALUES (?, ?)", projects)
    conn.commit()
    return types.SimpleNamespace(conn=conn)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(NAMES, NAMES), max_size=8), NAMES, st.sampled_from(["project", "approvals", "envs"]))
def test_every_answer_opens_a_real_project_or_says_why(tmp_path, projects, typed, screen):
    handle = _handle(tmp_path, projects)
    try:
        ids = {r[0] for r in handle.conn.execute("SELECT id FROM projects")}
        target = resolve_target(handle, screen, typed)
        answers = [target.argument is not None, bool(target.choices), target.refusal is not None]
        assert sum(answers) == 1, target
        if target.argument is not None and target.argument != typed:
            assert target.argument in ids  # a prefix or containing match: opened by its id
        for _label, value in target.choices:
            assert value in ids
        assert len({value for _, value in target.choices}) == len(target.choices)
        if target.refusal is not None:
            assert "\n" not in target.refusal
    finally:
        handle.conn.close()


def test_prefix_candidates_and_did_you_mean(tmp_path):
    handle = _handle(tmp_path, [("prj-a", "atlas-api"), ("prj-b", "atlas-batch"), ("prj-c", "checkout")])
    assert resolve_target(handle, "project", "check").argument == "prj-c"
    assert [v for _, v in resolve_target(handle, "project", "atlas").choices] == ["prj-a", "prj-b"]
    refused = resolve_target(handle, "project", "chekout").refusal
    assert "Did you mean :project checkout?" in refused
    assert resolve_target(handle, "project", "checkout").argument == "checkout"  # exact: as typed
