"""Execution profile revisions: browse, verify, compare, and roll back by activating an older one.

Revisions and their audit events are permanent (archon's triggers refuse any UPDATE); the console
never writes them except to append a `revision_activated` event. Activation changes the project's
`active_execution_profile_revision_id` and `build_execution_provider` in one UPDATE, because
archon's projection trigger demands that the provider always equals the active profile's
`provider_preference` (docs/archon-schema.md, execution profile activation).

Fingerprints are recomputed with `console.db.execution_profiles`, which reconstructs archon's
unseen canonical serialisation (docs/decisions.md, Q13). A mismatch is shown, never "fixed". It
blocks a rollback only where archon's next start re-reads the revision: there the console would
have to predict that start with the algorithms the database contradicts (profile_startup.py
`unpredictable`); elsewhere archon keeps the revision whatever the console makes of it.
"""

from __future__ import annotations

import difflib
import json
import re
import sqlite3
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console.db.sql import stored_columns
from console.clock import db_time
from console.db import execution_profiles, profile_evidence
from console.db.connect import ArchonDatabase
from console.db.detect import detect_shape
from console.db.tx import write_transaction
from console.errors import DatabaseUnusable, MissingArgument, Refusal
from console.models.profiles import FingerprintCheck, ProfileRevision, RevisionDetail
from console.models.projects import Project
from console.services import profile_startup
from console.services import identity
from console.services.base import ReleaseRefusal, validate_actor, validate_reason
from console.models.results import ActionResult
from console.services.resolve import find_project, near_projects, resolve_project
from console.text import UnreadableJson, one_line, read_json

HEX64 = re.compile(r"^[0-9a-f]{64}$")
_REVISION_NUMBER = re.compile(r"^[rR]?([0-9]{1,9})$")
PROVIDERS = execution_profiles.PROVIDERS


def require_profiles(handle: ArchonDatabase) -> None:
    """Profile revisions arrived with archon 1.8.22; older shapes have nothing to show. A
    `ReleaseRefusal`: true only until the file is upgraded (its dialog closes then, services/base.py)."""
    if not handle.shape.supports("profiles"):
        release = handle.shape.release or "unknown"
        raise ReleaseRefusal(
            f"Execution profile revisions need archon 1.8.22 or later; this database has the {release} "
            "shape (upgrade required).",
            "Run `archon-console upgrade --plan` to see what an upgrade would do.",
            release=handle.shape.release,
        )


def _revision_number(conn: sqlite3.Connection, project_row: Any, number: int, typed: str) -> str:
    row = conn.execute(
        "SELECT id FROM execution_profile_revisions WHERE project_id = ? AND revision = ?",
        (project_row["id"], number),
    ).fetchone()
    if row is None:
        raise Refusal(
            f"Project {one_line(project_row['id'])} has no execution profile revision {number} "
            f"(asked for {one_line(typed)!r}).",
            f"List them with `archon-console profiles list {one_line(project_row['id'])}`.",
        )
    return row["id"]


