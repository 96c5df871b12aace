"""The fleet console's screens over fixed hosts (tests/tui/fleet_helpers.py `FixedLink`): where a
decision is sent and with what, the host filter and search, an answer lost with the connection
read again, new requests on any host announced, doctor on demand, hostile host text shown as
data, and quitting closing the sessions. The same flows over the real client and servers are
tests/fleet/test_tui_flows.py."""

from __future__ import annotations

import pytest

from console.tui.fleet_monitor import Answer
from tests.tui.fleet_helpers import NOW_TEXT, FixedLink, HostConfig, request_row
from tests.tui.pilot import notifications, record_notifications, send_keys, type_text, wait_until
from widgets.safe_text import is_clean

pytestmark = pytest.mark.slow

HELLO = {"archon_release": "1.10.0", "actor": "alice", "actor_source": "forced_command", "read_only": False}


def two_hosts() -> FixedLink:
    return FixedLink({
        "eu1": ("ok", HELLO, [request_row("apr-1", "billing", "git_push", "2025-06-01 12:40:00", "dave",
                                          {"remote": "origin", "branch": "main"})]),
        "us2": ("ok", HELLO, [request_row("apr-1", "atlas", "custom_check", "2025-06-01 12:10:00", "erin",
                                          {"command": "make test"})]),
    })


@pytest.fixture
def start(monkeypatch, tmp_path):
    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW_TEXT)
    monkeypatch.setenv("ARCHON_CONSOLE_KEYMAP", str(tmp_path / "no-keymap.toml"))

    def build(link: FixedLink):
        from console.tui.fleet_app import FleetConsole

        app = FleetConsole([HostConfig(name) for name in link.hosts], link, poll_seconds=3600)
        record_notifications(app)
        return app
    return build


def keys(app):
    return [(r.host, r.id) for r in app.screen.rows]


def said(app, text: str) -> bool:
    return any(text in n.message for n in notifications(app))


async def loaded(pilot, app, count: int) -> None:
    await wait_until(pilot, lambda: hasattr(app.screen, "rows") and len(app.screen.rows) == count
                     and app.screen.selected is not None, what=f"{count} rows")


async def test_deny_goes_to_the_rows_host_with_its_reason(start):
    link = two_hosts()
    app = start(link)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 2)
        assert keys(app) == [("us2", "apr-1"), ("eu1", "apr-1")]  # one id on two hosts: two rows, by expiry
        await send_keys(pilot, "down", "d")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ReasonModal", what="the deny dialog")
        await send_keys(pilot, "ctrl+s")  # a deny needs a reason: nothing is sent without one
        await type_text(pilot, "not today")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: said(app, "eu1: Approved apr-1."), what="the host's answer")
        sent = [(h, m, p) for h, m, p in link.calls if m in ("approvals.approve", "approvals.deny")]
        assert sent == [("eu1", "approvals.deny", {"ids": ["apr-1"], "reason": "not today"})]


async def test_an_answer_lost_with_the_connection_is_read_again(start):
    link = two_hosts()
    link.answer_next("eu1", "approvals.approve", Answer("eu1", "outcome_unknown", "the connection ended"))
    app = start(link)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 2)
        await send_keys(pilot, "down", "a")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ReasonModal", what="the approve dialog")
        link.shows[("eu1", "apr-1")] = {"status": "approved", "events": [  # the write landed, by this session's
            {"to_status": "approved", "actor_classification": "human", "actor_reference": "alice"}]}  # actor
        await send_keys(pilot, "ctrl+s")
        await wait_until(pilot, lambda: said(app, "outcome unknown"), what="outcome unknown")
        await wait_until(pilot, lambda: said(app, "apr-1 on eu1 is approved (read again"), what="the re-read")
        assert [c for c in link.calls if c[1] == "approvals.approve"] == [
            ("eu1", "approvals.approve", {"ids": ["apr-1"]})]  # sent once, never repeated blindly


