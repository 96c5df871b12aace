"""1.10.0: indexes for cleanup retries, idle stops and claims by age."""

from console.db.migrations.base import execute_script

ID = "025-environment-operation-indexes"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "Indexes on cleanup_retry_at, idle_stop_at and the operation claim"

DDL = """
CREATE INDEX IF NOT EXISTS idx_execution_environments_cleanup_retry ON execution_environments(lifecycle_state, cleanup_retry_at, cleanup_claim_id);
CREATE INDEX IF NOT EXISTS idx_execution_environments_idle_stop ON execution_environments(idle_stop_at, lifecycle_state) WHERE idle_stop_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS idx_execution_environments_operation_claim ON execution_environments(operation_claim_id, operation_claimed_at) WHERE operation_claim_id IS NOT NULL;
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
