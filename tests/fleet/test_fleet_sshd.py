"""Fleet mode end to end through real OpenSSH (issue 20, item 8): the client (console/fleet/client.py)
runs the system `ssh` with the lab's ssh_config (tests/fleet/sshd.py), and each "host" runs this
checkout's `archon-console serve --stdio` as its own account, on its own database.

What only real sshd proves: the per-host states come from ssh's real failures (a refused port, a
listener that never speaks, a host frozen by SIGSTOP, a changed host key); who acts is decided by
the host (a forced command's `--actor`, a certificate's Key ID, the login), whatever the client's
command line says; four-eyes holds on each host of one fan-out; a connection lost under a write is
`outcome_unknown` and the write did not happen behind the console's back.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import threading
from pathlib import Path

import pytest

from console.fleet.client import call_hosts
from console.fleet.sessions import FleetSessions
from console.fleet.transport import classify
from tests.approvals_helpers import events, status_of
from tests.conftest import connect
from tests.fleet.sshd import USER, leftovers, until
from tests.fleet.sshd_hosts import host_db, write_fleet

pytestmark = pytest.mark.slow  # every test starts sshd instances and console servers over ssh


def by_host(outcomes):
    return {o.host: o for o in outcomes}


def test_a_read_over_several_hosts_answers_from_each_hosts_own_database(fleet_lab, make_db):
    lab = fleet_lab
    hosts = lab.add_hosts(3)
    fleet = write_fleet(lab, {h.name: {"ssh": h.name, "db": str(host_db(make_db, h.name))} for h in hosts})
    outcomes = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {"status": "pending"}, deadline=60)
    assert [o.host for o in outcomes] == ["host1", "host2", "host3"]
    for outcome in outcomes:
        assert (outcome.state, outcome.exit) == ("ok", 0), outcome
        assert "apr-x" in json.dumps(outcome.data)
        hello = outcome.hello
        assert (hello["actor"], hello["actor_source"], hello["read_only"]) == (USER, "login", False)
    assert len({o.hello["instance_id"] for o in outcomes}) == 3


def test_each_failing_host_is_classified_on_its_own(fleet_lab, make_db):
    lab = fleet_lab
    good, frozen, rekeyed = lab.add_hosts(3)
    refused, hole = lab.refused(), lab.black_hole()
    fleet = write_fleet(lab, {
        "good": {"ssh": good.name, "db": str(host_db(make_db, "good"))},
        "refused": {"ssh": refused}, "hole": {"ssh": hole},
        "frozen": {"ssh": frozen.name, "db": str(host_db(make_db, "frozen"))},
        "rekeyed": {"ssh": rekeyed.name, "db": str(host_db(make_db, "rekeyed"))},
    })
    frozen.pause()
    rekeyed.replace_host_key()
    # `good` must connect and answer within this deadline (ssh + the server's start on a loaded
    # machine); below ssh's ConnectTimeout (10 s), so `hole` and `frozen` end at the console's deadline
    outcomes = by_host(call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {}, deadline=9, cache=False))
    assert outcomes["good"].state == "ok"
    assert outcomes["refused"].state == "unreachable" and "Connection refused" in outcomes["refused"].sentence
    assert outcomes["hole"].state == "timeout" and outcomes["frozen"].state == "timeout"
    assert outcomes["rekeyed"].state == "host_key"
    assert rekeyed.fingerprint in outcomes["rekeyed"].sentence and "changed" in outcomes["rekeyed"].sentence
    for outcome in outcomes.values():
        assert outcome.sentence is None or "\n" not in outcome.sentence
    frozen.resume()


def test_the_actor_is_the_one_the_host_resolves(fleet_lab, make_db):
    lab = fleet_lab
    forced, certified, plain = lab.add_hosts(3)
    dbs = {h.name: host_db(make_db, h.name, requester="bob") for h in (forced, certified, plain)}
    alice = lab.client_key("alice")
    forced.authorize(alice.with_suffix(".pub"), 'restrict,command="archon-console serve --stdio --actor=alice"')
    dave = lab.client_key("dave")
    fleet = write_fleet(lab, {
        # The client asks for mallory; the forced command runs instead (SSH_ORIGINAL_COMMAND keeps the ask).
        "forced": {"ssh": lab.alias("as-alice", forced.address, forced.port, identity=alice),
                   "db": str(dbs[forced.name]), "remote": "archon-console --actor=mallory"},
        "cert": {"ssh": lab.alias("as-dave", certified.address, certified.port, identity=dave,
                                  certificate=lab.certificate(dave, "dave")), "db": str(dbs[certified.name])},
        "login": {"ssh": plain.name, "db": str(dbs[plain.name])},
    })
    outcomes = by_host(call_hosts(fleet, list(fleet.hosts.values()), "approvals.approve", {"ids": ["apr-x"]},
                                  deadline=60))
    assert {name: (o.state, o.exit, o.hello["actor"], o.hello["actor_source"]) for name, o in outcomes.items()} == {
        "forced": ("ok", 0, "alice", "forced_command"), "cert": ("ok", 0, "dave", "certificate"),
        "login": ("ok", 0, USER, "login")}
    for name, host, actor in (("forced", forced, "alice"), ("cert", certified, "dave"), ("login", plain, USER)):
        (event,) = [e for e in events(dbs[host.name], "apr-x") if e["to_status"] == "approved"]
        meta = json.loads(event["metadata_json"])
        assert (event["actor_reference"], meta["actor_source"]) == (actor, outcomes[name].hello["actor_source"])
        client, _, server, port = meta["ssh_connection"].split()
        assert (client, server, port) == ("127.0.0.1", host.address, str(host.port))


def test_two_entries_for_one_account_never_share_an_identity(fleet_lab, make_db):
    lab = fleet_lab
    host = lab.add_host()
    db = host_db(make_db, host.name, requester="bob")
    alice = lab.client_key("alice")
    host.authorize(alice.with_suffix(".pub"), 'restrict,command="archon-console serve --stdio --actor=alice"')
    fleet = write_fleet(lab, {
        "as-alice": {"ssh": lab.alias("as-alice", host.address, host.port, identity=alice), "db": str(db)},
        "as-login": {"ssh": host.name, "db": str(db)},
    })
    first, second = (call_hosts(fleet, [fleet.hosts[name]], "approvals.list", {}, deadline=60, cache=False)[0]
                     for name in ("as-alice", "as-login"))
    assert (first.hello["actor"], first.hello["actor_source"]) == ("alice", "forced_command")
    assert (second.hello["actor"], second.hello["actor_source"]) == (USER, "login")


def test_four_eyes_holds_on_each_host_of_one_fan_out(fleet_lab, make_db):
    lab = fleet_lab
    mine, theirs = lab.add_hosts(2)
    alice = lab.client_key("alice")
    dbs = {mine.name: host_db(make_db, mine.name, requester="alice"),
           theirs.name: host_db(make_db, theirs.name, requester="bob")}
    entries = {}
    for host in (mine, theirs):
        host.authorize(alice.with_suffix(".pub"), 'restrict,command="archon-console serve --stdio --actor=alice"')
        entries[host.name] = {"ssh": lab.alias(f"{host.name}-alice", host.address, host.port, identity=alice),
                              "db": str(dbs[host.name])}
    fleet = write_fleet(lab, entries)
    outcomes = by_host(call_hosts(fleet, list(fleet.hosts.values()), "approvals.approve", {"ids": ["apr-x"]},
                                  deadline=60))
    refused, done = outcomes[mine.name], outcomes[theirs.name]
    assert (refused.state, refused.exit) == ("ok", 1) and "four-eyes" in json.dumps(refused.data)
    assert status_of(dbs[mine.name], "apr-x") == "pending"
    assert (done.state, done.exit) == ("ok", 0), done.data
    assert status_of(dbs[theirs.name], "apr-x") == "approved"


def _waiting_for_the_lock(host) -> bool:
    """The host's server sleeps in SQLite's busy handler (clock_nanosleep, syscall 230 on x86-64, or
    nanosleep, 35): it has read the write and waits for the test's lock."""
    for pid in host.tree():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            syscall = Path(f"/proc/{pid}/syscall").read_text().split()[0]
        except OSError:
            continue
        if b"serve" in cmdline and b"python" in cmdline.split(b"\0")[0] and syscall in ("230", "35"):
            return True
    return False


