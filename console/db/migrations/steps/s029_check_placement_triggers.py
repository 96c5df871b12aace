"""1.10.0: a batch's environment binding and an attempt's placement are written once."""

from console.db.migrations.base import execute_script

ID = "029-check-placement-triggers"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "Triggers preserve_check_batch_environment_binding and preserve_check_attempt_placement"

DDL = """
DROP TRIGGER IF EXISTS preserve_check_batch_environment_binding;
DROP TRIGGER IF EXISTS preserve_check_attempt_placement;

  CREATE TRIGGER IF NOT EXISTS preserve_check_batch_environment_binding
  BEFORE UPDATE OF runtime_compatibility_json, batch_environment_json ON check_batch_details
  WHEN OLD.runtime_compatibility_json IS NOT NULL OR OLD.batch_environment_json IS NOT NULL
    OR NEW.runtime_compatibility_json IS NULL OR NEW.batch_environment_json IS NULL
  BEGIN
    SELECT RAISE(ABORT, 'Check batch environment binding is immutable');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_check_attempt_placement
  BEFORE UPDATE OF placement_json ON check_attempt_details
  WHEN OLD.placement_json IS NOT NULL OR NEW.placement_json IS NULL
  BEGIN
    SELECT RAISE(ABORT, 'Check attempt placement is immutable');
  END;
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
