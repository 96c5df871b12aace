"""The 1.8.20 demo at scale: `--requests N` sizes archon 1.8.20's run history (no approvals there).

Counts follow console.demo.history.plan(N) exactly, histories are consistent, the file is a
valid unversioned 1.8.20 database, and an upgrade from it does the work the history is for:
the sweep fails or cancels every in-flight sequence, the check-attempt rebuilds keep every row
and every diagnostic-parser child, every project gets its profile.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from collections import Counter
from datetime import datetime, timezone

import pytest

from console.cli.cli import main
from console.db.detect import detect_shape
from console.demo.writer import generate
from console.demo.history import meaning, plan
from console.services.upgrade.run import run_upgrade
from tests.conftest import connect

NOW = "2026-05-01T12:00:00Z"
AT = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)
SMALL, LARGE = 8_000, 16_000


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    """Row counts of the hand-written 1.8.20 data alone (N = 0)."""
    path = tmp_path_factory.mktemp("base") / "base.db"
    return generate(path, release="1.8.20", requests=0, now=NOW).counts


@pytest.fixture(scope="module")
def scaled(tmp_path_factory):
    """N -> (path, summary) of a 1.8.20 demo database with that many requests' worth of history."""
    root = tmp_path_factory.mktemp("history")
    out = {}
    for n in (SMALL, LARGE):
        path = root / f"1820-{n}.db"
        out[n] = (path, generate(path, release="1.8.20", requests=n, now=NOW))
    return out


def one(conn, sql, params=()):
    return conn.execute(sql, params).fetchone()[0]


@pytest.mark.slow
def test_is_an_unversioned_1820_database(scaled):
    path, summary = scaled[SMALL]
    conn = connect(path)
    shape = detect_shape(conn)
    assert shape.release == "1.8.20", shape.reason
    assert not shape.has_ledger_table
    assert one(conn, "PRAGMA journal_mode") == "wal"
    assert one(conn, "PRAGMA integrity_check") == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert not tables & {"approval_requests", "execution_profile_revisions"}
    assert summary.requests == SMALL and summary.requests_meaning == meaning("1.8.20")
    assert "no approval tables" in summary.requests_meaning


@pytest.mark.parametrize("n", [SMALL, LARGE])
def test_counts_follow_the_plan(scaled, base, n):
    path, summary = scaled[n]
    shape = plan(n)
    counts = summary.counts
    assert counts["check_batch_details"] - base["check_batch_details"] == shape.check_batches == n // 8
    assert counts["check_attempt_details"] - base["check_attempt_details"] == shape.check_attempts == n // 2
    assert counts["projects"] - base["projects"] == shape.projects == n // 1000
    assert counts["tickets"] - base["tickets"] == shape.tickets
    assert counts["build_sequences"] - base["build_sequences"] == shape.settled_sequences + shape.projects
    assert counts["execution_environments"] - base["execution_environments"] == shape.environments
    assert counts["execution_environment_run_bindings"] - base["execution_environment_run_bindings"] == (
        shape.leases + shape.environments)  # each environment's validation binding besides the leases
    history_runs = counts["execution_runs"] - base["execution_runs"]
    assert 0.95 * n < history_runs < 1.02 * n
    parsers = counts["check_attempt_diagnostic_parsers"] / shape.check_attempts
    assert 0.35 < parsers < 0.65
    assert summary.as_dict()["counts"] == counts


def test_counts_scale_with_n(scaled, base):
    small, large = scaled[SMALL][1].counts, scaled[LARGE][1].counts
    for table in ("execution_runs", "check_attempt_details", "check_batch_details",
                  "check_attempt_diagnostic_parsers", "tickets", "build_sequence_tickets",
                  "execution_environment_events", "execution_environment_run_bindings"):
        ratio = (large[table] - base[table]) / (small[table] - base[table])
        assert 1.9 < ratio < 2.1, table


