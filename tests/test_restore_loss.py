"""`restore` says what it would lose, and refuses to re-arm what archon already executed (issue 18, finding 1).

Main put the snapshot back silently: an approval archon's executor had consumed since was `approved`
again with `consumed_at` NULL, so archon could run the action a second time. Now both files are read
first (console/services/upgrade/restore_loss.py) and what would be lost is in the prompt, `--plan`
and `--json`; undoing a consumption is refused (exit 3, naming the request) unless --rearm-consumed.
Real files, real CLI processes, changes written with sqlite3 exactly as archon's own statements would.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from console.errors import EXIT_OK, EXIT_UNUSABLE
from console.services.upgrade.run import run_upgrade
from tests.restore_helpers import ENVS, LATER, REQUESTS, _armed, _as_archon, _consume, _decide, _event, _restore
from tests.upgrade_helpers import connect, dump, fingerprint_dir

pytestmark = pytest.mark.slow


def test_undoing_a_consumption_is_refused_naming_the_request(tmp_path):
    path, snapshot = _armed(tmp_path)
    _as_archon(path, lambda conn: _consume(conn, "apr-0"))
    state = fingerprint_dir(tmp_path)
    proc = _restore(path, snapshot, "--yes")
    assert proc.returncode == EXIT_UNUSABLE, proc.stdout + proc.stderr
    assert "apr-0" in proc.stderr and "--rearm-consumed" in proc.stderr
    assert "executable again" in proc.stdout + proc.stderr or "approved again" in proc.stderr
    assert "Traceback" not in proc.stderr
    assert fingerprint_dir(tmp_path) == state  # nothing replaced, nothing written beside it
    consumed = dump(path)
    forced = _restore(path, snapshot, "--yes", "--rearm-consumed")
    assert forced.returncode == EXIT_OK, forced.stderr
    assert "1 consumed approvals: apr-0" in forced.stdout
    assert "are executable again: apr-0" in forced.stdout
    assert dump(path) != consumed
    conn = connect(path)
    assert conn.execute("SELECT status, consumed_at FROM approval_requests WHERE id = 'apr-0'").fetchone() == (
        "approved", None)  # what the operator accepted with --rearm-consumed
    conn.close()


def test_plan_and_json_say_what_would_be_lost_and_write_nothing(tmp_path):
    path, snapshot = _armed(tmp_path)

    def since(conn):
        _consume(conn, "apr-0")
        _decide(conn, "apr-1", "denied")
        conn.execute("UPDATE execution_environments SET operation_claim_id = 'archon-worker:7', "
                     "operation_kind = 'retire', operation_claimed_at = ?, lifecycle_state = 'retiring', "
                     "retirement_requested_at = ? WHERE id = 'proj-1-env'", (LATER, LATER))

    _as_archon(path, since)
    state = fingerprint_dir(tmp_path)
    plan = _restore(path, snapshot, "--plan")
    assert plan.returncode == EXIT_UNUSABLE, plan.stdout + plan.stderr  # the restore itself would be refused
    assert "Would restore" in plan.stdout and "REFUSED" in plan.stdout
    assert "1 environment claims: proj-1-env" in plan.stdout
    assert "1 environment lifecycle changes: proj-1-env" in plan.stdout
    as_json = _restore(path, snapshot, "--plan", "--json")
    report = json.loads(as_json.stdout)
    assert report["planned"] is True and report["replaced_path"] is None
    lost = report["loss"]["lost"]
    assert lost["consumed_approvals"] == {"count": 1, "first": ["apr-0"]}
    assert lost["decisions"] == {"count": 1, "first": ["apr-1"]}  # apr-0 was approved before the snapshot
    assert lost["claims"]["first"] == ["proj-1-env"] and lost["lifecycle"]["first"] == ["proj-1-env"]
    assert lost["approval_events"]["count"] == 2
    assert report["loss"]["rearmed"] == {"count": 1, "first": ["apr-0"]}
    refused = _restore(path, snapshot, "--yes", "--json")
    assert refused.returncode == EXIT_UNUSABLE
    assert json.loads(refused.stdout)["loss"]["rearmed"]["first"] == ["apr-0"]
    assert fingerprint_dir(tmp_path) == state


def test_a_restore_that_loses_nothing_says_so(tmp_path):
    path, snapshot = _armed(tmp_path)
    assert _restore(path, snapshot, "--yes").returncode == EXIT_OK  # back to the snapshot's content
    plan = _restore(path, snapshot, "--plan", "--json")
    assert plan.returncode == EXIT_OK, plan.stderr
    assert json.loads(plan.stdout)["loss"]["nothing_lost"] is True
    again = _restore(path, snapshot, "--yes")
    assert again.returncode == EXIT_OK, again.stderr
    assert "Nothing written since the snapshot was lost." in again.stdout


# --- generated changes since the snapshot: the report counts exactly what differs --------------

@pytest.fixture(scope="module")
def template(tmp_path_factory) -> tuple[Path, Path]:
    """One upgraded database and its snapshot; each example works on copies."""
    return _armed(tmp_path_factory.mktemp("restore-loss"))


CHANGES = st.fixed_dictionaries({
    "decided": st.dictionaries(st.sampled_from(REQUESTS[1:]), st.sampled_from(["approved", "denied", "consumed", "invalidated", "expired"])),
    "consume_approved": st.booleans(),
    "claimed": st.sets(st.sampled_from(ENVS)),
    "stopped": st.sets(st.sampled_from(ENVS)),
    "approval_events": st.integers(0, 4),
    "environment_events": st.integers(0, 4),
})


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=CHANGES)
def test_the_report_counts_what_changed_since_the_snapshot(template, changes):
    from console.services.upgrade.restore_loss import loss_since  # here: main had no such module

    db, snapshot = template
    with tempfile.TemporaryDirectory() as scratch:
        path, snap = Path(scratch) / "archon.db", Path(scratch) / snapshot.name
        shutil.copyfile(db, path)
        shutil.copyfile(snapshot, snap)
        base = {kind.name: kind.count for kind in loss_since(path, snap).kinds}  # the upgrade's own writes
        for name in ("decisions", "consumed_approvals", "claims", "lifecycle", "approval_events",
                     "environment_events"):
            assert base[name] == 0, name

        def write(conn):
            for request, outcome in changes["decided"].items():
                _decide(conn, request, "approved" if outcome == "consumed" else outcome)
                if outcome == "consumed":
                    _consume(conn, request)
            if changes["consume_approved"]:
                _consume(conn, "apr-0")
            for env in changes["claimed"]:
                conn.execute("UPDATE execution_environments SET operation_claim_id = ?, operation_kind = 'stop', "
                             "operation_claimed_at = ? WHERE id = ?", (f"archon-worker:{env}", LATER, env))
            for env in changes["stopped"]:
                conn.execute("UPDATE execution_environments SET lifecycle_state = 'stopped', stopped_at = ? "
                             "WHERE id = ?", (LATER, env))
            for _ in range(changes["approval_events"]):
                _event(conn, "apr-5", "pending", "pending", "system")
            for n in range(changes["environment_events"]):
                conn.execute(
                    "INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, "
                    "event_type, from_state, to_state, created_at) VALUES (?, 'proj-2', 'proj-2-env', ?, "
                    "'lifecycle', 'ready', 'ready', ?)", (f"proj-2-env-new{n}", 10 + n, LATER),
                )

        _as_archon(path, write)
        report = loss_since(path, snap)
        counts = {kind.name: kind.count for kind in report.kinds}
        consumed = [r for r, outcome in changes["decided"].items() if outcome == "consumed"]
        consumed += ["apr-0"] if changes["consume_approved"] else []
        # a consumption is not a decision: apr-0 was approved before the snapshot
        assert counts["decisions"] == len(changes["decided"])
        assert counts["consumed_approvals"] == len(consumed)
        # each was pending or approved in the snapshot: decidable, then executable, again
        withdrawn = consumed + [r for r, outcome in changes["decided"].items() if outcome in ("invalidated", "expired")]
        assert report.rearmed_count == len(withdrawn)
        assert sorted(report.rearmed) == sorted(withdrawn)
        assert sorted(report.revived) == sorted(changes["stopped"]) == sorted(report.revived)
        assert counts["claims"] == len(changes["claimed"])
        assert counts["lifecycle"] == len(changes["stopped"])
        events = changes["approval_events"] + len(changes["decided"]) + len(consumed)
        assert counts["approval_events"] == events
        assert counts["environment_events"] == changes["environment_events"]
        assert counts["profile_activations"] == base["profile_activations"]
        assert counts["profile_events"] == base["profile_events"]
        assert report.nothing_lost == (sum(counts.values()) == 0)


# --- generated changes in any table: the per-table report is exactly what differs ----------------

def _oracle(now_path: Path, then_path: Path) -> dict[str, tuple[set, set, set]]:
    """(added, changed, deleted) keys of every table that differs, by loading both files whole: the
    brute-force answer the streamed comparison must give."""
    def load(path):
        conn = connect(path)
        conn.text_factory = bytes
        tables = {}
        for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"):
            name = name.decode()
            if name.startswith("sqlite_") or name in ("_sqlite_migrations", "_archon_console_ledger"):
                continue
            info = list(conn.execute(f'PRAGMA table_info("{name}")'))
            columns = [row[1].decode() for row in info]
            keys = [row[1].decode() for row in sorted((r for r in info if r[5]), key=lambda r: r[5])]
            rows = {}
            for row in conn.execute(f'SELECT rowid, * FROM "{name}"'):
                values = dict(zip(columns, row[1:]))
                rows[tuple(values[k] for k in keys) if keys else row[0]] = values
            tables[name] = (columns, rows)
        conn.close()
        return tables

    now, then = load(now_path), load(then_path)
    result = {}
    for name in set(now) | set(then):
        cols_now, rows_now = now.get(name, ([], {}))
        cols_then, rows_then = then.get(name, ([], {}))
        common = [c for c in cols_now if c in cols_then]
        added, deleted = set(rows_now) - set(rows_then), set(rows_then) - set(rows_now)
        changed = {k for k in set(rows_now) & set(rows_then)
                   if [rows_now[k][c] for c in common] != [rows_then[k][c] for c in common]}
        if added or changed or deleted or name not in now or name not in then or cols_now != cols_then:
            result[name] = (added, changed, deleted)
    return result


RUNS = [f"proj-1-apr-run-{i}" for i in range(6)] + [f"proj-{p}-run-{r}" for p in (1, 2)
                                                      for r in ("a1", "a2", "batch", "build")]
ANY_TABLE = st.fixed_dictionaries({
    "runs": st.dictionaries(st.sampled_from(RUNS), st.sampled_from(["complete", "fail", "delete"])),
    "new_runs": st.integers(0, 3),
    "bindings": st.dictionaries(st.sampled_from(["proj-1-env-lease", "proj-2-env-lease"]),
                                st.sampled_from(["release", "delete"])),
    "deleting": st.sets(st.sampled_from(["proj-1", "proj-2"])),
    "environments": st.dictionaries(st.sampled_from(ENVS), st.sampled_from(["cleanup", "retry", "delete"])),
    "against": st.sampled_from(["copy", "snapshot"]),  # the same schema, or the older one the upgrade left
})


def _write_anywhere(conn: sqlite3.Connection, changes: dict) -> None:
    """Archon's kinds of writes; one its rules refuse (RAISE, CHECK, a foreign key) is simply not made."""
    def attempt(sql: str, params: tuple = ()) -> None:
        try:
            conn.execute(sql, params)
        except sqlite3.IntegrityError:
            pass

    for run, what in changes["runs"].items():
        if what == "delete":
            attempt("DELETE FROM execution_runs WHERE id = ?", (run,))
        else:
            attempt("UPDATE execution_runs SET status = ?, finished_at = ? WHERE id = ?",
                    ("completed" if what == "complete" else "failed", LATER, run))
    for n in range(changes["new_runs"]):
        attempt("INSERT INTO execution_runs (id, project_id, kind, status, created_at) VALUES (?, 'proj-2', "
                "'build', 'queued', ?)", (f"proj-2-new-run-{n}", LATER))
    for binding, what in changes["bindings"].items():
        if what == "delete":
            attempt("DELETE FROM execution_environment_run_bindings WHERE id = ?", (binding,))
        else:
            attempt("UPDATE execution_environment_run_bindings SET released_at = ? WHERE id = ?", (LATER, binding))
    for project in changes["deleting"]:
        attempt("UPDATE projects SET deletion_started_at = ?, deletion_claim_id = 'archon-deleter:1' WHERE id = ?",
                (LATER, project))
    for env, what in changes["environments"].items():
        if what == "delete":
            attempt("DELETE FROM execution_environments WHERE id = ?", (env,))
        elif what == "cleanup":
            attempt("UPDATE execution_environments SET cleanup_attempts = cleanup_attempts + 1 WHERE id = ?", (env,))
        else:
            attempt("UPDATE execution_environments SET cleanup_retry_at = ? WHERE id = ?", (LATER, env))


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(changes=ANY_TABLE)
def test_the_report_counts_exactly_what_differs_in_any_table(template, changes):
    from console.services.upgrade.restore_loss import loss_since

    db, snapshot = template
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "archon.db"
        shutil.copyfile(db, path)
        then = Path(scratch) / "then.sqlite3"
        shutil.copyfile(db if changes["against"] == "copy" else snapshot, then)
        if changes["against"] == "copy":
            assert loss_since(path, then).nothing_lost
        _as_archon(path, lambda conn: _write_anywhere(conn, changes))
        expected = _oracle(path, then)
        report = loss_since(path, then)
        assert report.unreadable is None
        got = {table.table: (table.added.count, table.changed.count, table.deleted.count) for table in report.tables}
        assert got == {name: tuple(len(keys) for keys in sets) for name, sets in expected.items()}
        for table in report.tables:  # the first ids shown are among the ones that differ
            added, changed, deleted = expected[table.table]
            for shown, keys in ((table.added.first, added), (table.changed.first, changed),
                                (table.deleted.first, deleted)):
                assert set(shown) <= {"/".join(str(v.decode() if isinstance(v, bytes) else v) for v in k)
                                      if isinstance(k, tuple) else f"rowid {k}" for k in keys}
        assert report.nothing_lost == (not expected)
        text = "\n".join(report.lines())
        assert ("Nothing written since the snapshot" in text) == (not expected)
