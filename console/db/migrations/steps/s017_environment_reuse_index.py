"""1.8.22: the reuse index also keys on profile, credentials and retirement requests."""

ID = "017-environment-reuse-index"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Re-create idx_execution_environments_reuse with 11 columns"

INDEX = "CREATE INDEX idx_execution_environments_reuse ON execution_environments(project_id, provider_kind, target_key, target_workspace_path, environment_revision, workspace_mode, environment_validation_fingerprint, execution_profile_fingerprint, credential_requirements_fingerprint, retirement_requested_at, lifecycle_state)"


def up(conn):
    conn.execute("DROP INDEX IF EXISTS idx_execution_environments_reuse")
    conn.execute(INDEX)


def estimate(conn):
    return 0