def test_environment_histories_are_consistent(scaled):
    conn = connect(scaled[SMALL][0])
    envs = conn.execute("SELECT * FROM execution_environments WHERE id LIKE 'env-h-%'").fetchall()
    assert {e["lifecycle_state"] for e in envs} == {"retired", "stopped"}
    events: dict[str, list] = {}
    for row in conn.execute("SELECT * FROM execution_environment_events WHERE environment_id LIKE"
                            " 'env-h-%' ORDER BY environment_id, sequence"):
        events.setdefault(row["environment_id"], []).append(row)
    for env in envs:
        history = events[env["id"]]
        assert [e["sequence"] for e in history] == list(range(1, len(history) + 1))
        assert history[0]["from_state"] is None and history[0]["to_state"] == "queued"
        for before, after in zip(history, history[1:]):
            assert after["from_state"] == before["to_state"]
            assert after["created_at"] >= before["created_at"]
        assert history[-1]["to_state"] == env["lifecycle_state"]
        assert env["updated_at"] == history[-1]["created_at"] <= "2026-05-01 12:00:00"
        leases = conn.execute(
            "SELECT bound_at, released_at FROM execution_environment_run_bindings"
            " WHERE environment_id = ? AND relationship = 'execution' ORDER BY bound_at",
            (env["id"],)).fetchall()
        assert sum(1 for e in history if e["event_type"] == "started") == len(leases) >= 1
        for lease, after in zip(leases, leases[1:]):
            assert lease["released_at"] is not None and lease["released_at"] <= after["bound_at"]
    assert one(conn, "SELECT count(*) FROM execution_environment_run_bindings"
                     " WHERE id LIKE 'bind-h-%' AND released_at IS NULL") == 0


def test_check_batches_and_reruns(scaled):
    conn = connect(scaled[SMALL][0])
    attempts = conn.execute(
        "SELECT a.*, r.status AS run_status FROM check_attempt_details a JOIN execution_runs r"
        " ON r.id = a.execution_run_id WHERE a.batch_run_id LIKE 'run-h-%'").fetchall()
    by_id = {a["execution_run_id"]: a for a in attempts}
    per_batch = Counter(a["batch_run_id"] for a in attempts)
    assert set(per_batch.values()) == {4}
    reruns = [a for a in attempts if a["rerun_of_attempt_run_id"]]
    assert reruns
    for a in reruns:
        first = by_id[a["rerun_of_attempt_run_id"]]
        assert first["batch_run_id"] == a["batch_run_id"]
        assert first["definition_id"] == a["definition_id"]
    outcomes = Counter(a["outcome"] for a in attempts)
    assert outcomes["passed"] > 0.75 * len(attempts)
    assert {"command_failure", "timeout"} <= set(outcomes)
    for a in attempts:
        assert (a["run_status"] == "completed") == (a["outcome"] == "passed")
        if a["output_retention_state"] == "expired":
            assert a["retained_output"] == "" and a["retained_start_offset"] == a["retained_end_offset"]
        else:
            assert len(a["retained_output"].encode()) == a["total_persisted_bytes"]
        json.loads(a["initial_workspace_identity_json"])
    assert {a["output_retention_state"] for a in attempts} == {"retained", "expired"}
    late = one(conn, "SELECT count(*) FROM execution_runs WHERE id LIKE 'run-h-%' AND"
                     " (created_at < '2026-03-17' OR created_at > '2026-05-01 12:00:00'"
                     " OR finished_at > '2026-05-01 12:00:00')")
    assert late == 0


def test_every_extra_project_has_one_sequence_in_flight(scaled):
    conn = connect(scaled[SMALL][0])
    extra = [r[0] for r in conn.execute(
        "SELECT id FROM projects WHERE id NOT IN (SELECT project_id FROM worktree_bundles)"
        " AND id NOT IN (SELECT project_id FROM tickets WHERE id LIKE 'tkt-%' AND id NOT LIKE 'tkt-h-%')")]
    assert len(extra) == plan(SMALL).projects
    for project_id in extra:
        active = conn.execute("SELECT id FROM build_sequences WHERE project_id = ? AND status = 'active'",
                              (project_id,)).fetchall()
        assert len(active) == 1
        statuses = [r[0] for r in conn.execute(
            "SELECT status FROM build_sequence_tickets WHERE build_sequence_id = ? ORDER BY position",
            (active[0][0],))]
        assert statuses == ["completed", "active", "queued", "queued"]
    settled_open = one(conn, "SELECT count(*) FROM build_sequence_tickets t JOIN build_sequences s"
                             " ON s.id = t.build_sequence_id WHERE s.status <> 'active'"
                             " AND t.status IN ('active', 'queued')")
    assert settled_open == 0


