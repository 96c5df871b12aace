"""1.8.22: fail or cancel every in-flight build sequence whose tickets lack a profile selection.

Historical-destructive: active tickets become `failed`, queued ones `cancelled`, active sequences
`failed`. On the first upgrade from 1.8.20 this ends every in-flight sequence, because the
selection columns are new. Only the snapshot can bring the old statuses back.
"""

from console.db.migrations.base import columns, count

ID = "009-build-sequence-incomplete-sweep"
RELEASE = "1.8.22"
SAFETY = "historical-destructive"
DESCRIPTION = "Fail active / cancel queued tickets of build sequences without a profile selection"

INCOMPLETE = """
    SELECT DISTINCT build_sequence_id
    FROM build_sequence_tickets
    WHERE status IN ('active', 'queued')
      AND (
        execution_profile_revision_id IS NULL
        OR execution_profile_fingerprint IS NULL
        OR execution_profile_selection_reason IS NULL
      )
"""


def up(conn):
    for (sequence_id,) in conn.execute(INCOMPLETE).fetchall():
        conn.execute(
            "UPDATE build_sequence_tickets SET status = 'failed', finished_at = COALESCE(finished_at, CURRENT_TIMESTAMP) "
            "WHERE build_sequence_id = ? AND status = 'active'",
            (sequence_id,),
        )
        conn.execute(
            "UPDATE build_sequence_tickets SET status = 'cancelled', finished_at = COALESCE(finished_at, CURRENT_TIMESTAMP) "
            "WHERE build_sequence_id = ? AND status = 'queued'",
            (sequence_id,),
        )
        conn.execute(
            "UPDATE build_sequences SET status = 'failed', updated_at = CURRENT_TIMESTAMP WHERE id = ? AND status = 'active'",
            (sequence_id,),
        )


def estimate(conn):
    """Rows the sweep rewrites: affected tickets plus affected sequences.

    Before step 008 the selection columns do not exist yet; they will be NULL, so every
    sequence with an active or queued ticket is affected.
    """
    incomplete = INCOMPLETE
    if "execution_profile_selection_reason" not in columns(conn, "build_sequence_tickets"):
        incomplete = "SELECT DISTINCT build_sequence_id FROM build_sequence_tickets WHERE status IN ('active', 'queued')"
    tickets = count(
        conn,
        f"SELECT count(*) FROM build_sequence_tickets WHERE status IN ('active', 'queued') "
        f"AND build_sequence_id IN ({incomplete})",
    )
    sequences = count(
        conn, f"SELECT count(*) FROM build_sequences WHERE status = 'active' AND id IN ({incomplete})"
    )
    return tickets + sequences
