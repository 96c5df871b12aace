"""The guarded schema upgrade and its undo, one module per responsibility.

* model.py — the typed values: `UpgradePlan`, `PendingStep`, `UpgradeResult`, `UpgradeProgress`,
  `ForceRequired`; their `to_json` is the CLI's `--json`.
* decide.py — the decision and its fail-closed checks, made read-only for the plan and again under
  the writer lock before each step.
* plan.py — `plan_upgrade`: reads only, creates no file.
* run.py — `run_upgrade`: the snapshot and each step in its own locked transaction (its docstring
  says why the lock is held that way).
* restore.py — `restore_snapshot`: the verified snapshot put back, nobody else holding a lock;
  restore_records.py (which record vouches for its content), restore_origin.py (which database it
  was taken from) and restore_loss.py (what was written since) decide first.
"""

from __future__ import annotations

from console.errors import DatabaseUnusable, Refusal, UsageError
from console.services.profile_gate import UNVERIFIED_LINE, ProfileEvidenceContradicted
from console.services.upgrade.decide import resolve_target
from console.services.upgrade.model import (
    TARGETS,
    ForceRequired,
    PendingStep,
    UpgradePlan,
    UpgradeProgress,
    UpgradeResult,
)
from console.services.upgrade.plan import plan_upgrade
from console.services.upgrade.restore import RearmRefused, RestoreResult, restore_snapshot
from console.services.upgrade.restore_loss import LossReport
from console.services.upgrade.run import run_upgrade

__all__ = [
    "DatabaseUnusable",
    "ForceRequired",
    "LossReport",
    "ProfileEvidenceContradicted",
    "RearmRefused",
    "PendingStep",
    "Refusal",
    "RestoreResult",
    "TARGETS",
    "UNVERIFIED_LINE",
    "UpgradePlan",
    "UpgradeProgress",
    "UpgradeResult",
    "UsageError",
    "plan_upgrade",
    "restore_snapshot",
    "resolve_target",
    "run_upgrade",
]
