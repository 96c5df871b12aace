"""`archon-console audit`: the audit trail (approval, environment and profile events) as one stream.

Module-level imports stay light (argparse only); see `commands/approvals.py`.
Read-only always: the stream is one read transaction (console/services/audit.py), `--follow` a new
one per poll. Text is humanised; jsonl and csv carry exact UTC. Every line passes the one sanitiser
(the CLI's stdout is a `SafeStream`), and csv cells that a spreadsheet would run as a formula are
prefixed with `'`.
"""

from __future__ import annotations

import argparse

from console.cli.options import finite_number

HELP = "the audit trail: approval, environment and profile events in time order"

FORMATS = ("text", "jsonl", "csv")
_poll_seconds = finite_number("seconds", minimum=0.05, maximum=3600)


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "audit", help=HELP, parents=parents,
        description="Every approval request event, environment event (claims, takeovers, releases, "
        "hand-offs) and execution profile audit event, merged into one stream ordered by time. "
        "Reads only; works on a read-only file and on `inspect` snapshots. Text is humanised; "
        "jsonl and csv give exact UTC times.",
    )
    p.add_argument("--since", metavar="TIME", help="from TIME on ('YYYY-MM-DD[ HH:MM]' UTC, ISO 8601, "
                   "or an age such as 30m, 24h, 7d)")
    p.add_argument("--until", metavar="TIME", help="before TIME (same forms as --since)")
    p.add_argument("--project", metavar="P", help="project id or name")
    # its own dest: `actor` is the global `--as` (who acts), this is a filter (tests/test_cli_dests.py)
    p.add_argument("--actor", dest="audit_actor", metavar="A",
                   help="only events by this actor (exact declared name, or the OS login that acted)")
    p.add_argument("--kind", metavar="K", action="append", choices=("approval", "environment", "profile"),
                   help="approval, environment or profile (repeat for several; default all)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="text (default), jsonl (one JSON object per line) or csv (with a header)")
    p.add_argument("--follow", action="store_true",
                   help="after the trail so far, keep streaming new events until Ctrl-C")
    p.add_argument("--poll", type=_poll_seconds, default=1.0, metavar="SECONDS",
                   help="with --follow: how often to look for changes (default 1 s; a look costs one "
                   "PRAGMA data_version when nothing changed)")
    p.add_argument("--redact", action="store_true",
                   help="replace people's names, free text and ids with stable placeholders (as `doctor "
                   "--bundle --redact` does), so the export can leave the building")
    p.set_defaults(handler=run_audit)


def _format(args) -> str:
    if args.format:
        return args.format
    return "jsonl" if args.json else "text"


class _Writer:
    """One event per line in the chosen format, written in batches (one sanitiser pass per batch)."""

    BATCH = 2000

    def __init__(self, fmt: str, now):
        import sys

        self.fmt, self.now, self.out = fmt, now, sys.stdout
        self.count = 0
        self._pending: list = []
        if fmt == "csv":
            import csv
            import io

            from console.services.audit import COLUMNS

            self._buffer = io.StringIO()
            self._csv = csv.writer(self._buffer, lineterminator="\n")
            self._csv.writerow(COLUMNS)
        if fmt == "jsonl":
            from console.text import json_lines

            self._json_lines = json_lines

    def write(self, event) -> None:
        self.count += 1
        self._pending.append(event)
        if len(self._pending) >= self.BATCH:
            self.flush()

    def write_json_lines(self, lines) -> None:
        """Lines SQLite already encoded: batched, escaped like `json_text`, then written."""
        from itertools import islice

        from console.text import json_escape

        while True:
            batch = list(islice(lines, self.BATCH))
            if not batch:
                break
            self.count += len(batch)
            self.out.write(json_escape("\n".join(batch) + "\n"))
        self.out.flush()

    def flush(self) -> None:
        events, self._pending = self._pending, []
        if self.fmt == "jsonl":
            text = self._json_lines(e.to_json() for e in events)
        elif self.fmt == "csv":
            from console.cli.output import csv_cell

            self._csv.writerows([csv_cell(v) for v in e] for e in events)
            text = self._buffer.getvalue()
            self._buffer.seek(0)
            self._buffer.truncate()
        else:
            text = "".join(_text_line(e, self.now) + "\n" for e in events)
        if text:
            self.out.write(text)
        self.out.flush()


def _text_line(event, now) -> str:
    """One line per event; every field passes `line`'s `one_line`, so no stored text (an actor class,
    a state, an event type) can carry a line break and forge the next event."""
    from console.clock import relative
    from console.text import line

    change = line(event.event_type or "?", sep="")
    if event.kind == "profile":
        if event.from_state:
            change += " (after " + line((event.from_state, 60)) + ")"
    elif event.from_state or event.to_state:
        change += " (" + line(event.from_state or "-", "->", event.to_state or "-", sep=" ") + ")"
    who = line((event.actor.strip() or repr(event.actor), 40)) if event.actor else "-"
    said = [line((event.actor_class, 40))] if event.actor_class else []
    if event.os_account:  # who acted by the OS account, beside the declared name (docs/decisions.md, D21)
        said.append("OS " + line((event.os_account, 80)))
    if said:
        who += f" ({', '.join(said)})"
    fields = [line(event.at or "?")[:19].replace("T", " "),  # a time of any stored type, even a BLOB
              relative(event.at, now), f"{line(event.kind):<11}",
              (event.project_id, 40), (event.subject_id, 60), (change, 80), "by " + who]
    if event.reason:
        fields.append("reason: " + line((event.reason, 120)))
    return line(*fields)


def run_audit(ctx) -> int:
    from console.errors import UsageError
    from console.services.audit import KINDS, AuditFilter, missing_kinds, open_stream, parse_moment, redacted

    args = ctx.args
    now = ctx.clock()
    since = parse_moment(args.since, now, option="--since") if args.since else None
    until = parse_moment(args.until, now, option="--until") if args.until else None
    if since and until and until <= since:
        raise UsageError("--until must be later than --since.")
    if args.follow and until is not None:
        raise UsageError("--follow keeps streaming new events; --until would end it. Use one of them.")
    kinds = tuple(k for k in KINDS if k in (args.kind or KINDS))
    redactor = None
    if args.redact:
        from console.services.redaction import Redactor

        redactor = Redactor(True)
    writer = _Writer(_format(args), now)
    from console.db.live import LiveReader

    reader = LiveReader(ctx.db_path, lambda: ctx.open(read_only=True))
    reader.open()
    try:
        conn = reader.handle.conn
        project_id = None
        if args.project:
            from console.services.resolve import resolve_project

            project_id = resolve_project(conn, args.project)["id"]
        flt = AuditFilter(since=since, until=until, project_id=project_id, actor=args.audit_actor, kinds=kinds)
        from console.cli.output import say

        for note in missing_kinds(conn, kinds):
            say(note, err=True)
        if args.follow:
            reader.require_in_place("--follow")
        with _read_transaction(conn):  # one moment: the snapshot of every table is the same
            stream = open_stream(conn, flt)
            if writer.fmt == "jsonl" and redactor is None:
                writer.write_json_lines(stream.json_lines())
            else:
                for event in stream.events():
                    writer.write(redacted(event, redactor))
        writer.flush()
        if not args.follow:
            if writer.count == 0 and writer.fmt == "text":
                say("No events match.", err=True)
            return 0
        _follow(reader, stream, writer, redactor, args.poll)
    finally:
        reader.close()
    return 0


class _read_transaction:
    def __init__(self, conn):
        self.conn = conn

    def __enter__(self):
        self.conn.execute("BEGIN")

    def __exit__(self, *exc):
        self.conn.execute("COMMIT")


def _follow(reader, stream, writer, redactor, poll: float) -> None:
    """New events as they are committed; how a change is noticed (commits, a replaced or vanished
    file) is console/db/live.py's business, shared with `approvals watch`."""
    import time

    from console.db.live import GONE, UNCHANGED
    from console.cli.output import say
    from console.services.audit import redacted

    from console.cli.watch_delivery import output_gone, quiet_stdout

    gone_said = False
    while True:
        if output_gone():  # its reader left (`| head`): the same rule as `approvals watch`
            quiet_stdout()
            return
        time.sleep(poll)
        state = reader.poll()
        if state == UNCHANGED:
            continue
        if state == GONE:
            if not gone_said:
                say(f"archon-console: the database is not usable right now ({reader.problem}); waiting for it",
                    err=True)
                gone_said = True
            continue
        gone_said = False
        stream.conn = reader.handle.conn
        with _read_transaction(stream.conn):
            events = stream.newer()
        for event in events:
            writer.write(redacted(event, redactor))
        writer.flush()
