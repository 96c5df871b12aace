"""1.8.22: projects point at their active execution profile revision."""

from console.db.migrations.base import ensure_column

ID = "002-project-active-profile-column"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "projects.active_execution_profile_revision_id (default '')"


def up(conn):
    ensure_column(conn, "projects", "active_execution_profile_revision_id", "TEXT NOT NULL DEFAULT ''")


def estimate(conn):
    return 0
