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
* `backfillExecutionProfiles` (005 where 1.8.22 starts, and the first half of 021) inserts revision 1
  and activates the id whatever the insert did: an existing row with that id is fine when the
  project owns it (archon activates it as it is, and 021's schema move then moves it on); a row of
  another project under that id, or a project that already has a revision 1 or a revision with that
  fingerprint under another id, makes the insert a no-op and the pointer name a revision the project
  does not own.

Each step's inserts depend on what the earlier steps did (022 repairs the profile 021 activated), so
the pending steps run, in order, in a private in-memory copy of the schema with the rows of every
table the profile steps read or update (`ROW_TABLES`, and the tables they name in a FOREIGN KEY:
console/db/migrations/replay.py), each step's inserts predicted from the copy's state just before
it, with the same functions the steps use. The same run is the preflight's rehearsal of the whole
chain: a pending step that fails there for any reason (a guard trigger's RAISE, a backfill's
"Stored execution profile revision ... is invalid", a constraint) is `Rehearsal.failure`, which the
preflight turns into a refusal before step 001; a failure is never read as "no problem". Only
those tables' rows are copied, so memory stays bounded by the profile data, not by the file (run
history, events and check output stay on disk); what the other steps do to rows is checked by the
preflight's own rules (rebuilt rows against the new table text, foreign keys, new UNIQUE indexes).
Reads the database only; nothing the steps write is changed here.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Sequence

from console.db import execution_profiles as profiles
from console.db.limits import stopping
from console.db.migrations import backfills
from console.db.migrations.base import Migration
from console.db.migrations.replay import replay_schema
from console.db.migrations.runner import MigrationFailed, apply_migration
from console.db.migrations.stops import is_stop

REVISIONS = "execution_profile_revisions"
# the tables whose rows the profile steps (005, 006, 021, 022) read or update. Their audit events
# are only inserted, with INSERT OR IGNORE, which no row already there can make fail, so that table
# comes empty (its rows can be many, and a dangling one is the preflight's foreign-key blocker)
ROW_TABLES = ("projects", REVISIONS)
INITIAL = "005-profile-backfill-initial"
CURRENT = "021-profile-backfill-current-schema"
# steps that run archon's `backfillExecutionProfiles` (revision 1) first: step id -> (schema, release)
INITIAL_FIRST = {INITIAL: (2, "1.8.22"), CURRENT: (3, None)}  # None: on every path
# step id -> (schema versions it reads, the version it writes) for the reuse-by-fingerprint backfills
TO_SCHEMA = {"006-profile-backfill-schema-v2": ((1,), 2), CURRENT: ((1, 2), 3)}
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
class StepFailure:
    """A pending step that fails on the private copy: the upgrade would stop there, part-way."""

    step: str
    message: str


@dataclass(frozen=True)
class Rehearsal:
    """What running the pending chain on the private copy found: the first step's taken ids, or
    the first step that fails; both empty when every pending step ran to the end."""

    collisions: tuple[Collision, ...] = ()
    failure: StepFailure | None = None


@dataclass(frozen=True)
class _Insert:
    project: str
    revision_id: str
    fingerprint: str
    initial: bool = False  # revision 1: the id is activated whatever the insert did


def _normalized(profile_json: object, schema_version: int) -> dict | None:
    try:
        result = profiles.normalize(profiles.parse(profile_json), schema_version)  # as the backfills read it
    except (TypeError, ValueError):  # unreadable (bounded reader): the preflight's other blocker
        return None
    return result.profile if result.ok else None  # an invalid one is the preflight's other blocker


def _initial(scratch: sqlite3.Connection, step_id: str) -> list[_Insert]:
    """Revision 1 of `backfillExecutionProfiles` (005 where 1.8.22 starts, the first half of 021)."""
    schema_version, release = INITIAL_FIRST[step_id]
    if release is not None and not is_stop(release):  # 005 runs only where 1.8.22 starts (stops.py)
        return []
    return [
        _Insert(project, f"{project}:execution-profile:1",
                profiles.fingerprint(profiles.create(provider, schema_version)), initial=True)
        for project, provider, _active in scratch.execute(backfills.INITIAL_ROWS_SQL).fetchall()
    ]


def _to_schema(scratch: sqlite3.Connection, step_id: str) -> list[_Insert]:
    versions, target = TO_SCHEMA[step_id]
    found = []
    for project, _revision, profile_json in scratch.execute(backfills.active_rows_sql(versions)).fetchall():
        profile = _normalized(profile_json, target)
        if profile is not None:
            found.append(_Insert(project, f"{project}:execution-profile:v{target}", profiles.fingerprint(profile)))
    return found


