"""console/fleet/client.py: each host ends in one state with one sentence, through real processes
(the fake ssh runs tests/fleet/peer.py, a scripted server), within the deadline and the fan-out cap."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.fleet import cache as fleet_cache
from console.fleet.client import call_hosts
from console.fleet.transport import STATES
from console.text import is_clean

from .conftest import peer


def _one_line_clean(outcome):
    assert outcome.state in STATES
    if outcome.sentence is not None:
        assert is_clean(outcome.sentence, allow_newlines=False), outcome.sentence


def test_a_read_on_several_hosts_comes_back_in_host_order(write_hosts):
    fleet = write_hosts({
        "b": {"ssh": "alias-b", "remote": peer("--instance", "B"), "db": "/srv/archon/b.db"},
        "a": {"ssh": "alias-a", "remote": peer("--instance", "A"), "read_only": True},
    })
    outcomes = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {"status": "pending", "limit": 5})
    assert [o.host for o in outcomes] == ["b", "a"]
    for outcome in outcomes:
        _one_line_clean(outcome)
        assert outcome.state == "ok" and outcome.exit == 0, outcome
        assert outcome.data["method"] == "approvals.list"
        assert outcome.data["params"] == {"status": "pending", "limit": 5}
    # the database path travels in hello, never on the command line; read_only reaches the server
    assert outcomes[0].hello["params"]["db"] == "/srv/archon/b.db"
    assert outcomes[0].hello["params"]["protocol"] == 1
    assert "db" not in outcomes[1].hello["params"]
    assert outcomes[1].hello["read_only"] is True and outcomes[0].hello["read_only"] is False


@pytest.mark.slow
def test_fan_out_never_runs_more_than_parallel_hosts_at_once(write_hosts, tmp_path):
    markers = tmp_path / "markers"
    markers.mkdir()
    fleet = write_hosts({f"h{i}": {"ssh": f"h{i}", "remote": peer("--instance", f"I{i}", "--markers", str(markers),
                                                                    "--together", "3", "--total", "6")}
                         for i in range(6)})
    outcomes = call_hosts(fleet, list(fleet.hosts.values()), "projects.list", {}, parallel=3, deadline=60)
    assert [o.state for o in outcomes] == ["ok"] * 6
    seen = [int(p.read_text()) for p in markers.glob("*.seen")]
    assert len(seen) == 6
    assert max(seen) == 3  # three at once happened (each waited for the others), never a fourth


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["mute", "hang"])
def test_a_host_that_never_answers_ends_at_the_deadline_with_its_ssh_killed(write_hosts, tmp_path, mode):
    markers = tmp_path / "markers"
    markers.mkdir()
    fleet = write_hosts({"dead": {"ssh": "dead", "remote": peer("--mode", mode, "--markers", str(markers))},
                         "fine": {"ssh": "fine", "remote": peer("--instance", "F")}})
    # The one deadline is also the time `fine` has to start and answer (two Python processes behind
    # the fake ssh): short next to "never", long enough for a loaded machine.
    started = time.monotonic()
    dead, fine = call_hosts(fleet, list(fleet.hosts.values()), "envs.list", {}, deadline=10.0, cache=False)
    assert time.monotonic() - started < 10.0 + 20  # bounded by the deadline (and a loaded machine's slack)
    assert dead.state == "timeout" and "deadline" in dead.sentence
    assert fine.state == "ok"
    pids = [int(p.name) for p in markers.iterdir() if p.name.isdigit()]
    assert pids and not any(_alive(pid) for pid in pids)  # killed (and reaped), not left behind


@pytest.mark.slow
def test_an_answer_in_time_stays_the_answer_while_the_server_is_slow_to_exit(write_hosts, tmp_path, monkeypatch):
    """The deadline bounds the host's answer; ending the process afterwards has its own bound. A
    write that was answered "done" is never reported as timed out or unknown.

    The lingering server is waited for GRACE seconds before it is killed; with GRACE longer than
    the deadline, an exit counted inside the deadline would turn the answer into a timeout. Both
    are long enough for the answer to come in time on a loaded machine."""
    from console.fleet import session

    monkeypatch.setattr(session, "GRACE", 12.0)
    markers = tmp_path / "markers"
    markers.mkdir()
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--mode", "linger", "--markers", str(markers))}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.approve", {"ids": [1]}, deadline=8.0)
    assert outcome.state == "ok" and outcome.exit == 0, outcome
    pids = [int(p.stem) for p in markers.glob("*.started")]
    assert pids and not any(_alive(pid) for pid in pids)  # killed after its grace, not left behind


@pytest.mark.slow
def test_the_deadline_holds_while_another_process_keeps_the_pipes_open(write_hosts, tmp_path):
    """Under ControlMaster the killed ssh's stdio lives on in the master while its channel to a
    frozen host lives; the call still ends at its deadline."""
    import signal
    import threading

    markers = tmp_path / "markers"
    markers.mkdir()
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--mode", "hold", "--markers", str(markers))}})
    done = {}
    worker = threading.Thread(target=lambda: done.update(outcomes=call_hosts(
        fleet, list(fleet.hosts.values()), "doctor", {}, deadline=1.0, cache=False)), daemon=True)
    worker.start()
    try:
        worker.join(20)
        assert not worker.is_alive(), "the call outlived its deadline by far: it waited for the pipes"
        assert done["outcomes"][0].state == "timeout"
    finally:
        for holder in markers.glob("*.holder"):
            try:
                os.kill(int(holder.read_text()), signal.SIGKILL)
            except ProcessLookupError:
                pass
        worker.join(20)


def test_a_write_whose_connection_drops_before_the_answer_is_outcome_unknown(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--mode", "die-on-write")}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.approve", {"ids": [7], "reason": "ok"})
    assert outcome.state == "outcome_unknown", outcome
    _one_line_clean(outcome)
    assert outcome.data is None


@pytest.mark.slow
def test_a_write_without_an_answer_by_the_deadline_is_outcome_unknown(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--mode", "hang")}})
    # hello must be answered within the deadline for the write to be sent at all (else: timeout)
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "envs.claim", {"id": "e1"}, deadline=10.0)
    assert outcome.state == "outcome_unknown", outcome


@pytest.mark.parametrize("mode, words", [("garbage", "not JSON"), ("huge", "cap"), ("deep", "nested too deeply")])
def test_a_peer_that_breaks_the_framing_is_a_remote_error(write_hosts, mode, words):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--mode", mode)}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "doctor", {}, cache=False)
    assert outcome.state == "remote_error" and words in outcome.sentence, outcome
    _one_line_clean(outcome)


def test_a_json_rpc_error_is_a_remote_error_on_one_clean_line(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "fail", {})
    assert outcome.state == "remote_error" and "invalid_params" in outcome.sentence
    _one_line_clean(outcome)


def test_another_protocol_is_version_skew(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--protocol", "2")}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "doctor", {})
    assert outcome.state == "version_skew" and "protocol 2" in outcome.sentence


def test_a_host_without_the_console_names_the_install_command(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": "no-such-archon-console-here"}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "doctor", {}, cache=False)
    assert outcome.state == "no_server" and "pipx install . in a clone of archon-console" in outcome.sentence, outcome


def test_an_ssh_that_cannot_be_started_is_one_sentence(write_hosts, tmp_path):
    fleet = write_hosts({"eu1": {"ssh": "eu1"}}, command=[str(tmp_path / "no-ssh-here")])
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "doctor", {}, cache=False)
    assert outcome.state == "unreachable" and "[ssh] command" in outcome.sentence


@pytest.mark.slow
def test_a_host_answering_for_another_database_is_wrong_instance(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--instance", "first")}})
    assert call_hosts(fleet, list(fleet.hosts.values()), "doctor", {})[0].state == "ok"
    moved = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--instance", "second")}})
    [outcome] = call_hosts(moved, list(moved.hosts.values()), "approvals.approve", {"ids": [1]})
    assert outcome.state == "wrong_instance" and "first" in outcome.sentence and "second" in outcome.sentence
    assert outcome.data is None  # the write was never sent
    fleet_cache.forget_instance(moved.hosts["eu1"])
    assert call_hosts(moved, list(moved.hosts.values()), "doctor", {})[0].state == "ok"


@pytest.mark.slow
def test_two_hosts_answering_for_one_database_are_flagged(write_hosts):
    fleet = write_hosts({"a": {"ssh": "a", "remote": peer("--instance", "same")},
                         "b": {"ssh": "b", "remote": peer("--instance", "same")},
                         "c": {"ssh": "c", "remote": peer("--instance", "other")}})
    a, b, c = call_hosts(fleet, list(fleet.hosts.values()), "projects.list", {})
    # F14: both are flagged (order in hosts.toml does not say which one is real), the third is not
    assert (a.state, b.state, c.state) == ("wrong_instance", "wrong_instance", "ok")
    assert "(instance same) as b" in a.sentence and "(instance same) as a" in b.sentence
    assert a.data is None and b.data is None and "remove one" not in a.sentence


# ------------------------------------------------------------------ the cache
def test_an_unreachable_host_shows_its_last_read_as_stale_with_its_age(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    [live] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {"status": "pending"})
    assert live.state == "ok"
    directory = fleet_cache.cache_dir()
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    files = list(directory.glob("eu1+read+*.json"))
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    assert not list(directory.glob(".*.tmp"))
    down = write_hosts({"eu1": {"ssh": "eu1", "remote": "no-such-archon-console-here"}})
    [stale] = call_hosts(down, list(down.hosts.values()), "approvals.list", {"status": "pending"})
    assert stale.state == "stale" and stale.cause == "no_server"
    assert stale.data == live.data and stale.age_seconds is not None and stale.age_seconds >= 0
    assert "pipx install" in stale.sentence
    # other parameters were never read: nothing to show
    [other] = call_hosts(down, list(down.hosts.values()), "approvals.list", {"status": "approved"})
    assert other.state == "no_server" and other.data is None


def test_a_write_never_uses_nor_fills_the_cache(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    [ok] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.approve", {"ids": [1]})
    assert ok.state == "ok"
    assert fleet_cache.lookup(fleet.hosts["eu1"], "approvals.approve", {"ids": [1]}) is None
    fleet_cache.store(fleet.hosts["eu1"], "approvals.approve", {"ids": [1]}, {"planted": True}, None, 0)
    down = write_hosts({"eu1": {"ssh": "eu1", "remote": "no-such-archon-console-here"}})
    [outcome] = call_hosts(down, list(down.hosts.values()), "approvals.approve", {"ids": [1]})
    assert outcome.state == "no_server" and outcome.data is None


def test_a_symlink_in_the_cache_is_never_followed(write_hosts, tmp_path):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    host = fleet.hosts["eu1"]
    call_hosts(fleet, [host], "projects.list", {})
    [path] = fleet_cache.cache_dir().glob("eu1+read+*.json")
    elsewhere = tmp_path / "elsewhere.json"
    elsewhere.write_text('{"at": 0, "data": "planted"}')
    path.unlink()
    path.symlink_to(elsewhere)
    assert fleet_cache.lookup(host, "projects.list", {}) is None  # not read through the link
    fleet_cache.store(host, "projects.list", {}, ["new"], None, 0)
    assert not path.is_symlink() and elsewhere.read_text() == '{"at": 0, "data": "planted"}'
    assert fleet_cache.lookup(host, "projects.list", {})[0] == ["new"]


def test_a_cache_directory_others_can_use_is_not_used(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    host = fleet.hosts["eu1"]
    call_hosts(fleet, [host], "projects.list", {})
    directory = fleet_cache.cache_dir()
    directory.chmod(0o777)
    try:
        assert fleet_cache.lookup(host, "projects.list", {}) is None
        assert fleet_cache.known_instance(host) is None
    finally:
        directory.chmod(0o700)
    assert fleet_cache.lookup(host, "projects.list", {}) is not None


def test_a_server_refusing_the_protocol_is_version_skew(write_hosts):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--mode", "skew-error")}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "doctor", {}, cache=False)
    assert outcome.state == "version_skew" and "protocol 9" in outcome.sentence


async def test_stderr_is_drained_while_the_session_runs_and_only_its_tail_is_kept(write_hosts):
    from console.fleet.session import STDERR_KEEP, Session

    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--mode", "noisy")}})
    session = Session(fleet, fleet.hosts["eu1"], sockets=None)
    await session.start()
    try:
        hello = await asyncio.wait_for(session.request("hello", {"protocol": 1}), 60)
        assert hello["protocol"] == 1  # a megabyte on stderr did not stall the answer on stdout
        await asyncio.wait_for(session.request("doctor", {}), 60)
    finally:
        await session.close()
    assert 0 < len(session.stderr) <= STDERR_KEEP


def test_a_cache_file_over_the_cap_is_not_read(write_hosts, monkeypatch):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    host = fleet.hosts["eu1"]
    fleet_cache.store(host, "projects.list", {}, ["x" * 500], None, 0)
    assert fleet_cache.lookup(host, "projects.list", {}) is not None
    with monkeypatch.context() as patch:
        patch.setattr(fleet_cache, "MAX_FILE_BYTES", 100)
        assert fleet_cache.lookup(host, "projects.list", {}) is None
        fleet_cache.store(host, "projects.list", {}, ["y" * 500], None, 0)  # too large to keep: the old one stays
    assert fleet_cache.lookup(host, "projects.list", {})[0] == ["x" * 500]


@pytest.mark.parametrize("params", [{"ids": [1], "reason": "x" * 300_000}, {"ids": {1, 2}}, {"reason": float("nan")}])
def test_a_request_that_cannot_be_sent_is_said_and_not_unknown(write_hosts, params):
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.approve", params)
    assert outcome.state == "remote_error" and outcome.sentence.startswith("Nothing was sent to eu1"), outcome
    _one_line_clean(outcome)


def test_a_cache_file_is_created_exclusively(write_hosts, tmp_path, monkeypatch):
    """A name planted where the temporary file goes (a symlink to a file of the victim's) makes the
    write fail; nothing is written through it."""
    import secrets

    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    host = fleet.hosts["eu1"]
    victim = tmp_path / "victim"
    victim.write_text("precious")
    directory = fleet_cache.cache_dir()
    monkeypatch.setattr(secrets, "token_hex", lambda n: "f" * (2 * n))
    fleet_cache.store(host, "projects.list", {}, ["first"], None, 0)  # learn the real file's name
    [real] = directory.glob("eu1+read+*.json")
    planted = directory / f".{real.name}.{'f' * 16}.tmp"
    planted.symlink_to(victim)
    fleet_cache.store(host, "projects.list", {}, ["second"], None, 0)
    assert victim.read_text() == "precious" and planted.is_symlink()
    assert fleet_cache.lookup(host, "projects.list", {})[0] == ["first"]


@pytest.mark.slow
def test_call_hosts_from_several_threads_at_once(write_hosts):
    """The CLI may run one call_hosts per host in threads (each its own event loop)."""
    from concurrent.futures import ThreadPoolExecutor

    fleet = write_hosts({f"h{i}": {"ssh": f"h{i}", "remote": peer("--instance", f"I{i}")} for i in range(4)})
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda host: call_hosts(fleet, [host], "envs.list", {}), fleet.hosts.values()))
    assert [r[0].state for r in results] == ["ok"] * 4


JSON = st.recursive(st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
                    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=10), inner, max_size=3),
                    max_leaves=8)
HELLO = st.fixed_dictionaries({"protocol": st.sampled_from([1, 1, 2, "1", True, None]),
                               "instance_id": st.sampled_from(["i-1", "", "x" * 200, "a\u202eb", None, 7]),
                               "database": JSON})


def _reply(kind: str, value) -> str:
    if kind == "result":
        return json.dumps({"jsonrpc": "2.0", "id": "{id}", "result": value}).replace('"{id}"', "{id}")
    if kind == "error":
        return json.dumps({"jsonrpc": "2.0", "id": "{id}", "error": value}).replace('"{id}"', "{id}")
    if kind == "other id":
        return json.dumps({"jsonrpc": "2.0", "id": 99, "result": value})
    return value if isinstance(value, str) else json.dumps(value)


REPLIES = st.tuples(st.sampled_from(["result", "error", "other id", "raw"]), JSON | st.text(max_size=30))


@pytest.mark.slow
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(hello=st.one_of(HELLO.map(lambda h: [("result", h)]), st.lists(REPLIES, max_size=2)),
       answer=st.one_of(st.fixed_dictionaries({"exit": st.integers(0, 4), "output": JSON}).map(lambda a: [("result", a)]),
                        st.lists(REPLIES, max_size=3)),
       method=st.sampled_from(["approvals.list", "approvals.approve"]))
def test_whatever_a_host_answers_is_one_state_and_one_clean_sentence(write_hosts, tmp_path, hello, answer, method):
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"hello": [_reply(*r) for r in hello], "method": [_reply(*r) for r in answer],
                                  "end_after_hello": [kind for kind, _ in hello] != ["result"]}))
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--replay", str(script))}})
    # the peer always ends, so a passing run never waits for this deadline; a loaded machine may be slow
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), method, {}, deadline=60, cache=False)
    _one_line_clean(outcome)
    assert outcome.state != "timeout", outcome  # the peer always ends: nothing waits for the deadline
    if outcome.state == "ok":
        assert isinstance(outcome.exit, int)


@pytest.mark.slow
def test_a_request_cut_off_while_it_is_written_leaves_no_unretrieved_error(write_hosts, caplog):
    """The deadline can cancel a request while its write waits for a full pipe; the session's end
    must not then leave an exception in a future nobody awaits (asyncio logs it on the CLI's stderr)."""
    import gc
    import logging

    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": peer("--mode", "deaf")}})
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list",
                               {"search": "x" * 200_000}, deadline=1.5, cache=False)
        gc.collect()
    assert outcome.state == "timeout", outcome
    assert not [r for r in caplog.records if "never retrieved" in r.getMessage()], caplog.text
