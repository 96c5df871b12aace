"""1.8.22: check attempts may end in `ambiguous_process_loss` (table rebuild, new recipe).

The replacement is the table's own stored text with only the outcome list substituted
(`check_attempt_ddl.replacement_from_stored`): archon's table has a line its diffs never show, and
a table archon made keeps it. Triggers mentioning the table come back from their stored text.
"""

from console.db.migrations.base import count, rebuild_table, table_sql
from console.db.migrations.steps import check_attempt_ddl as ddl

ID = "018-check-attempt-outcome-ambiguous"
RELEASE = "1.8.22"
SAFETY = "data-preserving-rebuild"
DESCRIPTION = "Rebuild check_attempt_details with outcome 'ambiguous_process_loss'"
REBUILD = True


def needed(conn):
    sql = table_sql(conn, "check_attempt_details")
    return bool(sql) and (
        "evidence_persistence_failure" not in sql or "ambiguous_process_loss" not in sql
    )


def up(conn):
    if not needed(conn):
        return
    rebuild_table(
        conn,
        table="check_attempt_details",
        replacement=ddl.REPLACEMENT_NAME,
        create_replacement_sql=ddl.replacement_from_stored(
            table_sql(conn, "check_attempt_details"), ddl.OUTCOMES_1822
        ),
        copy_columns=None,
        trigger_like="check_attempt_details",
    )


def estimate(conn):
    return count(conn, "SELECT count(*) FROM check_attempt_details") if needed(conn) else 0
