"""console/fleet/client.py FleetSessions: long-lived sessions that start with hosts down, answer
reads from the cache while a host is down, reconnect in the background, and leave nothing running."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from console.fleet.client import call_hosts
from console.fleet.sessions import FleetSessions

from .conftest import peer

pytestmark = pytest.mark.slow  # every test here starts processes and waits on reconnections


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def _until(condition, timeout: float = 30.0, what: str = "the condition"):
    end = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < end, f"{what} did not happen within {timeout} s"
        await asyncio.sleep(0.02)


async def test_the_fleet_starts_with_hosts_down_and_reads_stale_data(write_hosts):
    up = write_hosts({"a": {"ssh": "a", "remote": peer("--instance", "A")},
                      "b": {"ssh": "b", "remote": peer("--instance", "B")}})
    live = await asyncio.to_thread(call_hosts, up, list(up.hosts.values()), "approvals.list", {"status": "pending"})
    assert [o.state for o in live] == ["ok", "ok"]
    down = write_hosts({"a": {"ssh": "a", "remote": "no-such-archon-console"},
                        "b": {"ssh": "b", "remote": peer("--mode", "mute")}})
    # `b` is mute: it times out at this deadline; `a` must fail on its own (no_server) within it
    fleet = FleetSessions(down, list(down.hosts.values()), deadline=10.0)
    try:
        outcomes = await fleet.connect()
        assert [o.state for o in outcomes] == ["no_server", "timeout"]
        a = await fleet.call("a", "approvals.list", {"status": "pending"})
        assert a.state == "stale" and a.data == live[0].data and a.cause == "no_server"
        write = await fleet.call("a", "approvals.approve", {"ids": [1]})
        assert write.state == "no_server" and write.data is None
    finally:
        await fleet.close()


async def test_calls_share_one_session_and_notifications_reach_the_listener(write_hosts):
    fleet_file = write_hosts({"a": {"ssh": "a", "remote": peer("--instance", "A")}})
    heard = []
    fleet = FleetSessions(fleet_file, list(fleet_file.hosts.values()),
                          on_notification=lambda host, method, params: heard.append((host, method, params)))
    try:
        [hello] = await fleet.connect()
        assert hello.state == "ok" and hello.hello["instance_id"] == "A"
        first = await fleet.call("a", "envs.list", {})
        second = await fleet.call("a", "approvals.watch", {"cursor": None})
        assert first.state == second.state == "ok" and first.data["pid"] == second.data["pid"]
        assert heard == [("a", "approvals.changed", {"n": n}) for n in range(3)]
    finally:
        await fleet.close()
    assert not _alive(first.data["pid"])


async def test_a_host_that_comes_up_is_reconnected_in_the_background(write_hosts, tmp_path):
    flag = tmp_path / "up"
    fleet_file = write_hosts({"a": {"ssh": "a", "remote": peer("--require", str(flag))}})
    changes = []
    fleet = FleetSessions(fleet_file, list(fleet_file.hosts.values()), on_state=changes.append)
    try:
        [first] = await fleet.connect()
        assert first.state == "unreachable" and "Connection refused" in first.sentence
        flag.touch()
        await _until(lambda: fleet.states["a"].state == "ok", what="the reconnection")
        assert [c.state for c in changes][0] == "unreachable" and changes[-1].state == "ok"
        answer = await fleet.call("a", "doctor", {})
        assert answer.state == "ok"
        os.kill(answer.data["pid"], 9)  # the host's server dies while idle
        await _until(lambda: fleet.states["a"].state != "ok", what="noticing the lost session")
        await _until(lambda: fleet.states["a"].state == "ok", what="the second reconnection")
        again = await fleet.call("a", "doctor", {})
        assert again.state == "ok" and again.data["pid"] != answer.data["pid"]
    finally:
        await fleet.close()


async def test_close_ends_the_shared_connections(write_hosts, tmp_path, monkeypatch):
    import json

    from console.fleet.transport import control_dir

    log = tmp_path / "ssh.log"
    monkeypatch.setenv("FAKE_SSH_LOG", str(log))
    fleet_file = write_hosts({"a": {"ssh": "alias-a", "remote": peer()}, "b": {"ssh": "alias-b", "remote": peer()}})
    fleet = FleetSessions(fleet_file, list(fleet_file.hosts.values()))
    await fleet.connect()
    (control_dir() / "stray").write_text("")  # what a master leaves: the exits run only when there is one
    await fleet.close()
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    exits = sorted(run[-1] for run in runs if run[run.index("--") - 2:run.index("--")] == ["-O", "exit"])
    assert exits == ["alias-a", "alias-b"]
    assert all(run[run.index("--") + 1] in ("alias-a", "alias-b") for run in runs)


async def test_a_write_whose_session_drops_is_outcome_unknown(write_hosts):
    fleet_file = write_hosts({"a": {"ssh": "a", "remote": peer("--mode", "die-on-write")}})
    fleet = FleetSessions(fleet_file, list(fleet_file.hosts.values()))
    try:
        await fleet.connect()
        outcome = await fleet.call("a", "approvals.deny", {"ids": [3], "reason": "no"})
        assert outcome.state == "outcome_unknown"
        assert fleet.states["a"].state != "ok"
    finally:
        await fleet.close()


async def test_a_read_past_the_deadline_kills_the_session(write_hosts):
    fleet_file = write_hosts({"a": {"ssh": "a", "remote": peer("--mode", "hang")}})
    fleet = FleetSessions(fleet_file, list(fleet_file.hosts.values()))
    try:
        [hello] = await fleet.connect()
        assert hello.state == "ok"
        outcome = await fleet.call("a", "doctor", {}, deadline=1.0)
        assert outcome.state == "timeout" and fleet.states["a"].state == "timeout"
    finally:
        await fleet.close()


async def test_a_host_stopped_mid_session_ends_at_the_deadline_and_the_others_answer(write_hosts):
    import signal

    fleet_file = write_hosts({"a": {"ssh": "a", "remote": peer("--instance", "A")},
                              "b": {"ssh": "b", "remote": peer("--instance", "B")}})
    fleet = FleetSessions(fleet_file, list(fleet_file.hosts.values()))
    try:
        await fleet.connect()
        first = await fleet.call("a", "doctor", {})
        os.kill(first.data["pid"], signal.SIGSTOP)
        try:
            stopped, other = await asyncio.gather(fleet.call("a", "doctor", {}, deadline=1.0),
                                                  fleet.call("b", "doctor", {}, deadline=30))
            assert (stopped.state, stopped.cause, other.state) == ("stale", "timeout", "ok")  # the first read, stale
            assert stopped.data == first.data and fleet.states["a"].state == "timeout"
            await _until(lambda: not _alive(first.data["pid"]), what="the stopped host's ssh being killed")
        finally:
            if _alive(first.data["pid"]):
                os.kill(first.data["pid"], signal.SIGKILL)
    finally:
        await fleet.close()


async def test_two_long_lived_hosts_claiming_one_instance_are_both_flagged(write_hosts):
    """F14: whichever connects first, neither host's answers are used; a reconnection does not make
    them take turns being the one shown; and a write to either is not sent."""
    fleet_file = write_hosts({"a": {"ssh": "a", "remote": peer("--instance", "same")},
                              "b": {"ssh": "b", "remote": peer("--instance", "same")},
                              "c": {"ssh": "c", "remote": peer("--instance", "other")}})
    fleet = FleetSessions(fleet_file, list(fleet_file.hosts.values()), cache=False)
    try:
        await fleet.connect()
        assert [fleet.states[n].state for n in "abc"] == ["wrong_instance", "wrong_instance", "ok"]
        for name in "ab":
            again = await fleet.call(name, "approvals.approve", {"ids": ["x"]})
            assert again.state == "wrong_instance" and again.data is None
        assert (await fleet.call("c", "envs.list", {})).state == "ok"
    finally:
        await fleet.close()
