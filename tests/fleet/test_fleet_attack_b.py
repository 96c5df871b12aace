"""The second attack on fleet mode (issue 20, findings G1 to G13): the command line over hosts
scripted by tests/fleet/peer.py (`--replay`: any answer a host can send) through the fake ssh."""

from __future__ import annotations

import json

import pytest

from console.cli.cli import main
from tests.fleet.conftest import peer

HELLO = {"protocol": 1, "instance_id": "hostile-1", "read_only": False, "actor": "tester", "actor_source": "login"}


def _replay(tmp_path, name: str, method_lines: list[str]) -> str:
    script = tmp_path / f"{name}.json"
    hello = json.dumps({"jsonrpc": "2.0", "id": "{id}", "result": {**HELLO, "instance_id": name}})
    script.write_text(json.dumps({"hello": [hello.replace('"{id}"', "{id}")],
                                  "method": [line.replace('"{id}"', "{id}") for line in method_lines]}))
    return peer("--replay", str(script))


def result(value) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": "{id}", "result": value})


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["approvals", "approve", "apr-1", "--reason", "x"],
    ["approvals", "approve", "h1:apr-1", "--reason", "x"],
    ["envs", "claim", "env-1"],
    ["approvals", "expire"],
    ["approvals", "show", "apr-1"],
    ["doctor"],
])
def test_every_call_checks_the_remembered_instance(hosts, tmp_path, argv, capsys):
    """G1: the remembered instance is checked whether or not the read cache is used: a write, a
    lookup or doctor over an alias that now reaches another database is wrong_instance, not sent."""
    hosts({"h1": {"ssh": "h1", "remote": peer("--instance", "db-A")}})
    assert main(["approvals", "list", "--host", "h1"]) == 0
    hosts({"h1": {"ssh": "h1", "remote": peer("--instance", "db-B", "--mode", "die-on-write")}})
    capsys.readouterr()
    code = main([*argv, "--host", "h1"])
    out = capsys.readouterr()
    assert code != 0, out
    assert "now answers for database db-B, not db-A" in out.out + out.err


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["approvals", "approve", "h1:apr-1", "h2:apr-1", "--reason", "x"],
    ["approvals", "approve", "h1:apr-1", "--reason", "x"],
    ["envs", "claim", "h2:env-1"],
    ["approvals", "expire"],
])
def test_no_write_goes_to_hosts_the_run_finds_sharing_an_instance(hosts, argv, capsys):
    """G7: a write is one call per host, which cannot see the other hosts' instances: the run
    compares them first and sends nothing to a host sharing its database with another."""
    hosts({"h1": {"ssh": "h1", "remote": peer("--instance", "same", "--mode", "die-on-write")},
           "h2": {"ssh": "h2", "remote": peer("--instance", "same", "--mode", "die-on-write")}})
    code = main([*argv, "--fleet"])
    out = capsys.readouterr()
    assert code == 4, out
    assert "answers for the same database (instance same)" in out.out + out.err
    assert "after the write was sent" not in out.out + out.err


def error(code: int, message: str) -> str:
    return json.dumps({"jsonrpc": "2.0", "id": "{id}", "error": {"code": code, "message": message}})


@pytest.mark.slow
@pytest.mark.parametrize("line", [error(-32603, "approve failed unexpectedly (KeyError)"),
                                  error(-32001, "The answer was not sent: too large"),
                                  error(-31999, "anything a host may say")])
def test_a_write_answered_by_an_error_that_may_follow_its_work_is_unknown(hosts, tmp_path, line, capsys):
    """G2: only the codes that precede running (protocol.BEFORE_RUNNING) mean nothing was written."""
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", [line])}})
    code = main(["approvals", "approve", "h1:apr-1", "--reason", "x", "--host", "h1", "--json"])
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert code == 4 and row["outcome_unknown"] is True and "refused" not in row["message"]


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["envs", "claim", "env-1"], ["envs", "complete", "env-1"],
                                  ["envs", "release", "env-1"]])
