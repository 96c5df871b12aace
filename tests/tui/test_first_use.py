"""What a first-time user met (issue 10, defects 1-11), each driven through Pilot at 120x40 and 80x24."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.environments import EnvironmentsScreen
from tests.tui.pilot import db, field, notifications, ready, record_notifications, select, table, type_text, wait_until
from widgets.lazy_table import LazyTable

pytestmark = pytest.mark.slow

SIZES = [(120, 40), (80, 24)]
size_ids = pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")


def assert_cursor_row_on_screen(app) -> None:
    """The highlighted row is drawn, whole, inside the table: the screen's widget at that row's
    first cell is the table itself (not its scrollbar, not the detail pane, not off-screen)."""
    t: LazyTable = table(app)
    y = t.content_region.y + 1 + (t.cursor - int(t.scroll_offset.y))
    assert t.content_region.y < y < t.content_region.bottom, (t.cursor, t.scroll_offset.y, t.size)
    widget, _ = app.screen.get_widget_at(t.content_region.x + 1, y)
    assert widget is t, f"row {t.cursor} is under {type(widget).__name__}"


# ---------------------------------------------------------------- 1. the selected row is on screen
@size_ids
async def test_selected_row_visible_after_end_pagedown_filter_and_refresh(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await pilot.press("s", "s", "s")  # every status: 200 rows, more than any screen holds
        await wait_until(pilot, lambda: app.screen.filters.statuses is None and table(app).total == 200
                         and table(app).visible_loaded)
        await pilot.press("end")
        await wait_until(pilot, lambda: table(app).cursor == table(app).total - 1 and table(app).visible_loaded)
        await pilot.pause()
        assert_cursor_row_on_screen(app)
        await pilot.press("home", "pagedown")
        await pilot.pause()
        assert_cursor_row_on_screen(app)
        await pilot.press("pagedown", "pagedown")
        await pilot.pause()
        assert_cursor_row_on_screen(app)
        await pilot.press("s")  # denied: another list, then to its end
        await wait_until(pilot, lambda: app.screen.filters.statuses == ("denied",) and table(app).visible_loaded)
        await pilot.press("end")
        await wait_until(pilot, lambda: table(app).cursor == table(app).total - 1 and table(app).visible_loaded)
        await pilot.pause()
        assert_cursor_row_on_screen(app)
        # live refresh (what the poll does when another process commits)
        key = table(app).cursor_key
        app.screen.refresh_data()
        await wait_until(pilot, lambda: table(app).cursor_key == key and table(app).visible_loaded)
        await pilot.pause()
        assert_cursor_row_on_screen(app)


@size_ids
async def test_selected_environment_visible_after_end(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await pilot.press("end")
        await wait_until(pilot, lambda: table(app).cursor == table(app).total - 1 and table(app).visible_loaded)
        await wait_until(pilot, lambda: field(app.screen.detail, "id") == table(app).cursor_key)
        await pilot.pause()
        assert_cursor_row_on_screen(app)


def screen_lines(app) -> list[str]:
    """The text the terminal shows, line by line (the top screen, with what is under a modal)."""
    return [strip.text for strip in app.screen._compositor.render_strips()]


# ---------------------------------------------------------------- 2. typed text is drawn
@size_ids
async def test_search_and_project_inputs_show_what_is_typed(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        for key, text in (("slash", "billing"), ("p", "atlas")):
            await pilot.press(key)
            await type_text(pilot, text)
            await wait_until(pilot, lambda: any(text in line for line in screen_lines(app)), what=f"{text!r} drawn")
            box = app.screen.query_one("#filter-input")
            assert box.has_focus and box.value == text
            assert box.content_region.height >= 1
            assert any(text in line for line in screen_lines(app)), f"{text!r} is not drawn"
            await pilot.press("escape")
        await pilot.press("colon")
        await type_text(pilot, "envs")
        await wait_until(pilot, lambda: any("envs" in line for line in screen_lines(app)), what="'envs' drawn")


def notes(app) -> list[str]:
    return [str(n.message) for n in notifications(app)]


# ---------------------------------------------------------------- 3. an unknown project in `p`
@size_ids
async def test_unknown_project_is_refused_and_the_screen_keeps_working(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        total = table(app).total
        await pilot.press("p")
        await type_text(pilot, "nosuchproject")
        await pilot.press("enter")
        await wait_until(pilot, lambda: any("No project 'nosuchproject'" in n for n in notes(app)),
                         what="the refusal")
        assert app.screen.filters.project is None
        assert "nosuchproject" not in str(app.screen.query_one("#filters").render())
        assert table(app).total == total
        await pilot.press("s")  # approved
        await wait_until(pilot, lambda: table(app).visible_loaded and table(app).cursor_row.status == "approved")
        assert table(app).total == db(path, "SELECT count(*) FROM approval_requests WHERE status='approved'")[0][0]
        await pilot.press("k")  # git_push
        await wait_until(pilot, lambda: table(app).visible_loaded and table(app).cursor_row.action_kind == "git_push")
        await pilot.press("down")
        await wait_until(pilot, lambda: field(app.screen.detail, "id") == table(app).cursor_key,
                         what="the detail pane follows the cursor")
        # a known project by name is applied
        await pilot.press("p")
        await type_text(pilot, "atlas-api")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen.filters.project == "atlas-api" and table(app).visible_loaded)
        assert {table(app).row_at(i).project_id for i in range(table(app).total)} == {"prj-atlas-api"}


# ---------------------------------------------------------------- 4. the detail pane follows the list
@size_ids
async def test_detail_pane_never_shows_a_request_the_filter_removed(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, table(app).row_at(3).id)
        shown = app.screen.detail.id
        await pilot.press("slash")
        await type_text(pilot, "nothing-has-this-text")
        await pilot.press("enter")
        await wait_until(pilot, lambda: table(app).total == 0)
        await wait_until(pilot, lambda: "No request matches" in str(app.screen.query_one("#detail-head").render()),
                         what="the detail pane emptied")
        assert app.screen.detail is None
        assert shown not in str(app.screen.query_one("#detail-head").render())
        assert "No request matches" in str(app.screen.query_one("#detail-head").render())
        assert app.screen.check_action("approve", ()) is None  # nothing to act on
        await pilot.press("slash")
        await type_text(pilot, "billing")
        await pilot.press("enter")
        await wait_until(pilot, lambda: table(app).total and table(app).visible_loaded)
        await wait_until(pilot, lambda: field(app.screen.detail, "id") == table(app).cursor_key)
        assert "billing" in (app.screen.detail.project_id + app.screen.detail.action_json).lower()


# ---------------------------------------------------------------- 5. revoke says `invalidated`
@size_ids
async def test_revoke_dialog_and_glossary_say_invalidated(demo_db, make_app, size):
    from console.tui.screens.help import GLOSSARY
    from console.tui.screens.reason import ReasonModal

    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await pilot.press("s")  # approved
        await wait_until(pilot, lambda: app.screen.filters.statuses == ("approved",) and table(app).visible_loaded)
        await select(pilot, app, "apr-00000193")
        await pilot.press("r")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal))
        said = app.screen.summary.plain
        assert "becomes invalidated" in said and "expired" not in said.split("\n\n", 1)[1]
        await type_text(pilot, "wrong remote")
        await pilot.press("enter")
        await wait_until(pilot, lambda: db(path, "SELECT status FROM approval_requests WHERE id='apr-00000193'")[0][0]
                         == "invalidated", what="invalidated in the database")
    words = dict(row for _, rows in GLOSSARY for row in rows)
    assert "revoked" in words["invalidated"] and "revoked" not in words["expired"]


# ---------------------------------------------------------------- 6. who holds a claim, how old, STALE
@size_ids
async def test_claim_column_shows_holder_age_and_stale_on_screen(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path, start="envs")
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await wait_until(pilot, lambda: any("env-0005" in line for line in screen_lines(app)), what="the rows drawn")
        lines = {line.split()[0]: line for line in screen_lines(app) if line.strip().startswith("env-")}
        assert "reset · …orker:13 · 3h STALE" in lines["env-0005"]  # claimed at 09:00, now 12:00
        assert "stop · archon-worker:42 · 2m" in lines["env-0004"] and "STALE" not in lines["env-0004"]
        if "env-0012" in lines:  # below the fold at 80x24
            assert "stop · alice · 14m" in lines["env-0012"]
    assert db(path, "SELECT operation_claim_id FROM execution_environments WHERE id='env-0005'") == [("archon-worker:13",)]


# ---------------------------------------------------------------- 7, 8, 11. the upgrade screen at rest
@size_ids
async def test_upgrade_screen_idle_shows_the_plan_and_steps_not_a_bar(demo_db, make_app, monkeypatch, size):
    from textual.widgets import ProgressBar, RichLog

    from console.tui.screens.typed import TypedConfirmModal
    from console.tui.screens.upgrade import UpgradeScreen, snapshot_label

    monkeypatch.setattr("console.db.snapshot.free_bytes", lambda path: 42 * 1024**3)
    path = demo_db(release="1.8.22", requests=20)
    app = make_app(path, start="upgrade")
    async with app.run_test(size=size) as pilot:
        await wait_until(pilot, lambda: isinstance(app.screen, UpgradeScreen) and app.screen.plan is not None)
        await wait_until(pilot, lambda: any("001-archon-1.8.20-baseline" in line for line in screen_lines(app)),
                         what="the step table drawn")
        screen = app.screen
        assert not screen.query_one(ProgressBar).display and not screen.query_one(RichLog).display
        shown = "\n".join(screen_lines(app))
        assert "001-archon-1.8.20-baseline" in shown  # the step table is on screen
        assert "(archon 1.8.22 shape)" not in shown  # said once, not twice
        label = snapshot_label(screen.plan)
        assert label == f"{screen.plan.snapshot_path.rsplit('/', 1)[1]} (next to the database)"
        assert label in " ".join(shown.split())  # (it may wrap at 80 columns)
        await pilot.press("U")
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal))
        assert label in app.screen.summary.plain.replace("\n", " ")  # the same words in the dialog
        await type_text(pilot, "archon.db")
        await pilot.press("enter")
        await wait_until(pilot, lambda: screen.running or screen.query_one(RichLog).display, what="the run")
        assert screen.query_one(RichLog).display
        await wait_until(pilot, lambda: app.screen is screen and not screen.running and screen.plan is not None
                         and screen.plan.up_to_date, timeout=30, what="upgrade finished")
        assert not screen.query_one(ProgressBar).display
    assert db(path, "SELECT count(*) FROM _sqlite_migrations")[0][0] == 29


# ---------------------------------------------------------------- 7, 11. the footer keeps what matters
@size_ids
async def test_footer_always_shows_help_and_quit_and_back_only_where_it_acts(demo_db, make_app, size):
    from console.tui.screens.doctor import DoctorScreen
    from console.tui.screens.projects import OverviewScreen
    from console.tui.screens.profiles import ProfilesScreen

    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await wait_until(pilot, lambda: screen_lines(app)[-1].strip(), what="the footer")
        footer = screen_lines(app)[-1]
        for key in ("? Help", "/ Search", "q Quit", "a Approve"):
            assert key in footer, (key, footer)
        assert "esc Back" not in footer  # the first screen: nothing to go back to
        await pilot.press("question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen"
                         and any("Quit" in line for line in screen_lines(app)[:-1]), what="the help drawn")
        quit_rows = [line for line in screen_lines(app)[:-1] if "Quit" in line]
        assert quit_rows and all("q, ^c, ^q" in line for line in quit_rows), screen_lines(app)  # the footer's q first; ctrl+c quits too
        await pilot.press("escape")
        for command, screen_cls in (("envs", EnvironmentsScreen), ("projects", OverviewScreen),
                                    ("project atlas-api", ProfilesScreen), ("doctor", DoctorScreen)):
            app.navigate(*command.split(" ", 1))
            await wait_until(pilot, lambda: isinstance(app.screen, screen_cls) and "Back" in screen_lines(app)[-1],
                             what=f"the footer of {command}")
            footer = screen_lines(app)[-1]
            for key in ("? Help", "q Quit", "esc Back"):
                assert key in footer, (command, key, footer)


# ---------------------------------------------------------------- 9. a greyed key says why
@size_ids
async def test_a_key_that_cannot_act_says_why(demo_db, make_app, size):
    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        overdue = table(app).row_at(0)
        assert overdue.overdue and overdue.status == "pending"
        await wait_until(pilot, lambda: field(app.screen.detail, "id") == overdue.id)
        why = app.screen.unavailable()["approve"]
        await pilot.press("a")
        await wait_until(pilot, lambda: f"Approve: {why}" in notes(app), what="the reason")
        assert isinstance(app.screen, ApprovalsScreen)  # no dialog
        app.navigate("envs")
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0004")  # claimed two minutes ago: not stale
        await pilot.press("t")
        await wait_until(pilot, lambda: any(n.startswith("Take over: ") and "not stale" in n for n in notes(app)))
    assert db(path, "SELECT status FROM approval_requests WHERE id=?", overdue.id) == [("pending",)]
    assert db(path, "SELECT operation_claim_id FROM execution_environments WHERE id='env-0004'") == [("archon-worker:42",)]


@size_ids
async def test_in_inspect_the_reason_is_the_support_snapshot(demo_db, make_app, size):
    from console.tui.app import ArchonConsole
    from console.models.support import SupportInfo
    from tests.tui.conftest import make_ctx

    make_app  # sets the test's keymap and clipboard environment
    path = demo_db()
    approved = db(path, "SELECT count(*) FROM approval_requests WHERE status='approved'")
    support = SupportInfo(Path("/srv/archon/archon.db"), path, datetime(2025, 6, 1, 11, 59, tzinfo=timezone.utc))
    app = ArchonConsole(make_ctx(path, read_only=True), support, start="approvals", poll_seconds=3600)
    record_notifications(app)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await pilot.press("a")
        await wait_until(pilot, lambda: "Approve: support snapshot: read-only" in notes(app), what="the reason")
        assert not any("--read-only" in n for n in notes(app))
    assert db(path, "SELECT count(*) FROM approval_requests WHERE status='approved'") == approved


# ---------------------------------------------------------------- 11. the smaller ones
@size_ids
async def test_smaller_ones_on_screen(demo_db, make_app, size):
    from console.tui.screens.command_line import CommandLine
    from console.tui.screens.doctor import DoctorScreen
    from console.tui.screens.projects import OverviewScreen

    path = demo_db()
    app = make_app(path)
    async with app.run_test(size=size, notifications=True) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        # a short id column: the request ids are on screen, inside the table, at 120x40 and 80x24
        t = table(app)
        first = t.row_at(0).id
        line = screen_lines(app)[t.content_region.y + 1]
        assert first in line[t.content_region.x:t.content_region.right]
        # `:` names every screen, and so does the hint for a word that is none
        await pilot.press("colon")
        await wait_until(pilot, lambda: isinstance(app.screen, CommandLine))
        assert "doctor" in app.screen.query_one("#command-input").placeholder
        await type_text(pilot, "nosuch")
        await pilot.press("enter")
        await wait_until(pilot, lambda: any("No screen called 'nosuch'" in n for n in notes(app)))
        assert any(":doctor" in n for n in notes(app) if "No screen called" in n)
        # one environment, not "1 environments"
        app.navigate("envs")
        await ready(pilot, app, EnvironmentsScreen)
        await pilot.press("f")  # state: queued (one in the demo)
        await wait_until(pilot, lambda: app.screen.state == "queued" and table(app).total == 1)
        await wait_until(pilot, lambda: "1 environment" in str(app.screen.query_one("#filters").render()))
        assert "1 environments" not in str(app.screen.query_one("#filters").render())
        # projects being deleted are marked in words; pending reads one way
        app.navigate("projects")
        await ready(pilot, app, OverviewScreen)
        await wait_until(pilot, lambda: any("legacy-mo" in line for line in screen_lines(app)), what="the projects drawn")
        lines = screen_lines(app)
        assert any("legacy-mo" in line and "[being deleted]" in line for line in lines)
        assert any("16 (4 <1h, 1 overdue)" in line for line in lines), lines  # was "16 (4 <1h) 1 overdue"
        # doctor: plural counts, the release said once, whole ids
        app.navigate("doctor")
        await wait_until(pilot, lambda: isinstance(app.screen, DoctorScreen) and app.screen.report is not None,
                         timeout=15)
        await wait_until(pilot, lambda: "0 errors" in str(app.screen.query_one("#doctor-summary").render())
                         and all(f.id in "\n".join(screen_lines(app)) for f in app.screen.findings[:5]),
                         what="the findings drawn, whole")
        summary = str(app.screen.query_one("#doctor-summary").render())
        assert "0 errors" in summary and "0 error " not in summary
        release = app.screen.report.finding("schema.release")
        assert release.found.startswith("archon 1.10.0 shape;"), release.found
        shown = "\n".join(screen_lines(app))
        for finding in app.screen.findings[:5]:
            assert finding.id in shown, finding.id  # not cut short


def test_pending_column_reads_one_way():
    from console.models.projects import ProjectSummary
    from console.tui.screens.projects import _pending

    def project(pending_approvals, pending_expiring_within_hour=None, pending_overdue=None):
        return ProjectSummary({"id": "p"}, None, None, pending_approvals, pending_expiring_within_hour, pending_overdue)

    row = project(pending_approvals=12, pending_expiring_within_hour=1, pending_overdue=2)
    assert _pending(row).plain == "12 (1 <1h, 2 overdue)"
    assert _pending(project(pending_approvals=7, pending_overdue=7)).plain == "7 (7 overdue)"
    assert _pending(project(pending_approvals=3, pending_expiring_within_hour=1)).plain == "3 (1 <1h)"


async def test_unknown_keymap_ids_are_named(demo_db, make_app, tmp_path, monkeypatch):
    keymap = tmp_path / "keymap.toml"
    keymap.write_text('[keys]\n"approvals.aprove" = "A"\n"approvals.deny" = "D"\n"nav.bakc" = "b"\n')
    path = demo_db()
    monkeypatch.setenv("ARCHON_CONSOLE_KEYMAP", str(keymap))
    app = make_app(path)
    async with app.run_test(size=(80, 24), notifications=True) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        warning = next(n for n in notes(app) if "approvals.aprove" in n)
        assert "nav.bakc" in warning and "approvals.deny" not in warning
        assert app.screen.active_bindings.get("D") is not None  # the known id was applied


# ---------------------------------------------------------------- 10. NO_COLOR
def styled_segments(app):
    for y, strip in enumerate(app.screen._compositor.render_strips()):
        for segment in strip:
            if segment.style is not None and segment.text.strip():
                yield y, segment


def assert_monochrome(app) -> None:
    for y, segment in styled_segments(app):
        style = segment.style
        assert style.color is None or style.color.is_default, (y, segment)
        assert style.bgcolor is None or style.bgcolor.is_default, (y, segment)
        assert not style.bold and not style.dim, (y, segment)


@size_ids
async def test_no_color_is_monochrome_and_says_in_words_what_colour_said(demo_db, make_app, monkeypatch, size):
    monkeypatch.setenv("NO_COLOR", "1")
    path = demo_db()
    app = make_app(path, read_only=True)
    async with app.run_test(size=size) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")  # expires in 5 minutes
        await wait_until(pilot, lambda: "(Approve)" in screen_lines(app)[-1], what="the greyed footer")
        assert_monochrome(app)
        t = table(app)
        lines = screen_lines(app)
        cursor_y = t.content_region.y + 1 + t.cursor - int(t.scroll_offset.y)
        assert "! 5m00s" in lines[cursor_y]  # within the hour: a symbol, not only yellow
        assert any(y == cursor_y and s.style.reverse for y, s in styled_segments(app))  # the cursor
        assert "expired" in lines[t.content_region.y + 1]  # overdue: a word
        app.navigate("envs")
        await ready(pilot, app, EnvironmentsScreen)
        await wait_until(pilot, lambda: any("STALE" in line for line in screen_lines(app)), what="the rows drawn")
        assert_monochrome(app)
        assert any("STALE" in line for line in screen_lines(app))


async def test_colour_is_still_colour_without_no_color(demo_db, make_app, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    app = make_app(demo_db())
    async with app.run_test(size=(80, 24)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        assert any(s.style.color is not None and not s.style.color.is_default for _, s in styled_segments(app))
