"""A fixed revision id already taken refuses the upgrade before step 001 (issue 18, finding 3).

On main, when `<project>:execution-profile:v3` (or `:v2`, `:chat-build-v3`, ...) already existed
with other content, steps 001-020 committed (the destructive sweep 009 and the v3 rebuild among
them), then the profile backfill stopped and the upgrade exited 1, half-done, with a shape no
release has. The preflight now predicts every fixed id each pending step would insert
(console/db/migrations/fixed_ids.py) and refuses with exit 3, nothing written, naming the ids and
projects. A row with the same id and the same content is fine, as archon's re-lookup finds it.
"""

from __future__ import annotations

import json
import shutil
import tempfile
import sqlite3
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from console.db import execution_profiles as profiles
from console.errors import EXIT_OK, EXIT_UNUSABLE, DatabaseUnusable
from console.services.upgrade.plan import plan_upgrade
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import LEGACY_PROFILE, db_1822, fingerprint_dir, run_cli

pytestmark = pytest.mark.slow


def _schema_and_rows(path: Path) -> tuple[list, list[str]]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return (conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name").fetchall(),
                list(conn.iterdump()))
    finally:
        conn.close()


def _with_triggers_off(conn: sqlite3.Connection, change) -> None:
    """As a hand edit (or an older tool) does it: archon's guards dropped, the change, the guards back."""
    triggers = conn.execute("SELECT name, sql FROM sqlite_master WHERE type = 'trigger'").fetchall()
    conn.execute("BEGIN")
    for name, _sql in triggers:
        conn.execute(f'DROP TRIGGER "{name}"')
    change(conn)
    for _name, sql in triggers:
        conn.execute(sql)
    conn.execute("COMMIT")


def _v2(raw: dict) -> str:
    """A valid schema-2 profile as archon stores it (so the evidence gate has nothing to object to)."""
    return profiles.serialize(profiles.normalize(raw, 2).profile)


def _add_revision(conn, revision_id: str, project: str, profile_json: str, fingerprint: str | None = None):
    revision = conn.execute("SELECT COALESCE(MAX(revision), 0) + 10 FROM execution_profile_revisions "
                            "WHERE project_id = ?", (project,)).fetchone()[0]
    conn.execute(
        "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
        "profile_json) VALUES (?, ?, ?, 2, ?, ?)",
        (revision_id, project, revision, fingerprint or profiles.fingerprint_json(profile_json), profile_json),
    )


@pytest.fixture(scope="module")
def original(tmp_path_factory) -> Path:
    """1.8.22 without a ledger: proj-1 on a schema-1 profile (006 writes `:v2`, 021 `:v3`), proj-2 on
    its revision 1 (021 writes `:v3`, 022 a `…-v3` repair), proj-3 whose pointer names a revision it
    does not own (005 gives it `:1` again, which it holds with the same content: fine)."""
    path = db_1822(tmp_path_factory.mktemp("fixed-ids") / "archon.db")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("INSERT INTO projects (id, name, repo_path, created_at) VALUES "
                 "('proj-3', 'Project 3', '/srv/repo3', '2025-01-01 00:00:00')")
    _with_triggers_off(conn, lambda c: c.execute(
        "UPDATE projects SET active_execution_profile_revision_id = 'proj-1:legacy' WHERE id = 'proj-3'"))
    conn.close()
    return path


def _clean_upgrade(original: Path, directory: Path, target: str) -> dict[str, tuple[str, str, str]]:
    path = directory / "archon.db"
    shutil.copyfile(original, path)
    before = _revision_ids(path)
    run_upgrade(path, target=target, force=True)
    conn = sqlite3.connect(path)
    rows = {r[0]: (r[1], r[2], target) for r in conn.execute("SELECT id, project_id, fingerprint FROM execution_profile_revisions")}
    conn.close()
    added = {i: rows[i] for i in sorted(_revision_ids(path) - before)}
    added["proj-3:execution-profile:1"] = rows["proj-3:execution-profile:1"]  # revision 1: reused by id
    return added