def _workloads(scratch: sqlite3.Connection, step_id: str) -> list[_Insert]:
    return [
        _Insert(r["project_id"], f"{r['project_id']}:execution-profile:{r['repair_key']}-v3",
                profiles.fingerprint(r["profile"]))
        for r in backfills.workload_repairs(scratch, 3)
    ]


def _split(step_id: str) -> bool:
    """Whether `step_id` runs another routine after its revision-1 backfill (021)."""
    return step_id in INITIAL_FIRST and step_id in TO_SCHEMA


def _phases(step_id: str) -> list:
    """The routines `step_id` runs, in its order; each is predicted on the state the one before left
    (021 moves to `:v3` the revision 1 its first half activated)."""
    return ([_initial] if step_id in INITIAL_FIRST else []) + ([_to_schema] if step_id in TO_SCHEMA else []) + (
        [_workloads] if step_id == WORKLOADS else [])


def _collision(scratch: sqlite3.Connection, step_id: str, insert: _Insert) -> Collision | None:
    def has(where: str, *args) -> bool:
        return scratch.execute(f"SELECT 1 FROM {REVISIONS} WHERE {where}", args).fetchone() is not None

    same_print = has("project_id = ? AND fingerprint = ?", insert.project, insert.fingerprint)
    held = scratch.execute(
        f"SELECT project_id, fingerprint FROM {REVISIONS} WHERE id = ?", (insert.revision_id,)
    ).fetchone()
    if not insert.initial:
        if same_print or held is None:
            return None  # reused by fingerprint, or inserted
    elif held is None:
        if not (same_print or has("project_id = ? AND revision = 1", insert.project)):
            return None
        return Collision(step_id, insert.project, insert.revision_id,
                         "no row, but the project already has a revision 1 or this profile under another id, "
                         "so the insert would be skipped and the project pointed at a revision that does not exist")
    elif held[0] == insert.project:
        return None  # the project's own revision under that id: archon activates it as it is
    owner, _print = held
    what = f"a revision of project {owner}" if owner != insert.project else "a revision with other content"
    return Collision(step_id, insert.project, insert.revision_id, what)


def _first_half(scratch: sqlite3.Connection, step_id: str) -> bool:
    """Run the revision-1 backfill of `step_id` as the step does, so its second half is predicted on
    what it leaves; False (and nothing kept) when it fails: the step, run next, says why."""
    scratch.execute("SAVEPOINT first_half")
    try:
        backfills.backfill_initial(scratch, INITIAL_FIRST[step_id][0])
    except (sqlite3.Error, backfills.BackfillError):
        if stopping():
            raise  # the operator's stop (an interrupt also rolled the savepoint back): no finding
        if scratch.in_transaction:  # an error SQLite ended the whole transaction for left nothing to undo
            scratch.execute("ROLLBACK TO first_half")
            scratch.execute("RELEASE first_half")
        return False
    scratch.execute("RELEASE first_half")
    return True


def rehearse(conn: sqlite3.Connection, pending: Sequence[Migration]) -> Rehearsal:
    """Run every pending step, in order, on a private copy with the rows of `ROW_TABLES`; stop at
    the first step whose fixed ids are taken (a later step runs only after it; its ids are
    predicted again once these are resolved) or that fails."""
    if not pending:
        return Rehearsal()
    scratch = replay_schema(conn, rows_of=ROW_TABLES)
    try:
        for migration in pending:
            for phase in _phases(migration.id):
                try:
                    found = [c for i in phase(scratch, migration.id) if (c := _collision(scratch, migration.id, i))]
                except (sqlite3.Error, backfills.BackfillError):
                    break  # the step itself, run below, fails with its own message
                if found:
                    return Rehearsal(collisions=tuple(found))
                if phase is _initial and _split(migration.id) and not _first_half(scratch, migration.id):
                    break
            try:
                apply_migration(scratch, migration)
            except MigrationFailed as exc:
                return Rehearsal(failure=StepFailure(migration.id, exc.message))
    finally:
        scratch.close()
    return Rehearsal()


def collisions(conn: sqlite3.Connection, pending: Sequence[Migration]) -> list[Collision]:
    """The taken fixed ids of the first pending step that meets one (`rehearse`)."""
    return list(rehearse(conn, pending).collisions)


__all__ = ["Collision", "Rehearsal", "STEPS", "StepFailure", "collisions", "rehearse"]