def resolve_revision(handle, revision: str, *, project: str | None = None) -> str:
    """The id of the execution profile revision `revision` names.

    Its full id (`prj-atlas-api:execution-profile:3`), else `PROJECT:N` or `PROJECT:rN` (PROJECT an id
    or a unique name; console/services/resolve.py), else `N` or `rN` when the project is given
    separately. The full id is tried first, so an id that happens to look like `PROJECT:N` still
    means itself. `rN` without a project is a usage error (exit 2).
    """
    require_profiles(handle)
    conn = handle.conn
    project_row = resolve_project(conn, project) if project is not None else None
    row = conn.execute(
        "SELECT id, project_id FROM execution_profile_revisions WHERE id = ?", (revision,)
    ).fetchone()
    if row is not None:
        if project_row is not None and row["project_id"] != project_row["id"]:
            raise Refusal(
                f"Revision {one_line(revision)} belongs to project {one_line(row['project_id'])}, "
                f"not {one_line(project_row['id'])}.",
                "Leave out the project, or name a revision of that project (rN).",
            )
        return row["id"]
    number = _REVISION_NUMBER.match(revision)
    if number is not None:
        if project_row is None:
            raise MissingArgument(
                f"{one_line(revision)!r} names a revision within a project, and no project was given.",
                f"Write PROJECT:{number.group(1)} or put the project first (`PROJECT {one_line(revision)}`).",
            )
        return _revision_number(conn, project_row, int(number.group(1)), revision)
    head, colon, tail = revision.rpartition(":")
    number = _REVISION_NUMBER.match(tail) if colon else None
    within = find_project(conn, head) if number is not None and head else None
    if within is not None:
        if project_row is not None and within["id"] != project_row["id"]:
            raise Refusal(f"{one_line(revision)!r} names project {one_line(within['id'])}, "
                          f"not {one_line(project_row['id'])}.")
        return _revision_number(conn, within, int(number.group(1)), revision)
    near = near_projects(conn, head) if number is not None and head and within is None else None
    raise Refusal(
        f"There is no execution profile revision {one_line(revision)}"
        + (f": no project {one_line(head)!r}. Did you mean {near}?" if near else "."),
        "Name it by id, PROJECT:N or PROJECT rN; list them with `profiles list PROJECT`.",
    )


def pretty(profile_json: str | None) -> str:
    """Indented, key-sorted JSON; invalid text is returned as stored (shown raw, docs/archon-schema.md),
    text over the reader's limits as the note saying so."""
    try:
        value = read_json(profile_json) if profile_json is not None else None
    except UnreadableJson as exc:
        return str(exc) if exc.over_limit else profile_json or ""
    return json.dumps(value, indent=2, sort_keys=True, ensure_ascii=False)


def _provider(profile_json: str | None) -> Any:
    try:
        value = read_json(profile_json or "")
    except ValueError:  # UnreadableJson
        return None
    return value.get("provider_preference") if isinstance(value, dict) else None


def _verify(row: dict[str, Any]) -> dict[str, Any]:
    computed = execution_profiles.fingerprint_json(row.get("profile_json"))
    stored = row.get("fingerprint") or ""
    row["fingerprint_short"] = stored[:12]
    row["fingerprint_well_formed"] = bool(HEX64.match(stored))
    row["computed_fingerprint"] = computed
    row["fingerprint_matches"] = computed == stored
    row["provider_preference"] = _provider(row.get("profile_json"))
    return row


def _project(conn, project_id: str) -> dict[str, Any]:
    row = conn.execute(f"SELECT {stored_columns(conn, 'projects')} FROM projects WHERE id = ?", (project_id,)).fetchone()
    if row is None:
        raise Refusal(f"There is no project {project_id}.", "List them with `projects list`.")
    return dict(row)


def _revision(conn, revision_id: str) -> dict[str, Any]:
    row = conn.execute(
        f"SELECT {stored_columns(conn, 'execution_profile_revisions')} FROM execution_profile_revisions WHERE id = ?",
        (revision_id,)).fetchone()
    if row is None:
        raise Refusal(
            f"There is no execution profile revision {revision_id}.",
            "List a project's revisions with `profiles list PROJECT`.",
        )
    return dict(row)


def _audit(conn, project_id: str) -> list[dict[str, Any]]:
    return [
        dict(r)
        for r in conn.execute(
            f"SELECT {stored_columns(conn, 'execution_profile_audit_events')} FROM execution_profile_audit_events "
            "WHERE project_id = ? ORDER BY created_at, id",
            (project_id,),
        )
    ]


