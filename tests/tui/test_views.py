"""Saved views: `:approvals key=value ...`, `:save NAME`, `:view NAME`, the palette, and `--view` in the CLI."""

from __future__ import annotations

import json
import os

import pytest

from console.services import views
from console.cli.cli import main
from console.errors import UsageError
from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.projects import OverviewScreen
from tests.tui.pilot import notifications, ready, settle, table, wait_until


@pytest.fixture
def views_file(tmp_path, monkeypatch):
    path = tmp_path / "config" / "views.toml"
    monkeypatch.setenv("ARCHON_CONSOLE_VIEWS", str(path))
    monkeypatch.setenv("ARCHON_CONSOLE_CONFIG", str(tmp_path / "none.toml"))
    return path


def test_expressions_parse_check_and_round_trip():
    view = views.parse("approvals", "status=pending project=prj-atlas-api kind=git_push expiring<60")
    assert view.expression() == "status=pending project=prj-atlas-api kind=git_push expiring=60".replace(
        "expiring=", "expiring<")
    filters = views.approval_filters(view)
    assert (filters.statuses, filters.project, filters.kind, filters.expiring_within_minutes) == (
        ("pending",), "prj-atlas-api", "git_push", 60.0)
    assert views.approvals_view(filters) == view
    assert views.parse("envs", "state=ready claimed=yes").get("claimed") == "yes"
    for screen, bad in (("approvals", "colour=red"), ("approvals", "expiring=60"), ("approvals", "kind=rm_rf"),
                        ("approvals", "status=maybe"), ("envs", "state=melting"), ("envs", "claimed=perhaps"),
                        ("approvals", "expiring<soon"), ("projects", "x=1")):
        with pytest.raises(UsageError):
            views.parse(screen, bad)
    assert views.is_expression("status=pending") and not views.is_expression("prj-atlas-api")


def test_the_file_keeps_views_atomically_and_skips_broken_ones(views_file):
    views.save("mine", views.parse("approvals", "status=pending kind=git_push"))
    views.save("ready", views.parse("envs", "state=ready"))
    loaded, warning = views.load()
    assert warning is None and set(loaded) == {"mine", "ready"}
    assert loaded["mine"].expression() == "status=pending kind=git_push"
    assert not [p for p in views_file.parent.iterdir() if p.name.startswith(".archon-console-")]
    views_file.write_text(views_file.read_text() + '\n[views.broken]\nscreen = "approvals"\nfilters = "x=y"\n')
    loaded, warning = views.load()
    assert set(loaded) == {"mine", "ready"} and "broken" in warning
    with pytest.raises(UsageError):
        views.save("../escape", views.View("approvals"))
    with pytest.raises(UsageError, match="No saved view"):
        views.find("nope")


@pytest.mark.slow
async def test_typed_filters_save_and_reopen(demo_db, make_app, views_file):
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        app.navigate("approvals", "status=pending kind=custom_check")
        await ready(pilot, app, ApprovalsScreen)
        t = table(app)
        assert t.total and all(t.row_at(i).action_kind == "custom_check" for i in range(t.total))
        kinds_total = t.total
        app.navigate("save", "checks")
        await wait_until(pilot, lambda: views_file.exists(), what="the views file", timeout=20)
        assert views.find("checks").expression() == "status=pending kind=custom_check"
        app.action_back()
        await ready(pilot, app, OverviewScreen)
        app.navigate("view", "checks")
        await ready(pilot, app, ApprovalsScreen)
        assert table(app).total == kinds_total and app.screen.filters.kind == "custom_check"


@pytest.mark.slow
async def test_envs_views_and_a_vanished_project(demo_db, make_app, views_file):
    views.save("gone", views.parse("approvals", "status=pending project=prj-deleted-long-ago"))
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        app.navigate("view", "gone")
        await ready(pilot, app, ApprovalsScreen)
        assert app.screen.filters.project is None
        assert any("not in this database" in n.message for n in notifications(app))
        app.navigate("envs", "state=ready claimed=no")
        await ready(pilot, app, EnvironmentsScreen)
        assert app.screen.state == "ready"
        app.navigate("save", "ready-envs")
        await wait_until(pilot, lambda: "ready-envs" in views.load()[0], what="the saved envs view", timeout=20)
        assert views.find("ready-envs").expression() == "state=ready"
        app.navigate("approvals", "colour=red")
        await settle(pilot, app)
        assert isinstance(app.screen, EnvironmentsScreen)  # a wrong expression opens nothing
        assert any("has no filter 'colour'" in n.message for n in notifications(app))


async def test_palette_lists_saved_views(demo_db, make_app, views_file):
    from console.tui.palette import NavigationCommands

    views.save("mine", views.parse("approvals", "kind=git_push"))
    app = make_app(demo_db(), start="projects")
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, OverviewScreen)
        provider = NavigationCommands(app.screen)
        await provider.startup()
        texts = [text for text, _, _ in provider._commands()]
        assert ":view mine" in texts


def test_cli_list_uses_the_same_view(demo_db, views_file, capsys, monkeypatch):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", "2025-06-01 12:00:00")
    path = demo_db()
    views.save("checks", views.parse("approvals", "status=all kind=custom_check"))
    code = main(["--json", "approvals", "list", "--db", str(path), "--view", "checks", "--limit", "500"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and rows and {r["action_kind"] for r in rows} == {"custom_check"}
    assert len({r["status"] for r in rows}) > 1  # status=all from the view
    code = main(["--json", "approvals", "list", "--db", str(path), "--view", "checks", "--status", "pending"])
    assert {r["status"] for r in json.loads(capsys.readouterr().out)} == {"pending"}  # the option wins
    views.save("gone", views.parse("approvals", "project=prj-nowhere"))
    code = main(["approvals", "list", "--db", str(path), "--view", "gone"])
    assert code == 0 and "not in this database" in capsys.readouterr().err
    code = main(["approvals", "list", "--db", str(path), "--view", "missing"])
    assert code == 2 and "No saved view" in capsys.readouterr().err
    views.save("ready", views.parse("envs", "state=ready"))
    code = main(["--json", "envs", "list", "--db", str(path), "--view", "ready"])
    rows = json.loads(capsys.readouterr().out)
    assert code == 0 and {r["lifecycle_state"] for r in rows} <= {"ready"}
    assert os.path.exists(views_file)
