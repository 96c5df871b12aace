"""Archon's check_attempt_details rebuild: the outcome list per release, and the replacement built from
the database's own stored table text."""

import re

OUTCOMES_1822 = """'passed', 'command_failure', 'spawn_failure',
          'infrastructure_failure', 'evidence_persistence_failure', 'timeout',
          'workspace_changed_before_start', 'user_stop', 'restart_loss', 'shutdown_loss', 'ambiguous_process_loss'"""

OUTCOMES_1100 = OUTCOMES_1822 + ", 'environment_loss'"

# The columns archon's own rebuild copies by name: a table lacking one cannot be rebuilt by archon
# either (its INSERT ... SELECT names them), which the upgrade's preflight refuses up front.
COLUMNS = [
    "execution_run_id", "batch_run_id", "definition_id", "command_snapshot_json", "definition_fingerprint",
    "initial_workspace_identity_json", "final_workspace_identity_json", "outcome", "rerun_of_attempt_run_id",
    "exit_code", "exit_signal", "exit_error", "output_revision", "retained_start_offset", "retained_end_offset",
    "total_persisted_bytes", "retained_output", "output_retention_state", "placement_json",
]


# --- the replacement built from the database's own text ------------------------------------
#
# Archon's replacement table carries one line between its last FOREIGN KEY and its first CHECK
# that the console has never seen (archon's own diffs cut through it), and an adopted database
# may carry columns or constraints the console does not know. So the replacement is the table's
# stored `CREATE TABLE` text with exactly two substitutions, the table name and the outcome list;
# everything else, seen or not, survives byte for byte, and every stored column is copied.

_CREATE_HEAD = re.compile(
    r'^\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?(?:"[^"]+"|`[^`]+`|\[[^\]]+\]|[\w]+)\s*\(',
    re.IGNORECASE,
)
_OUTCOME_LIST = re.compile(r"(\boutcome\s+IN\s*\()([^()]*)(\))", re.IGNORECASE)
REPLACEMENT_NAME = "check_attempt_details_replacement"


class UnexpectedTableText(ValueError):
    """The stored text is not the shape whose outcome list the console knows how to widen."""


def replacement_from_stored(stored_sql: str, outcomes: str) -> str:
    head = _CREATE_HEAD.match(stored_sql)
    if head is None:
        raise UnexpectedTableText("its stored text does not start with CREATE TABLE check_attempt_details (")
    lists = list(_OUTCOME_LIST.finditer(stored_sql))
    if len(lists) != 1:
        raise UnexpectedTableText(
            f"its stored text has {len(lists)} `outcome IN (...)` lists, not exactly one"
        )
    match = lists[0]
    body = stored_sql[head.end():match.start(2)] + outcomes + stored_sql[match.end(2):]
    return f"CREATE TABLE {REPLACEMENT_NAME} (" + body