def list_revisions(handle: ArchonDatabase, project_id: str) -> list[ProfileRevision]:
    """A project's revisions, newest first, with the active flag, audit times and a fingerprint check."""
    require_profiles(handle)
    conn = handle.conn
    project_id = resolve_project(conn, project_id)["id"]  # an id or a unique name
    project = _project(conn, project_id)
    audit = _audit(conn, project_id)
    found = profile_evidence.verify(conn)
    rows = []
    for stored in conn.execute(
        f"SELECT {stored_columns(conn, 'execution_profile_revisions')} FROM execution_profile_revisions "
        "WHERE project_id = ? ORDER BY revision DESC", (project_id,)
    ):
        columns = dict(stored)
        row = _verify(dict(columns))
        active = row["id"] == project.get("active_execution_profile_revision_id")
        undone = None if active else profile_startup.replacement(conn, handle.shape.release, row, project)
        unknown = None if active else profile_startup.unpredictable(handle.shape, row, project, found)
        rows.append(ProfileRevision(
            columns=columns,
            check=FingerprintCheck.of(row),
            active=active,
            activated_at=[e["created_at"] for e in audit
                          if e["event_type"] == "revision_activated" and e["profile_revision_id"] == row["id"]],
            archon_replaces_with=undone.revision_id if undone else None,
            activation_refused=unknown or (undone.sentence() if undone else None),
            created_event_at=next(
                (e["created_at"] for e in audit
                 if e["event_type"] == "revision_created" and e["profile_revision_id"] == row["id"]),
                None,
            ),
        ))
    return rows


def show_revision(handle: ArchonDatabase, revision_id: str) -> RevisionDetail:
    """One revision: pretty JSON, fingerprint check, whether it is active, and its audit events."""
    require_profiles(handle)
    conn = handle.conn
    columns = _revision(conn, revision_id)
    row = _verify(dict(columns))
    project = conn.execute(f"SELECT {stored_columns(conn, 'projects')} FROM projects WHERE id = ?",
                           (row["project_id"],)).fetchone()
    return RevisionDetail(
        columns=columns,
        check=FingerprintCheck.of(row),
        project_name=project["name"] if project else None,
        active=bool(project) and project["active_execution_profile_revision_id"] == revision_id,
        pretty_json=pretty(row["profile_json"]),
        audit_events=[
            e for e in _audit(conn, row["project_id"])
            if revision_id in (e["profile_revision_id"], e["previous_profile_revision_id"])
        ],
    )


def activation_problem(revision: ProfileRevision, project: Project | None) -> str | None:
    """Why `activate` would not make this revision (a `list_revisions` row) active now, or None
    when it would: the screens grey the key from this answer, and `activate` refuses on the same
    rules inside its transaction. Activating the active revision is a no-op there, so it is
    offered nowhere."""
    if revision.active:
        return "this revision is already active"
    if project is not None and project.deleting:
        return "the project is being deleted"
    if revision.activation_refused:  # said before any reason is typed (profile_startup.py)
        return revision.activation_refused
    if revision.provider_preference not in PROVIDERS:
        return (f"its provider_preference {revision.provider_preference!r} cannot become the project's "
                f"build provider ({' or '.join(PROVIDERS)})")
    return None


@dataclass
class RevisionDiff:
    a: str
    b: str
    text: str  # unified diff of pretty, key-sorted JSON; empty when the profiles are equal

    @property
    def same(self) -> bool:
        return not self.text


def diff_revisions(handle: ArchonDatabase, rev_a: str, rev_b: str) -> RevisionDiff:
    require_profiles(handle)
    a = _revision(handle.conn, rev_a)
    b = _revision(handle.conn, rev_b)
    lines = difflib.unified_diff(
        pretty(a["profile_json"]).splitlines(keepends=True),
        pretty(b["profile_json"]).splitlines(keepends=True),
        fromfile=f"{rev_a} (revision {a['revision']})",
        tofile=f"{rev_b} (revision {b['revision']})",
    )
    text = "".join(line if line.endswith("\n") else line + "\n" for line in lines)
    return RevisionDiff(rev_a, rev_b, text)


