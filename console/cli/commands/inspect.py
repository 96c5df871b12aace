"""`archon-console inspect PATH [--keep-snapshot DIR [--no-tui]]`: support mode.

Takes a consistent snapshot of someone's database into a private 0700 directory (see
`console/db/readonly.py`: nothing next to PATH is created or changed, even while archon writes)
and opens the TUI on the snapshot, read-only, with a SUPPORT badge naming PATH and the snapshot
time. The snapshot is removed on exit unless `--keep-snapshot DIR` is given; with `--no-tui` too, the
command only takes the snapshot and prints where it is (for scripts: the console needs a terminal,
console/tui/tui.py `require_terminal`).

`prepare_inspection` is the part without a terminal, so tests can check it.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from console.cli.options import user_path
from console.clock import system_clock
from console.db.files import private_dir
from console.db.paths import expand_home, require_database_file, sidecars
from console.db.readonly import snapshot_copy
from console.errors import DatabaseUnusable, UsageError
from console.models.support import SupportInfo


@dataclass
class Inspection:
    original: Path
    snapshot: Path
    taken_at: datetime
    workdir: Path | None  # the private temp directory to remove, None when the copy is kept
    modified_at: datetime | None = None  # the screens' "as of" time when the database records none

    @property
    def support(self) -> SupportInfo:
        return SupportInfo(original=self.original, snapshot=self.snapshot, taken_at=self.taken_at,
                           modified_at=self.modified_at)

    def cleanup(self) -> None:
        if self.workdir is not None:
            shutil.rmtree(self.workdir, ignore_errors=True)
            self.workdir = None


def prepare_inspection(path: str | Path, keep_dir: str | Path | None = None, *, now: datetime | None = None) -> Inspection:
    """Snapshot `path`; into `keep_dir` (kept) or a private temp directory (removed by `cleanup`)."""
    # The path as given is checked first, so a loop or a dangling link is said of what was typed
    # (console/db/paths.py, as `doctor` and --db say it), not of its target; realpath never raises.
    require_database_file(expand_home(path, "PATH"))
    original = Path(os.path.realpath(expand_home(path, "PATH")))
    taken_at = now or system_clock()
    modified_at = _modified_at(original)
    name = f"{original.stem}.support-{taken_at.strftime('%Y%m%dT%H%M%SZ')}.sqlite"
    if keep_dir is not None:
        keep = expand_home(keep_dir, "--keep-snapshot")
        if Path(os.path.realpath(keep)) == original.parent:
            raise UsageError("--keep-snapshot must not be the database's own directory (nothing is written there).")
        return Inspection(original, snapshot_copy(original, keep, name=name, option="--keep-snapshot"), taken_at, None,
                          modified_at)
    try:
        workdir = private_dir("inspect")  # mode 0700, named for this process (console/db/files.py)
    except OSError as exc:
        raise DatabaseUnusable(f"Cannot create a private directory in {tempfile.gettempdir()}: "
                               f"{exc.strerror or exc}.", "Point TMPDIR at a directory you can write to.") from None
    try:
        snapshot = snapshot_copy(original, workdir, name=name)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return Inspection(original, snapshot, taken_at, workdir, modified_at)


def _modified_at(original: Path) -> datetime | None:
    """The newest mtime of PATH and its -wal, read with stat (nothing is opened): the fallback for
    the snapshot's "as of" time (console/models/support.py `SupportInfo.as_of`)."""
    times = []
    for path in (original, sidecars(original)["-wal"]):
        try:
            times.append(os.stat(path).st_mtime)
        except (OSError, ValueError):
            continue
    return datetime.fromtimestamp(max(times), timezone.utc).replace(microsecond=0) if times else None


def cmd_inspect(ctx) -> int:
    if ctx.args.no_tui:
        return _snapshot_only(ctx)
    from console.tui.tui import require_terminal, run_tui  # the only import of textual

    # Asked here as well as at the console's door, so a refusal copies nothing first.
    require_terminal(as_json=ctx.json)
    inspection = prepare_inspection(ctx.args.path, ctx.args.keep_snapshot, now=ctx.clock())
    try:
        snap_ctx = dataclasses.replace(ctx, db_path=inspection.snapshot, read_only=True)
        return run_tui(snap_ctx, support=inspection.support)
    finally:
        inspection.cleanup()
        if ctx.args.keep_snapshot:
            print(f"Snapshot kept at {inspection.snapshot}")


def _snapshot_only(ctx) -> int:
    """`--no-tui`: the snapshot is the result. Its path alone on stdout (`snap=$(archon-console
    inspect ...)`), or one JSON object with --json."""
    if not ctx.args.keep_snapshot:
        raise UsageError("--no-tui needs --keep-snapshot DIR: without it the snapshot would be removed as "
                         "soon as it was taken.")
    inspection = prepare_inspection(ctx.args.path, ctx.args.keep_snapshot, now=ctx.clock())
    if ctx.json:
        from console.cli.output import emit_json

        emit_json({"ok": True, "snapshot": str(inspection.snapshot), "original": str(inspection.original),
                   "taken_at": inspection.taken_at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})
    else:
        print(inspection.snapshot)
    return 0


def register(subparsers, parents) -> None:
    p = subparsers.add_parser(
        "inspect", parents=parents, help="support mode: open a read-only snapshot of a database",
        description="Snapshots PATH with the SQLite backup API into a private temporary directory "
        "(including commits still in its -wal) and opens the console on the snapshot, read-only, with "
        "a SUPPORT badge. Nothing next to PATH is created or changed. The snapshot is deleted on exit "
        "unless --keep-snapshot DIR is given.",
    )
    p.add_argument("path", metavar="PATH", type=user_path("PATH"), help="the database to inspect")
    p.add_argument("--keep-snapshot", metavar="DIR", type=user_path("--keep-snapshot", "directory"), default=None, help="keep the snapshot in DIR")
    p.add_argument("--no-tui", action="store_true",
                   help="with --keep-snapshot: only take the snapshot and print its path (with --json: "
                   "an object with it), for scripts; the console needs a terminal")
    p.set_defaults(handler=cmd_inspect)


__all__ = ["Inspection", "prepare_inspection", "register"]