def test_a_connection_lost_under_a_write_is_outcome_unknown_and_nothing_landed(fleet_lab, make_db):
    lab = fleet_lab
    host = lab.add_host()
    db = host_db(make_db, host.name, requester="bob")
    fleet = write_fleet(lab, {"h": {"ssh": host.name, "db": str(db)}})
    lock = connect(db)
    lock.execute("BEGIN IMMEDIATE")  # the host's write waits for this lock (its busy timeout is 5 s)
    result = {}
    worker = threading.Thread(target=lambda: result.update(outcomes=call_hosts(
        fleet, [fleet.hosts["h"]], "approvals.approve", {"ids": ["apr-x"]}, deadline=60)))
    worker.start()
    try:
        until(lambda: _waiting_for_the_lock(host), 30, "the host's server waiting for the lock")
        host.stop()  # the host goes away with the write in flight
    finally:
        lock.execute("ROLLBACK")
        lock.close()
        worker.join(60)
    (outcome,) = result["outcomes"]
    assert outcome.state == "outcome_unknown", outcome
    assert "unknown" in outcome.sentence and "\n" not in outcome.sentence
    assert status_of(db, "apr-x") == "pending"
    host.start()  # back on the same address: a read says what happened (nothing)
    (again,) = call_hosts(fleet, [fleet.hosts["h"]], "approvals.show", {"id": "apr-x"}, deadline=60)
    assert again.state == "ok" and '"pending"' in json.dumps(again.data)