def activate(
    handle: ArchonDatabase, revision_id: str, actor: str, *, reason: str | None, now: datetime
) -> ActionResult:
    """Make `revision_id` its project's active revision (a rollback), with its audit event.

    One transaction: re-read the revision and project, refuse a project being deleted, a
    revision without a valid provider, one archon's next start re-reads with algorithms the database
    contradicts (exit 3: the console cannot predict that start), or one it would replace (issue 8 rule 3,
    profile_startup.py: archon's backfills would silently undo the rollback), then one UPDATE of the pointer and the provider projection
    (compare-and-set on the old pointer) and one `revision_activated` event naming the previous
    revision. Activating the revision that is already active is a no-op.
    """
    require_profiles(handle)
    actor = validate_actor(actor)
    reason = validate_reason(reason, required=True, what="activating a profile revision")
    with write_transaction(handle.conn, read_only=handle.read_only) as conn:
        revision = _verify(_revision(conn, revision_id))
        project_id = revision["project_id"]
        project = _project(conn, project_id)
        if project.get("deletion_started_at"):
            raise Refusal(
                f"Project {project_id} is being deleted (since {project['deletion_started_at']}); "
                "its profile cannot be changed. Nothing was written."
            )
        previous = project.get("active_execution_profile_revision_id")
        if previous == revision_id:
            return ActionResult(
                True, revision_id, "active",
                f"{revision_id} is already the active profile of {project_id}; nothing changed.", noop=True,
                extra={"project_id": project_id},
            )
        provider = revision["provider_preference"]
        if provider not in PROVIDERS:
            raise Refusal(
                f"{revision_id} has provider_preference {provider!r}, which archon cannot project onto the "
                f"project's build provider ({' or '.join(PROVIDERS)}); it cannot be activated. Nothing was written."
            )
        shape = detect_shape(conn)  # as the file is now, inside the transaction
        unknown = profile_startup.unpredictable(shape, revision, project, profile_evidence.verify(conn))
        if unknown is not None:
            raise DatabaseUnusable(
                f"{revision_id} cannot be activated: {unknown}. Nothing was written.",
                "Make the profile you want in archon itself (its settings), or let archon start once and "
                "check `doctor --check profiles`.",
            )
        undone = profile_startup.replacement(conn, shape.release, revision, project)
        if undone is not None:
            raise Refusal(
                f"{revision_id} cannot be activated: {undone.sentence()}. Nothing was written.",
                None if undone.exists and not undone.failure else
                "Make the profile you want in archon itself (its settings), then activate that revision.",
            )
        changed = conn.execute(
            "UPDATE projects SET active_execution_profile_revision_id = ?, build_execution_provider = ? "
            "WHERE id = ? AND active_execution_profile_revision_id IS ?",
            (revision_id, provider, project_id, previous),
        ).rowcount
        if changed != 1:  # impossible under BEGIN IMMEDIATE; the last line of defence
            raise Refusal(f"Project {project_id} changed while activating; nothing was written. Try again.")
        owned = previous and conn.execute(
            "SELECT 1 FROM execution_profile_revisions WHERE project_id = ? AND id = ?", (project_id, previous)
        ).fetchone()
        metadata = {**identity.event_metadata(actor), "actor": actor, "reason": reason, "source": "archon-console"}
        if previous and not owned:  # a dangling pointer cannot satisfy the audit FK; keep it as text
            metadata["previous_active_revision_id"] = previous
        conn.execute(
            "INSERT INTO execution_profile_audit_events (id, project_id, event_type, profile_revision_id, "
            "previous_profile_revision_id, metadata_json, created_at) VALUES (?, ?, 'revision_activated', ?, ?, ?, ?)",
            (
                f"{revision_id}:activated:{uuid.uuid4().hex[:8]}", project_id, revision_id,
                previous if owned else None, json.dumps(metadata, sort_keys=True, ensure_ascii=False), db_time(now),
            ),
        )
    message = (
        f"{revision_id} (revision {revision['revision']}) is now the active profile of {project_id}, "
        f"replacing {previous or 'none'}; build provider {project.get('build_execution_provider')} -> {provider}."
    )
    if not revision["fingerprint_matches"]:
        message += " Warning: its stored fingerprint does not match the console's recomputation (shown, not fixed)."
    return ActionResult(
        True, revision_id, "active", message,
        extra={"project_id": project_id, "previous_revision_id": previous, "build_execution_provider": provider},
    )


__all__ = [
    "RevisionDiff",
    "activate",
    "activation_problem",
    "diff_revisions",
    "list_revisions",
    "pretty",
    "require_profiles",
    "resolve_revision",
    "show_revision",
]
