"""What an upgrade plans and what it did: the typed values the CLI, its `--json` and the screen share.

`to_json` is the one place the JSON form is made (console/cli/commands/upgrade.py prints it), so the
screen's attributes and the CLI's JSON cannot disagree.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any, Callable

from console.db import snapshot as snapshots
from console.db.migrations.registry import MIGRATIONS, RELEASES
from console.errors import Refusal
from console.text import shell_quote

if TYPE_CHECKING:  # the gate's module loads the profile evidence; a plan with nothing pending has none
    from console.services.profile_gate import ProfileGate

TARGETS = RELEASES + ("current",)


@dataclass(frozen=True)
class UpgradeProgress:
    """One tick for a progress bar: `kind` is "snapshot" (pages), "migration" (steps), "done", or
    "wait" (`--wait`: other processes hold the file; its message names them)."""

    kind: str
    done: int
    total: int
    message: str = ""


ProgressCallback = Callable[[UpgradeProgress], None]


@dataclass(frozen=True)
class PendingStep:
    id: str
    release: str
    safety: str
    description: str
    rebuild: bool
    rows: int | None  # rows it will touch, as the database is now (None: cannot tell)


@dataclass
class UpgradePlan:
    path: str
    target: str
    detected_release: str | None
    shape_reason: str
    ledger_state: str  # "versioned" or "unversioned-adoption"
    applied: list[str]
    pending: list[PendingStep]
    snapshot_path: str
    snapshot_bytes: int
    free_bytes: int
    force_required: bool
    force_reasons: list[str] = field(default_factory=list)
    policy_changes: list[str] = field(default_factory=list)
    profile_evidence: ProfileGate | None = None  # rule 1's gate, when a pending step writes profiles
    # Other processes holding a SQLite lock on the file (console/db/exclusive_lock.py `holders`), as
    # the plan found them: the run refuses while there are any ("stop archon first").
    in_use_by: list[str] = field(default_factory=list)

    @property
    def up_to_date(self) -> bool:
        return not self.pending

    @property
    def enough_space(self) -> bool:
        return self.free_bytes >= self.snapshot_bytes + snapshots.SPACE_MARGIN_BYTES

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["up_to_date"] = self.up_to_date
        data["enough_space"] = self.enough_space
        data["registry_size"] = len(MIGRATIONS)
        return data


@dataclass
class UpgradeResult:
    status: str  # "up-to-date" or "upgraded"
    plan: UpgradePlan
    applied: list[str]
    skipped: list[str]  # applied meanwhile by another upgrader
    snapshot_path: str | None = None
    snapshot_sha256: str | None = None
    release_after: str | None = None
    snapshot_reused: bool = False  # the interrupted run's snapshot was kept (console/db/snapshot_reuse.py)
    # what the run found after its last step and could no longer prevent (console/services/upgrade/run.py)
    warnings: list[str] = field(default_factory=list)

    @property
    def message(self) -> str:
        if self.status == "up-to-date":
            return f"Up to date: the database is at {self.plan.target} and its ledger is complete; nothing was written."
        text = f"Applied {len(self.applied)} step(s); the database now has the {self.release_after or 'unknown'} shape."
        if self.skipped:
            text += f" {len(self.skipped)} step(s) were applied meanwhile by another upgrader."
        for warning in self.warnings:
            text += f" Warning: {warning}"
        return text

    @property
    def undo_command(self) -> str | None:
        return undo_command(self.plan.path, self.snapshot_path) if self.snapshot_path else None

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "message": self.message,
            "undo_command": self.undo_command,
            "applied": self.applied,
            "skipped": self.skipped,
            "snapshot_path": self.snapshot_path,
            "snapshot_sha256": self.snapshot_sha256,
            "snapshot_reused": self.snapshot_reused,
            "release_after": self.release_after,
            "warnings": self.warnings,
            "plan": self.plan.to_json(),
        }


def undo_command(db_path: str | os.PathLike[str], snapshot_path: str | os.PathLike[str]) -> str:
    """The command that puts the snapshot back, naming the database: without `--db` it would replace
    whatever ARCHON_DB_PATH names in the shell it is pasted into (issue 18, finding 11). The resolved
    paths: `restore` refuses a symbolic link as --db (it would replace the link), so a database
    reached through one must be named by the file the console actually opened."""
    return (f"archon-console --db {shell_quote(os.path.realpath(db_path))} restore "
            f"{shell_quote(os.path.realpath(snapshot_path))}")


class ForceRequired(Refusal):
    """The plan needs `--force`; nothing was written. Carries the plan so it can be shown."""

    def __init__(self, plan: UpgradePlan):
        super().__init__(
            "This upgrade needs --force: " + "; ".join(plan.force_reasons) + ". Nothing was written.",
            "Read the plan above, then run `archon-console upgrade --force` (a verified snapshot is taken first).",
        )
        self.plan = plan



__all__ = ["ForceRequired", "PendingStep", "ProgressCallback", "TARGETS", "UpgradePlan", "UpgradeProgress", "UpgradeResult", "undo_command"]
