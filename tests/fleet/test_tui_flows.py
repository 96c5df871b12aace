"""The fleet console (console/tui/fleet_app.py) driven through Pilot over the real client, the ssh
stand-in (tests/fleet/fake_ssh.py) and real `python -m console serve --stdio` processes, each on
its own SQLite file: the merged queue shows every host's rows with their host, a decision lands on
its own host's file only, a host that cannot be reached is down with its sentence while the others
still show, the console starts with every host down or no hosts file, and a read-only host's
write keys are greyed."""

from __future__ import annotations

import argparse
import time
from datetime import datetime, timedelta, timezone

import pytest

from tests.approvals_helpers import add_project, add_request, dump, events, status_of
from tests.tui.pilot import notifications, record_notifications, send_keys, wait_until

pytestmark = pytest.mark.slow

SOON = datetime.now(timezone.utc) + timedelta(hours=2)  # decisions are stamped with the real clock


def host_db(make_db, name: str, *ids: str, minutes: int = 0):
    """A host's database with pending requests `ids`, expiring `minutes` apart (the first soonest)."""
    def fill(conn):
        add_project(conn, f"{name}-p", f"{name}-project")
        for i, request_id in enumerate(ids):
            add_request(conn, request_id, f"{name}-p", expires_at=SOON + timedelta(minutes=minutes * i))
    return make_db(fill=fill, name=f"{name}.db")


@pytest.fixture
def fleet(write_hosts, monkeypatch, tmp_path):
    """fleet({"eu1": {"db": path}, ...}) -> the fleet console over those hosts, not yet running."""
    monkeypatch.setenv("ARCHON_CONSOLE_KEYMAP", str(tmp_path / "no-keymap.toml"))

    def build(hosts: dict[str, dict], **kwargs):
        from console.tui.tui import fleet_app

        tables = {name: {"ssh": name, "remote": f"archon-console --busy-timeout 5", **table}
                  for name, table in hosts.items()}
        for name, table in tables.items():
            if "db" in table:
                table["db"] = str(table["db"])
        loaded = write_hosts(tables)
        monkeypatch.setenv("ARCHON_CONSOLE_HOSTS", str(loaded.path))
        app = fleet_app(argparse.Namespace(fleet_hosts=None, fleet_groups=None, fleet_all=True, parallel=8),
                        poll_seconds=3600, **kwargs)
        record_notifications(app)
        return app

    return build


def rows(app):
    return [(r.host, r.id, r.stale) for r in getattr(app.screen, "rows", [])]


async def cursor_to(pilot, app, host: str, request_id: str) -> None:
    from widgets.lazy_table import LazyTable

    table = app.screen.query_one(LazyTable)
    deadline = time.monotonic() + 60  # bounds a failing test only
    while table.cursor_key != (host, request_id):  # steps again if a refresh moved the rows meanwhile
        assert time.monotonic() < deadline, f"timed out waiting for the cursor on {host}:{request_id}"
        keys = [(r.host, r.id) for r in app.screen.rows]
        if (host, request_id) in keys and table.cursor is not None:
            step = keys.index((host, request_id)) - table.cursor
            if step:
                await send_keys(pilot, *(["down"] * step if step > 0 else ["up"] * -step))
        await pilot.pause(0.02)


async def test_merged_queue_and_a_decision_lands_on_its_own_host(fleet, make_db):
    eu1 = host_db(make_db, "eu1", "apr-e1", "apr-shared", minutes=30)
    us2 = host_db(make_db, "us2", "apr-u1", "apr-shared", minutes=20)
    app = fleet({"eu1": {"db": eu1}, "us2": {"db": us2}})
    before = dump(eu1)
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: len(rows(app)) == 4, what="both hosts' rows")
        assert sorted(rows(app)) == [("eu1", "apr-e1", False), ("eu1", "apr-shared", False),
                                     ("us2", "apr-shared", False), ("us2", "apr-u1", False)]
        assert [r[:2] for r in rows(app)][:2] == [("eu1", "apr-e1"), ("us2", "apr-u1")]  # by expiry across hosts
        await cursor_to(pilot, app, "us2", "apr-shared")
        await send_keys(pilot, "a")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ReasonModal", what="the approve dialog")
        await send_keys(pilot, "ctrl+s")
        await wait_until(pilot, lambda: status_of(us2, "apr-shared") == "approved", what="the approval on us2")
        await wait_until(pilot, lambda: ("us2", "apr-shared", False) not in rows(app), what="the row refreshed")
        assert dump(eu1) == before  # the same id on the other host is untouched: nothing was written there
        # The actor is the one the host resolved (here its login, as its hello said), not one the console sent.
        assert events(us2, "apr-shared")[-1]["actor_reference"] == app.status["us2"].actor
        assert app.status["us2"].actor_source == "login"
        assert any(n.message.startswith("us2: ") and "apr-shared" in n.message for n in notifications(app))


