"""`approvals watch --fleet`'s pieces without hosts (console/cli/fleet_watch.py): the one cursor
file holds every host's cursor, and a host's change prints as the local line with its host first."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from console.cli.watch_delivery import Cursor
from console.cli.fleet_watch import change_from_json, change_json, change_text, decode_cursors, encode_cursors
from console.errors import UsageError

CHANGE = {"change": "new", "request_id": "apr-1", "project_id": "p", "project_name": "atlas", "kind": "git_push",
          "from_status": None, "to_status": "pending", "actor": None, "actor_class": None, "reason": None,
          "at": "2026-12-02 00:10:00", "expires_at": "2026-12-02 03:00:00", "event_id": "e1", "os_account": None}


def test_the_cursor_file_keeps_every_hosts_cursor_through_the_watch_file_mechanism(tmp_path):
    said = []
    path = tmp_path / "fleet.cursor"
    cursor = Cursor(str(path), said.append, decode=decode_cursors, encode=encode_cursors)
    assert cursor.load() is None
    cursor.save({"us1": {"rowid": 7, "event_id": "e7", "reminded": []}, "eu1": {"rowid": 3}})
    again = Cursor(str(path), said.append, decode=decode_cursors, encode=encode_cursors).load()
    assert again == {"eu1": {"rowid": 3}, "us1": {"rowid": 7, "event_id": "e7", "reminded": []}}
    assert json.loads(path.read_text())["fleet"]["eu1"] == {"rowid": 3}
    assert [p.name for p in tmp_path.iterdir()] == ["fleet.cursor"]  # the temporary file was published


@pytest.mark.parametrize("text", ['{"rowid": 3, "event_id": null, "reminded": []}', '[]', '{"fleet": []}',
                                  '{"fleet": {}, "x": 1}', '"fleet"'])
def test_a_cursor_file_of_another_shape_is_refused_not_reset(tmp_path, text):
    path = tmp_path / "c"
    path.write_text(text)
    with pytest.raises(UsageError, match="not a cursor this command wrote"):
        Cursor(str(path), print, decode=decode_cursors, encode=encode_cursors).load()


def test_a_change_prints_as_the_local_line_with_its_host_first_and_never_a_second_line():
    now = datetime(2026, 12, 2, 0, 30, tzinfo=timezone.utc)
    text = change_text("eu1", change_from_json(CHANGE), now)
    assert text.split()[:1] == ["eu1"] and "apr-1" in text and "atlas" in text
    evil = dict(CHANGE, request_id="a\nus1  2026-12-02  approved", project_name="\x1b[2J", kind=7)
    text = change_text("eu1", change_from_json(evil), now)
    assert "\n" not in text and "\x1b" not in text
    assert change_json("eu1", dict(CHANGE, host="forged"))["host"] == "eu1"


@pytest.mark.parametrize("bad", [None, [], {"change": "new"}, {"request_id": "x"}, {"change": 1, "request_id": "x"}])
def test_a_change_of_another_shape_is_refused(bad):
    with pytest.raises(ValueError):
        change_from_json(bad)


@pytest.mark.slow  # a real `serve --stdio` behind the fake ssh
def test_a_second_ok_for_a_session_already_watching_starts_no_second_watch(make_db, write_hosts, tmp_path):
    """A host's watch is started on each `ok` state, and `FleetSessions.call` may itself reconnect
    (the session dropped between the `ok` and the watch's call) and announce a second `ok` for the
    session that first call then watches on. Two starts on one session: the second is refused by
    the host (a watching session is dedicated, STREAM_BUSY) and the user read "the watch did not
    start" while it ran. One watch per session: a second `ok` for a watched session starts nothing."""
    import asyncio
    from types import SimpleNamespace

    from console.cli.fleet_watch import _Stream

    from tests.approvals_helpers import add_project

    db = make_db(name="eu1.db", fill=lambda conn: add_project(conn, "p-eu1"))  # a project: an instance id
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": "archon-console", "db": str(db)}})  # this checkout's
    runner = SimpleNamespace(fleet=fleet, hosts=list(fleet.hosts.values()), names=list(fleet.hosts),
                             args=SimpleNamespace(parallel=8), json=True)
    said: list[str] = []
    cursors: dict = {}
    stream = _Stream(runner, {"poll": 0.05}, cursors, SimpleNamespace(save=lambda value: None), None, said.append)

    def settled() -> bool:
        if "eu1" not in cursors:
            return False
        starting = getattr(stream, "starting", None)
        if starting is None:  # (before the fix nothing kept the starts: the host's refusal ends the second)
            return any("did not start" in note for note in said)
        return all(task.done() for task in starting)

    async def scenario():
        from console.fleet.sessions import FleetSessions

        stream.sessions = FleetSessions(fleet, runner.hosts, cache=False, on_state=stream.state)
        try:
            await stream.sessions.connect()  # its `ok` starts the watch
            stream.state(stream.sessions.states["eu1"])  # a second `ok` of the same session
            end = asyncio.get_running_loop().time() + 60
            while not settled():
                assert asyncio.get_running_loop().time() < end, f"the starts did not end: {said}"
                await asyncio.sleep(0.02)
        finally:
            await stream.sessions.close()

    asyncio.run(scenario())
    assert "eu1" in cursors and not [note for note in said if "did not start" in note], said