@pytest.fixture(scope="module")
def inserted_ids(original, tmp_path_factory) -> dict[str, tuple[str, str, str]]:
    """The fixed ids a clean upgrade of `original` inserts (each family at least once), with the
    project and fingerprint the step gives each and the upgrade's target: `:v2` only where 1.8.22
    is the target (a direct upgrade to 1.10.0 runs no 1.8.22 backfill, docs/decisions.md D22)."""
    added = _clean_upgrade(original, tmp_path_factory.mktemp("clean"), "current")
    to_1822 = _clean_upgrade(original, tmp_path_factory.mktemp("clean-1822"), "1.8.22")
    added.update({i: row for i, row in to_1822.items() if i.endswith(":v2")})
    assert {i.split(":execution-profile:")[1] for i in added} >= {"1", "v2", "v3", "chat-build-v3", "chat-build-check-v3"}
    return added


def _revision_ids(path: Path) -> set[str]:
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT id FROM execution_profile_revisions")}
    finally:
        conn.close()


def _take(path: Path, revision_id: str, owner: str, profile_json: str) -> None:
    def change(conn):
        conn.execute("DELETE FROM execution_profile_revisions WHERE id = ?", (revision_id,))
        _add_revision(conn, revision_id, owner, profile_json)

    conn = sqlite3.connect(path, isolation_level=None)
    _with_triggers_off(conn, change)
    conn.close()


def test_taken_v3_id_refuses_before_step_001_and_writes_nothing(original, tmp_path):
    path = tmp_path / "archon.db"
    shutil.copyfile(original, path)
    _take(path, "proj-2:execution-profile:v3", "proj-2", _v2({"provider_preference": "host", "eligible_workloads": ["build"]}))
    files, (schema, rows) = fingerprint_dir(tmp_path), _schema_and_rows(path)

    proc = run_cli("--db", str(path), "upgrade", "--force")
    assert proc.returncode == EXIT_UNUSABLE, proc.stderr
    assert "proj-2:execution-profile:v3 for project proj-2" in proc.stderr
    assert "Nothing was written" in proc.stderr and "Traceback" not in proc.stderr
    assert fingerprint_dir(tmp_path) == files  # no snapshot, no ledger, the same bytes
    assert _schema_and_rows(path) == (schema, rows)

    plan = run_cli("--db", str(path), "upgrade", "--plan")
    assert plan.returncode == EXIT_UNUSABLE, plan.stdout
    assert "proj-2:execution-profile:v3 for project proj-2" in plan.stderr
    assert fingerprint_dir(tmp_path) == files


def test_the_same_id_with_the_same_content_is_fine(original, tmp_path):
    """Archon's re-lookup by fingerprint finds such a row: it is reused, not a collision (`:1` of
    proj-3 in the fixture is the same for step 005, by id)."""
    path = tmp_path / "archon.db"
    shutil.copyfile(original, path)
    v2 = profiles.serialize(profiles.normalize(json.loads(LEGACY_PROFILE), 2).profile)
    _take(path, "proj-1:execution-profile:v2", "proj-1", v2)
    proc = run_cli("--db", str(path), "upgrade", "--force")
    assert proc.returncode == EXIT_OK, proc.stderr
    conn = sqlite3.connect(path)
    active = dict(conn.execute("SELECT id, active_execution_profile_revision_id FROM projects"))
    conn.close()
    assert active["proj-3"] != "proj-1:legacy"  # 005 re-pointed it at its own revision


