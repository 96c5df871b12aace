"""1.10.0: check attempts may end in `environment_loss` (rebuild; placement_json kept).

The replacement is the table's own stored text with only the outcome list widened
(`check_attempt_ddl.replacement_from_stored`), so the line archon's diffs never show and any column
the console does not know survive. Archon's own copy omits placement_json and re-adds the column
afterwards, losing nothing only because the column is new; here, when the table already has it,
it is one of the stored columns and is copied.
"""

from console.db.migrations.base import count, ensure_column, rebuild_table, table_sql
from console.db.migrations.steps import check_attempt_ddl as ddl

ID = "028-check-attempt-outcome-environment-loss"
RELEASE = "1.10.0"
SAFETY = "data-preserving-rebuild"
DESCRIPTION = "Rebuild check_attempt_details with outcome 'environment_loss'"
REBUILD = True


def needed(conn):
    sql = table_sql(conn, "check_attempt_details")
    return bool(sql) and not all(
        marker in sql for marker in ("evidence_persistence_failure", "ambiguous_process_loss", "environment_loss")
    )


def up(conn):
    if needed(conn):
        rebuild_table(
            conn,
            table="check_attempt_details",
            replacement=ddl.REPLACEMENT_NAME,
            create_replacement_sql=ddl.replacement_from_stored(
                table_sql(conn, "check_attempt_details"), ddl.OUTCOMES_1100
            ),
            copy_columns=None,
            trigger_like="check_attempt_details",
        )
    ensure_column(conn, "check_attempt_details", "placement_json", "TEXT")


def estimate(conn):
    return count(conn, "SELECT count(*) FROM check_attempt_details") if needed(conn) else 0
