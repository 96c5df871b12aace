"""1.8.22 `migrateApprovalRequestActionLimit`: widen action_json to 65536 bytes on an older table.

Events reference requests with ON DELETE CASCADE; the runner turns foreign keys off before
BEGIN so dropping the old table deletes no event, and checks foreign_key_check before COMMIT
(archon itself does not check here; we do).
"""

from console.db.migrations.base import count, rebuild_table, table_sql
from console.db.migrations.steps import approval_ddl as ddl

ID = "014-approval-requests-rebuild-action-limit"
RELEASE = "1.8.22"
SAFETY = "data-preserving-rebuild"
DESCRIPTION = "Rebuild approval_requests with action_json BETWEEN 2 AND 65536 if older"
REBUILD = True


def needed(conn):
    sql = table_sql(conn, "approval_requests")
    return bool(sql) and "BETWEEN 2 AND 65536" not in sql


def up(conn):
    if not needed(conn):
        return
    rebuild_table(
        conn,
        table="approval_requests",
        replacement="approval_requests_v2",
        create_replacement_sql="      " + ddl.requests_table("approval_requests_v2", if_not_exists=False),
        copy_columns=ddl.REQUEST_COLUMN_NAMES,
        trigger_like="approval_requests",
    )


def estimate(conn):
    return count(conn, "SELECT count(*) FROM approval_requests") if needed(conn) else 0
