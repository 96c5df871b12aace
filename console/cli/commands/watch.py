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

from console.cli.options import finite_number, minutes, user_path, whole_number
from console.cli.watch_delivery import Cursor, OutputGone, change_line, deliver, held_signals, output_gone, quiet_stdout

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
    p.add_argument("--cursor", metavar="FILE", type=user_path("--cursor"),
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


def _skipped(report, change, exc: BaseException) -> None:
    """A change that could not be shown or handed to the hook (a value of a form nobody expected):
    one sentence, and the stream goes on with the next; the cursor moves past it, so it is not retried
    for ever. `approvals show ID` reads it on its own."""
    from console.text import one_line

    report(f"could not show or hand on a change of request {one_line(change.request_id, 60)} "
           f"({type(exc).__name__}); skipped it, the watch goes on.")


class _Emitter:
    def __init__(self, ctx):
        import sys

        self.ctx, self.out = ctx, sys.stdout

    def change(self, change) -> None:
        if self.ctx.json:
            from console.cli.output import json_document

            self.out.write(json_document(change.to_json(), indent=None) + "\n")
        else:
            self.out.write(change_line(change, self.ctx.clock()) + "\n")
        self.out.flush()

    def note(self, text: str) -> None:
        from console.cli.watch_delivery import say

        say(text)


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
        emit.note(f"watching approval requests in {ctx.db_path} (Ctrl-C to stop)")
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
                                    deliver(lambda: emit.change(change))
                                    cursor.save(position)
                                if hooks is not None and change.change == "new":
                                    request = svc.request_json(conn, change.request_id)
                                    if request is not None:
                                        hooks.submit(change.request_id, request)
                            except OutputGone:
                                raise
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
                            deliver(lambda: emit.change(change))
                            cursor.save(position)
                    if time.monotonic() - pruned > PRUNE_EVERY:
                        pruned = time.monotonic()
                        kept = svc.still_pending(conn, position.reminded)
                        if kept != position.reminded:
                            position.reminded = kept
                            cursor.save(position)
            if output_gone():
                raise OutputGone()
            time.sleep(args.poll)
            cursor.retry()
            state = reader.poll()
    except (KeyboardInterrupt, Stopped):
        return 0  # a watch is meant to be stopped: every delivered change is already in the cursor
    except OutputGone:  # its reader left (`| head -1`): ends as a list does, the cursor at the last line read
        quiet_stdout()
        return 0
    finally:
        if hooks is not None:
            left = hooks.stop()
            if left:
                emit.note(f"stopped with {left} hook run(s) unfinished")
        reader.close()
