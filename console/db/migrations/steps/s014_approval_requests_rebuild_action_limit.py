"""1.8.22 `migrateApprovalRequestActionLimit`: widen action_json to 65536 bytes on an older table.

Events reference requests with ON DELETE CASCADE; the runner turns foreign keys off before
BEGIN so dropping the old table deletes no event, and checks foreign_key_check before COMMIT
(archon itself does not check here; we do). The table text is archon's in full (its diffs show
it), and the three request triggers and three indexes come back with the text archon's rebuild
installs, not whatever text the old database held.
"""

from console.db.migrations.base import count, rebuild_table, statements_by_name, table_sql
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
        trigger_overrides={n: sql for n, sql in _RELEASE_TEXT.items() if sql.startswith("CREATE TRIGGER")},
        index_overrides={n: sql for n, sql in _RELEASE_TEXT.items() if sql.startswith("CREATE INDEX")},
    )


_RELEASE_TEXT = statements_by_name(ddl.REBUILD_TRIGGERS_AND_INDEXES)


def estimate(conn):
    return count(conn, "SELECT count(*) FROM approval_requests") if needed(conn) else 0
