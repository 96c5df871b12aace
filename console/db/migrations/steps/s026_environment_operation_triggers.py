"""1.10.0: claims are all-or-nothing, and claimed or retiring environments admit no new lease."""

from console.db.migrations.base import execute_script

ID = "026-environment-operation-triggers"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "Triggers validate_execution_environment_operation_claim and lease admission"

DDL = """
  CREATE TRIGGER IF NOT EXISTS validate_execution_environment_operation_claim
  BEFORE UPDATE OF operation_claim_id, operation_kind, operation_claimed_at ON execution_environments
  WHEN NOT (
    (NEW.operation_claim_id IS NULL AND NEW.operation_kind IS NULL AND NEW.operation_claimed_at IS NULL)
    OR (
      length(NEW.operation_claim_id) BETWEEN 1 AND 128
      AND NEW.operation_kind IN ('stop', 'retire', 'reset', 'cleanup_retry')
      AND NEW.operation_claimed_at IS NOT NULL
    )
  )
  BEGIN
    SELECT RAISE(ABORT, 'Invalid execution environment operation claim');
  END;

  CREATE TRIGGER IF NOT EXISTS validate_execution_environment_lease_admission
  BEFORE INSERT ON execution_environment_run_bindings
  WHEN NEW.relationship = 'execution' AND NOT EXISTS (
    SELECT 1 FROM execution_environments
    WHERE id = NEW.environment_id
      AND project_id = NEW.project_id
      AND lifecycle_state IN ('ready', 'running', 'stopped')
      AND retirement_requested_at IS NULL
      AND operation_claim_id IS NULL
  )
  BEGIN
    SELECT RAISE(ABORT, 'Execution environment is not admitting leases');
  END;
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
