"""The fleet command line through real OpenSSH (issue 20, item 8): `archon-console --fleet ...` run
as the operator runs it, a process of its own with ARCHON_CONSOLE_HOSTS naming a hosts.toml whose
hosts are the lab's sshd instances (tests/fleet/sshd.py). The merged view, a decision named
HOST:ID that lands on its host with the actor that host resolved, and the console starting with
every host down.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.approvals_helpers import events, status_of
from tests.fleet.sshd_hosts import host_db, write_fleet

pytestmark = pytest.mark.slow  # each test starts sshd instances and runs the console over ssh


def console(lab, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, ARCHON_CONSOLE_HOSTS=str(lab.base / "hosts.toml"))
    return subprocess.run([sys.executable, "-m", "console", *args], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, timeout=120)


def test_the_merged_queue_of_real_hosts_and_a_decision_by_host_id(fleet_lab, make_db):
    lab = fleet_lab
    eu, us = lab.add_hosts(2)
    dbs = {eu.name: host_db(make_db, eu.name, requester="bob"), us.name: host_db(make_db, us.name, requester="bob")}
    alice = lab.client_key("alice")
    entries = {}
    for host in (eu, us):
        host.authorize(alice.with_suffix(".pub"), 'restrict,command="archon-console serve --stdio --actor=alice"')
        entries[host.name] = {"ssh": lab.alias(f"{host.name}-alice", host.address, host.port, identity=alice),
                              "db": str(dbs[host.name])}
    write_fleet(lab, entries)
    listed = console(lab, "--fleet", "approvals", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    value = json.loads(listed.stdout)
    assert [h["state"] for h in value["hosts"]] == ["ok", "ok"]
    assert {(row["host"], row["id"]) for row in value["rows"]} >= {(eu.name, "apr-x"), (us.name, "apr-x")}
    # apr-x is on both hosts: a bare id is refused with the candidates, HOST:ID lands on its host only.
    bare = console(lab, "--fleet", "approvals", "approve", "apr-x")
    assert bare.returncode == 2 and f"{eu.name}:apr-x" in bare.stderr and "Traceback" not in bare.stderr
    decided = console(lab, "--fleet", "approvals", "approve", f"{us.name}:apr-x")
    assert decided.returncode == 0, decided.stderr
    assert status_of(dbs[us.name], "apr-x") == "approved" and status_of(dbs[eu.name], "apr-x") == "pending"
    (event,) = [e for e in events(dbs[us.name], "apr-x") if e["to_status"] == "approved"]
    assert event["actor_reference"] == "alice"
    assert json.loads(event["metadata_json"])["actor_source"] == "forced_command"


def test_the_console_starts_with_every_host_down(fleet_lab, make_db):
    lab = fleet_lab
    hosts = lab.add_hosts(2)
    refused = lab.refused()
    write_fleet(lab, {**{h.name: {"ssh": h.name, "db": str(host_db(make_db, h.name))} for h in hosts},
                      "never": {"ssh": refused}})
    first = console(lab, "--fleet", "approvals", "list", "--json")
    assert first.returncode == 4, first.stderr  # "never" has never answered
    for host in hosts:
        host.stop()
    down = console(lab, "--fleet", "approvals", "list", "--json")
    assert down.returncode == 4 and "Traceback" not in down.stderr
    value = json.loads(down.stdout)
    states = {h["host"]: h["state"] for h in value["hosts"]}
    assert states == {"host1": "stale", "host2": "stale", "never": "unreachable"}, value["hosts"]
    assert {row["host"] for row in value["rows"]} == {"host1", "host2"}  # the last rows, marked stale
    text = console(lab, "--fleet", "approvals", "list")
    assert text.returncode == 4 and "Traceback" not in text.stderr
    assert "Connection refused" in text.stdout + text.stderr


def test_a_long_fan_out_over_lost_hosts_says_only_sentences(fleet_lab, make_db):
    lab = fleet_lab
    hosts = lab.add_hosts(2)
    entries = {h.name: {"ssh": h.name, "db": str(host_db(make_db, h.name))} for h in hosts}
    write_fleet(lab, entries)
    assert console(lab, "--fleet", "approvals", "list").returncode == 0  # the shared connections stay
    for host in hosts:
        host.stop()
    write_fleet(lab, {**entries, "hole": {"ssh": lab.black_hole()}})
    down = console(lab, "--fleet", "approvals", "list")
    assert down.returncode == 4
    said = [line for line in down.stderr.splitlines() if line.strip()]
    assert [line.split(":")[0] for line in said] == ["host1", "host2", "hole"], down.stderr
