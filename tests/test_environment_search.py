"""`/` on the environments list is a predicate of the keyset query (issue 21, item 6): pages read
by id, never every row; the project is found by id or name; any text, however hostile, is a bound
parameter that finds exactly what the Python reference finds."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from console.services.environment_queries import list_environments
from tests.conftest import add_project
from tests.environments_support import add_env, handle, raw
from tests.tui.conftest import NOW

NAMES = {"p1": "P1", "p2": "needle-project", "p3": "Émile's [bold]x[/] 'q'"}


def _database(make_db):
    path = make_db(projects=["p1"])
    conn = raw(path)
    add_project(conn, "p2", name=NAMES["p2"])
    add_project(conn, "p3", name=NAMES["p3"])
    for i in range(9):
        add_env(conn, f"env-{i:02d}", ("ready", "stopped", "failed")[i % 3], project_id=f"p{i % 3 + 1}")
    conn.close()
    return path


def _every_page(h, limit: int, **filters) -> list:
    rows, after = [], None
    while True:
        page = list_environments(h, now=NOW, after=after, limit=limit, **filters)
        assert len(page.rows) <= limit
        rows += page.rows
        if page.next_after is None:
            return rows
        after = page.next_after


def test_a_search_is_read_page_by_page_and_rows_carry_the_project_name(make_db):
    path = _database(make_db)
    with handle(path, read_only=True) as h:
        rows = _every_page(h, 2, search="NEEDLE")
        assert [r.id for r in rows] == ["env-01", "env-04", "env-07"]
        assert {r.project_name for r in rows} == {"needle-project"}
        assert [r.id for r in _every_page(h, 2, project="needle-project")] == ["env-01", "env-04", "env-07"]
        assert [r.id for r in _every_page(h, 100, project="p2", search="failed")] == []
        assert _every_page(h, 100, project="nobody-has-this") == []


def _reference(env) -> str:
    """What the search looks in, folded as SQLite's lower() folds (ASCII only)."""
    text = " ".join(str(v or "") for v in (env["id"], env["project_id"], NAMES[env["project_id"]],
                                          env["state"], "host"))
    return "".join(c.lower() if c.isascii() else c for c in text)


def test_any_search_text_finds_what_the_reference_finds(make_db):
    path = _database(make_db)
    envs = [{"id": f"env-{i:02d}", "project_id": f"p{i % 3 + 1}", "state": ("ready", "stopped", "failed")[i % 3]}
            for i in range(9)]

    @settings(max_examples=80, deadline=None)
    @given(needle=st.one_of(st.text(max_size=6),
                            st.sampled_from(["É", "é", "mile's", "[bold]", "'q'", "%", "_", "ENV-0", " p3 "])))
    def search(needle: str) -> None:
        folded = "".join(c.lower() if c.isascii() else c for c in needle.strip())
        want = [e["id"] for e in envs if folded in _reference(e)]
        with handle(path, read_only=True) as h:
            assert [r.id for r in _every_page(h, 4, search=needle)] == want, needle

    search()
