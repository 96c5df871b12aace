"""1.8.22: tickets carry their profile selection; replaced entries keep theirs."""

from console.db.migrations.base import ensure_column, execute_script

ID = "008-build-sequence-profile-columns"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "build_sequence_tickets profile selection columns; build_sequence_ticket_replacements"

DDL = """
  CREATE TABLE IF NOT EXISTS build_sequence_ticket_replacements (
    id                                 TEXT PRIMARY KEY,
    build_sequence_id                  TEXT NOT NULL,
    ticket_id                          TEXT NOT NULL,
    position                           INTEGER NOT NULL,
    execution_profile_revision_id      TEXT NOT NULL,
    execution_profile_fingerprint      TEXT NOT NULL,
    execution_profile_selection_reason TEXT NOT NULL,
    replaced_at                        DATETIME DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (build_sequence_id) REFERENCES build_sequences(id) ON DELETE CASCADE,
    FOREIGN KEY (ticket_id) REFERENCES tickets(id) ON DELETE CASCADE
  )
"""


def up(conn):
    execute_script(conn, DDL)
    for column in (
        "execution_profile_revision_id",
        "execution_profile_fingerprint",
        "execution_profile_selection_reason",
        "activation_execution_run_id",
    ):
        ensure_column(conn, "build_sequence_tickets", column, "TEXT")


def estimate(conn):
    return 0
