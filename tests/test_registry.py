"""The registry is ordered, classified exactly, and reproduces each release's shape."""

import sqlite3

import pytest

from console.db.detect import detect_shape
from console.db.migrations import registry
from console.db.migrations.registry import MIGRATIONS, SAFETY_BY_ID, assert_registry, migrations_through
from console.db.migrations.runner import apply_all


def test_safety_registry_matches_migration_ids_exactly_and_in_order():
    assert list(SAFETY_BY_ID) == [m.id for m in MIGRATIONS]
    assert_registry()


def test_a_missing_or_reordered_classification_is_refused():
    ids = list(SAFETY_BY_ID)
    swapped = dict(SAFETY_BY_ID)
    reordered = {ids[1]: swapped[ids[1]], ids[0]: swapped[ids[0]], **{k: swapped[k] for k in ids[2:]}}
    with pytest.raises(registry.RegistryError, match="exact ordered"):
        assert_registry(MIGRATIONS, reordered)
    missing = dict(SAFETY_BY_ID)
    missing.pop(ids[-1])
    with pytest.raises(registry.RegistryError):
        assert_registry(MIGRATIONS, missing)


def test_only_the_build_sequence_sweep_is_historical_destructive():
    destructive = [m.id for m in MIGRATIONS if m.safety == "historical-destructive"]
    assert destructive == ["009-build-sequence-incomplete-sweep"]


@pytest.mark.parametrize("release", ["1.8.20", "1.8.22", "1.10.0"])
def test_each_release_is_detected_and_replaying_every_step_is_harmless(release):
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    apply_all(conn, migrations_through(release))
    assert detect_shape(conn).release == release
    before = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    apply_all(conn, migrations_through(release))  # the release's own steps, once more
    assert conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall() == before
    if release == "1.10.0":
        apply_all(conn, MIGRATIONS)
        after = conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
        assert before == after


def test_new_projects_get_revision_one_with_the_current_defaults():
    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    apply_all(conn, MIGRATIONS)
    conn.execute("INSERT INTO projects (id, name, repo_path, build_execution_provider) VALUES ('p', 'P', '/r', 'docker_sandbox')")
    rev = conn.execute("SELECT id, revision, schema_version, json_extract(profile_json, '$.provider_preference') FROM execution_profile_revisions").fetchone()
    assert rev == ("p:execution-profile:1", 1, 3, "docker_sandbox")
    assert conn.execute("SELECT active_execution_profile_revision_id FROM projects").fetchone()[0] == "p:execution-profile:1"


def test_a_rebuild_not_needed_keeps_foreign_keys_on_and_stops_if_the_shape_changes_under_the_lock():
    import dataclasses

    from console.db.migrations.registry import by_id
    from console.db.migrations.runner import MigrationFailed, apply_migration

    conn = sqlite3.connect(":memory:", isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    apply_all(conn, MIGRATIONS)
    step = by_id("014-approval-requests-rebuild-action-limit")
    seen = []

    def up(c):
        seen.append(c.execute("PRAGMA foreign_keys").fetchone()[0])

    apply_migration(conn, dataclasses.replace(step, up=up))
    assert seen == [1]  # not needed: no rebuild, foreign keys stayed on
    answers = iter([False, True])  # not needed before BEGIN, needed under the lock
    racing = dataclasses.replace(step, up=up, needed=lambda c: next(answers))
    with pytest.raises(MigrationFailed, match="changed shape"):
        apply_migration(conn, racing)
    assert seen == [1] and not conn.in_transaction
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
