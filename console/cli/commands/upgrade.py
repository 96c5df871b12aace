"""`upgrade` and `restore`: the guarded schema upgrade and its undo, for a shell.

The work is in `console.services.upgrade`; this module only prints plans and results, draws a
plain progress bar on a terminal and asks for the typed confirmation a restore needs.
"""

from __future__ import annotations

import argparse
import sys
import time

from console.cli.options import user_path
from console.errors import Refusal
from console.cli.output import emit_error, emit_json, say, table, wrapped, write_trusted
from console.services.profile_gate import ProfileEvidenceContradicted, UNVERIFIED_LINE
from console.services.upgrade.model import ForceRequired, TARGETS
from console.text import one_line

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

    from console.services.upgrade.model import UpgradePlan, UpgradeProgress
    from console.services.upgrade.restore_loss import LossReport

# The plan, the run and the restore are imported by the handler that needs them: `upgrade --plan`
# does not pay for the upgrade's runner nor the restore's loss report (issue 22).


class ProgressBar:
    """A `\\r` bar on stderr, only when stderr is a terminal (no textual import)."""

    WIDTH = 30

    def __init__(self, stream: TextIO | None = None, *, min_interval: float = 0.1):
        self.stream = stream or sys.stderr
        self.enabled = self.stream.isatty()
        self.min_interval = min_interval
        self._last = 0.0
        self._open = False

    def __call__(self, event: UpgradeProgress) -> None:
        if event.kind == "wait":  # said on any stderr: the operator must know why nothing moves
            self.finish()
            say(f"Waiting: {one_line(event.message, 400)}", err=True)
            return
        if not self.enabled:
            return
        if event.kind == "done":
            self.finish()
            return
        now = time.monotonic()
        final = event.total and event.done >= event.total
        if not final and now - self._last < self.min_interval:
            return
        self._last = now
        fraction = event.done / event.total if event.total else 0.0
        filled = int(self.WIDTH * fraction)
        unit = "pages" if event.kind == "snapshot" else "steps"
        label = one_line(event.message, 50)
        write_trusted(
            self.stream,
            f"\r{event.kind:<9} [{'#' * filled}{'.' * (self.WIDTH - filled)}] "
            f"{fraction * 100:5.1f}% {event.done}/{event.total} {unit} {label}\x1b[K"
        )
        self.stream.flush()
        self._open = True
        if event.kind == "snapshot" and final:
            self.finish()

    def finish(self) -> None:
        if self._open:
            self.stream.write("\n")
            self.stream.flush()
            self._open = False


def render_plan(plan: UpgradePlan) -> str:
    import humanize

    lines = [
        f"Database:        {plan.path}",
        f"Detected shape:  {plan.detected_release or 'no single release'} ({plan.shape_reason})",
        f"Ledger:          {plan.ledger_state}, {len(plan.applied)} of {len(plan.applied) + len(plan.pending)} "
        f"steps up to {plan.target} applied",
        f"Target release:  {plan.target}",
    ]
    if plan.up_to_date:
        lines.append("Pending steps:   none; the database is up to date.")
        return "\n".join(lines)
    if plan.in_use_by:
        lines.append(
            "In use:          " + one_line("; ".join(plan.in_use_by), 300)
            + "\n                 the upgrade would be refused: stop archon first (or run it with --wait)"
        )
    lines.append(
        f"Snapshot:        {plan.snapshot_path}\n"
        f"                 needs ~{humanize.naturalsize(plan.snapshot_bytes, binary=True)}, "
        f"{humanize.naturalsize(plan.free_bytes, binary=True)} free"
        + ("" if plan.enough_space else "  ** NOT ENOUGH SPACE **")
    )
    lines.append("")
    rows = [
        (
            step.id,
            step.release,
            step.safety,
            "?" if step.rows is None else f"{step.rows:,}",
            step.description,
        )
        for step in plan.pending
    ]
    lines.append(table(rows, ("step", "release", "class", "rows", "what it does"), max_width=70))
    if plan.policy_changes:
        lines.append("")
        lines.append("Projects whose effective policy step 022 changes:")
        lines.extend(f"  {one_line(p)}" for p in plan.policy_changes)
    lines.append("")
    gate = plan.profile_evidence
    if gate is not None:
        lines.extend(render_profile_evidence(gate))
        lines.append("")
        if gate.contradicted:
            return "\n".join(lines)
    if plan.force_required:
        lines.append("--force is required:")
        for reason in plan.force_reasons:  # wrapped, never cut: each is what --force would accept
            lines.extend(wrapped(reason, first="  - ", rest="    "))
    else:
        lines.append("--force is not required.")
    return "\n".join(lines)


