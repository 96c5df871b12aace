"""What archon's next start would do to a profile revision if it were made active.

At every start archon re-runs two profile backfills over each project's *active* revision
(console/db/migrations/backfills.py re-implements them for upgrades):

- `backfillExecutionProfilesToCurrentSchema` (1.8.22: from schema 1; 1.10.0: from 1 and 2):
  the active revision's profile, normalised to the current schema, is looked up by fingerprint
  in the project's revisions, created as `<project>:execution-profile:v<N>` when missing, and
  made active;
- `backfillExecutionProfileWorkloadEligibility` (1.10.0): an active build-eligible current-schema
  profile without `chat_build` (or, when the project has a configured check policy, without the
  `agent_template` check policy) is repaired the same way (`...:<repair>-v3`).

Their audit events have fixed ids inserted `OR IGNORE`, so after a second rollback archon's
undo leaves no trace. Activating such a revision is therefore refused; this module says which
revision archon would switch to, following both steps in archon's order.

That prediction runs the console's reconstruction of archon's profile algorithms
(console/db/execution_profiles.py) for a release the console knows. Where archon's own rows
contradict it (the evidence that makes the upgrade refuse to write profile data,
console/db/profile_evidence.py), the console cannot say what archon's next start does with a
revision it re-reads, and where the database is no release the console knows it cannot say which
start comes next at all: `unpredictable` refuses those activations outright, for the CLI and the
TUI alike.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from typing import Any

from console.db import execution_profiles as profiles
from console.db import profile_evidence
from console.db.detect import Shape
from console.db.migrations.backfills import PROJECT_POLICY_COLUMNS

# Schema versions each release's start moves to the current one (seeds: 001 and 000).
SCHEMA_BACKFILL_FROM = {"1.8.22": (1,), "1.10.0": (1, 2)}
WORKLOAD_REPAIR_RELEASES = frozenset({"1.10.0"})


@dataclass(frozen=True)
class Replacement:
    """Archon `release` would make `revision_id` active instead (`exists`: it is already stored;
    otherwise archon would create it), because of `why`. `failure`: archon's start would stop."""

    release: str
    revision_id: str | None
    exists: bool
    revision_number: int | None
    why: str
    failure: str | None = None

    def sentence(self) -> str:
        """The refusal, in the words the issue gives it, then why."""
        if self.failure:
            return (f"archon {self.release} would try to replace it at its next start, because {self.why}, and "
                    f"by the console's reading of the profile would fail to start: {self.failure}")
        if self.exists:
            number = f" (revision {self.revision_number})" if self.revision_number is not None else ""
            return (f"archon {self.release} would replace it at its next start with {self.revision_id}; "
                    f"activate that one instead. Archon does so because {self.why}; {self.revision_id}{number} "
                    "is the revision it would pick")
        return (f"archon {self.release} would replace it at its next start with a new revision it would create "
                f"({self.revision_id}), because {self.why}; none exists yet that you could activate instead")


def _row(conn: sqlite3.Connection, sql: str, params: tuple) -> dict[str, Any] | None:
    row = conn.execute(sql, params).fetchone()
    return None if row is None else dict(zip(row.keys(), tuple(row)))


def _by_fingerprint(conn, project_id: str, fp: str) -> dict[str, Any] | None:
    return _row(conn, "SELECT id, revision, schema_version, profile_json FROM execution_profile_revisions "
                "WHERE project_id = ? AND fingerprint = ?", (project_id, fp))


def _by_id(conn, revision_id: str) -> dict[str, Any] | None:
    return _row(conn, "SELECT id, revision, schema_version, profile_json FROM execution_profile_revisions "
                "WHERE id = ?", (revision_id,))


def _normalized(profile_json: Any, schema_version: int) -> dict[str, Any] | None:
    try:
        normalized = profiles.normalize(profiles.parse(profile_json), schema_version)
    except (TypeError, ValueError):  # UnreadableJson is a ValueError
        return None
    return normalized.profile if normalized.ok else None


