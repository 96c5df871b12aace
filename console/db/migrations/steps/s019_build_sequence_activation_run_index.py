"""1.8.22: one run activates at most one ticket."""

ID = "019-build-sequence-activation-run-index"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "Unique partial index idx_build_sequence_tickets_activation_run"


def up(conn):
    conn.execute(
        """CREATE UNIQUE INDEX IF NOT EXISTS idx_build_sequence_tickets_activation_run
  ON build_sequence_tickets(activation_execution_run_id)
  WHERE activation_execution_run_id IS NOT NULL"""
    )


def estimate(conn):
    return 0
