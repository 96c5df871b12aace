"""1.8.22: environments record their profile and credential fingerprints and retirement requests."""

from console.db.migrations.base import ensure_column

ID = "011-environment-profile-columns"
RELEASE = "1.8.22"
SAFETY = "additive"
DESCRIPTION = "execution_environments profile/credential/retirement columns; binding profile fingerprint"


def up(conn):
    ensure_column(conn, "execution_environments", "execution_profile_revision_id", "TEXT")
    ensure_column(conn, "execution_environments", "execution_profile_fingerprint", "TEXT")
    ensure_column(conn, "execution_environments", "credential_requirements_fingerprint", "TEXT")
    ensure_column(conn, "execution_environments", "retirement_requested_at", "DATETIME")
    ensure_column(conn, "execution_environment_run_bindings", "execution_profile_fingerprint", "TEXT")
    ensure_column(conn, "execution_environment_run_bindings", "authority_json", "TEXT")
    ensure_column(conn, "execution_environment_run_bindings", "placement_json", "TEXT")


def estimate(conn):
    return 0
