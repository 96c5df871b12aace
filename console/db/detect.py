"""Which archon release shape a database has, read from archon's own markers.

Archon keeps no ledger; it converges its schema at every start (`ensureColumn`, `IF NOT EXISTS`,
rebuilds when a table's stored SQL lacks a marker). We read the same markers, tolerate every table
we do not manage, and say "no known release" when markers of a release are only partly there.
"""

from __future__ import annotations

import re
import sqlite3
from console.records import dataclass, field

from console.db.sql import quote_identifier

LEDGER_TABLE = "_sqlite_migrations"
LEDGER_META_TABLE = "_archon_console_ledger"
MIGRATION_SET = "archon-console"


@dataclass(frozen=True)
class Shape:
    release: str | None
    reason: str
    newer: bool = False
    markers: dict[str, dict[str, bool]] = field(default_factory=dict)
    ledger: tuple[str, ...] = ()
    has_ledger_table: bool = False
    tables: frozenset[str] = frozenset()
    intermediate: bool = False

    @property
    def versioned(self) -> bool:
        return bool(self.ledger)

    @property
    def has_profiles(self) -> bool:
        return "execution_profile_revisions" in self.tables

    @property
    def has_approvals(self) -> bool:
        return "approval_requests" in self.tables

    @property
    def has_claims(self) -> bool:
        return self.markers.get("1.10.0", {}).get("operation claim columns", False)

    def supports(self, feature: str) -> bool:
        return {
            "profiles": self.has_profiles,
            "approvals": self.has_approvals,
            "claims": self.has_claims,
        }[feature]


def _sql(conn, kind, name) -> str:
    row = conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)
    ).fetchone()
    return (row[0] or "") if row else ""


def _columns(conn, table) -> set[str]:
    try:
        return {row[1] for row in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")}
    except sqlite3.DatabaseError:
        return set()


def read_ledger(conn: sqlite3.Connection) -> tuple[str, ...]:
    if not _sql(conn, "table", LEDGER_TABLE):
        return ()
    try:
        rows = conn.execute(
            f"SELECT name FROM {LEDGER_TABLE} WHERE migration_set = ? ORDER BY rowid",
            (MIGRATION_SET,),
        ).fetchall()
    except sqlite3.DatabaseError:
        return ()
    return tuple(row[0] for row in rows)


def release_markers(conn: sqlite3.Connection) -> dict[str, dict[str, bool]]:
    revisions = _sql(conn, "table", "execution_profile_revisions")
    approvals = _sql(conn, "table", "approval_requests")
    attempts = _sql(conn, "table", "check_attempt_details")
    environments = _columns(conn, "execution_environments")
    projects = _columns(conn, "projects")
    return {
        "1.8.20": {
            "projects table": bool(projects),
            "execution_environments table": bool(environments),
            "execution_runs table": bool(_sql(conn, "table", "execution_runs")),
        },
        "1.8.22": {
            "projects.active_execution_profile_revision_id": "active_execution_profile_revision_id" in projects,
            "execution_profile_revisions schema_version IN (1, 2)": (
                "schema_version IN (1, 2)" in revisions or "schema_version IN (1, 2, 3)" in revisions
            ),
            "approval_requests BETWEEN 2 AND 65536": "BETWEEN 2 AND 65536" in approvals,
            "execution_environments.retirement_requested_at": "retirement_requested_at" in environments,
            "build_setup_evidence table": bool(_sql(conn, "table", "build_setup_evidence")),
            # 1.10.0's rebuild of the revisions table drops this trigger and its start re-creates it
            # only after its backfills (console: step 020, then 022): with the table in 1.10.0's text
            # its absence is that interrupted start, which 1.10.0's next start (or run) finishes.
            "create_project_execution_profile trigger": bool(
                _sql(conn, "trigger", "create_project_execution_profile")
            ) or "schema_version IN (1, 2, 3)" in revisions,
            "check_attempt_details ambiguous_process_loss": "ambiguous_process_loss" in attempts,
        },
        "1.10.0": {
            "execution_profile_revisions schema_version IN (1, 2, 3)": "schema_version IN (1, 2, 3)" in revisions,
            "service_run_details table": bool(_sql(conn, "table", "service_run_details")),
            "operation claim columns": {
                "operation_claim_id",
                "operation_kind",
                "operation_claimed_at",
            } <= environments,
            "validate_execution_environment_operation_claim trigger": bool(
                _sql(conn, "trigger", "validate_execution_environment_operation_claim")
            ),
            "check_attempt_details environment_loss": "environment_loss" in attempts,
        },
    }


def _intermediate_1_8_21(conn: sqlite3.Connection, markers: dict[str, dict[str, bool]]) -> bool:
    """Profile or approval tables exist in an older shape, and nothing of 1.10.0 is present."""
    if any(markers["1.10.0"].values()):
        return False
    revisions = _sql(conn, "table", "execution_profile_revisions")
    approvals = _sql(conn, "table", "approval_requests")
    old_revisions = bool(revisions) and not markers["1.8.22"][
        "execution_profile_revisions schema_version IN (1, 2)"
    ]
    old_approvals = bool(approvals) and not markers["1.8.22"]["approval_requests BETWEEN 2 AND 65536"]
    return old_revisions or old_approvals


_NEWER_SCHEMA = re.compile(r"schema_version IN \(1, 2, 3, \d")


def table_names(conn: sqlite3.Connection) -> frozenset[str]:
    """Every table's name, in one read of `sqlite_master` (the upgrade's "is this archon's" too)."""
    return frozenset(row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))


def detect_shape(conn: sqlite3.Connection) -> Shape:
    tables = table_names(conn)
    markers = release_markers(conn)
    ledger = read_ledger(conn)
    common = dict(markers=markers, ledger=ledger, has_ledger_table=LEDGER_TABLE in tables, tables=tables)
    if _NEWER_SCHEMA.search(_sql(conn, "table", "execution_profile_revisions")):
        return Shape(
            None,
            "execution_profile_revisions allows a profile schema newer than 3: a newer archon made it",
            newer=True,
            **common,
        )
    release = None
    for name, checks in markers.items():
        present = [k for k, v in checks.items() if v]
        if len(present) == len(checks):
            release = name
            continue
        if present:
            missing = ", ".join(k for k, v in checks.items() if not v)
            if name == "1.8.22" and _intermediate_1_8_21(conn, markers):
                # docs/decisions.md, Q16: a pre-release between 1.8.20 and 1.8.22 created the profile or
                # approval tables in an older shape. 1.8.22's own steps upgrade them, so it is a
                # valid starting point; replaying from 1.8.20 is what archon 1.8.22 would do.
                return Shape(
                    "1.8.20",
                    f"intermediate shape between 1.8.20 and 1.8.22 (probably 1.8.21): has "
                    f"{', '.join(present)} but lacks {missing}",
                    intermediate=True,
                    **common,
                )
            return Shape(
                None,
                f"partly {name}: has {', '.join(present)} but lacks {missing}",
                **common,
            )
        break
    if release is None:
        return Shape(None, "none of archon's 1.8.20 tables are present", **common)
    # Nothing of a later release may appear after a missing one.
    order = list(markers)
    for later in order[order.index(release) + 1 :]:
        if any(markers[later].values()):
            present = ", ".join(k for k, v in markers[later].items() if v)
            return Shape(None, f"{release} with parts of {later} ({present})", **common)
    return Shape(release, f"archon {release} shape", **common)
