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


@pytest.fixture
def hosts(write_hosts, tmp_path, monkeypatch):
    def write(table):
        fleet = write_hosts(table)
        monkeypatch.setenv("ARCHON_CONSOLE_HOSTS", str(tmp_path / "hosts.toml"))
        return fleet
    return write


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
