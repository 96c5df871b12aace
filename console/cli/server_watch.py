"""`approvals.watch` over `archon-console serve`: the queue's changes as JSON-RPC notifications.

The filters are `approvals watch`'s own, parsed by its parser (console/cli/commands/watch.py), and
the changes are read by the same service (console/services/watch.py) through the same live reader
(console/db/live.py), so a change reads exactly as the line `approvals watch --json` prints. Each
is sent as `approvals.changed` `{"change": LINE, "cursor": POSITION}`; POSITION is the watch's own
cursor after that change (opaque to the client). A client that stores the cursor of each change it
has handled and passes the last one as `cursor` when it watches again gets every later change once:
a change is sent only after the position before it, and the position moves only with a change sent.

A watch runs inside the session loop (console/cli/server.py) and has the session to itself: the
client gives it its own connection (the session answers only `shutdown` beside it, so this process
never opens the file again under the watch's connection). It ends with the session (end of input or
`shutdown`), or when a poll fails in a way the live reader cannot wait out (a last note says why).
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

from console.fleet import protocol as wire


class WatchStream:
    def __init__(self, session, args, position, flt, reader):
        self.session, self.args, self.position, self.flt, self.reader = session, args, position, flt, reader
        self.window = timedelta(minutes=args.expiring_within) if args.expiring_within is not None else None
        self.due = time.monotonic()  # the first tick delivers what is already after the cursor
        self.first = True  # the first tick reads from the cursor without waiting for a commit
        self.gone_said = False

    def close(self) -> None:
        self.reader.close()

    def _send(self, change: dict[str, Any]) -> None:
        self.session.channel.send(wire.notification(wire.WATCH_NOTIFICATION,
                                                    {"change": change, "cursor": self.position.to_json()}))

    def note(self, text: str) -> None:
        self._send({"change": "note", "note": text})

    def tick(self) -> None:
        from console.signals import Stopped

        try:
            self._tick()
        except (KeyboardInterrupt, Stopped):
            raise
        except Exception as exc:  # noqa: BLE001 - the watch ends, the session goes on
            from console.text import one_line

            self.note(f"the watch stopped: {type(exc).__name__}: {one_line(exc, 200)}; watch again to resume "
                      "from the last cursor")
            self.close()
            self.session.watch = None
            return
        self.due = time.monotonic() + self.args.poll

    def _tick(self) -> None:
        from console.db.live import CHANGED, GONE, REOPENED
        from console.services import watch as svc

        state = CHANGED if self.first else self.reader.poll()
        self.first = False
        if state == GONE:
            if not self.gone_said:
                self.note(f"the database is not usable right now ({self.reader.problem}); waiting for it")
                self.gone_said = True
            return
        conn = self.reader.handle.conn
        if state == REOPENED:
            self.position, moved = svc.resume(conn, self.position)
            self.note("the database is back" if self.gone_said else "the database file was replaced")
            if moved:
                self.note(moved)
            self.gone_said = False
        if state in (CHANGED, REOPENED):
            for _page in range(1000):  # bounded: a page is svc.BATCH events
                changes, after, more = svc.changes_after(conn, self.position, self.flt)
                for change in changes:
                    self.position = svc.Position(change.rowid, change.event_id, self.position.reminded)
                    self._send(change.to_json())
                if after.rowid != self.position.rowid:
                    self.position = after
                if not more:
                    break
        if self.window is not None:
            from console.clock import system_clock

            for change in svc.expiring(conn, system_clock(), self.window, self.flt, self.position.reminded):
                self.position.reminded.add(change.request_id)
                self._send(change.to_json())


def start_watch(session, id_: Any, params: dict[str, Any]) -> dict[str, Any]:
    from console.cli.server_methods import BadParams, argv_for, failure, run
    from console.db.live import LiveReader
    from console.errors import Refusal
    from console.services import watch as svc

    cursor = params.get("cursor")
    saved = None
    if cursor is not None:
        try:
            saved = svc.Position.from_json(cursor)
        except ValueError:
            return wire.error(id_, wire.INVALID_PARAMS, "cursor is not one this server sent (pass the cursor of the "
                              "last approvals.changed you handled, or none to start from now).")
    try:
        argv = argv_for(wire.WATCH, {k: v for k, v in params.items() if k != "cursor"}, extra=frozenset({"cursor"}))
    except BadParams as exc:
        return wire.error(id_, wire.INVALID_PARAMS, f"approvals.watch: {exc}.")
    parsed: dict[str, Any] = {}

    def keep(args):  # the parser's checks and conversions, without running the CLI's own loop
        parsed["args"] = args
        args.handler = lambda ctx: 0
        return session.context(args)

    outcome = run(argv, keep)
    if "args" not in parsed or outcome.exit != 0:
        return wire.result(id_, outcome.to_json())
    args = parsed["args"]
    ctx = session.context(args)
    reader = LiveReader(ctx.db_path, lambda: ctx.open(read_only=True))
    notes: list[str] = []
    try:
        reader.open()
        conn = reader.handle.conn
        if not svc.has_approvals(conn):
            raise Refusal("This database has no approval tables (archon added approvals in 1.8.22); there "
                          "is nothing to watch.", "Run `archon-console upgrade --plan` to see the upgrade.")
        if args.kind is not None:
            from console.models.approvals import check_kind

            check_kind(args.kind)
        project_id = None
        if args.project:
            from console.services.resolve import resolve_project

            project_id = resolve_project(conn, args.project)["id"]
        statuses = None
        if args.status:
            from console.models.approvals import parse_status_filter

            parsed_statuses = parse_status_filter(args.status)
            statuses = None if parsed_statuses is None else frozenset(parsed_statuses)
        flt = svc.WatchFilter(project_id=project_id, kind=args.kind, statuses=statuses)
        if saved is None:
            position = svc.newest(conn)
        else:
            position, moved = svc.resume(conn, saved)
            if moved:
                notes.append(moved)
    except Exception as exc:  # noqa: BLE001 - answered as `approvals watch --json` would: exit and error JSON
        reader.close()
        return wire.result(id_, failure(exc).to_json())
    session.watch = WatchStream(session, args, position, flt, reader)
    return wire.result(id_, {"exit": 0, "output": {"watching": True, "db": str(ctx.db_path),
                                                   "cursor": position.to_json(), "notes": notes}})


__all__ = ["WatchStream", "start_watch"]
