"""1.8.22: immutable execution profile revisions and their audit trail (seed DDL, verbatim)."""

from console.db.migrations.base import execute_script

ID = "003-profile-tables"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "execution_profile_revisions and execution_profile_audit_events with indexes"

DDL = """
  CREATE TABLE IF NOT EXISTS execution_profile_revisions (
    id             TEXT PRIMARY KEY,
    project_id     TEXT NOT NULL,
    revision       INTEGER NOT NULL CHECK (revision > 0),
    schema_version INTEGER NOT NULL CHECK (schema_version IN (1, 2)),
    fingerprint    TEXT NOT NULL CHECK (length(fingerprint) = 64),
    profile_json   TEXT NOT NULL CHECK (
      json_valid(profile_json)
      AND json_type(profile_json) = 'object'
      AND length(CAST(profile_json AS BLOB)) BETWEEN 2 AND 16384
    ),
    created_at     DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    UNIQUE (project_id, revision),
    UNIQUE (project_id, fingerprint),
    UNIQUE (project_id, id),
    FOREIGN KEY (project_id) REFERENCES projects(id) ON DELETE CASCADE
  );

  CREATE TABLE IF NOT EXISTS execution_profile_audit_events (
    id                           TEXT PRIMARY KEY,
    project_id                   TEXT NOT NULL,
    event_type                   TEXT NOT NULL CHECK (event_type IN ('revision_created', 'revision_activated')),
    profile_revision_id          TEXT NOT NULL,
    previous_profile_revision_id TEXT,
    metadata_json                TEXT CHECK (
      metadata_json IS NULL OR (
        json_valid(metadata_json)
        AND json_type(metadata_json) = 'object'
        AND length(CAST(metadata_json AS BLOB)) BETWEEN 2 AND 16384
      )
    ),
    created_at                   DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (project_id, profile_revision_id)
      REFERENCES execution_profile_revisions(project_id, id) ON DELETE CASCADE,
    FOREIGN KEY (project_id, previous_profile_revision_id)
      REFERENCES execution_profile_revisions(project_id, id) ON DELETE CASCADE
  );

  CREATE INDEX IF NOT EXISTS idx_execution_profile_revisions_project
    ON execution_profile_revisions(project_id, revision DESC);
  CREATE INDEX IF NOT EXISTS idx_execution_profile_audit_project
    ON execution_profile_audit_events(project_id, created_at DESC, id DESC);
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
