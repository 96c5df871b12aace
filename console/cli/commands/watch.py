"""`archon-console approvals watch`: the approval queue's changes as a live stream.

Module-level imports stay light (argparse only); see `commands/approvals.py`. The database work is
in console/services/watch.py (what changed) and console/db/live.py (noticing that it changed,
through restarts, restores and a vanished file); the hook pool in console/cli/hooks.py.

Delivery order per change: the line is printed and flushed, then the `--cursor` file is replaced
atomically. A crash between the two repeats that one line at the next start (each line carries the
event id); a clean stop (Ctrl-C, SIGTERM, SIGHUP) never repeats or loses one.
"""

from __future__ import annotations

import argparse

from console.cli.options import finite_number, minutes, whole_number

_seconds = finite_number("seconds", minimum=0.05, maximum=3600)
_hook_seconds = finite_number("seconds", minimum=0.1, maximum=86400)
_jobs = whole_number("hooks", minimum=1, maximum=64)
_retries = whole_number("retries", minimum=0, maximum=100)
PRUNE_EVERY = 60.0  # seconds between forgetting reminded requests that are no longer pending


def register(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "watch", parents=parents, help="stream the queue's changes as they happen (Ctrl-C to stop)",
        description="One line per change of the approval queue from now on: a new pending request, a "
        "decision, an expiry, a consumption, a revoke. Reads only. Notices changes through the database "
        "itself (PRAGMA data_version), so it costs almost nothing while idle, and keeps going when archon "
        "restarts, when `restore` replaces the file and while the file is missing.",
    )
    p.add_argument("--project", metavar="P", help="project id or name")
    p.add_argument("--kind", metavar="K", help="git_push or custom_check")
    p.add_argument("--status", metavar="S",
                   help="only changes into these statuses (comma-separated: pending, approved, denied, "
                   "cancelled, expired, invalidated, consumed)")
    p.add_argument("--cursor", metavar="FILE",
                   help="remember the last delivered change in FILE and continue after it at the next start "
                   "(each change delivered once across restarts); without it the stream starts from now")
    p.add_argument("--expiring-within", type=minutes, metavar="MINUTES",
                   help="also print one reminder per pending request when its expiry comes within MINUTES")
    p.add_argument("--exec", dest="exec_command", metavar="CMD",
                   help="run CMD (with /bin/sh) once per new pending request: the request as JSON on stdin, "
                   "its id in $ARCHON_REQUEST_ID; failures are reported and retried, never block the stream")
    p.add_argument("--exec-timeout", type=_hook_seconds, default=30.0, metavar="SECONDS",
                   help="kill a hook that runs longer (default 30)")
    p.add_argument("--exec-jobs", type=_jobs, default=4, metavar="N", help="hooks running at once (default 4)")
    p.add_argument("--exec-retries", type=_retries, default=3, metavar="N",
                   help="retries of a failing hook, with back-off 2, 4, 8 ... s (default 3)")
    p.add_argument("--poll", type=_seconds, default=0.5, metavar="SECONDS",
                   help="how often to look for changes (default 0.5; a look is one stat and one "
                   "PRAGMA data_version when nothing changed)")
    p.set_defaults(handler=run_watch)


def _statuses(text: str | None) -> frozenset[str] | None:
    """Only changes into these statuses; None for every one (no --status, or `all`)."""
    from console.models.approvals import parse_status_filter

    statuses = parse_status_filter(text) if text else None
    return None if statuses is None else frozenset(statuses)