async def test_host_filter_search_and_the_command_line(start):
    app = start(two_hosts())
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 2)
        await send_keys(pilot, "h")
        await wait_until(pilot, lambda: keys(app) == [("eu1", "apr-1")], what="eu1 only")
        await send_keys(pilot, "h")
        await wait_until(pilot, lambda: keys(app) == [("us2", "apr-1")], what="us2 only")
        await send_keys(pilot, "h")
        await wait_until(pilot, lambda: len(keys(app)) == 2, what="every host again")
        await send_keys(pilot, "colon")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetCommandLine", what="the command line")
        await type_text(pilot, "host eu1")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: keys(app) == [("eu1", "apr-1")], what=":host eu1")
        app.command("host nowhere")
        await wait_until(pilot, lambda: said(app, "No host called 'nowhere'"), what="the refusal")
        app.command("host")
        await wait_until(pilot, lambda: len(keys(app)) == 2, what=":host alone: every host")
        await send_keys(pilot, "slash")
        await type_text(pilot, "make test")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: keys(app) == [("us2", "apr-1")], what="the search")


async def test_slash_filters_as_you_type_enter_keeps_escape_restores(start):
    """Issue 21, item 10: the fleet queue's `/` is the lists' filter box (widgets/filter_box.py)."""
    from widgets.lazy_table import LazyTable

    app = start(two_hosts())
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 2)
        await send_keys(pilot, "slash")
        await type_text(pilot, "make")  # no Enter
        await wait_until(pilot, lambda: keys(app) == [("us2", "apr-1")], what="filtered while typing")
        await send_keys(pilot, "escape")
        await wait_until(pilot, lambda: len(keys(app)) == 2 and app.screen.search is None, what="the filter restored")
        assert type(app.screen).__name__ == "FleetQueueScreen" and app.screen.query_one(LazyTable).has_focus
        await send_keys(pilot, "slash")
        await type_text(pilot, "dave")
        await wait_until(pilot, lambda: keys(app) == [("eu1", "apr-1")], what="filtered while typing")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: app.screen.query_one(LazyTable).has_focus, what="back in the table")
        assert app.screen.search == "dave" and keys(app) == [("eu1", "apr-1")]


async def test_new_requests_on_any_host_are_announced(start):
    link = two_hosts()
    app = start(link)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 2)
        link.hosts["us2"][2].append(request_row("apr-9", "atlas", "git_push", "2025-06-01 13:00:00", "erin", {}))
        app.monitor.refresh("us2")
        await wait_until(pilot, lambda: said(app, "New request on us2: apr-9"), what="the announcement")
        assert len(app.screen.rows) == 3


async def test_doctor_on_demand_and_quitting_closes_the_sessions(start):
    link = two_hosts()
    app = start(link)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 2)
        await send_keys(pilot, "H")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetHostsScreen", what="the hosts screen")
        await send_keys(pilot, "d")
        await wait_until(pilot, lambda: app.status["eu1"].doctor == "1 warning", what="doctor's summary")
        await send_keys(pilot, "down", "enter")  # Enter on us2: the queue, filtered to that host
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetQueueScreen" and keys(app) == [
            ("us2", "apr-1")], what="us2's requests")
        await send_keys(pilot, "H")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetHostsScreen", what="the hosts screen")
        await send_keys(pilot, "escape")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetQueueScreen", what="back to the queue")
    assert link.closed


async def test_host_text_is_data(start):
    hostile = "[@click=app.quit]x\x1b[2J\u202e"
    link = FixedLink({"eu1": ("ok", dict(HELLO, actor=hostile, archon_release=hostile), [
        request_row("apr-" + hostile, hostile, hostile, "2025-06-01 12:40:00", hostile, {"command": hostile})])})
    app = start(link)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 1)
        screen = app.screen
        row = screen.rows[0]
        from widgets.lazy_table import LazyTable

        cells = [column.cell(row).plain for column in screen.query_one(LazyTable).columns]
        assert all(is_clean(cell, allow_newlines=False) for cell in cells), cells
        head = str(screen.query_one("#detail-head").render())
        assert "\x1b" not in head and "\u202e" not in head
        await send_keys(pilot, "H")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetHostsScreen", what="the hosts screen")
        hosts_cells = [column.cell(app.status["eu1"]).plain for column in app.screen.query_one(LazyTable).columns]
        assert all(is_clean(cell, allow_newlines=False) for cell in hosts_cells), hosts_cells
        assert app.is_running  # the markup was not an action


