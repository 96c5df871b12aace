"""The fleet client against the real `archon-console serve --stdio` (console/cli/server.py), run
through the fake ssh on this machine: the client's states over the server's actual answers."""

from __future__ import annotations

import pytest

from console.fleet.client import call_hosts
from tests.approvals_helpers import live_request, seed, status_of

pytestmark = pytest.mark.slow  # every test starts console processes


def test_reads_and_a_write_through_the_real_server(write_hosts, make_db):
    one = make_db(fill=seed, name="one.db")
    other = make_db(projects=("p9",), name="other.db")
    request = live_request(one)
    fleet = write_hosts({"one": {"ssh": "one", "db": str(one)},
                         "other": {"ssh": "other", "db": str(other), "read_only": True}})
    hosts = list(fleet.hosts.values())
    listed = call_hosts(fleet, hosts, "approvals.list", {"status": "pending"})
    assert [(o.host, o.state, o.exit) for o in listed] == [("one", "ok", 0), ("other", "ok", 0)], listed
    assert request in {row["id"] for row in listed[0].data} and listed[1].data == []
    assert listed[0].hello["db"] == str(one) and listed[1].hello["read_only"] is True
    assert listed[0].hello["instance_id"] != listed[1].hello["instance_id"]

    [approved] = call_hosts(fleet, hosts[:1], "approvals.approve", {"ids": [request], "reason": "fleet test"})
    assert approved.state == "ok" and approved.exit == 0, approved
    assert status_of(one, request) == "approved"
    [refused] = call_hosts(fleet, hosts[1:], "approvals.expire", {})
    # refused here, before the host is contacted (hosts.toml is this machine's policy: F16)
    assert refused.state == "read_only" and "nothing was sent" in refused.sentence


def test_two_entries_for_one_database_and_a_missing_database(write_hosts, make_db, tmp_path):
    one = make_db(fill=seed, name="one.db")
    fleet = write_hosts({"a": {"ssh": "a", "db": str(one)}, "b": {"ssh": "b", "db": str(one)},
                         "gone": {"ssh": "gone", "db": str(tmp_path / "nothing-here.db")}})
    a, b, gone = call_hosts(fleet, list(fleet.hosts.values()), "projects.list", {})
    assert (a.state, b.state) == ("wrong_instance", "wrong_instance") and "as a:" in b.sentence
    assert gone.state == "remote_error", gone