class Cursor:
    """The `--cursor` file: read at start, replaced atomically after every delivery.

`decode` turns the file's JSON into a position (ValueError: not a cursor of this command) and
`encode` a position into JSON: one host's `Position` here; a JSON object host -> the host's cursor
for `approvals watch --fleet` (console/cli/fleet_watch.py), through this same file mechanism.

    A save that fails (the directory gone or full, a read-only remount) never stops the stream:
    what the watch is for is the lines, and the cursor only saves repeats after a restart. The
    first failure is said once; the newest position is retried after every change and every poll,
    and the watch says when the cursor is saved again.
    """

    def __init__(self, path: str | None, warn, *, decode=None, encode=None):
        from pathlib import Path

        self.path = Path(path).expanduser() if path else None
        self._warn = warn
        self._decode = decode
        self._encode = encode or (lambda position: position.to_json())
        self._unsaved = None  # the newest position a failed save left behind

    def load(self):
        from console.errors import UsageError
        from console.services.watch import Position
        from console.text import read_json
        from console.small_files import read_small_text

        if self.path is None:
            return None
        if not self.path.parent.is_dir():
            raise UsageError(f"--cursor {self.path}: its directory does not exist.")
        from console.db.files import require_output_dir

        require_output_dir(self.path.parent, "--cursor")  # another user there could swap the cursor
        try:
            text = read_small_text(self.path)
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(f"--cursor {self.path} cannot be read ({getattr(exc, 'strerror', None) or exc}).")
        try:
            return (self._decode or Position.from_json)(read_json(text))
        except ValueError:
            raise UsageError(f"--cursor {self.path} is not a cursor this command wrote; "
                             "move it away to start from now.") from None

    def save(self, position) -> None:
        if self.path is None:
            return
        try:
            self._write(position)
        except OSError as exc:
            if self._unsaved is None:
                self._warn(f"cannot save the cursor {self.path} ({exc.strerror or exc}); still watching, "
                           "and retrying after every change (a restart now may repeat lines)")
            self._unsaved = position
            return
        if self._unsaved is not None:
            self._unsaved = None
            self._warn(f"the cursor {self.path} is saved again")

    def retry(self) -> None:
        """Save the position a failed save left behind, if any."""
        if self._unsaved is not None:
            self.save(self._unsaved)

    def _write(self, position) -> None:
        import json
        import os

        from console.db.files import create_exclusive, publish, temp_prefix

        tmp = create_exclusive(self.path.parent, temp_prefix("cursor"))
        try:
            with open(tmp, "w", encoding="utf-8") as handle:
                handle.write(json.dumps(self._encode(position)) + "\n")
                handle.flush()
                os.fsync(handle.fileno())
            publish(tmp, self.path, no_clobber=False)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise


class held_signals:
    """Ctrl-C, SIGTERM and SIGHUP wait (blocked, not lost) while a change is printed and its cursor
    saved: they arrive right after, so a stop never repeats or skips a change."""

    def __enter__(self):
        import signal

        self._signal = signal
        self._old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})

    def __exit__(self, *exc):
        self._signal.pthread_sigmask(self._signal.SIG_SETMASK, self._old)


def _skipped(report, change, exc: BaseException) -> None:
    """A change that could not be shown or handed to the hook (a value of a form nobody expected):
    one sentence, and the stream goes on with the next; the cursor moves past it, so it is not retried
    for ever. `approvals show ID` reads it on its own."""
    from console.text import one_line

    report(f"could not show or hand on a change of request {one_line(change.request_id, 60)} "
           f"({type(exc).__name__}); skipped it, the watch goes on.")


def change_line(change, now) -> str:
    """One line per change; every field passes `line`'s `one_line` (a stored actor class or kind with
    a line break would otherwise print a second, forged change)."""
    from console.clock import relative
    from console.text import line

    when = line(change.at or now.strftime("%Y-%m-%dT%H:%M:%SZ"))[:19]  # a time of any stored type.replace("T", " ")
    fields = [when, f"{line(change.change):<10}", (change.request_id, 60),
              (change.project_name or change.project_id, 40), change.kind or "-"]
    if change.change in ("new", "expiring", "pending"):
        when_expires = relative(change.expires_at, now)
        fields.append(f"expired {when_expires} (overdue)" if when_expires.endswith(" ago")
                      else f"expires {when_expires}")
    else:
        who = line((change.actor.strip() or repr(change.actor), 40)) if change.actor else "-"
        said = [line((change.actor_class, 40))] if change.actor_class else []
        if change.os_account:  # who acted by the OS account, beside the declared name (D21)
            said.append("OS " + line((change.os_account, 80)))
        fields.append(f"by {who}" + (f" ({', '.join(said)})" if said else ""))
        if change.reason:
            fields.append("reason: " + line((change.reason, 120)))
    return line(*fields)


