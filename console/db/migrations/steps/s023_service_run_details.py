"""1.10.0: service runs, one unfinished run per (project, context) (seed DDL, verbatim)."""

from console.db.migrations.base import execute_script

ID = "023-service-run-details"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "service_run_details with idx_active_service_run_context and idx_service_run_profile"

DDL = """
  CREATE TABLE IF NOT EXISTS service_run_details (
    execution_run_id                 TEXT PRIMARY KEY,
    project_id                       TEXT NOT NULL,
    context_key                      TEXT NOT NULL,
    target_kind                      TEXT NOT NULL,
    target_key                       TEXT NOT NULL,
    target_workspace_path            TEXT NOT NULL,
    execution_profile_revision_id    TEXT NOT NULL,
    execution_profile_fingerprint    TEXT NOT NULL,
    provider_kind                    TEXT,
    environment_id                   TEXT,
    environment_revision             INTEGER,
    service_snapshot_json            TEXT NOT NULL,
    placement_json                   TEXT,
    interruption_scope               TEXT,
    created_at                       DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    started_at                       DATETIME,
    completed_at                     DATETIME,
    updated_at                       DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (execution_run_id, project_id) REFERENCES execution_runs(id, project_id) ON DELETE CASCADE,
    FOREIGN KEY (project_id, execution_profile_revision_id)
      REFERENCES execution_profile_revisions(project_id, id) ON DELETE RESTRICT,
    CHECK (length(CAST(context_key AS BLOB)) BETWEEN 1 AND 1000),
    CHECK (length(CAST(target_kind AS BLOB)) BETWEEN 1 AND 100),
    CHECK (length(CAST(target_key AS BLOB)) BETWEEN 1 AND 1000),
    CHECK (length(CAST(target_workspace_path AS BLOB)) BETWEEN 1 AND 4096),
    CHECK (length(execution_profile_fingerprint) = 64 AND execution_profile_fingerprint NOT GLOB '*[^0-9a-f]*'),
    CHECK (provider_kind IS NULL OR provider_kind IN ('host', 'docker_sandbox')),
    CHECK ((environment_id IS NULL) = (environment_revision IS NULL)),
    CHECK (environment_revision IS NULL OR environment_revision >= 1),
    CHECK (length(CAST(service_snapshot_json AS BLOB)) BETWEEN 2 AND 16384),
    CHECK (placement_json IS NULL OR length(CAST(placement_json AS BLOB)) BETWEEN 2 AND 16384),
    CHECK (interruption_scope IS NULL OR interruption_scope IN ('local_processes', 'whole_environment'))
  );

  CREATE UNIQUE INDEX IF NOT EXISTS idx_active_service_run_context
    ON service_run_details(project_id, context_key)
    WHERE completed_at IS NULL;

  CREATE INDEX IF NOT EXISTS idx_service_run_profile
    ON service_run_details(project_id, execution_profile_revision_id, created_at);
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
