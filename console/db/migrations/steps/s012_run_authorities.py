"""1.8.22: the authority each run was granted, fixed once recorded."""

from console.db.migrations.base import execute_script

ID = "012-run-authorities"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "execution_run_authorities and preserve_execution_run_authority"

DDL = """
  CREATE TABLE IF NOT EXISTS execution_run_authorities (
    execution_run_id                 TEXT NOT NULL,
    project_id                       TEXT NOT NULL,
    execution_profile_revision_id    TEXT NOT NULL,
    execution_profile_fingerprint    TEXT NOT NULL,
    authority_json                   TEXT NOT NULL,
    created_at                       DATETIME NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (execution_run_id),
    FOREIGN KEY (execution_run_id, project_id) REFERENCES execution_runs(id, project_id) ON DELETE CASCADE,
    FOREIGN KEY (project_id, execution_profile_revision_id)
      REFERENCES execution_profile_revisions(project_id, id) ON DELETE RESTRICT,
    CHECK (length(execution_profile_fingerprint) = 64 AND execution_profile_fingerprint NOT GLOB '*[^0-9a-f]*'),
    CHECK (length(CAST(authority_json AS BLOB)) BETWEEN 2 AND 16384)
  );

  CREATE TRIGGER IF NOT EXISTS preserve_execution_run_authority
  BEFORE UPDATE ON execution_run_authorities
  BEGIN
    SELECT RAISE(ABORT, 'Execution run authority is immutable');
  END;
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