async def test_a_host_down_says_why_and_the_others_still_show(fleet, make_db):
    eu1 = host_db(make_db, "eu1", "apr-e1")
    app = fleet({"eu1": {"db": eu1}, "gone": {"remote": "archon-console-not-installed"}})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: rows(app) == [("eu1", "apr-e1", False)], what="eu1's row")
        await wait_until(pilot, lambda: app.status["gone"].phase == "down", what="the host down")
        await send_keys(pilot, "H")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetHostsScreen", what="the hosts screen")
        from console.tui.screens.fleet_hosts import state_label

        label = state_label(app.status["gone"])
        assert label.startswith("down: ") and "archon-console" in label  # the sentence names the remedy


async def test_the_console_starts_with_every_host_down(fleet):
    app = fleet({"a": {"remote": "archon-console-not-installed"}, "b": {"remote": "no-such-command"}})
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: all(s.phase == "down" for s in app.status.values()), what="both down")
        await wait_until(pilot, lambda: "No host answered" in app.screen.query_one("LazyTable").empty_message,
                         what="the sentence")


async def test_the_console_starts_without_a_hosts_file(monkeypatch, tmp_path):
    from console.tui.tui import fleet_app

    monkeypatch.setenv("ARCHON_CONSOLE_HOSTS", str(tmp_path / "absent.toml"))
    app = fleet_app(argparse.Namespace(fleet_hosts=None, fleet_groups=None, fleet_all=True, parallel=8))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until(pilot, lambda: "There is no hosts file" in app.screen.query_one("LazyTable").empty_message,
                         what="the sentence")


async def test_a_read_only_host_greys_approve_and_sends_nothing(fleet, make_db):
    ro = host_db(make_db, "ro", "apr-r1")
    app = fleet({"ro": {"db": ro, "read_only": True}})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: rows(app) == [("ro", "apr-r1", False)], what="the row")
        await wait_until(pilot, lambda: app.screen.check_action("approve", ()) is None, what="approve greyed")
        await send_keys(pilot, "a")
        await wait_until(pilot, lambda: any("read-only" in n.message for n in notifications(app)), what="why")
        assert type(app.screen).__name__ == "FleetQueueScreen"  # no dialog opened
        assert status_of(ro, "apr-r1") == "pending"


async def test_a_black_holed_host_never_delays_the_others(fleet, make_db):
    """A host whose server accepts and never speaks stays `connecting…` while the others' rows show;
    quitting ends its ssh too."""
    import shlex
    import sys
    import uuid

    eu1 = host_db(make_db, "eu1", "apr-e1")
    marker = f"black-hole-{uuid.uuid4().hex}"
    silent = " ".join(shlex.quote(w) for w in (sys.executable, "-c", "import time; time.sleep(120)", marker))
    app = fleet({"eu1": {"db": eu1}, "hole": {"remote": silent}})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: rows(app) == [("eu1", "apr-e1", False)], what="eu1's row")
        assert app.status["hole"].phase == "connecting"
        await send_keys(pilot, "H")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "FleetHostsScreen", what="the hosts screen")
        from console.tui.screens.fleet_hosts import state_label

        assert state_label(app.status["hole"]) == "connecting…"
        assert state_label(app.status["eu1"]) == "ok"
        assert running(marker)
    assert not running(marker)  # the app has exited: the silent host's ssh was ended, not left behind


def running(marker: str) -> bool:
    from pathlib import Path

    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if marker.encode() in cmdline.read_bytes():
                return True
        except OSError:
            continue
    return False



async def test_four_eyes_is_the_hosts_refusal_shown_as_its_sentence(fleet, make_db):
    """The host resolves who is acting and refuses a decision on one's own request; the console
    shows the host's sentence and the request stays pending."""
    import getpass

    me = getpass.getuser()

    def fill(conn):
        add_project(conn, "own-p", "own-project")
        add_request(conn, "apr-mine", "own-p", expires_at=SOON, authority={"requested_by": me})

    own = make_db(fill=fill, name="own.db")
    app = fleet({"own": {"db": own}})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: rows(app) == [("own", "apr-mine", False)], what="the row")
        # Read on the host for the actor it resolved: approve is greyed with the host's reason.
        await wait_until(pilot, lambda: "four-eyes" in app.screen.unavailable().get("approve", ""),
                         what="approve greyed by the host's reading")
        await send_keys(pilot, "a")
        await wait_until(pilot, lambda: any("four-eyes" in n.message and n.title == "Why greyed?"
                                            for n in notifications(app)), what="why")
        assert type(app.screen).__name__ == "FleetQueueScreen"
        # Sent anyway (a reading that came too late): the host itself refuses, in its words.
        app.monitor.decide("own", "approve", "apr-mine", None)
        await wait_until(pilot, lambda: any("four-eyes" in n.message and n.severity == "error"
                                            for n in notifications(app)), what="the host's refusal")
        assert status_of(own, "apr-mine") == "pending"


