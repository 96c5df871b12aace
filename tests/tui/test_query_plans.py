"""Every query the TUI runs at start and on a page move is an index seek, never a full scan.

The statements are captured as SQLite runs them (the trace callback receives them with their
values bound) on the session's own connection, while Pilot starts the app and pages through the
approval queue, the environments and the projects; each captured SELECT is then planned again
with `EXPLAIN QUERY PLAN` on the same demo database. A full scan is a plan step that reads a
stored table or index from end to end: `SCAN <table>` (with or without `USING [COVERING] INDEX`,
since a SCAN step has no search constraint). A `SCAN` of a CTE, a subquery result, a constant row
or a table-valued function is not: those are built from the steps planned inside them, which are
checked themselves.
"""

from __future__ import annotations

import re
import shutil
import sqlite3

import pytest

from console.cli.cli import Context
from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.projects import OverviewScreen
from tests.tui.conftest import NOW_TEXT
from tests.tui.pilot import ready, settle

pytestmark = pytest.mark.slow

_STEP = re.compile(r"^SCAN (?P<name>\S+)(?P<rest>.*)$")
_BUILT = re.compile(r"^(?:CO-ROUTINE|MATERIALIZE) (?P<name>.+)$")


# Full scans that stay, each with why: the console never creates an index in archon's database
# (README: "What the console writes into archon's database"), and these read every row of a
# small table by design. Keyed by the scanned table and a pattern of the (whitespace-folded) SQL.
ALLOWED_SCANS: list[tuple[str, str, str]] = [
    ("sqlite_master", r"FROM sqlite_master\b",
     "schema detection reads SQLite's own catalogue, which has no index; once per open"),
    ("projects", r"^SELECT id, name, deletion_started_at FROM projects ORDER BY id$",
     "the queue needs every project, one (project, status) partition each (approval_queue._projects); "
     "one row per project"),
    ("projects", r"^SELECT (\"[^\"]+\"(, )?)+ FROM projects ORDER BY name, id$",
     "the overview lists every project by name; archon has no index on projects(name); one row per project"),
    ("p", r"FROM projects AS p CROSS JOIN execution_profile_revisions AS r",
     "every project's active revision: a walk of projects, each revision found by seek"),
    ("p", r"FROM projects AS p CROSS JOIN approval_requests AS r ON r\.project_id = p\.id AND r\.status = 'pending'",
     "the window title's pending count (services/watch.pending_count): a walk of projects, each "
     "project's pending requests counted by seek"),
    ("execution_environments", r"^SELECT project_id, lifecycle_state, count\(\*\) AS n FROM execution_environments "
     r"GROUP BY project_id, lifecycle_state",
     "the overview's environment counts by project and state: a count of every environment has no seek"),
    ("execution_environments", r"^SELECT count\(\*\) FROM execution_environments e$",
     "the environment list's exact total (environment_pages.count_environments): no seek counts every row"),
    ("e", r"FROM execution_environments e ORDER BY e\.id ASC LIMIT \d+$",
     "the first page of the unfiltered list: the primary-key index read from its start, stopped by "
     "LIMIT after one page; SQLite calls a walk from the start a SCAN"),
]


def allowed(detail: str, sql: str) -> bool:
    name = _STEP.match(detail).group("name")
    folded = " ".join(sql.split())
    return any(name == table and re.search(pattern, folded) for table, pattern, _ in ALLOWED_SCANS)


def full_scans(conn: sqlite3.Connection, sql: str) -> list[str]:
    """The plan steps of `sql` that read a stored table or index from end to end."""
    plan = [row[3] for row in conn.execute("EXPLAIN QUERY PLAN " + sql)]
    built = {m.group("name") for detail in plan if (m := _BUILT.match(detail))}
    scans = []
    for detail in plan:
        m = _STEP.match(detail)
        if m is None:
            continue
        name, rest = m.group("name"), m.group("rest")
        if name == "CONSTANT" or name in built or name.startswith("(") or "VIRTUAL TABLE" in rest:
            continue
        scans.append(detail)
    return scans


def _is_query(sql: str) -> bool:
    head = sql.lstrip().split(None, 1)[0].upper() if sql.strip() else ""
    return head in ("SELECT", "WITH", "VALUES")


@pytest.fixture
def traced(monkeypatch):
    """Every statement the app's connection runs, from the moment it is opened."""
    statements: list[str] = []
    opened = Context.open

    def open_traced(self, *args, **kwargs):
        handle = opened(self, *args, **kwargs)
        handle.conn.set_trace_callback(statements.append)
        return handle

    monkeypatch.setattr(Context, "open", open_traced)
    return statements


async def _page(pilot, app, screen_cls) -> None:
    await ready(pilot, app, screen_cls)
    for key in ("pagedown", "pagedown", "pagedown", "pagedown", "end", "pageup", "home"):
        await pilot.press(key)
        await ready(pilot, app, screen_cls)
    await settle(pilot, app)  # a page move's read-ahead runs in a worker


@pytest.fixture(scope="module")
def paged_demo(tmp_path_factory):
    """Large enough that a page move reads: a few hundred pending requests and environments."""
    from console.demo.writer import generate

    path = tmp_path_factory.mktemp("plans") / "archon.db"
    generate(path, requests=3000, environments=400, seed=7, now=NOW_TEXT, overwrite=True, wal=False)
    return path


@pytest.mark.parametrize("start", [None, "envs"])
async def test_start_and_page_moves_never_scan_a_table(paged_demo, tmp_path, make_app, traced, start):
    path = tmp_path / "archon.db"
    shutil.copyfile(paged_demo, path)
    app = make_app(path, start=start)
    async with app.run_test(size=(120, 40)) as pilot:
        if start is None:  # the pending check chose the queue
            await _page(pilot, app, ApprovalsScreen)
        screens = {"envs": EnvironmentsScreen, "projects": OverviewScreen, "approvals": ApprovalsScreen}
        for name in ("envs", "projects", "approvals") if start else ("envs", "projects"):
            if not isinstance(app.screen, screens[name]):
                app.navigate(name)
            await _page(pilot, app, screens[name])
        await app.workers.wait_for_complete()

    queries = list(dict.fromkeys(sql for sql in traced if _is_query(sql)))
    assert queries, "no query was captured"
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        found = []
        for sql in queries:
            for detail in full_scans(conn, sql):
                if not allowed(detail, sql):
                    found.append(f"{detail}\n    in: {' '.join(sql.split())}")
    finally:
        conn.close()
    assert not found, "full scans:\n" + "\n".join(found)


def test_the_scan_rule_tells_seeks_from_scans(demo_db):
    """The rule itself, on plans whose shape is known."""
    conn = sqlite3.connect(f"file:{demo_db()}?mode=ro", uri=True)
    try:
        assert full_scans(conn, "SELECT 1 FROM approval_requests WHERE status = 'pending' LIMIT 1")  # index walk
        assert full_scans(conn, "SELECT count(*) FROM approval_request_events WHERE reason = 'x'")  # table
        assert not full_scans(conn, "SELECT * FROM approval_requests WHERE id = 'x'")
        assert not full_scans(conn, "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 3) "
                                    "SELECT * FROM n")  # SCAN of a CTE
        assert not full_scans(conn, "SELECT * FROM (SELECT id FROM projects WHERE id = 'p' LIMIT 1)")
    finally:
        conn.close()