def render_profile_evidence(gate) -> list[str]:
    """The plan's lines for rule 1's evidence gate (console/services/profile_gate.py)."""
    if gate.contradicted:
        lines = [
            "REFUSED: " + one_line(gate.refusal or "", 400) + ".",
            f"Start archon {gate.release} once to let it upgrade this database itself.",
            "Rows that differ:",
        ]
        contradictions = gate.evidence.get("contradictions", [])
        lines.extend(f"  {one_line(c['row_id'], 120)} ({c['table']}): {one_line(c['what'], 200)}"
                     for c in contradictions[:50])
        if len(contradictions) > 50:
            lines.append(f"  and {len(contradictions) - 50} more")
        return lines
    if gate.force_reason:
        return wrapped((gate.unverified or UNVERIFIED_LINE) + ".")
    return [f"Profile evidence: {one_line(gate.summary, 300)}; steps {', '.join(gate.steps)} write profile data."]


def _upgrade(ctx) -> int:
    from console.services.upgrade.plan import plan_upgrade

    args = ctx.args
    if args.plan:
        plan = plan_upgrade(ctx.db_path, args.to, snapshot_dir=args.snapshot_dir, now=ctx.clock())
        if ctx.json:
            emit_json(plan.to_json())
        else:
            say(render_plan(plan))
        if plan.profile_evidence is not None and plan.profile_evidence.contradicted:
            return ProfileEvidenceContradicted.exit_code  # the upgrade would be refused (exit 3)
        return 0
    if ctx.read_only:
        raise Refusal(
            "The console is in read-only mode; nothing was written.",
            "Use `upgrade --plan` to see what an upgrade would do.",
        )
    from console.services.upgrade.run import run_upgrade

    bar = ProgressBar()
    try:
        result = run_upgrade(
            ctx.db_path,
            target=args.to,
            force=args.force,
            snapshot_dir=args.snapshot_dir,
            full_check=args.full_check,
            progress=bar,
            now=ctx.write_now(),
            busy_timeout_ms=ctx.busy_timeout_ms,
            wait=args.wait,
        )
    except ProfileEvidenceContradicted as exc:
        bar.finish()
        if ctx.json:  # one object on stdout, the plan inside it (README: --json on every path)
            emit_error(exc.reason, exc.hint, exc.exit_code, status="refused", message=exc.reason,
                       plan=exc.plan.to_json() if exc.plan is not None else None)
            return exc.exit_code
        if exc.plan is not None:
            say(render_plan(exc.plan))
        raise
    except ForceRequired as exc:
        bar.finish()
        if ctx.json:
            emit_error(exc.reason, exc.hint, exc.exit_code, wrote=[], status="force-required", message=exc.reason,
                       plan=exc.plan.to_json())
            return exc.exit_code
        say(render_plan(exc.plan))
        raise
    finally:
        bar.finish()
    if ctx.json:
        emit_json(result.to_json())
        return 0
    say(result.message)
    if result.snapshot_path:
        say(f"Snapshot: {result.snapshot_path}"
            + (" (kept from the interrupted run: SHA-256 verified, no second copy written)"
               if result.snapshot_reused else ""))
        say(f"SHA-256:  {result.snapshot_sha256}")
        say("To undo: " + result.undo_command)
    return 0


def typed_confirmation(name: str, loss: LossReport) -> bool:
    """Say what would be lost, then ask on the terminal for the database file's name; anything else declines."""
    for line in loss.lines():
        say(line, err=True)
    sys.stderr.write(
        f"This replaces the database with the snapshot (the current file is kept aside).\n"
        f"Type the database file name ({name}) to confirm: "
    )
    sys.stderr.flush()
    try:
        answer = sys.stdin.readline()
    except (EOFError, OSError):
        return False
    return answer.strip() == name


def _require_snapshot_file(ctx) -> None:
    """A missing SNAPSHOT is the argument's fault, not --db's: the shared "No database at" sentence
    would send the operator to fix the wrong path."""
    from pathlib import Path

    from console.errors import UsageError

    snapshot = Path(ctx.args.snapshot).expanduser()
    if not snapshot.exists() and not snapshot.is_symlink():
        raise UsageError(
            f"There is no snapshot file at {snapshot}; nothing was restored. SNAPSHOT is the file "
            f"`upgrade` wrote; the database it would replace is --db ({ctx.db_path}).",
            "`upgrade` prints the snapshot's path after it runs (\"To undo: archon-console --db DATABASE restore SNAPSHOT\"); "
            "snapshots are written beside the database unless --snapshot-dir was given.",
        )