def test_every_host_down_still_answers_each_host_and_the_last_read_is_stale(fleet_lab, make_db):
    lab = fleet_lab
    hosts = lab.add_hosts(2)
    fleet = write_fleet(lab, {h.name: {"ssh": h.name, "db": str(host_db(make_db, h.name))} for h in hosts})
    first = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {}, deadline=60)
    assert [o.state for o in first] == ["ok", "ok"]
    for host in hosts:
        host.stop()
    down = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {}, deadline=10)
    assert [o.state for o in down] == ["stale", "stale"]
    for outcome, before in zip(down, first):
        assert outcome.data == before.data and outcome.age_seconds is not None and outcome.cause == "unreachable"
    fresh = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {}, deadline=10, cache=False)
    assert [o.state for o in fresh] == ["unreachable", "unreachable"]
    assert all("Connection refused" in o.sentence for o in fresh)


def test_a_host_lost_mid_session_is_reconnected_and_close_ends_the_masters(fleet_lab, make_db):
    """The TUI's long-lived sessions (`FleetSessions`): a host whose sshd dies after its hello is
    `unreachable` while the other host answers; back on its address, it is reconnected in the
    background; `close` ends the shared connections (`ssh -O exit`)."""
    lab = fleet_lab
    hosts = lab.add_hosts(2)
    fleet = write_fleet(lab, {h.name: {"ssh": h.name, "db": str(host_db(make_db, h.name))} for h in hosts})
    lost, fine = hosts

    async def scenario():
        sessions = FleetSessions(fleet, list(fleet.hosts.values()), deadline=30, cache=False)
        try:
            assert [o.state for o in await sessions.connect()] == ["ok", "ok"]
            lost.stop()
            down = await sessions.call(lost.name, "approvals.list", {}, deadline=10)
            answered = await sessions.call(fine.name, "approvals.list", {})
            lost.start()
            back = await _until_ok(sessions, lost.name)
            return down, answered, back
        finally:
            await sessions.close()

    down, answered, back = asyncio.run(scenario())
    assert (down.state, down.sentence) == (  # after the hello, ssh's stderr is quoted, never believed
        "unreachable", f"The connection to {lost.name} ended mid-session (ssh exit 255); the last line on its "
                       f"stderr: Connection to {lost.address} closed by remote host."), down
    assert (answered.state, answered.exit) == ("ok", 0)
    assert back.state == "ok", back
    masters = [pid for pid in leftovers(lab.marker, lab.base) if b"[mux]" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    assert masters == []  # `close` sent `ssh -O exit` to every shared connection


async def _until_ok(sessions, name: str, attempts: int = 20):
    """Calls until the host answers again (the keeper reconnects after ~1 s, then backs off)."""
    outcome = None
    for _attempt in range(attempts):
        outcome = await sessions.call(name, "approvals.list", {}, deadline=10)
        if outcome.state == "ok":
            break
    return outcome


def test_a_host_frozen_mid_session_times_out_within_the_deadline(fleet_lab, make_db):
    lab = fleet_lab
    frozen, fine = lab.add_hosts(2)
    fleet = write_fleet(lab, {h.name: {"ssh": h.name, "db": str(host_db(make_db, h.name))} for h in (frozen, fine)})

    async def scenario():
        sessions = FleetSessions(fleet, list(fleet.hosts.values()), deadline=30, cache=False)
        try:
            assert [o.state for o in await sessions.connect()] == ["ok", "ok"]
            frozen.pause()
            # The console's deadline is 2 s; 20 s bounds this test (TimeoutError: the defect), far
            # below ServerAlive's 45 s, with room for killing the ssh on a loaded machine.
            stuck = await asyncio.wait_for(sessions.call(frozen.name, "approvals.list", {}, deadline=2), 20)
            answered = await sessions.call(fine.name, "approvals.list", {})
            return stuck, answered
        finally:
            frozen.resume()
            await asyncio.wait_for(sessions.close(), 30)

    stuck, answered = asyncio.run(scenario())
    assert stuck.state == "timeout" and "deadline" in stuck.sentence, stuck
    assert (answered.state, answered.exit) == ("ok", 0)


def test_a_changed_host_key_names_a_remedy_that_removes_the_pinned_key(fleet_lab, make_db):
    lab = fleet_lab
    host = lab.add_host()
    fleet = write_fleet(lab, {"h": {"ssh": host.name, "db": str(host_db(make_db, host.name))}})
    host.replace_host_key()
    (outcome,) = call_hosts(fleet, [fleet.hosts["h"]], "approvals.list", {}, deadline=60, cache=False)
    assert outcome.state == "host_key"
    assert outcome.sentence.endswith(f"then run ssh-keygen -f {lab.known_hosts} -R '[{host.address}]:{host.port}'.")
    removed = subprocess.run(["ssh-keygen", "-f", str(lab.known_hosts), "-R", f"[{host.address}]:{host.port}"],
                             capture_output=True, text=True, timeout=30)
    assert removed.returncode == 0 and f"[{host.address}]:{host.port}" not in lab.known_hosts.read_text()


def test_the_remedy_for_a_changed_key_is_quoted_for_the_shell():
    """The known_hosts path comes from the user's config: pasted into a shell, it must stay one word."""
    stderr = ('@    WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED!     @\n'
              '  remove with:\n  ssh-keygen -f "/home/op/$(touch x) hosts" -R "[10.0.0.1]:2222"\n'
              'Host key verification failed.\n')
    state, sentence = classify(255, stderr, alias="eu1")
    assert state == "host_key"
    assert sentence.endswith("then run ssh-keygen -f '/home/op/$(touch x) hosts' -R '[10.0.0.1]:2222'.")
