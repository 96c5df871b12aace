"""1.8.22: tickets that are queued or active must carry a valid, frozen profile selection."""

from console.db.migrations.base import execute_script

ID = "010-build-sequence-profile-triggers"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Triggers validating and freezing build sequence ticket profile selections"

DDL = """
  CREATE TRIGGER IF NOT EXISTS validate_build_sequence_ticket_profile_insert
  BEFORE INSERT ON build_sequence_tickets
  WHEN NEW.status IN ('active', 'queued')
    OR NEW.execution_profile_revision_id IS NOT NULL OR NEW.execution_profile_fingerprint IS NOT NULL
    OR NEW.execution_profile_selection_reason IS NOT NULL
  BEGIN
    SELECT CASE WHEN
      NEW.execution_profile_revision_id IS NULL
      OR NEW.execution_profile_fingerprint IS NULL
      OR NEW.execution_profile_selection_reason NOT IN ('project_active_at_acceptance', 'historical_lineage')
      OR NOT EXISTS (
        SELECT 1
        FROM execution_profile_revisions revision
        JOIN build_sequences sequence ON sequence.id = NEW.build_sequence_id
        WHERE revision.id = NEW.execution_profile_revision_id
          AND revision.project_id = sequence.project_id
          AND revision.fingerprint = NEW.execution_profile_fingerprint
      )
    THEN RAISE(ABORT, 'Invalid Build sequence execution profile selection') END;
  END;

  CREATE TRIGGER IF NOT EXISTS validate_build_sequence_ticket_profile_activation
  BEFORE UPDATE OF status ON build_sequence_tickets
  WHEN NEW.status IN ('active', 'queued') AND (
    NEW.execution_profile_revision_id IS NULL
    OR NEW.execution_profile_fingerprint IS NULL
    OR NEW.execution_profile_selection_reason NOT IN ('project_active_at_acceptance', 'historical_lineage')
    OR NOT EXISTS (
      SELECT 1
      FROM execution_profile_revisions revision
      JOIN build_sequences sequence ON sequence.id = NEW.build_sequence_id
      WHERE revision.id = NEW.execution_profile_revision_id
        AND revision.project_id = sequence.project_id
        AND revision.fingerprint = NEW.execution_profile_fingerprint
    )
  )
  BEGIN
    SELECT RAISE(ABORT, 'Invalid Build sequence execution profile selection');
  END;

  CREATE TRIGGER IF NOT EXISTS preserve_build_sequence_ticket_profile
  BEFORE UPDATE OF execution_profile_revision_id, execution_profile_fingerprint, execution_profile_selection_reason
  ON build_sequence_tickets
  WHEN NEW.execution_profile_revision_id IS NOT OLD.execution_profile_revision_id
    OR NEW.execution_profile_fingerprint IS NOT OLD.execution_profile_fingerprint
    OR NEW.execution_profile_selection_reason IS NOT OLD.execution_profile_selection_reason
  BEGIN
    SELECT RAISE(ABORT, 'Build sequence execution profile selection is immutable');
  END;
"""


def up(conn):
    execute_script(conn, DDL)


def estimate(conn):
    return 0
