"""Archon's check_attempt_details replacement table, per release (outcome list and placement)."""

OUTCOMES_1822 = """'passed', 'command_failure', 'spawn_failure',
          'infrastructure_failure', 'evidence_persistence_failure', 'timeout',
          'workspace_changed_before_start', 'user_stop', 'restart_loss', 'shutdown_loss', 'ambiguous_process_loss'"""

OUTCOMES_1100 = OUTCOMES_1822 + ", 'environment_loss'"

COLUMNS = [
    "execution_run_id", "batch_run_id", "definition_id", "command_snapshot_json", "definition_fingerprint",
    "initial_workspace_identity_json", "final_workspace_identity_json", "outcome", "rerun_of_attempt_run_id",
    "exit_code", "exit_signal", "exit_error", "output_revision", "retained_start_offset", "retained_end_offset",
    "total_persisted_bytes", "retained_output", "output_retention_state", "placement_json",
]


def replacement(outcomes: str, *, placement: bool) -> str:
    placement_column = "\n        placement_json                  TEXT," if placement else ""
    return f"""
      CREATE TABLE check_attempt_details_replacement (
        execution_run_id                TEXT PRIMARY KEY,
        batch_run_id                    TEXT NOT NULL,
        definition_id                  TEXT NOT NULL,
        command_snapshot_json          TEXT NOT NULL,
        definition_fingerprint         TEXT NOT NULL,
        initial_workspace_identity_json TEXT,
        final_workspace_identity_json  TEXT,
        outcome                        TEXT,
        rerun_of_attempt_run_id        TEXT,
        exit_code                      INTEGER,
        exit_signal                    TEXT,
        exit_error                     TEXT,
        output_revision                 INTEGER NOT NULL DEFAULT 0,
        retained_start_offset           INTEGER NOT NULL DEFAULT 0,
        retained_end_offset             INTEGER NOT NULL DEFAULT 0,
        total_persisted_bytes           INTEGER NOT NULL DEFAULT 0,
        retained_output                 TEXT NOT NULL DEFAULT '',
        output_retention_state          TEXT NOT NULL DEFAULT 'retained',{placement_column}
        FOREIGN KEY (execution_run_id) REFERENCES execution_runs(id) ON DELETE CASCADE,
        FOREIGN KEY (batch_run_id) REFERENCES execution_runs(id) ON DELETE RESTRICT,
        FOREIGN KEY (rerun_of_attempt_run_id) REFERENCES execution_runs(id) ON DELETE RESTRICT,
        CHECK (length(definition_fingerprint) = 64 AND definition_fingerprint NOT GLOB '*[^0-9a-f]*'),
        CHECK (outcome IS NULL OR outcome IN ({outcomes})),
        CHECK (output_revision >= 0 AND retained_start_offset >= 0 AND retained_end_offset >= retained_start_offset
          AND total_persisted_bytes >= retained_end_offset),
        CHECK (output_retention_state IN ('retained', 'expired'))
      );
"""
