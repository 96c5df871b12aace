"""Rows of a working archon, the starting rows of the oracle's scenarios and of the console's tests.

Plain SQL through archon's own tables and triggers (foreign keys on), in the shapes a real archon
holds: projects, build sequences with active and queued tickets (what step 009 sweeps),
environments with events and a lease, check batches and attempts with a diagnostic parser (a
CASCADE child of a rebuilt table), and an AUTOINCREMENT table archon does not share with the
console (so `sqlite_sequence` must survive). They live here, not in tests/upgrade_helpers.py, because
the oracle may not depend on anything that imports `console` (tests/test_reference_profiles.py).
Timestamps are fixed in 2024, so anything written later with CURRENT_TIMESTAMP can be told apart.
"""

from __future__ import annotations

import sqlite3

FP = "a" * 64
T0 = "2024-03-01 10:00:00"


def populate_1820_rows(conn: sqlite3.Connection, projects: int = 2) -> None:
    """Rows every release from 1.8.20 on can hold (no profile or approval columns)."""
    conn.execute("BEGIN")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS archon_misc_log (id INTEGER PRIMARY KEY AUTOINCREMENT, note TEXT)"
    )
    conn.executemany("INSERT INTO archon_misc_log (note) VALUES (?)", [("a",), ("b",), ("c",)])
    conn.execute("DELETE FROM archon_misc_log WHERE note = 'c'")  # sqlite_sequence stays at 3
    for p in range(1, projects + 1):
        pid = f"proj-{p}"
        conn.execute(
            "INSERT INTO projects (id, name, repo_path, created_at, required_check_definition_ids) "
            "VALUES (?, ?, ?, ?, ?)",
            (pid, f"Project {p}", f"/srv/repo{p}", T0, '["lint"]' if p == 1 else None),
        )
        for t in range(1, 5):
            conn.execute(
                "INSERT INTO tickets (id, project_id, title, created_at) VALUES (?, ?, ?, ?)",
                (f"{pid}-t{t}", pid, f"Ticket {t}", T0),
            )
        # An in-flight sequence (active + queued tickets) and a finished one.
        conn.execute(
            "INSERT INTO build_sequences (id, project_id, status, created_at, updated_at) VALUES (?, ?, 'active', ?, ?)",
            (f"{pid}-seq-live", pid, T0, T0),
        )
        conn.execute(
            "INSERT INTO build_sequences (id, project_id, status, created_at, updated_at) VALUES (?, ?, 'completed', ?, ?)",
            (f"{pid}-seq-done", pid, T0, T0),
        )
        # From 1.8.22 on, queued and active tickets must carry the project's profile selection.
        selection = {}
        cols = {r[1] for r in conn.execute("PRAGMA table_info(build_sequence_tickets)")}
        if "execution_profile_selection_reason" in cols:
            rev, fp = conn.execute(
                "SELECT r.id, r.fingerprint FROM projects p JOIN execution_profile_revisions r "
                "ON r.id = p.active_execution_profile_revision_id WHERE p.id = ?",
                (pid,),
            ).fetchone()
            selection = {
                "execution_profile_revision_id": rev,
                "execution_profile_fingerprint": fp,
                "execution_profile_selection_reason": "project_active_at_acceptance",
            }
        for sequence, position, ticket, status in (
            ("live", 1, "t1", "completed"), ("live", 2, "t2", "active"), ("live", 3, "t3", "queued"),
            ("done", 1, "t4", "completed"),
        ):
            row = {
                "build_sequence_id": f"{pid}-seq-{sequence}", "ticket_id": f"{pid}-{ticket}",
                "position": position, "status": status, "entered_queue_at": T0,
                "started_at": T0 if status != "queued" else None,
                "finished_at": T0 if status == "completed" else None, **selection,
            }
            conn.execute(
                f"INSERT INTO build_sequence_tickets ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                tuple(row.values()),
            )
        # Runs, an environment with events and a lease, a check batch with attempts.
        for r in ("build", "batch", "a1", "a2"):
            conn.execute(
                "INSERT INTO execution_runs (id, project_id, kind, status, created_at) VALUES (?, ?, ?, 'completed', ?)",
                (f"{pid}-run-{r}", pid, "check" if r != "build" else "build", T0),
            )
        env = f"{pid}-env"
        conn.execute(
            "INSERT INTO execution_environments (id, project_id, provider_kind, provider_version, target_kind, "
            "target_key, target_workspace_path, environment_revision, workspace_mode, "
            "environment_validation_fingerprint, template_identity, lifecycle_state, created_at, updated_at, ready_at) "
            "VALUES (?, ?, 'docker', '1', 'repo_root', 'root', ?, 1, 'direct', ?, 'tmpl:1', 'ready', ?, ?, ?)",
            (env, pid, f"/srv/repo{p}", FP, T0, T0, T0),
        )
        for seq, (old, new) in enumerate([(None, "queued"), ("queued", "preparing"), ("preparing", "ready")], 1):
            conn.execute(
                "INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, event_type, "
                "from_state, to_state, created_at) VALUES (?, ?, ?, ?, 'lifecycle', ?, ?, ?)",
                (f"{env}-ev{seq}", pid, env, seq, old, new, T0),
            )
        conn.execute(
            "INSERT INTO execution_environment_run_bindings (id, environment_id, execution_run_id, project_id, "
            "relationship, environment_revision, environment_validation_fingerprint, authority_json, bound_at) "
            "VALUES (?, ?, ?, ?, 'execution', 1, ?, '{}', ?)",
            (f"{env}-lease", env, f"{pid}-run-build", pid, FP, T0),
        )
        conn.execute(
            "INSERT INTO check_batch_details (execution_run_id, purpose, completed_at) VALUES (?, 'manual', ?)",
            (f"{pid}-run-batch", T0),
        )
        for a, outcome in (("a1", "passed"), ("a2", "command_failure")):
            conn.execute(
                "INSERT INTO check_attempt_details (execution_run_id, batch_run_id, definition_id, "
                "command_snapshot_json, definition_fingerprint, outcome, exit_code) VALUES (?, ?, 'lint', '{}', ?, ?, ?)",
                (f"{pid}-run-{a}", f"{pid}-run-batch", FP, outcome, 0 if outcome == "passed" else 1),
            )
            conn.execute(
                "INSERT INTO check_attempt_diagnostic_parsers (attempt_run_id, parser_id, created_at) VALUES (?, 'eslint', ?)",
                (f"{pid}-run-{a}", T0),
            )
    conn.execute("COMMIT")
