"""What the profile services return: a project's revisions, one revision in full."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from console.models.values import Json, Stored

# The fields `profiles._verify` adds to a stored revision, in the order `--json` shows them.
CHECK_FIELDS = ("fingerprint_short", "fingerprint_well_formed", "computed_fingerprint",
                "fingerprint_matches", "provider_preference")


@dataclass(frozen=True)
class FingerprintCheck:
    """The stored fingerprint against the console's recomputation (shown, never fixed)."""

    fingerprint_short: str
    fingerprint_well_formed: bool
    computed_fingerprint: str | None
    fingerprint_matches: bool
    provider_preference: Json  # from the profile JSON; None when it names none (or is not JSON)

    @classmethod
    def of(cls, checked: dict[str, Any]) -> "FingerprintCheck":
        return cls(*(checked[name] for name in CHECK_FIELDS))


@dataclass(frozen=True)
class _Revision:
    # `columns`: the `execution_profile_revisions` row as stored, in table order (`--json` keeps it).
    columns: dict[str, Stored]
    check: FingerprintCheck

    @property
    def id(self) -> Stored:
        return self.columns["id"]

    @property
    def project_id(self) -> Stored:
        return self.columns["project_id"]

    @property
    def revision(self) -> Stored:
        return self.columns.get("revision")

    @property
    def schema_version(self) -> Stored:
        return self.columns.get("schema_version")

    @property
    def fingerprint(self) -> Stored:
        return self.columns.get("fingerprint")

    @property
    def profile_json(self) -> Stored:
        return self.columns.get("profile_json")

    @property
    def created_at(self) -> Stored:
        return self.columns.get("created_at")

    @property
    def fingerprint_short(self) -> str:
        return self.check.fingerprint_short

    @property
    def fingerprint_matches(self) -> bool:
        return self.check.fingerprint_matches

    @property
    def fingerprint_well_formed(self) -> bool:
        return self.check.fingerprint_well_formed

    @property
    def computed_fingerprint(self) -> str | None:
        return self.check.computed_fingerprint

    @property
    def provider_preference(self) -> Json:
        return self.check.provider_preference

    def _json_head(self) -> dict[str, Any]:
        data = dict(self.columns)
        for name in CHECK_FIELDS:
            data[name] = getattr(self.check, name)
        return data


@dataclass(frozen=True)
class ProfileRevision(_Revision):
    """One row of a project's revision list: whether it is active, when it was activated, and
    whether archon's next start would undo activating it (`activation_refused` says why)."""

    active: bool = False
    activated_at: list[Stored] = field(default_factory=list)  # revision_activated event times, oldest first
    archon_replaces_with: str | None = None
    activation_refused: str | None = None
    created_event_at: Stored = None

    def to_json(self) -> dict[str, Any]:
        data = self._json_head()
        data.update(active=self.active, activated_at=list(self.activated_at),
                    archon_replaces_with=self.archon_replaces_with,
                    activation_refused=self.activation_refused, created_event_at=self.created_event_at)
        return data


@dataclass(frozen=True)
class RevisionDetail(_Revision):
    """One revision in full: its pretty JSON and the audit events that name it."""

    project_name: Stored = None
    active: bool = False
    pretty_json: str = ""
    audit_events: list[dict[str, Stored]] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        data = self._json_head()
        data.update(project_name=self.project_name, active=self.active, pretty_json=self.pretty_json,
                    audit_events=self.audit_events)
        return data
