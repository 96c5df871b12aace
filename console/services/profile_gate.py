"""The upgrade's evidence gate for profile writes (issue rule 1, console/db/profile_evidence.py).

Only steps that would write profile data are gated: the backfills (005, 006, 021, 022) when they
have rows to move, and the steps that install `create_project_execution_profile` with the
console's default profiles embedded (007 when the trigger is missing; 020 when it rebuilds, which
drops it for 022 to create after the backfills; 022 whenever it is missing, as after a run stopped
after 020). A
contradiction refuses the whole upgrade before anything is written, `--force` or not. Each
writing step writes at its release's schema version, and only archon's own rows at that version
prove what the step writes (profile_evidence.py `proves`): a step whose version nothing archon
wrote proves is a risk the plan states and `--force` accepts, even when other versions are proven.
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass, field
from typing import Any, Sequence

from console.db import profile_evidence
from console.db.execution_profiles import SCHEMA_VERSION_BY_RELEASE
from console.db.migrations.base import Migration, object_exists
from console.db.migrations.steps import (
    s005_profile_backfill_initial as s005,
    s006_profile_backfill_schema_v2 as s006,
    s007_profile_guard_triggers as s007,
    s020_profile_revisions_rebuild_v3 as s020,
    s021_profile_backfill_current_schema as s021,
    s022_profile_workload_eligibility as s022,
)
from console.errors import DatabaseUnusable

BACKFILL_STEPS = frozenset({s005.ID, s006.ID, s021.ID, s022.ID})
TRIGGER_STEPS = frozenset({s007.ID, s020.ID})

UNVERIFIED_LINE = (
    "Profile defaults, serialisation and fingerprints are the console's reconstruction and unverified: "
    "the database holds no profile revision or profile trigger archon wrote to check them against"
)


def _unverified_line(evidence: profile_evidence.ProfileEvidence, missing: list[int]) -> str:
    """UNVERIFIED_LINE, or which schema versions are unproven when archon's rows prove others; then
    which of the database's rows were set aside as the console's own."""
    if evidence.status == profile_evidence.NONE:
        line = UNVERIFIED_LINE
    else:
        at = ", ".join(map(str, missing))
        proven = ", ".join(map(str, sorted(set(evidence.schema_versions)
                                           | {evidence.trigger_schema_version} - {None})))
        line = (f"Profile defaults, serialisation and fingerprints are the console's reconstruction and "
                f"unverified at schema {at}: the database holds no profile revision or profile trigger archon "
                f"wrote at schema {at} to check them against (its schema-{proven} evidence does not prove "
                f"what archon writes at schema {at})")
    if evidence.console_rows:
        line += (f"; {evidence.console_rows} row(s) the console's own upgrade wrote are not evidence")
    return line


@dataclass
class ProfileGate:
    """What the plan shows about the evidence, and what it means for the run."""

    status: str  # profile_evidence.VERIFIED / CONTRADICTED / NONE
    summary: str
    steps: list[str]  # pending steps that would write profile data
    release: str  # the first release among them
    evidence: dict[str, Any] = field(default_factory=dict)
    refusal: str | None = None
    force_reason: str | None = None
    unverified: str | None = None  # the plan's line when force_reason is set

    @property
    def contradicted(self) -> bool:
        return self.status == profile_evidence.CONTRADICTED


def _trigger_left_to_022(conn: sqlite3.Connection) -> bool:
    """The revisions table has 1.10.0's text (020's rebuild ran, in this run or a stopped one, or
    archon's did) and the trigger is missing: 022 creates it. (Where 020 is still to rebuild, 020
    counts as the step that installs it.)"""
    try:
        return (object_exists(conn, "table", profile_evidence.REVISIONS) and not s020.needed(conn)
                and not object_exists(conn, "trigger", profile_evidence.TRIGGER))
    except sqlite3.Error:
        return True


def _would_write(conn: sqlite3.Connection, migration: Migration) -> bool:
    if migration.id == s022.ID and _trigger_left_to_022(conn):
        return True  # it creates the trigger after its backfill, with the console's defaults embedded
    if migration.id in BACKFILL_STEPS:
        try:
            return int(migration.estimate(conn)) != 0
        except Exception:
            return True  # cannot tell: assume it writes
    if migration.id == s007.ID:
        return not object_exists(conn, "trigger", profile_evidence.TRIGGER)
    if migration.id == s020.ID:
        try:
            return not object_exists(conn, "table", profile_evidence.REVISIONS) or bool(s020.needed(conn))
        except sqlite3.Error:
            return True
    return False


def check(conn: sqlite3.Connection, pending: Sequence[Migration]) -> ProfileGate | None:
    """The gate for these pending steps on this database; None when none of them writes profiles."""
    writers = [m for m in pending if (m.id in BACKFILL_STEPS or m.id in TRIGGER_STEPS) and _would_write(conn, m)]
    if not writers:
        return None
    evidence = profile_evidence.verify(conn)
    release = writers[0].release
    gate = ProfileGate(
        status=evidence.status,
        summary=evidence.summary(),
        steps=[m.id for m in writers],
        release=release,
        evidence=evidence.to_json(),
    )
    if evidence.status == profile_evidence.CONTRADICTED:
        rows = evidence.contradicted_rows
        named = ", ".join(rows[:profile_evidence.SHOWN]) + (
            f" and {len(rows) - profile_evidence.SHOWN} more" if len(rows) > profile_evidence.SHOWN else "")
        gate.refusal = (
            f"The database contradicts the console's execution-profile algorithms, which steps "
            f"{', '.join(gate.steps)} would use to write profile data: {len(rows)} row(s) differ ({named}). "
            f"Nothing was written; --force does not override this"
        )
    else:
        writes_at = {m.id: SCHEMA_VERSION_BY_RELEASE.get(m.release, 0) for m in writers}
        missing = sorted({v for v in writes_at.values() if not evidence.proves(v)})
        if missing:
            unproven = [m.id for m in writers if writes_at[m.id] in missing]
            gate.status = profile_evidence.NONE
            gate.unverified = _unverified_line(evidence, missing)
            gate.force_reason = gate.unverified[0].lower() + gate.unverified[1:] + f" (steps {', '.join(unproven)})"
    return gate


class ProfileEvidenceContradicted(DatabaseUnusable):
    """The upgrade is refused before any write; carries the plan so it can be shown (exit 3)."""

    def __init__(self, gate: ProfileGate, plan: Any = None):
        super().__init__(
            gate.refusal or "The database contradicts the console's execution-profile algorithms.",
            f"Start archon {gate.release} once to let it upgrade this database itself.",
        )
        self.gate = gate
        self.plan = plan


__all__ = ["ProfileEvidenceContradicted", "ProfileGate", "UNVERIFIED_LINE", "check"]