def _fingerprints_held(path: Path, owner: str, but: str) -> frozenset[str]:
    """The fingerprints `owner`'s other revisions hold: archon's UNIQUE (project_id, fingerprint)
    forbids another revision of the same project with one of them."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return frozenset(r[0] for r in conn.execute(
            "SELECT fingerprint FROM execution_profile_revisions WHERE project_id = ? AND id != ?", (owner, but)))
    finally:
        conn.close()


def _profiles_in(path: Path) -> list[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sorted({r[0] for r in conn.execute(
            "SELECT profile_json FROM execution_profile_revisions WHERE schema_version = 2")})
    finally:
        conn.close()


def profiles_unlike(held: frozenset[str], known: list[str]) -> st.SearchStrategy[str]:
    """A valid schema-2 profile_json: one the database already holds (`known`, the likeliest to meet a
    rule) or any provider, any workloads, perhaps a field the console does not know; never one whose
    fingerprint is `held`: a row the holder can really have beside its others."""
    raw = st.fixed_dictionaries(
        {"provider_preference": st.sampled_from(profiles.PROVIDERS),
         "eligible_workloads": st.lists(st.sampled_from(profiles.WORKLOADS), min_size=1, unique=True)},
        optional={"note": st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)})
    drawn = st.one_of(st.sampled_from(known), raw.map(_v2)) if known else raw.map(_v2)
    return drawn.filter(lambda profile_json: profiles.fingerprint_json(profile_json) not in held)


@settings(max_examples=200, deadline=None)
@given(data=st.data())
def test_a_generated_holder_row_is_one_archon_can_hold(original, inserted_ids, data):
    """The set-up below never breaks the schema's own UNIQUE rules: `_take` of any fixed id, by any
    project, with any drawn profile, is a database archon could have written (it failed once in CI:
    `UNIQUE constraint failed: execution_profile_revisions.project_id, fingerprint`, a drawn profile
    equal to one the holder already had)."""
    revision_id = data.draw(st.sampled_from(sorted(inserted_ids)), label="fixed id")
    owner = data.draw(st.sampled_from(["proj-1", "proj-2", "proj-3"]), label="held by")
    profile_json = data.draw(profiles_unlike(_fingerprints_held(original, owner, but=revision_id), _profiles_in(original)), label="profile")
    path = Path(tempfile.mkdtemp()) / "archon.db"
    try:
        shutil.copyfile(original, path)
        _take(path, revision_id, owner, profile_json)
    finally:
        shutil.rmtree(path.parent)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_any_taken_fixed_id_is_refused_before_any_write(original, inserted_ids, tmp_path, data):
    """Every family (`:1`, `:v2`, `:v3`, `:chat-build-v3`, `:chat-build-check-v3`), held by any
    project with any valid profile: refused, nothing written, unless it is the very row the step
    would insert (same project, same fingerprint) or, for revision 1, the project's own revision
    (archon activates it as it is)."""
    revision_id = data.draw(st.sampled_from(sorted(inserted_ids)), label="fixed id")
    project, target_print, target = inserted_ids[revision_id]
    owner = data.draw(st.sampled_from(["proj-1", "proj-2", "proj-3"]), label="held by")
    profile_json = data.draw(profiles_unlike(_fingerprints_held(original, owner, but=revision_id), _profiles_in(original)), label="profile")
    directory = Path(tempfile.mkdtemp(dir=tmp_path))
    path = directory / "archon.db"
    shutil.copyfile(original, path)
    _take(path, revision_id, owner, profile_json)
    if owner == project and (revision_id.endswith(":1") or profiles.fingerprint_json(profile_json) == target_print):
        plan_upgrade(path, target=target)  # the project's own revision 1, or the very row: no refusal
        return
    before = _schema_and_rows(path)
    with pytest.raises(DatabaseUnusable) as refused:
        plan_upgrade(path, target=target)
    assert revision_id in refused.value.reason and f"for project {project}" in refused.value.reason
    with pytest.raises(DatabaseUnusable):
        run_upgrade(path, target=target, force=True)
    assert _schema_and_rows(path) == before
    assert sorted(p.name for p in directory.iterdir()) == ["archon.db"]  # no snapshot either
