"""The project overview on every release shape: it shows what exists and says None for the rest."""

from __future__ import annotations

from datetime import timedelta

import pytest

from console.db.connect import open_database
from console.services.projects import list_projects
from tests.approvals_helpers import NOW, add_project, add_request, connect, dump, ts

FINGERPRINT = "a" * 64


def add_environment(conn, env_id, project_id, state, *, claim_age: timedelta | None = None, kind="stop"):
    conn.execute(
        "INSERT INTO execution_environments (id, project_id, provider_kind, provider_version, target_kind, target_key, "
        "target_workspace_path, environment_revision, workspace_mode, environment_validation_fingerprint, "
        "template_identity, lifecycle_state) VALUES (?, ?, 'host', '1', 'repo_root', 'main', '/w', 1, 'direct', ?, 't', ?)",
        (env_id, project_id, FINGERPRINT, state),
    )
    if claim_age is not None:
        conn.execute(
            "UPDATE execution_environments SET operation_claim_id = ?, operation_kind = ?, operation_claimed_at = ? "
            "WHERE id = ?",
            (f"archon-worker:{env_id}", kind, ts(NOW - claim_age), env_id),
        )


def build(schema_db, release):
    path = schema_db(release)
    conn = connect(path)
    add_project(conn, "p1", "Payments")
    add_project(conn, "p2", "Archive", deleting="2026-10-31 12:00:00")
    add_environment(conn, "env-1", "p1", "ready", claim_age=timedelta(minutes=3) if release == "1.10.0" else None)
    add_environment(conn, "env-2", "p1", "running", claim_age=timedelta(minutes=40) if release == "1.10.0" else None)
    add_environment(conn, "env-3", "p1", "ready")
    add_environment(conn, "env-4", "p2", "retired")
    if release != "1.8.20":
        add_request(conn, "r1", "p1", expires_at=NOW + timedelta(minutes=20))
        add_request(conn, "r2", "p1", expires_at=NOW + timedelta(hours=3))
        add_request(conn, "r3", "p1", expires_at=NOW - timedelta(minutes=1))
    conn.close()
    return path


def test_1_10_0_shows_everything(schema_db):
    path = build(schema_db, "1.10.0")
    before = dump(path)
    with open_database(path, read_only=True) as h:
        projects = {p.id: p for p in list_projects(h, now=NOW)}
    assert dump(path) == before
    p1, p2 = projects["p1"], projects["p2"]
    assert (p1.active_revision, p1.active_schema_version, p1.build_execution_provider) == (1, 3, "host")
    assert (p1.pending_approvals, p1.pending_expiring_within_hour, p1.pending_overdue) == (3, 1, 1)
    assert p1.environments == {"ready": 2, "running": 1} and p1.environments_total == 3
    assert (p1.claims_held, p1.claims_stale) == (2, 1)
    assert p2.deleting is True and p2.environments == {"retired": 1} and p2.claims_held == 0
    assert p2.pending_approvals == 0 and p1.deleting is False


def test_stale_threshold_is_configurable(schema_db):
    path = build(schema_db, "1.10.0")
    with open_database(path) as h:
        p1 = {p.id: p for p in list_projects(h, now=NOW, stale_after=timedelta(minutes=2))}["p1"]
    assert p1.claims_stale == 2


def test_1_8_22_has_no_claims(schema_db):
    path = build(schema_db, "1.8.22")
    with open_database(path) as h:
        p1 = {p.id: p for p in list_projects(h, now=NOW)}["p1"]
    assert p1.active_schema_version == 2 and p1.pending_approvals == 3
    assert p1.claims_held is None and p1.claims_stale is None


def test_1_8_20_has_neither_profiles_nor_approvals(schema_db):
    path = build(schema_db, "1.8.20")
    with open_database(path) as h:
        p1 = {p.id: p for p in list_projects(h, now=NOW)}["p1"]
    assert p1.active_revision is None and p1.pending_approvals is None and p1.claims_held is None
    assert p1.environments == {"ready": 2, "running": 1}


@pytest.mark.parametrize("release", ["1.8.20", "1.8.22", "1.10.0"])
def test_projects_list_command_on_every_shape(schema_db, capsys, release):
    from console.cli.cli import main

    path = build(schema_db, release)
    assert main(["projects", "list", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert "Payments" in out and "Archive [being deleted]" in out
