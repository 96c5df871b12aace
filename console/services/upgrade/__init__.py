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

Callers import each name from the module that defines it; this package imports nothing, so
starting one part (the TUI's isolated plan, a test of one module) does not load the others. The
refusals are console/errors.py's and console/services/profile_gate.py's own classes.
"""
