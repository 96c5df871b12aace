"""`envs list/show/claim/release/complete --json` keep their exact shape now that the service
returns typed models (console/models/environments.py): archon's columns as stored, in table
order, then the derived fields in the order the CLI has always printed them."""

from __future__ import annotations

import json
import sqlite3

import pytest

from console.cli.cli import main
from console.clock import json_times
from tests.conftest import pin_real_clock
from tests.environments_support import add_env, add_lease, raw, set_claim

DERIVED = ["active_lease_count", "claim_holder", "claim_account", "claim_age_seconds", "stale", "admits_leases", "admission_reason",
           "pending_handoffs"]


@pytest.fixture
def db(make_db, monkeypatch):
    pin_real_clock(monkeypatch, "2026-11-01T09:30:00Z")
    monkeypatch.delenv("ARCHON_CONSOLE_STALE_MINUTES", raising=False)
    path = make_db(projects=["p1"])
    conn = raw(path)
    add_env(conn, "env-running", "running", idle_stop_at="2026-11-01 09:00:00")
    add_lease(conn, "env-running", "run-1")
    set_claim(conn, "env-running", "archon-worker:42", "stop", "2026-11-01 09:00:00")
    add_env(conn, "env-ready", "ready")
    conn.close()
    return path


def cli_json(capsys, *argv):
    code = main([str(a) for a in argv])
    out, _ = capsys.readouterr()
    return code, json.loads(out)


def raw_rows(path, sql, *params) -> list[dict]:
    conn = sqlite3.connect(path)
    conn.row_factory = sqlite3.Row
    try:
        return [dict(r) for r in conn.execute(sql, params)]
    finally:
        conn.close()


def test_list_and_show_print_archons_columns_then_the_derived_fields(db, capsys):
    columns = [r["name"] for r in raw_rows(db, "PRAGMA table_info(execution_environments)")]
    _, rows = cli_json(capsys, "envs", "list", "--db", db, "--json")
    stored = {r["id"]: r for r in raw_rows(db, "SELECT * FROM execution_environments")}
    for row in rows:
        assert list(row) == columns + DERIVED
        assert {k: row[k] for k in columns} == json_times(stored[row["id"]])  # as stored, instants in one form
    running = next(r for r in rows if r["id"] == "env-running")
    assert (running["active_lease_count"], running["claim_holder"], running["claim_age_seconds"], running["stale"],
            running["admits_leases"]) == (1, "archon-worker:42", 1800, True, False)
    assert running["admission_reason"] == ("it is claimed for stop; an execution lease is active (one at a time)")
    assert list(running["pending_handoffs"][0]) == ["kind", "column", "since", "age_seconds", "performed_by",
                                                    "overdue", "text"]
    _, shown = cli_json(capsys, "envs", "show", "env-running", "--db", db, "--json")
    more = ["active_leases", "bound_runs", "holding_work", "holding_not_checked", "events"]
    assert list(shown) == columns + DERIVED + more
    assert {k: v for k, v in shown.items() if k not in more} == running
    # the CLI reads everything that holds it, by environment alone: nothing is left unchecked
    assert shown["holding_not_checked"] is None
    assert [w["run"] for w in shown["holding_work"]] == [lease["execution_run_id"] for lease in shown["bound_runs"]]
    assert shown["active_leases"] == json_times(raw_rows(db, "SELECT * FROM execution_environment_run_bindings"))
    assert shown["bound_runs"] == shown["active_leases"]  # no validation binding here
    assert shown["events"] == []


def test_claim_release_and_complete_results_keep_their_keys(db, capsys):
    base = ["ok", "id", "state", "message", "noop"]
    _, claimed = cli_json(capsys, "envs", "claim", "env-ready", "--op", "stop", "--as", "alice", "--db", db, "--json")
    assert list(claimed) == base + ["operation_kind", "claim_id", "event_written"]
    _, again = cli_json(capsys, "envs", "claim", "env-ready", "--op", "stop", "--as", "alice", "--db", db, "--json")
    assert list(again) == base + ["operation_kind", "claim_id"] and again["noop"] is True
    _, completed = cli_json(capsys, "envs", "complete", "env-ready", "--as", "alice", "--db", db, "--json")
    assert list(completed) == base + ["operation_kind", "handoff", "event_written"]
    assert list(completed["handoff"]) == ["kind", "column", "since", "performed_by"]
    _, repeated = cli_json(capsys, "envs", "complete", "env-ready", "--as", "alice", "--db", db, "--json")
    assert list(repeated) == base and repeated["noop"] is True
    _, released = cli_json(capsys, "envs", "release", "env-running", "--takeover", "--reason", "worker died",
                           "--confirm-holder", "archon-worker:42", "--as", "alice", "--db", db, "--json")
    assert list(released) == base + ["operation_kind", "event_written"]
    _, shown = cli_json(capsys, "envs", "show", "env-running", "--db", db, "--json")
    assert [e["event_type"] for e in shown["events"]] == ["operation_released"]
    assert list(shown["events"][0]) == [r["name"] for r in raw_rows(db, "PRAGMA table_info(execution_environment_events)")]
