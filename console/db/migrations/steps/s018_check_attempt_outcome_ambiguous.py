"""1.8.22: check attempts may end in `ambiguous_process_loss` (table rebuild, new recipe)."""

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
        replacement="check_attempt_details_replacement",
        create_replacement_sql=ddl.replacement(ddl.OUTCOMES_1822, placement=False),
        copy_columns=ddl.COLUMNS,
        trigger_like="check_attempt_details",
    )


def estimate(conn):
    return count(conn, "SELECT count(*) FROM check_attempt_details") if needed(conn) else 0
