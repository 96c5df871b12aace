"""What the project overview reads: one project and what needs attention in it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from console.models.values import Stored


@dataclass(frozen=True)
class ProjectSummary:
    """A project row with its counts. A count the database's release cannot have (approvals
    before 1.8.22, claims before 1.10.0) is None, never 0.

    `columns` is the `projects` row as archon stores it, in table order: the release decides which
    columns exist, and `--json` keeps them all, ahead of the derived fields (`to_json`).
    """

    columns: dict[str, Stored]
    active_revision: int | None
    active_schema_version: int | None
    pending_approvals: int | None
    pending_expiring_within_hour: int | None  # not yet overdue
    pending_overdue: int | None
    environments: dict[str, int] = field(default_factory=dict)  # lifecycle state -> count
    environments_total: int = 0
    claims_held: int | None = None
    claims_stale: int | None = None
    deleting: bool = False

    @property
    def id(self) -> Stored:
        return self.columns["id"]

    @property
    def name(self) -> Stored:
        return self.columns.get("name")

    @property
    def build_execution_provider(self) -> Stored:
        return self.columns.get("build_execution_provider")

    def to_json(self) -> dict[str, Any]:
        data = dict(self.columns)
        for name in ("active_revision", "active_schema_version", "pending_approvals",
                     "pending_expiring_within_hour", "pending_overdue", "environments",
                     "environments_total", "claims_held", "claims_stale", "deleting"):
            data[name] = getattr(self, name)
        return data


@dataclass(frozen=True)
class Project:
    """A `projects` row as archon stores it (`columns`, whichever release wrote it), with the
    fields the profiles screen and the activation rule read."""

    columns: dict[str, Stored]

    @property
    def id(self) -> Stored:
        return self.columns["id"]

    @property
    def name(self) -> Stored:
        return self.columns.get("name")

    @property
    def build_execution_provider(self) -> Stored:
        return self.columns.get("build_execution_provider")

    @property
    def deleting(self) -> bool:
        """The project's deletion has started: the console changes nothing in it."""
        return bool(self.columns.get("deletion_started_at"))

    def to_json(self) -> dict[str, Any]:
        return dict(self.columns)


@dataclass(frozen=True)
class ProfileAuditEvent:
    """One row of a project's execution-profile audit trail, as stored."""

    columns: dict[str, Stored]

    @property
    def event_type(self) -> Stored:
        return self.columns.get("event_type")

    @property
    def profile_revision_id(self) -> Stored:
        return self.columns.get("profile_revision_id")

    @property
    def previous_profile_revision_id(self) -> Stored:
        return self.columns.get("previous_profile_revision_id")

    @property
    def metadata_json(self) -> Stored:
        return self.columns.get("metadata_json")

    @property
    def created_at(self) -> Stored:
        return self.columns.get("created_at")

    def to_json(self) -> dict[str, Any]:
        return dict(self.columns)
