"""The fleet command line end to end: `archon-console --fleet ...` in this process, each host a real
`archon-console serve --stdio` on its own SQLite file, reached through the fake ssh
(tests/fleet/fake_ssh.py, a real process). What lands where, with which actor, is read back from
the files."""

from __future__ import annotations

import json
import os
import stat
import sys
from datetime import datetime, timedelta, timezone

import pytest

from console.cli.cli import main
from tests.approvals_helpers import add_project, add_request, events, status_of, ts
from tests.conftest import connect

pytestmark = pytest.mark.slow  # every call starts one server process per host


def _later(hours: float) -> str:
    return ts(datetime.now(timezone.utc) + timedelta(hours=hours))


def _db(make_db, name: str, requests: dict[str, float]):
    """A host's own database: a project of its own (its instance id), requests expiring in hours."""
    project = f"p-{name}"

    def fill(conn):
        add_project(conn, project)
        for request_id, hours in requests.items():
            add_request(conn, request_id, project, expires_at=_later(hours))

    return make_db(name=f"{name}.db", fill=fill)


def _forced(tmp_path, actor: str, db) -> str:
    """A host whose key is a forced command (`command="archon-console serve --stdio --actor=..."`):
    whatever the client asks to run, the host runs its own server, with the actor it names."""
    script = tmp_path / f"forced-{actor}.sh"
    script.write_text(f"#!/bin/sh\nexec {sys.executable} -m console serve --stdio --actor={actor} --db {db}\n")
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


@pytest.fixture
def fleet(make_db, write_hosts, tmp_path, monkeypatch):
    eu1 = _db(make_db, "eu1", {"apr-a": 3, "apr-shared": 1})
    us1 = _db(make_db, "us1", {"apr-b": 2, "apr-shared": 4})
    write_hosts({
        "eu1": {"ssh": "eu1", "remote": _forced(tmp_path, "erin", eu1), "groups": ["eu"]},
        "us1": {"ssh": "us1", "remote": _forced(tmp_path, "carol", us1), "groups": ["us"]},
        "dead": {"ssh": "dead", "remote": str(tmp_path / "no-console-here"), "groups": ["broken"]},
    })
    monkeypatch.setenv("ARCHON_CONSOLE_HOSTS", str(tmp_path / "hosts.toml"))
    return {"eu1": eu1, "us1": us1}


def _json(capsys):
    return json.loads(capsys.readouterr().out)


def test_merged_list_has_the_host_first_and_sorts_by_expiry_across_hosts(fleet, capsys):
    assert main(["--group", "eu", "--group", "us", "approvals", "list", "--json"]) == 0
    value = _json(capsys)
    assert value["ok"] is True and value["exit"] == 0
    assert [(r["host"], r["id"]) for r in value["rows"]] == [
        ("eu1", "apr-shared"), ("us1", "apr-b"), ("eu1", "apr-a"), ("us1", "apr-shared")]
    assert [h["state"] for h in value["hosts"]] == ["ok", "ok"]
    assert main(["approvals", "list", "--host", "eu1", "--host", "us1"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split()[:2] == ["HOST", "ID"] and out[2].split()[:2] == ["eu1", "apr-shared"]


def test_one_host_down_is_a_partial_answer_with_its_sentence(fleet, capsys):
    assert main(["--fleet", "approvals", "list"]) == 4
    captured = capsys.readouterr()
    assert "apr-b" in captured.out
    (said,) = [line for line in captured.err.splitlines() if line.startswith("dead: ")]
    assert "no_server" in said or "unreachable" in said
    assert main(["--fleet", "approvals", "list", "--json"]) == 4
    value = _json(capsys)
    assert value["ok"] is False and {h["host"]: h["exit"] for h in value["hosts"]}["dead"] == 4


def test_approve_host_id_lands_on_its_host_only_with_the_actor_the_host_resolved(fleet, capsys):
    assert main(["--fleet", "--as", "mallory", "approvals", "approve", "us1:apr-shared"]) == 2  # never sent
    capsys.readouterr()
    assert main(["--group", "eu", "--group", "us", "approvals", "approve", "us1:apr-shared", "--json"]) == 0
    value = _json(capsys)
    assert [(r["host"], r["id"], r["ok"]) for r in value["rows"]] == [("us1", "apr-shared", True)]
    assert status_of(fleet["us1"], "apr-shared") == "approved"
    assert status_of(fleet["eu1"], "apr-shared") == "pending"
    assert events(fleet["us1"], "apr-shared")[-1]["actor_reference"] == "carol"


def test_a_bare_id_on_two_hosts_is_refused_with_the_candidates_and_nothing_is_written(fleet, capsys):
    assert main(["--group", "eu", "--group", "us", "approvals", "approve", "apr-shared"]) == 2
    assert "eu1:apr-shared, us1:apr-shared" in capsys.readouterr().err
    assert status_of(fleet["eu1"], "apr-shared") == status_of(fleet["us1"], "apr-shared") == "pending"


def test_bare_ids_on_one_host_each_go_one_call_per_host(fleet, capsys):
    assert main(["--group", "eu", "--group", "us", "approvals", "deny", "apr-a", "apr-b", "--reason", "no",
                 "--json"]) == 0
    value = _json(capsys)
    assert sorted((r["host"], r["id"]) for r in value["rows"]) == [("eu1", "apr-a"), ("us1", "apr-b")]
    assert status_of(fleet["eu1"], "apr-a") == status_of(fleet["us1"], "apr-b") == "denied"


def test_doctor_over_hosts_is_the_worst_hosts_exit_and_a_silent_host_is_not_clean(fleet, capsys):
    code_clean = main(["--group", "eu", "--group", "us", "doctor", "--json"])
    value = _json(capsys)
    assert code_clean == max(h["exit"] for h in value["hosts"])
    assert {r["host"] for r in value["rows"]} == {"eu1", "us1"}
    assert main(["--fleet", "doctor"]) == 4
    out = capsys.readouterr().out
    assert "dead" in out and "host.no_server" in out or "host.unreachable" in out


def test_upgrade_plan_over_hosts_one_row_each(fleet, capsys):
    assert main(["--group", "eu", "--group", "us", "upgrade", "--plan", "--json"]) == 0
    rows = _json(capsys)["rows"]
    assert [r["host"] for r in rows] == ["eu1", "us1"] and all(r["pending"] is not None for r in rows)
