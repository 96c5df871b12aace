"""1.10.0: cleanup retries, idle stops and exclusive operation claims on environments."""

from console.db.migrations.base import ensure_column

ID = "024-environment-operation-columns"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "execution_environments cleanup_retry_at, idle_stop_at, operation claim triple"


def up(conn):
    ensure_column(conn, "execution_environments", "cleanup_retry_at", "DATETIME")
    ensure_column(conn, "execution_environments", "idle_stop_at", "DATETIME")
    ensure_column(conn, "execution_environments", "operation_claim_id", "TEXT")
    ensure_column(conn, "execution_environments", "operation_kind", "TEXT")
    ensure_column(conn, "execution_environments", "operation_claimed_at", "DATETIME")


def estimate(conn):
    return 0