def unpredictable(shape: Shape, revision: dict[str, Any], project: dict[str, Any],
                  found: profile_evidence.ProfileEvidence) -> str | None:
    """Why the console cannot promise what archon's next start does with `revision` if it were made
    active, or None. Two causes:

    * the database's shape is not a release whose profile start-up the console knows (no known
      release: partly upgraded, an intermediate pre-release, or a newer archon's file). Then which
      release starts next, and what its backfills re-read, is unknown: a newer archon moves every
      older schema to its own, and a partly upgraded file is finished by a release the console
      cannot name. `replacement` has nothing to predict with, so every activation is refused, not
      allowed (D5);
    * that start re-reads it (a schema below the current one, or 1.10.0's workload repair of
      current-schema revisions) with algorithms the database contradicts. `found` is
      `profile_evidence.verify` of the database, the evidence the upgrade's gate reads (taken once
      per listing, and again inside the activation's transaction).
    """
    if project.get("deletion_started_at"):
        return None  # refused on its own grounds
    release = shape.release
    current_version = profiles.SCHEMA_VERSION_BY_RELEASE.get(release or "")
    if current_version is None:
        known = " or ".join(f"archon {r}" for r in profiles.SCHEMA_VERSION_BY_RELEASE)
        return (f"this database's shape is not a release whose start-up the console knows ({shape.reason}; it "
                f"knows what {known} do with profile revisions at start), so the console cannot promise what "
                "archon's next start does with it")
    if found.status != profile_evidence.CONTRADICTED:
        return None
    version = revision.get("schema_version")
    reread = version in SCHEMA_BACKFILL_FROM.get(release, ()) or (
        release in WORKLOAD_REPAIR_RELEASES and version == current_version)
    if not reread:
        return None
    rows = found.contradicted_rows
    named = ", ".join(rows[:profile_evidence.SHOWN]) + (
        f" and {len(rows) - profile_evidence.SHOWN} more" if len(rows) > profile_evidence.SHOWN else "")
    return (f"archon {release} re-reads this revision at its next start with its execution-profile algorithms, "
            f"and this database's own profile data contradicts the console's reconstruction of them ({len(rows)} "
            f"row(s) differ: {named}), so the console cannot promise what that start does with it; the upgrade "
            "refuses to write profile data here for the same reason")


def replacement(conn: sqlite3.Connection, release: str | None, revision: dict[str, Any],
                project: dict[str, Any]) -> Replacement | None:
    """None when archon `release`'s next start would leave `revision` active."""
    current_version = profiles.SCHEMA_VERSION_BY_RELEASE.get(release or "")
    if current_version is None or project.get("deletion_started_at"):
        return None  # unknown release: `unpredictable` refuses; a project being deleted is skipped
    project_id = revision["project_id"]
    current = {"id": revision["id"], "revision": revision.get("revision"),
               "schema_version": revision.get("schema_version"), "profile_json": revision.get("profile_json")}
    stored = True
    reasons: list[str] = []
    if current["schema_version"] in SCHEMA_BACKFILL_FROM.get(release, ()):
        why = (f"its schema_version {current['schema_version']} is below archon {release}'s "
               f"{current_version}")
        profile = _normalized(current["profile_json"], current_version)
        if profile is None:
            return Replacement(release, None, False, None, why,
                               f"Stored execution profile revision {revision['id']} is invalid")
        found = _by_fingerprint(conn, project_id, profiles.fingerprint(profile))
        if found is None:  # archon inserts OR IGNORE under a fixed id, then activates that id
            new_id = f"{project_id}:execution-profile:v{current_version}"
            found = _by_id(conn, new_id)
            if found is None:
                found = {"id": new_id, "revision": None, "schema_version": current_version,
                         "profile_json": profiles.serialize(profile)}
                stored = False
        current = found
        reasons.append(why)
    if release in WORKLOAD_REPAIR_RELEASES and current["schema_version"] == current_version:
        profile = _normalized(current["profile_json"], current_version)
        if profile is None:
            return Replacement(release, None, False, None, "archon re-reads every active profile at start",
                               f"Stored execution profile revision {current['id']} is invalid")
        workloads = profile["eligible_workloads"]
        build = "build" in workloads
        needs_chat = build and "chat_build" not in workloads
        policy_row = {column: project.get(column) for column in PROJECT_POLICY_COLUMNS}
        needs_check = (build and profiles.has_configured_check_policy(policy_row)
                       and profile["check_template_policy"]["mode"] != "agent_template")
        if needs_chat or needs_check:
            repaired = profiles.normalize({
                **profile,
                "eligible_workloads": workloads + (["chat_build"] if needs_chat else [])
                + (["check"] if needs_check else []),
                "check_template_policy": {"mode": "agent_template", "agent": "opencode"}
                if needs_check else profile["check_template_policy"],
            }, current_version)
            if not repaired.ok:
                return Replacement(release, None, False, None, "its workload repair does not normalise",
                                   f"Stored execution profile revision {current['id']} is invalid")
            key = "chat-build-check" if needs_chat and needs_check else "chat-build" if needs_chat else "configured-check"
            reasons.append(
                "it is build-eligible but lacks " + " and ".join(
                    (["chat_build eligibility"] if needs_chat else [])
                    + (["the agent_template check policy its project's configured checks need"] if needs_check else [])
                ))
            fp = profiles.fingerprint(repaired.profile)
            found = _by_fingerprint(conn, project_id, fp)
            if found is not None:
                current, stored = found, True
            else:
                new_id = f"{project_id}:execution-profile:{key}-v{current_version}"
                if _by_id(conn, new_id) is not None:  # archon's insert is ignored and its re-lookup fails
                    return Replacement(release, new_id, True, None, reasons[-1],
                                       f"Failed to migrate stored execution profile revision {current['id']}")
                current, stored = {"id": new_id, "revision": None}, False
    if current["id"] == revision["id"]:
        return None
    return Replacement(release, current["id"], stored, current.get("revision"), " and ".join(reasons))


__all__ = ["Replacement", "SCHEMA_BACKFILL_FROM", "WORKLOAD_REPAIR_RELEASES", "replacement", "unpredictable"]