def test_a_one_id_write_answered_for_another_id_is_no_answer_for_it(hosts, tmp_path, argv, capsys):
    """G5: the host's id is kept, so an answer for env-OTHER is not env-1's success."""
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", [result(
        {"exit": 0, "output": {"ok": True, "id": "env-OTHER", "message": "env-OTHER claimed", "state": "done"}})])}})
    code = main([*argv, "--host", "h1", "--json"])
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert code != 0
    assert not any(row["ok"] and row["id"] == "env-1" for row in rows), rows


@pytest.mark.slow
@pytest.mark.parametrize("verb, state", [("approve", "denied"), ("approve", None), ("deny", "approved"),
                                         ("revoke", "approved")])
def test_a_decision_answered_ok_with_another_state_is_not_done(hosts, tmp_path, verb, state, capsys):
    """G11: an ok item must carry the decision's state (a repeat "already ... by you" does)."""
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", [result(
        {"exit": 0, "output": [{"ok": True, "id": "apr-1", "state": state, "message": "apr-1 decided."}]})])}})
    code = main(["approvals", verb, "apr-1", "--reason", "x", "--host", "h1", "--json"])
    (row,) = json.loads(capsys.readouterr().out)["rows"]
    assert code != 0 and row["ok"] is False and row["outcome_unknown"] is True


@pytest.mark.slow
@pytest.mark.parametrize("argv", [["approvals", "show", "apr-1"], ["envs", "show", "env-1"], ["audit"],
                                  ["approvals", "list"]])
def test_a_failure_object_with_exit_0_is_never_a_clean_read(hosts, tmp_path, argv, capsys):
    """G10: `{"ok": false, "error": ...}` with exit 0 is not understood, for every method."""
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", [result(
        {"exit": 0, "output": {"ok": False, "error": "database is unusable", "rows": []}})])}})
    code = main([*argv, "--host", "h1"])
    out = capsys.readouterr()
    assert code == 4, out
    assert "does not understand" in out.out + out.err


@pytest.mark.slow
@pytest.mark.parametrize("argv, output", [
    (["doctor"], {"findings": [{"severity": "error", "id": "integrity", "title": "the file is corrupt"}]}),
    (["doctor", "--strict"], {"findings": [{"severity": "warning", "id": "wal", "title": "big wal"}]}),
    (["doctor"], {"findings": [], "usable": False, "reason": "not a database"}),
])
def test_fleet_doctors_verdict_is_the_reports(hosts, tmp_path, argv, output, capsys):
    """G6: a host's exit 0 beside a report of errors, --strict warnings or an unusable file is not clean."""
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", [result({"exit": 0, "output": output})])}})
    code = main([*argv, "--host", "h1", "--json"])
    value = json.loads(capsys.readouterr().out)
    assert code == 4 and value["ok"] is False
    assert all(row["severity"] != "none" for row in value["rows"]), value["rows"]


@pytest.mark.slow
def test_fleet_doctor_without_strict_and_only_warnings_stays_clean(hosts, tmp_path, capsys):
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", [result({"exit": 0, "output": {
        "findings": [{"severity": "warning", "id": "wal", "title": "big wal"}]}})])}})
    assert main(["doctor", "--host", "h1", "--json"]) == 0


