"""The ordered migration registry and, kept apart from it, the safety class of every step.

As in akm, the two lists are compared at import: adding a step forces an explicit safety decision
in the same change, and a released step is never edited, removed or reordered (its checksum is in
every ledger that applied it).
"""

from __future__ import annotations

import importlib

from console.db.migrations.base import SAFETY_CLASSES, Migration
MIGRATION_SET = "archon-console"

# Releases whose shape the registry can produce, oldest first.
RELEASES = ("1.8.20", "1.8.22", "1.10.0")
CURRENT_RELEASE = RELEASES[-1]

# The step modules in console/db/migrations/steps/, in the order they apply. Append only.
STEP_MODULES = (
    "s001_baseline_1_8_20",
    "s002_project_active_profile_column",
    "s003_profile_tables",
    "s004_profile_revisions_rebuild_v2",
    "s005_profile_backfill_initial",
    "s006_profile_backfill_schema_v2",
    "s007_profile_guard_triggers",
    "s008_build_sequence_profile_columns",
    "s009_build_sequence_incomplete_sweep",
    "s010_build_sequence_profile_triggers",
    "s011_environment_profile_columns",
    "s012_run_authorities",
    "s013_approval_tables",
    "s014_approval_requests_rebuild_action_limit",
    "s015_build_setup_evidence",
    "s016_environment_identity_triggers",
    "s017_environment_reuse_index",
    "s018_check_attempt_outcome_ambiguous",
    "s019_build_sequence_activation_run_index",
    "s020_profile_revisions_rebuild_v3",
    "s021_profile_backfill_current_schema",
    "s022_profile_workload_eligibility",
    "s023_service_run_details",
    "s024_environment_operation_columns",
    "s025_environment_operation_indexes",
    "s026_environment_operation_triggers",
    "s027_check_environment_columns",
    "s028_check_attempt_outcome_environment_loss",
    "s029_check_placement_triggers",
)

MIGRATIONS: tuple[Migration, ...] = tuple(
    Migration.from_module(importlib.import_module(f"console.db.migrations.steps.{name}"))
    for name in STEP_MODULES
)

# Kept separate from the step bodies on purpose (akm's STATE_MIGRATION_SAFETY_BY_ID).
SAFETY_BY_ID: dict[str, str] = {
    "001-archon-1.8.20-baseline": "additive",
    "002-project-active-profile-column": "additive",
    "003-profile-tables": "additive",
    "004-profile-revisions-rebuild-v2": "data-preserving-rebuild",
    "005-profile-backfill-initial": "additive",
    "006-profile-backfill-schema-v2": "additive",
    "007-profile-guard-triggers": "additive",
    "008-build-sequence-profile-columns": "additive",
    "009-build-sequence-incomplete-sweep": "historical-destructive",
    "010-build-sequence-profile-triggers": "additive",
    "011-environment-profile-columns": "additive",
    "012-run-authorities": "additive",
    "013-approval-tables": "additive",
    "014-approval-requests-rebuild-action-limit": "data-preserving-rebuild",
    "015-build-setup-evidence": "additive",
    "016-environment-identity-triggers": "additive",
    "017-environment-reuse-index": "additive",
    "018-check-attempt-outcome-ambiguous": "data-preserving-rebuild",
    "019-build-sequence-activation-run-index": "additive",
    "020-profile-revisions-rebuild-v3": "data-preserving-rebuild",
    "021-profile-backfill-current-schema": "additive",
    "022-profile-workload-eligibility": "additive",
    "023-service-run-details": "additive",
    "024-environment-operation-columns": "additive",
    "025-environment-operation-indexes": "additive",
    "026-environment-operation-triggers": "additive",
    "027-check-environment-columns": "additive",
    "028-check-attempt-outcome-environment-loss": "data-preserving-rebuild",
    "029-check-placement-triggers": "additive",
}


class RegistryError(AssertionError):
    pass


def assert_registry(migrations=MIGRATIONS, safety_by_id=SAFETY_BY_ID) -> None:
    ids = [m.id for m in migrations]
    if len(set(ids)) != len(ids) or ids != sorted(ids):
        raise RegistryError("Migration registry ids must be unique and strictly ascending.")
    if list(safety_by_id) != ids:
        raise RegistryError(
            "Migration safety classifications must match the exact ordered migration registry."
        )
    for migration in migrations:
        if safety_by_id[migration.id] not in SAFETY_CLASSES:
            raise RegistryError(f"Migration {migration.id} has no valid safety classification.")
        if migration.safety != safety_by_id[migration.id]:
            raise RegistryError(
                f"Migration {migration.id} declares {migration.safety} but is classified "
                f"{safety_by_id[migration.id]}."
            )
        if migration.release not in RELEASES:
            raise RegistryError(f"Migration {migration.id} names unknown release {migration.release}.")
    releases = [RELEASES.index(m.release) for m in migrations]
    if releases != sorted(releases):
        raise RegistryError("Migrations must be grouped by release, oldest first.")


assert_registry()


def migrations_through(release: str) -> tuple[Migration, ...]:
    """Every step up to and including `release` (which must be known)."""
    if release == "current":
        release = CURRENT_RELEASE
    if release not in RELEASES:
        raise ValueError(f"Unknown archon release {release!r}; known: {', '.join(RELEASES)}.")
    limit = RELEASES.index(release)
    return tuple(m for m in MIGRATIONS if RELEASES.index(m.release) <= limit)


def by_id(migration_id: str) -> Migration | None:
    for migration in MIGRATIONS:
        if migration.id == migration_id:
            return migration
    return None
