"""1.8.22: build setup evidence, whose identity is fixed once recorded (seed DDL, verbatim)."""

from console.db.migrations.base import execute_script

ID = "015-build-setup-evidence"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "build_setup_evidence, 3 indexes, preserve_build_setup_evidence_identity"

DDL = """
  CREATE TABLE IF NOT EXISTS build_setup_evidence (
    id                              TEXT PRIMARY KEY,
    project_id                      TEXT NOT NULL,
    execution_run_id                TEXT NOT NULL,
    target_kind                     TEXT NOT NULL,
    target_key                      TEXT NOT NULL,
    target_workspace_path           TEXT NOT NULL,
    workspace_evidence_state        TEXT NOT NULL,
    workspace_evidence_fingerprint  TEXT,
    setup_configuration_fingerprint TEXT NOT NULL,
    execution_profile_fingerprint   TEXT NOT NULL,
    provider                        TEXT NOT NULL,
    environment_revision            INTEGER,
    command_count                    INTEGER NOT NULL,
    outcome                          TEXT NOT NULL,
    reused_from_evidence_id          TEXT,
    started_at                       DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    completed_at                     DATETIME,
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE,
    FOREIGN KEY (execution_run_id, project_id) REFERENCES execution_runs(id, project_id) ON DELETE CASCADE,
    FOREIGN KEY (reused_from_evidence_id) REFERENCES build_setup_evidence(id) ON DELETE CASCADE,
    CHECK (length(id) BETWEEN 1 AND 128),
    CHECK (length(target_kind) BETWEEN 1 AND 100),
    CHECK (length(CAST(target_key AS BLOB)) BETWEEN 1 AND 1000),
    CHECK (length(CAST(target_workspace_path AS BLOB)) BETWEEN 1 AND 4096),
    CHECK (workspace_evidence_state IN ('available', 'unavailable')),
    CHECK ((workspace_evidence_state = 'available') = (workspace_evidence_fingerprint IS NOT NULL)),
    CHECK (workspace_evidence_fingerprint IS NULL OR (length(workspace_evidence_fingerprint) = 64 AND workspace_evidence_fingerprint NOT GLOB '*[^0-9a-f]*')),
    CHECK (length(setup_configuration_fingerprint) = 64 AND setup_configuration_fingerprint NOT GLOB '*[^0-9a-f]*'),
    CHECK (length(execution_profile_fingerprint) = 64 AND execution_profile_fingerprint NOT GLOB '*[^0-9a-f]*'),
    CHECK (provider IN ('host', 'docker_sandbox')),
    CHECK ((provider = 'host') = (environment_revision IS NULL)),
    CHECK (environment_revision IS NULL OR environment_revision >= 1),
    CHECK (command_count >= 0),
    CHECK (outcome IN ('running', 'completed', 'noop', 'reused', 'failed')),
    CHECK ((outcome = 'reused') = (reused_from_evidence_id IS NOT NULL)),
    CHECK ((outcome = 'running') = (completed_at IS NULL))
  );

  CREATE UNIQUE INDEX IF NOT EXISTS idx_build_setup_evidence_active_target
    ON build_setup_evidence(project_id, target_key)
    WHERE outcome = 'running';

  CREATE INDEX IF NOT EXISTS idx_build_setup_evidence_reuse
    ON build_setup_evidence(
      project_id, target_key, workspace_evidence_fingerprint,
      setup_configuration_fingerprint, execution_profile_fingerprint,
      provider, environment_revision, completed_at DESC
    )
    WHERE outcome IN ('completed', 'noop', 'reused');

  CREATE UNIQUE INDEX IF NOT EXISTS idx_build_setup_evidence_execution_run
    ON build_setup_evidence(execution_run_id);

  CREATE TRIGGER IF NOT EXISTS preserve_build_setup_evidence_identity
  BEFORE UPDATE OF id, project_id, execution_run_id, target_kind, target_key,
    target_workspace_path, workspace_evidence_state, workspace_evidence_fingerprint,
    setup_configuration_fingerprint, execution_profile_fingerprint, provider,
    environment_revision, command_count, reused_from_evidence_id, started_at
    ON build_setup_evidence
  BEGIN
    SELECT RAISE(ABORT, 'Build setup evidence identity is immutable');
  END;
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