def test_runs_over_different_hosts_never_make_the_cursor_file_unloadable(tmp_path):
    """G8: each run over one host keeps its own cursor at its share; the other runs' entries are kept
    only while they fit the rest of the file, so the next run always loads it."""
    from types import SimpleNamespace

    from console.cli.fleet_watch import _Stream, decode_cursors, encode_cursors
    from console.cli.watch_delivery import Cursor

    (tmp_path / "out").mkdir(mode=0o700)
    path = tmp_path / "out" / "cur.json"
    notes: list[str] = []
    for n in range(1, 9):  # `approvals watch --host hN --cursor cur.json`, one after the other
        host = f"h{n}"
        cursor = Cursor(str(path), notes.append, decode=decode_cursors, encode=encode_cursors)
        cursors = cursor.load() or {}
        _Stream(SimpleNamespace(names=[host]), {}, cursors, cursor, None, notes.append).keep(host, "x" * 65000)
        loaded = Cursor(str(path), notes.append, decode=decode_cursors, encode=encode_cursors).load()
        assert loaded[host] == "x" * 65000  # this run's host keeps its place
        if n > 1:
            assert f"h{n - 1}" in loaded or len(loaded) > 1  # some other run's place is kept while it fits


@pytest.mark.parametrize("text", ["1e999", "-1e999", '{"a": [1E400]}', '{"exit": 0, "output": 1e309}'])
def test_the_wire_refuses_numbers_that_parse_to_infinity(text):
    """G13: `parse_constant` never sees `1e999`; it is refused like Infinity."""
    from console.fleet.protocol import read_wire_json

    with pytest.raises(ValueError):
        read_wire_json(text)


def test_a_large_line_is_parsed_off_the_event_loop(monkeypatch):
    """G12: a line over OFF_LOOP_BYTES is decoded in a worker thread, never on the loop's own thread."""
    import asyncio
    import threading

    from console.fleet import protocol, session

    threads: list[bool] = []

    def decode(line):
        threads.append(threading.current_thread() is threading.main_thread())
        return protocol.decode(line)

    monkeypatch.setattr(session, "decode", decode)
    big = json.dumps({"jsonrpc": "2.0", "method": "x", "params": {"p": "a" * protocol.OFF_LOOP_BYTES}}).encode()

    async def run():
        reader = asyncio.StreamReader(limit=protocol.MAX_RESPONSE_BYTES + 1)
        reader.feed_data(b'{"jsonrpc": "2.0", "method": "x", "params": {}}\n' + big + b"\n")
        reader.feed_eof()
        one = session.Session.__new__(session.Session)
        one._stdout, one.spoke, one.violation, one._pending = reader, False, None, {}
        one._ended, one.on_lost = asyncio.Event(), None
        one._dispatch = lambda message: None
        await one._read()

    asyncio.run(run())
    assert threads == [True, False]
    assert protocol.MAX_RESPONSE_BYTES <= 4 * 1024 * 1024


def test_killing_a_session_whose_ssh_just_exited_leaves_the_reaping_to_asyncio(write_hosts, monkeypatch, caplog):
    """Issue 20 (test_async_failures' "Unknown child process pid N"): `Process.kill()` polls, and that
    waitpid reaped a child that had exited but that asyncio's child watcher had not reaped yet. The
    watcher is held here until the session has killed its (already exited) ssh."""
    import asyncio
    import logging
    import os
    import sys
    import threading

    from console.fleet import session as session_module

    fleet = write_hosts({"h1": {"ssh": "h1", "remote": f"{sys.executable} -c pass"}})
    gate = threading.Event()
    real_waitpid = os.waitpid

    def held_waitpid(pid, options):  # asyncio's watcher thread waits for the gate
        if threading.current_thread() is not threading.main_thread():
            gate.wait(30)
        return real_waitpid(pid, options)

    async def run():
        one = session_module.Session(fleet, fleet.hosts["h1"], sockets=None)
        await one.start()
        pid = one.process.pid
        # the fake ssh runs the remote command and exits: wait until it is a zombie nobody reaped
        for _ in range(3000):
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    break
            await asyncio.sleep(0.01)
        closing = asyncio.ensure_future(one.close(kill=True))
        for _ in range(20):
            await asyncio.sleep(0)
        gate.set()
        await closing

    monkeypatch.setattr(os, "waitpid", held_waitpid)
    with caplog.at_level(logging.WARNING, logger="asyncio"):
        asyncio.run(run())
    assert not [r for r in caplog.records if "Unknown child process" in r.getMessage()]