class _Emitter:
    def __init__(self, ctx):
        import sys

        self.ctx, self.out, self.err = ctx, sys.stdout, sys.stderr

    def change(self, change) -> None:
        if self.ctx.json:
            from console.text import json_text

            self.out.write(json_text(change.to_json(), indent=None) + "\n")
        else:
            self.out.write(change_line(change, self.ctx.clock()) + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        if self.ctx.json:
            from console.text import json_text

            self.out.write(json_text({"change": "note", "note": text}, indent=None) + "\n")
            self.out.flush()
        else:
            self.err.write(f"archon-console: {text}\n")
            self.err.flush()


def run_watch(ctx) -> int:
    import threading
    import time
    from datetime import timedelta

    from console.db.live import CHANGED, GONE, REOPENED, LiveReader
    from console.errors import Refusal
    from console.services import watch as svc
    from console.signals import Stopped

    args = ctx.args
    statuses = _statuses(args.status)
    if args.kind is not None:
        from console.models.approvals import check_kind

        check_kind(args.kind)
    emit = _Emitter(ctx)
    lock = threading.Lock()  # hooks report from their own threads

    def report(text: str) -> None:
        with lock:
            emit.note(text)

    cursor = Cursor(args.cursor, report)
    saved = cursor.load()
    reader = LiveReader(ctx.db_path, lambda: ctx.open(read_only=True))
    reader.open()
    hooks = None
    try:
        conn = reader.handle.conn
        reader.require_in_place("watch")
        if not svc.has_approvals(conn):
            raise Refusal("This database has no approval tables (archon added approvals in 1.8.22); there "
                          "is nothing to watch.", "Run `archon-console upgrade --plan` to see the upgrade.")
        project_id = None
        if args.project:
            from console.services.resolve import resolve_project

            project_id = resolve_project(conn, args.project)["id"]
        flt = svc.WatchFilter(project_id=project_id, kind=args.kind, statuses=statuses)
        if saved is None:
            position = svc.newest(conn)
        else:
            position, note = svc.resume(conn, saved)
            if note:
                emit.note(note)
        cursor.save(position)
        if args.exec_command:
            from console.cli.hooks import HookPolicy, HookRunner

            hooks = HookRunner(HookPolicy(args.exec_command, timeout=args.exec_timeout, jobs=args.exec_jobs,
                                          retries=args.exec_retries), report)
        window = timedelta(minutes=args.expiring_within) if args.expiring_within is not None else None
        # Always on stderr: it tells a script (and the tests) that the starting position is taken.
        emit.err.write(f"archon-console: watching approval requests in {ctx.db_path} (Ctrl-C to stop)\n")
        emit.err.flush()
        state, gone_said, pruned = CHANGED, False, time.monotonic()
        while True:
            if state == GONE:
                if not gone_said:
                    emit.note(f"the database is not usable right now ({reader.problem}); waiting for it")
                    gone_said = True
            else:
                conn = reader.handle.conn
                if state == REOPENED:
                    position, note = svc.resume(conn, position)
                    emit.note("the database is back" if gone_said else "the database file was replaced")
                    if note:
                        emit.note(note)
                    gone_said = False
                if state in (CHANGED, REOPENED):
                    more = True
                    while more:
                        changes, after, more = svc.changes_after(conn, position, flt)
                        for change in changes:
                            position = svc.Position(change.rowid, change.event_id, position.reminded)
                            try:
                                with held_signals():  # a clean stop never falls between line and cursor
                                    emit.change(change)
                                    cursor.save(position)
                                if hooks is not None and change.change == "new":
                                    request = svc.request_json(conn, change.request_id)
                                    if request is not None:
                                        hooks.submit(change.request_id, request)
                            except Exception as exc:  # noqa: BLE001  one row never stops the stream
                                _skipped(report, change, exc)
                                cursor.save(position)
                        if after.rowid != position.rowid:
                            position = after
                            cursor.save(position)
                if window is not None:
                    for change in svc.expiring(conn, ctx.clock(), window, flt, position.reminded):
                        position.reminded.add(change.request_id)
                        with held_signals():
                            emit.change(change)
                            cursor.save(position)
                    if time.monotonic() - pruned > PRUNE_EVERY:
                        pruned = time.monotonic()
                        kept = svc.still_pending(conn, position.reminded)
                        if kept != position.reminded:
                            position.reminded = kept
                            cursor.save(position)
            time.sleep(args.poll)
            cursor.retry()
            state = reader.poll()
    except (KeyboardInterrupt, Stopped):
        return 0  # a watch is meant to be stopped: every delivered change is already in the cursor
    finally:
        if hooks is not None:
            left = hooks.stop()
            if left:
                emit.note(f"stopped with {left} hook run(s) unfinished")
        reader.close()