def test_deterministic_for_a_seed(tmp_path):
    paths = [tmp_path / f"{k}.db" for k in range(3)]
    for path, seed in zip(paths, (7, 7, 8)):
        generate(path, release="1.8.20", requests=2_000, now=NOW, seed=seed)
    dump = lambda p: list(sqlite3.connect(p).iterdump())  # noqa: E731
    assert dump(paths[0]) == dump(paths[1])
    assert dump(paths[0]) != dump(paths[2])


@pytest.mark.slow
def test_upgrade_to_current_does_the_work(scaled, tmp_path):
    path = tmp_path / "archon.db"
    shutil.copyfile(scaled[SMALL][0], path)
    before = connect(path)
    in_flight = one(before, "SELECT count(*) FROM build_sequence_tickets WHERE status IN ('active', 'queued')")
    active_sequences = one(before, "SELECT count(*) FROM build_sequences WHERE status = 'active'")
    failed_before = one(before, "SELECT count(*) FROM build_sequences WHERE status = 'failed'")
    attempts = one(before, "SELECT count(*) FROM check_attempt_details")
    parsers = one(before, "SELECT count(*) FROM check_attempt_diagnostic_parsers")
    projects = one(before, "SELECT count(*) FROM projects")
    before.close()
    assert in_flight >= 3 * plan(SMALL).projects

    seen = []
    result = run_upgrade(path, force=True, now=AT, snapshot_dir=tmp_path, progress=seen.append)
    assert result.status == "upgraded" and result.release_after == "1.10.0"
    assert seen[-1].kind == "done"
    conn = connect(path)
    assert one(conn, "PRAGMA quick_check") == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    assert one(conn, "SELECT count(*) FROM build_sequence_tickets WHERE status IN ('active', 'queued')") == 0
    assert one(conn, "SELECT count(*) FROM build_sequences WHERE status = 'failed'") == (
        failed_before + active_sequences)
    assert one(conn, "SELECT count(*) FROM check_attempt_details") == attempts
    assert one(conn, "SELECT count(*) FROM check_attempt_diagnostic_parsers") == parsers
    assert one(conn, "SELECT count(*) FROM projects p JOIN execution_profile_revisions r"
                     " ON r.id = p.active_execution_profile_revision_id") == projects
    assert one(conn, "SELECT count(DISTINCT project_id) FROM execution_profile_audit_events") == projects


def test_cli_says_what_n_meant(tmp_path, capsys):
    path = tmp_path / "cli.db"
    assert main(["demo", str(path), "--now", NOW, "--release", "1.8.20", "--requests", "4000",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["requests"] == 4000 and "1.8.20" in summary["requests_meaning"]
    assert summary["counts"]["check_attempt_details"] >= 2000
    text = tmp_path / "text.db"
    assert main(["demo", str(text), "--now", NOW, "--release", "1.8.20", "--requests", "400"]) == 0
    assert "N sizes its run history" in capsys.readouterr().out
    try:
        main(["demo", "--help"])
    except SystemExit:  # argparse's own exit, when the CLI lets it through
        pass
    assert "1.8.20 the size of the run history" in " ".join(capsys.readouterr().out.split())


@pytest.mark.slow
def test_progress_reports_the_history(tmp_path):
    seen = []
    generate(tmp_path / "p.db", release="1.8.20", requests=50_000, now=NOW,
             progress=lambda stage, done, total: seen.append((stage, done, total)))
    history = [s for s in seen if s[0] == "1.8.20 history"]
    assert len(history) >= 2
    assert history[-1][1] == history[-1][2] == plan(50_000).items
    assert [s[1] for s in history] == sorted(s[1] for s in history)