async def test_help_lists_the_fleet_keys_and_why_one_is_greyed(start):
    link = FixedLink({"ro": ("ok", dict(HELLO, read_only=True, read_only_reason="the host's policy sets read_only"),
                             [request_row("apr-1", "billing", "git_push", "2025-06-01 12:40:00", "dave", {})])})
    app = start(link)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 1)
        await wait_until(pilot, lambda: app.screen.check_action("approve", ()) is None, what="approve greyed")
        queue = app.screen
        await send_keys(pilot, "question_mark")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "HelpScreen", what="help")
        assert queue.unavailable()["approve"] == "read-only on the host (the host's policy sets read_only)"


async def test_read_only_console_sends_nothing_to_any_host(monkeypatch, tmp_path):
    from console.tui.fleet_app import FleetConsole

    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW_TEXT)
    link = two_hosts()
    app = FleetConsole([HostConfig(name) for name in link.hosts], link, poll_seconds=3600, read_only=True)
    record_notifications(app)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 2)
        assert app.screen.unavailable()["approve"].startswith("read-only mode (--read-only)")
        app.monitor.decide("eu1", "approve", "apr-1", None).result(30)  # even asked directly, nothing is sent
        assert not [c for c in link.calls if c[1] == "approvals.approve"]
        await wait_until(pilot, lambda: said(app, "Nothing was sent to eu1: read-only mode"), what="the refusal")


async def test_whatever_escapes_ends_the_fleet_console_in_one_sentence(start, monkeypatch):
    monkeypatch.delenv("ARCHON_CONSOLE_DEBUG", raising=False)
    link = two_hosts()
    app = start(link)
    with pytest.raises(ZeroDivisionError):
        async with app.run_test(size=(80, 24)) as pilot:
            await loaded(pilot, app, 2)
            app.call_later(lambda: 1 / 0)
            await wait_until(pilot, lambda: app.return_code == 3, what="the exit")
    assert app.return_code == 3 and link.closed  # the sessions were closed on the way out


async def test_the_hosts_reading_greys_a_decision_and_asks_for_a_typed_confirmation(start):
    """The highlighted request is read on its host for the actor the host resolved: a decision the
    host would refuse is greyed with its words; one whose four-eyes cannot be checked is confirmed
    by typing, and the approval is sent with requester_unknown_ok."""
    link = two_hosts()
    link.shows[("us2", "apr-1")] = {"options": {"approve": "you requested it (four-eyes rule)", "deny": None}}
    link.shows[("eu1", "apr-1")] = {"confirm": {"approve": "the requester is not named"}}
    app = start(link)
    async with app.run_test(size=(120, 40)) as pilot:
        await loaded(pilot, app, 2)
        await wait_until(pilot, lambda: app.screen.unavailable().get("approve") == "you requested it (four-eyes rule)",
                         what="us2's reason")
        assert app.screen.check_action("deny", ()) is True
        await send_keys(pilot, "a")
        await wait_until(pilot, lambda: said(app, "you requested it"), what="why greyed")
        await send_keys(pilot, "down")
        await wait_until(pilot, lambda: app.screen.detail is not None and app.screen.detail[0] == ("eu1", "apr-1"),
                         what="eu1's reading")
        await send_keys(pilot, "a")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "TypedConfirmModal", what="the typed dialog")
        await type_text(pilot, "not the requester")
        await send_keys(pilot, "enter")  # on to the optional reason
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: any(c[1] == "approvals.approve" for c in link.calls), what="the approval")
        assert [c for c in link.calls if c[1] == "approvals.approve"] == [
            ("eu1", "approvals.approve", {"ids": ["apr-1"], "requester_unknown_ok": True})]
