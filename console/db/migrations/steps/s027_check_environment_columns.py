"""1.10.0: check batches record their runtime environment; attempts record their placement."""

from console.db.migrations.base import ensure_column

ID = "027-check-environment-columns"
RELEASE = "1.10.0"
SAFETY = "additive"
DESCRIPTION = "check_batch_details runtime/environment JSON; check_attempt_details.placement_json"


def up(conn):
    ensure_column(conn, "check_attempt_details", "placement_json", "TEXT")
    ensure_column(conn, "check_batch_details", "runtime_compatibility_json", "TEXT")
    ensure_column(conn, "check_batch_details", "batch_environment_json", "TEXT")


def estimate(conn):
    return 0
