"""1.8.22: approval requests and their append-only event history, with archon's five triggers."""

from console.db.migrations.base import execute_script
from console.db.migrations.steps import approval_ddl as ddl

ID = "013-approval-tables"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "approval_requests, approval_request_events, 5 triggers, 4 indexes"


def up(conn):
    execute_script(
        conn,
        ddl.requests_table()
        + ddl.EVENTS_TABLE
        + ddl.REQUEST_TRIGGERS
        + ddl.EVENT_TRIGGERS
        + ddl.REQUEST_INDEXES
        + ddl.EVENT_INDEXES,
    )


def estimate(conn):
    return 0