def _restore(ctx) -> int:
    args = ctx.args
    if ctx.read_only and not args.plan:
        raise Refusal("The console is in read-only mode; nothing was restored.",
                      "`restore --plan` shows what a restore would do and lose.")
    from console.services.upgrade.restore import RearmRefused, restore_snapshot

    _require_snapshot_file(ctx)
    interactive = sys.stdin is not None and sys.stdin.isatty()
    try:
        result = restore_snapshot(
            ctx.db_path,
            args.snapshot,
            yes=args.yes,
            unverified=args.unverified,
            rearm_consumed=args.rearm_consumed,
            loss_unknown=args.loss_unknown,
            other_links=args.other_links,
            other_database=args.other_database,
            plan=args.plan,
            confirm=typed_confirmation if interactive else None,
            now=None if args.plan else ctx.write_now(),
            busy_timeout_ms=ctx.busy_timeout_ms,
        )
    except RearmRefused as exc:
        if not ctx.json:
            for line in exc.loss.lines():
                say(line)
            raise
        emit_error(exc.reason, exc.hint, exc.exit_code, status="refused", message=exc.reason,
                   loss=exc.loss.to_json())
        return exc.exit_code
    if ctx.json:
        emit_json(result.to_json())
    else:
        say(result.message)
        if result.removed:
            say("Removed stale files: " + ", ".join(result.removed))
    return result.exit_code


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    upgrade = subparsers.add_parser(
        "upgrade",
        parents=parents,
        help="plan or apply the guarded schema upgrade (snapshot first)",
        description="Bring the database's schema to an archon release, with a verified snapshot first. "
        "Refused (exit 3) while another process holds a SQLite lock on the file: stop archon first. "
        "Exit codes: 0 done or up to date, 1 refused (e.g. --force needed), 3 database unusable, divergent "
        "or in use.",
    )
    upgrade.add_argument("--plan", action="store_true", help="show what would happen; write nothing")
    upgrade.add_argument(
        "--force",
        action="store_true",
        help="accept the risks the plan lists (adopting a database without ledger, historical-destructive "
        "steps, unverified profile defaults); never a contradiction of the profile evidence",
    )
    upgrade.add_argument(
        "--to",
        metavar="RELEASE",
        default="current",
        choices=TARGETS,
        help="stop at this archon release (1.8.20, 1.8.22, 1.10.0 or current; default current)",
    )
    upgrade.add_argument("--snapshot-dir", metavar="DIR", type=user_path("--snapshot-dir", "directory"), help="write the snapshot here instead of beside the database")
    upgrade.add_argument(
        "--wait",
        action="store_true",
        help="when another process (archon) holds the database, wait up to --busy-timeout for it to let go "
        "instead of refusing at once",
    )
    upgrade.add_argument(
        "--full-check",
        action="store_true",
        help="also run PRAGMA integrity_check on the snapshot (slower; the snapshot is always proven to be "
        "the database's image: each page read once and read back once written)",
    )
    upgrade.set_defaults(handler=_upgrade)

    restore = subparsers.add_parser(
        "restore",
        parents=parents,
        help="put a snapshot back in place of the database",
        description="Verify SNAPSHOT (its integrity, and its SHA-256 against the manifest written beside it "
        "or the database's upgrade ledger), then replace the database with it atomically; the replaced file "
        "is kept as <file>.replaced-<UTC time> and the restored one gets its owner, group and mode. First it "
        "says what would be lost (everything written since the snapshot). Refused while any process holds a "
        "lock on the database. Exit codes: 0 restored (or planned), 1 refused (in use, not confirmed, no "
        "record of the snapshot), 3 the snapshot is damaged, does not match its record, was taken from "
        "another database or from this one at another path (--other-database), or would re-arm approvals "
        "archon consumed, invalidated, let expire or deleted since (--rearm-consumed), or cannot tell what it would "
        "lose (--loss-unknown), or the database has other hard links (--other-links).",
    )
    restore.add_argument("snapshot", metavar="SNAPSHOT", type=user_path("SNAPSHOT"), help="a snapshot written by `upgrade`")
    restore.add_argument("--yes", action="store_true", help="do not ask for the typed confirmation")
    restore.add_argument(
        "--plan",
        action="store_true",
        help="check the snapshot and say what the restore would lose (decisions, consumed approvals, "
        "claims, lifecycle changes, profile activations, events, and every table's rows added, changed "
        "or deleted since); replace nothing",
    )
    restore.add_argument(
        "--rearm-consumed",
        action="store_true",
        help="restore even though approval requests archon consumed (its executor ran the action), "
        "invalidated, let expire or deleted since the snapshot become approved (executable) again",
    )
    restore.add_argument(
        "--loss-unknown",
        action="store_true",
        help="restore even though what it would lose cannot be told (the database, or one of its tables, "
        "cannot be read or compared within the statement budget), so neither can whether it re-arms an "
        "approval archon already consumed",
    )
    restore.add_argument(
        "--other-links",
        action="store_true",
        help="restore even though the database file has other hard links (another path, perhaps archon's, "
        "names it): only --db's name is replaced; the other names keep the old file",
    )
    restore.add_argument(
        "--other-database",
        action="store_true",
        help="restore a snapshot taken from another database than --db (or one that does not say which)",
    )
    restore.add_argument(
        "--unverified",
        action="store_true",
        help="restore a snapshot whose SHA-256 matches no record (no manifest, no ledger row); "
        "it must still be a whole archon database",
    )
    restore.set_defaults(handler=_restore)