@pytest.mark.parametrize("argv, says", [
    (["--host", "eu2"], "No host named 'eu2'"),
    (["--fleet", "--db", "/srv/archon.db"], "--db names a file on this machine"),
    (["--host", "eu1", "--as", "mallory"], "--as is not sent to hosts"),
], ids=["unknown-host", "db", "as"])
def test_bad_fleet_options_are_usage_errors_before_the_terminal_is_taken(write_hosts, argv, says):
    import os
    import subprocess
    import sys

    loaded = write_hosts({"eu1": {"ssh": "eu1"}})
    env = dict(os.environ, ARCHON_CONSOLE_HOSTS=str(loaded.path))
    done = subprocess.run([sys.executable, "-m", "console", *argv], capture_output=True, text=True,
                          env=env, timeout=60, stdin=subprocess.DEVNULL)
    assert done.returncode == 2, done.stderr
    assert says in done.stderr and "Traceback" not in done.stderr


def test_archon_console_fleet_opens_on_a_terminal_and_quits(write_hosts, make_db):
    """The real command on a pseudo-terminal: `archon-console --fleet` paints the merged queue with
    one host down, and q ends it (exit 0), its sessions closed."""
    import os
    import sys
    import time

    from bench.pty_term import Terminal

    eu1 = host_db(make_db, "eu1", "apr-00000001", "apr-00000002")
    loaded = write_hosts({"eu1": {"ssh": "eu1", "db": str(eu1), "remote": "archon-console"},
                          "gone": {"ssh": "gone", "remote": "archon-console-not-installed"}})
    env = dict(os.environ, ARCHON_CONSOLE_HOSTS=str(loaded.path), ARCHON_CONSOLE_KEYMAP="/nonexistent",
               ARCHON_CONSOLE_CONFIG="/nonexistent")
    term = Terminal([sys.executable, "-m", "console", "--fleet"], env, 100, 30)
    status = None
    try:
        term.wait_new_ids(0, 2, timeout=60)
        term.press(b"q")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and status is None:
            try:
                term.settle(quiet=0.05, limit=0.2)
            except RuntimeError:  # the program ended: its terminal closed
                pass
            pid, code = os.waitpid(term.pid, os.WNOHANG)
            status = code if pid else None
        assert status is not None and os.waitstatus_to_exitcode(status) == 0
    finally:
        if status is None:
            term.close()


async def test_a_write_whose_answer_was_lost_is_read_again_on_reconnect(fleet, make_db, tmp_path):
    """The approval lands on the host but the connection drops before its answer: the console says
    `outcome unknown`, reconnects, and reads the request again by id; nothing is sent twice."""
    import shlex
    import sys
    from pathlib import Path

    eu1 = host_db(make_db, "eu1", "apr-e1")
    relay = Path(__file__).with_name("drop_relay.py")
    remote = " ".join(shlex.quote(w) for w in (sys.executable, str(relay), str(tmp_path / "dropped")))
    app = fleet({"eu1": {"db": eu1, "remote": remote}})
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_until(pilot, lambda: rows(app) == [("eu1", "apr-e1", False)], what="the row")
        await send_keys(pilot, "a")
        await wait_until(pilot, lambda: type(app.screen).__name__ == "ReasonModal", what="the approve dialog")
        await send_keys(pilot, "ctrl+s")
        await wait_until(pilot, lambda: any("outcome unknown" in n.message for n in notifications(app)),
                         what="outcome unknown")
        await wait_until(pilot, lambda: any("apr-e1 on eu1 is approved (read again" in n.message
                                            for n in notifications(app)), what="the re-read")
        await wait_until(pilot, lambda: rows(app) == [], what="the row gone from the queue")
    assert status_of(eu1, "apr-e1") == "approved"
    decided = [e for e in events(eu1, "apr-e1") if e["to_status"] == "approved"]
    assert len(decided) == 1  # decided once: the lost answer was not retried blindly
