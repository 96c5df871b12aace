"""The fixed revision ids the pending profile steps would insert, and which of them are already taken.

Archon's profile routines insert revisions under fixed ids (`<project>:execution-profile:1`,
`…:v2`, `…:v3`, `…:<repair>-v3`) with `INSERT OR IGNORE`, then use the id (005) or look the revision
up again by fingerprint (006, 021, 022; console/db/migrations/backfills.py). When the id is already
taken by a row with other content, the insert is silently skipped: the re-lookup finds nothing and
the step stops ("Failed to migrate stored execution profile revision ..."), after every earlier step
had committed (the destructive sweep 009 and the v3 rebuild among them), or, for 005, the project
is pointed at a revision that is not the one archon writes. So the preflight predicts them all
before step 001, and the upgrade refuses (exit 3) while any is taken.

The rule, as archon's `INSERT OR IGNORE` and re-lookup make it:

* a step that reuses by fingerprint (006, 021, 022) inserts only when the project has no revision
  with that fingerprint; the id then collides with whatever row holds it (a row with the same id,
  project and content would have been found by the fingerprint lookup: it is fine);
* 005 inserts revision 1 and activates the id whatever the insert did: an existing row with that id
  is fine only with the same project and fingerprint; a project that already has a revision 1 or a
  revision with that fingerprint under another id makes the insert a no-op and the pointer dangle.

Each step's inserts depend on what the earlier steps did (022 repairs the profile 021 activated), so
the pending steps run, in order, in a private in-memory copy of the schema with the rows of
`projects` and `execution_profile_revisions` (console/db/migrations/replay.py), each step's inserts
predicted from the copy's state just before it, with the same functions the steps use. Reads the
database only; nothing the steps write is changed here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Sequence

from console.db import execution_profiles as profiles
from console.db.migrations import backfills
from console.db.migrations.base import Migration
from console.db.migrations.replay import replay_schema
from console.db.migrations.runner import MigrationFailed, apply_migration
from console.db.migrations.steps import s005_profile_backfill_initial as s005
from console.text import read_json

REVISIONS = "execution_profile_revisions"
INITIAL = "005-profile-backfill-initial"
# step id -> (schema versions it reads, the version it writes) for the reuse-by-fingerprint backfills
TO_SCHEMA = {"006-profile-backfill-schema-v2": ((1,), 2), "021-profile-backfill-current-schema": ((1, 2), 3)}
WORKLOADS = "022-profile-workload-eligibility"
STEPS = frozenset({INITIAL, WORKLOADS, *TO_SCHEMA})


@dataclass(frozen=True)
class Collision:
    """A fixed id a pending step would insert, already held by a row with other content."""

    step: str
    project: str
    revision_id: str
    held_by: str  # what holds it: "project X's revision", "other content", "no row: ..."


@dataclass(frozen=True)
class _Insert:
    project: str
    revision_id: str
    fingerprint: str


def _normalized(profile_json: object, schema_version: int) -> dict | None:
    try:
        result = profiles.normalize(read_json(profile_json), schema_version)  # type: ignore[arg-type]
    except (TypeError, ValueError):  # unreadable (bounded reader): the preflight's other blocker
        return None
    return result.profile if result.ok else None  # an invalid one is the preflight's other blocker


def inserts(scratch: sqlite3.Connection, step_id: str) -> list[_Insert]:
    """What `step_id` would insert on the state of `scratch`, computed as the step computes it."""
    if step_id == INITIAL:
        return [
            _Insert(project, f"{project}:execution-profile:1",
                    profiles.fingerprint(profiles.create(provider, s005.SCHEMA_VERSION)))
            for project, provider, _active in scratch.execute(s005.SELECT).fetchall()
        ]
    if step_id in TO_SCHEMA:
        versions, target = TO_SCHEMA[step_id]
        found = []
        for project, _revision, profile_json in scratch.execute(backfills.active_rows_sql(versions)).fetchall():
            profile = _normalized(profile_json, target)
            if profile is not None:
                found.append(_Insert(project, f"{project}:execution-profile:v{target}", profiles.fingerprint(profile)))
        return found
    if step_id == WORKLOADS:
        return [
            _Insert(r["project_id"], f"{r['project_id']}:execution-profile:{r['repair_key']}-v3",
                    profiles.fingerprint(r["profile"]))
            for r in backfills.workload_repairs(scratch, 3)
        ]
    return []


def _collision(scratch: sqlite3.Connection, step_id: str, insert: _Insert) -> Collision | None:
    def has(where: str, *args) -> bool:
        return scratch.execute(f"SELECT 1 FROM {REVISIONS} WHERE {where}", args).fetchone() is not None

    same_print = has("project_id = ? AND fingerprint = ?", insert.project, insert.fingerprint)
    held = scratch.execute(
        f"SELECT project_id, fingerprint FROM {REVISIONS} WHERE id = ?", (insert.revision_id,)
    ).fetchone()
    if step_id != INITIAL:
        if same_print or held is None:
            return None  # reused by fingerprint, or inserted
    elif held is None:
        if not (same_print or has("project_id = ? AND revision = 1", insert.project)):
            return None
        return Collision(step_id, insert.project, insert.revision_id,
                         "no row, but the project already has a revision 1 or this profile under another id, "
                         "so the insert would be skipped and the project pointed at a revision that does not exist")
    elif tuple(held) == (insert.project, insert.fingerprint):
        return None  # the same id with the same content
    owner, _print = held
    what = f"a revision of project {owner}" if owner != insert.project else "a revision with other content"
    return Collision(step_id, insert.project, insert.revision_id, what)


def _predictable(conn: sqlite3.Connection) -> bool:
    """Only rows already there can take an id: none when the table is missing or empty."""
    try:
        return conn.execute(f"SELECT 1 FROM {REVISIONS} LIMIT 1").fetchone() is not None
    except sqlite3.OperationalError:
        return False


def collisions(conn: sqlite3.Connection, pending: Sequence[Migration]) -> list[Collision]:
    """Every taken fixed id of the first pending step that meets one (a later step runs only after
    it; its ids are predicted again once these are resolved). Empty when the steps can insert."""
    if not any(m.id in STEPS for m in pending) or not _predictable(conn):
        return []
    scratch = replay_schema(conn, rows_of=("projects", REVISIONS))
    try:
        for migration in pending:
            if migration.id in STEPS:
                try:
                    found = [c for i in inserts(scratch, migration.id) if (c := _collision(scratch, migration.id, i))]
                except (sqlite3.Error, backfills.BackfillError):
                    return []  # the step fails on its rows for another reason: the preflight's other checks
                if found:
                    return found
            try:
                apply_migration(scratch, migration)
            except MigrationFailed:
                return []  # likewise
    finally:
        scratch.close()
    return []


__all__ = ["Collision", "STEPS", "collisions", "inserts"]
