"""Hostile and misconfigured hosts end to end (issue 20, attack findings F1, F2, F3, F16, F17): the
command line over hosts scripted by tests/fleet/peer.py `--replay` (any answer a host can send) or a
real forced-command server, through the fake ssh. The client decides from what it sent; this
machine's hosts.toml policy is enforced on this machine."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from console.cli.cli import main
from console.cli.fleet_watch import _Stream, cursor_cap, decode_cursors, encode_cursors
from console.fleet.client import call_hosts
from tests.fleet.conftest import peer

HELLO = {"protocol": 1, "instance_id": "hostile-1", "read_only": False, "actor": "tester", "actor_source": "login"}


def _replay(tmp_path, name: str, result) -> str:
    script = tmp_path / f"{name}.json"
    line = json.dumps({"jsonrpc": "2.0", "id": "{id}", "result": "R"})
    script.write_text(json.dumps({
        "hello": [line.replace('"{id}"', "{id}").replace('"R"', json.dumps({**HELLO, "instance_id": name}))],
        "method": [line.replace('"{id}"', "{id}").replace('"R"', json.dumps(result))]}))
    return peer("--replay", str(script))


@pytest.mark.slow
@pytest.mark.parametrize("code", [256, 512, 2 ** 32, -1, 300])
def test_a_hosts_exit_code_never_becomes_the_runs(hosts, tmp_path, code, capsys):
    """F1: `sys.exit(256)` is status 0; a host saying exit 256 must not make a refused write, or
    another host's failure, a success."""
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", {"exit": code, "output": {"ok": False}})},
           "h2": {"ssh": "h2", "remote": _replay(tmp_path, "h2", {"exit": 1, "output": {"findings": [
               {"severity": "error", "id": "x", "title": "t"}]}})}})
    assert main(["doctor", "--fleet"]) == 4
    assert main(["approvals", "approve", "h1:apr-1", "--reason", "x", "--host", "h1"]) == 4


@pytest.mark.slow
@pytest.mark.parametrize("answer", [
    {"exit": 0, "output": [{"ok": True, "id": "apr-OTHER", "state": "approved", "message": "m"}]},
    {"exit": 0, "output": []},
    {"exit": 1, "output": [{"ok": True, "id": "apr-1", "state": "approved", "message": "m"},
                           {"ok": True, "id": "apr-2", "state": "approved", "message": "m"}]},
])
def test_a_write_answered_for_other_ids_none_or_exit_1_is_never_ok(hosts, tmp_path, answer, capsys):
    """F2: every id sent gets one row; an id the host did not answer for is outcome unknown."""
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", answer)}})
    code = main(["approvals", "approve", "h1:apr-1", "h1:apr-2", "--reason", "x", "--host", "h1", "--json"])
    value = json.loads(capsys.readouterr().out)
    assert code != 0 and value["ok"] is False and value["exit"] == code
    assert [r["id"] for r in value["rows"] if r["id"] in ("apr-1", "apr-2")] == ["apr-1", "apr-2"]


@pytest.mark.slow
def test_a_doctor_answer_that_is_not_a_report_is_unknown_not_clean(hosts, tmp_path, capsys):
    """F17."""
    hosts({"h1": {"ssh": "h1", "remote": _replay(tmp_path, "h1", {"exit": 0, "output": {"method": "doctor"}})}})
    assert main(["doctor", "--host", "h1", "--json"]) == 4
    value = json.loads(capsys.readouterr().out)
    assert value["ok"] is False and [r["severity"] for r in value["rows"]] == ["unknown"]


@pytest.mark.slow
def test_a_write_is_never_sent_to_a_host_hosts_toml_marks_read_only(write_hosts, tmp_path):
    """F16: refused here, before the host is contacted (no ssh started), whatever its server does."""
    markers = tmp_path / "markers"
    markers.mkdir()
    fleet = write_hosts({"h1": {"ssh": "h1", "remote": peer("--markers", str(markers)), "read_only": True}})
    for method in ("approvals.approve", "approvals.expire", "envs.claim", "profiles.activate", "no.such.method"):
        [outcome] = call_hosts(fleet, list(fleet.hosts.values()), method, {"ids": ["a"]}, cache=False)
        assert outcome.state == "read_only" and "nothing was sent" in outcome.sentence
    assert list(markers.iterdir()) == []  # no process was started for any of them
    [read] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {}, cache=False)
    assert read.state == "ok"


@pytest.mark.slow
def test_a_read_only_host_behind_a_forced_command_keeps_its_requests(hosts, make_db, tmp_path, capsys):
    """F16 end to end: the forced command drops `--read-only`; the write is refused here, exit 1,
    the file is untouched, and a read says that the host's server is not read-only."""
    from tests.fleet.serve_helpers import forced_server, host_db
    from tests.approvals_helpers import status_of

    db = host_db(make_db, "h1", {"apr-a": 3})
    hosts({"h1": {"ssh": "h1", "remote": forced_server(tmp_path, "alice", db), "read_only": True}})
    assert main(["approvals", "approve", "h1:apr-a", "--reason", "x", "--host", "h1"]) == 1
    assert "read-only in hosts.toml; nothing was sent" in capsys.readouterr().err
    assert main(["approvals", "expire", "--host", "h1"]) == 1
    assert status_of(db, "apr-a") == "pending"
    assert main(["approvals", "list", "--host", "h1"]) == 0
    assert "its server does not run read-only" in capsys.readouterr().err


# ------------------------------------------------------------------ F3: one host's cursor
def _stream(tmp_path, names):
    from console.cli.watch_delivery import Cursor

    said = []
    cursor = Cursor(str(tmp_path / "cursor.json"), said.append, decode=decode_cursors, encode=encode_cursors)
    runner = SimpleNamespace(names=names)
    return _Stream(runner, {}, {}, cursor, None, said.append), cursor, said


@pytest.mark.parametrize("hosts_count", [2, 17, 40])
def test_one_hosts_oversized_cursor_never_costs_the_others_their_place(tmp_path, hosts_count):
    names = [f"h{i}" for i in range(hosts_count)]
    stream, cursor, said = _stream(tmp_path, names)
    stream.keep("h0", {"rowid": 1, "reminded": ["x" * 70_000]})  # over any cap
    for name in names[1:]:  # every honest host at its cap
        stream.keep(name, {"rowid": 5, "event_id": None, "reminded": ["y" * (cursor_cap(hosts_count) - 60)]})
    loaded = cursor.load()
    assert "h0" not in loaded and set(loaded) == set(names[1:])
    assert len([s for s in said if "not kept" in s]) == 1


def test_a_file_with_one_oversized_entry_loads_the_others(tmp_path):
    big = {"rowid": 1, "reminded": ["x" * 70_000]}
    assert decode_cursors({"fleet": {"h1": big, "h2": {"rowid": 3}}}) == {"h2": {"rowid": 3}}
