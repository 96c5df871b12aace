"""`archon-console approvals ...`: the approval queue from a shell.

Imports stay light at module level (argparse and the option parsers): `approvals list` must answer
in well under a quarter second on a million requests, and a command line that names this family
imports it and nothing else (console/cli/cli.py `COMMAND_OWNERS`), so what is imported here is on
that path. Services and output helpers are imported inside the handlers, and the parser of only
the action named is built (`ACTIONS`). tests/test_cli_startup.py checks what `list` and `approve`
import.
"""

from __future__ import annotations

import argparse

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any

from console.cli.options import minutes, whole_number

HELP = "approval requests: list, show, approve, deny, revoke, expire"


_positive_int = whole_number("rows", minimum=1)


# Every action's parser costs start-up time (argparse builds a help formatter per argument and
# asks gettext for every help string), so a command line that names its action builds only that
# one (console/cli/parser.py `build_parser`); help for the family, or an unknown action, builds them all.
ACTIONS = ("list", "show", "approve", "deny", "revoke", "expire", "watch")


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser],
             action: str | None = None) -> None:
    family = subparsers.add_parser(
        "approvals", help=HELP, description="Approval requests (git_push / custom_check) and their decisions.",
        parents=parents,
    )
    commands = family.add_subparsers(dest="approvals_command", metavar="ACTION", required=True)
    for name in (action,) if action in ACTIONS else ACTIONS:
        _ADDERS[name](commands, parents)


def _add_list(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "list", parents=parents, help="requests by expiry, soonest first",
        description="Requests ordered by expiry (soonest first). Times are relative to now; "
        "'overdue' marks an open request past its expiry (it can only expire).",
    )
    p.add_argument("--status", metavar="S", default=None,
                   help="pending (default), approved, denied, cancelled, expired, invalidated, consumed, "
                   "a comma-separated list, or 'all'")
    p.add_argument("--project", metavar="P", help="project id or name")
    p.add_argument("--kind", metavar="K", help="git_push or custom_check")
    p.add_argument("--expiring-within", type=minutes, metavar="MINUTES",
                   help="only requests whose expiry is at most MINUTES away (overdue ones included)")
    p.add_argument("--search", metavar="TEXT", help="text to find in the id, project or requested action")
    p.add_argument("--limit", type=_positive_int, default=50, metavar="N", help="at most N rows (default 50)")
    p.add_argument("--view", metavar="NAME", help="the filters of a view saved in the console (:save NAME); "
                   "options given here override them")
    p.set_defaults(handler=run_list)


def _add_show(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser("show", parents=parents, help="one request with its action, authority and history")
    p.add_argument("id", metavar="ID")
    p.add_argument("--as-of", metavar="TIME", help="the request as it was at TIME, rebuilt from its events "
                   "('YYYY-MM-DD HH:MM' UTC, ISO 8601, or HH:MM for today)")
    p.set_defaults(handler=run_show)


def _add_approve(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "approve", parents=parents, help="approve pending requests (each in its own transaction)",
        description="Approve each pending request. The requester may not approve their own request (names "
        "compared after Unicode NFKC with invisible characters removed, ignoring case); when the request's "
        "authority does not say with certainty who asked for it, approving needs --requester-unknown-ok. "
        "A request past its expiry is marked expired instead. Repeating your own approval is a no-op.",
    )
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--reason", metavar="TEXT", help="optional note (at most 2000 bytes)")
    p.add_argument("--requester-unknown-ok", action="store_true",
                   help="approve even when the request's authority does not say with certainty who asked "
                   "for it (you confirm you are not the requester; recorded with the decision)")
    p.set_defaults(handler=run_decide, decision="approve")


def _add_deny(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "deny", parents=parents, help="deny pending requests (a reason is required)",
        description="Deny each pending request; the reason (at most 2000 bytes) is recorded in its history.",
    )
    p.add_argument("ids", nargs="+", metavar="ID")
    p.add_argument("--reason", metavar="TEXT", required=True, help="why (required, at most 2000 bytes)")
    p.set_defaults(handler=run_decide, decision="deny")


def _add_revoke(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "revoke", parents=parents, help="withdraw an approval not yet consumed (approved -> invalidated)",
    )
    p.add_argument("ids", nargs=1, metavar="ID")
    p.add_argument("--reason", metavar="TEXT", required=True, help="why (required, at most 2000 bytes)")
    p.set_defaults(handler=run_decide, decision="revoke")


def _actor_cell(reference, classification, metadata_json) -> str:
    """The declared actor, and the OS account the console recorded beside it (docs/decisions.md, D21)."""
    from console.services.identity import account_of
    from console.text import one_line

    account = account_of(metadata_json)
    who = one_line(reference.strip() or repr(reference), 40) if isinstance(reference, str) and reference else "-"
    return f"{who} ({classification}" + (f"; OS {account})" if account else ")")


def _add_expire(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    p = commands.add_parser(
        "expire", parents=parents, help="mark every pending or approved request past its expiry as expired",
        description="The sweep archon runs: pending or approved requests past expires_at become expired "
        "(recorded as actor 'system' / archon-console).",
    )
    p.set_defaults(handler=run_expire)


def _add_watch(commands: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    from console.cli.commands.watch import register as register_watch

    register_watch(commands, parents)


_ADDERS = {"list": _add_list, "show": _add_show, "approve": _add_approve, "deny": _add_deny,
           "revoke": _add_revoke, "expire": _add_expire, "watch": _add_watch}


# --- handlers ----------------------------------------------------------------------------------

def run_list(ctx) -> int:
    from console.models.approvals import parse_status_filter
    from console.services.approval_queue import Filters, list_requests

    args = ctx.args
    filters = Filters(
        statuses=("pending",) if args.status is None else parse_status_filter(args.status),
        project=args.project,
        kind=args.kind,
        expiring_within_minutes=args.expiring_within,
        search=args.search,
    )
    now = ctx.clock()
    with ctx.open(read_only=True) as handle:
        if args.view:
            filters = _with_view(handle, args, filters)
        page = list_requests(handle, filters, limit=args.limit, now=now)
    if ctx.json:
        from console.cli.output import emit_json

        emit_json([request.to_json() for request in page.rows])
        return 0
    from console.clock import relative
    from console.cli.output import say, table
    from console.services.approval_queue import action_summary, parse_json_field

    if not page.rows:
        say("No approval requests match.")
        return 0
    rows = []
    for r in page.rows:
        expires = relative(r.expires_at, now)
        if r.overdue:
            expires += " (overdue)"
        rows.append([
            r.id,
            r.project_name or r.project_id,
            r.action_kind,
            r.status,
            expires,
            r.requester or "-",  # the TUI's requester column reads the same field
            action_summary(r.action_kind, parse_json_field(r.action_json), r.action_json),
        ])
    say(table(rows, ["ID", "PROJECT", "KIND", "STATUS", "EXPIRES", "REQUESTER", "ACTION"]))
    if page.next_cursor is not None:
        say(f"(first {len(page.rows)}; more match, raise --limit or narrow the filters)")
    return 0


def _with_view(handle, args, filters):
    """The saved view's filters, under the options given on the command line."""
    from console.records import replace
    from console.services import views
    from console.cli.output import say
    from console.models.approvals import parse_status_filter

    view, note = views.open_view(handle, args.view, "approvals")
    if note:
        say(note, err=True)
    saved = views.approval_filters(view)
    return replace(
        saved,
        statuses=parse_status_filter(args.status) if args.status is not None else saved.statuses,
        project=args.project or saved.project,
        kind=args.kind or saved.kind,
        expiring_within_minutes=(args.expiring_within if args.expiring_within is not None
                                 else saved.expiring_within_minutes),
        search=args.search or saved.search,
    )


def _pretty(value: Any, raw: Any) -> str:
    import json

    from console.text import UnreadableJson, json_text, read_json, strip_control, unparseable_note

    if raw is None:
        return "-"
    if value is None:  # JSON's `null`; over the reader's limits: only the note; not JSON: one quoted
        # line, so text the requester wrote cannot pose as more sections of this page ("history:")
        try:
            read_json(raw)
            return "null"
        except UnreadableJson:
            pass
        return unparseable_note(raw) or "not JSON, as stored: " + json_text(str(raw), indent=None)
    # json.dumps escapes C0 controls but not C1 ones (U+0080-U+009F), so strip those too.
    return strip_control(json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True))


def run_show(ctx) -> int:
    from console.services.approval_queue import show_request

    now = ctx.clock()
    if getattr(ctx.args, "as_of", None):
        from console.services.history import approval_as_of

        return show_as_of(ctx, approval_as_of, now)
    with ctx.open(read_only=True) as handle:
        request = show_request(handle, ctx.args.id, actor=ctx.actor, now=now)
    if ctx.json:
        from console.cli.output import emit_json

        emit_json(request.to_json())
        return 0
    from console.clock import relative
    from console.cli.output import say, table
    from console.text import one_line

    def when(value: Any) -> str:
        return "-" if value is None else f"{one_line(value)} ({relative(value, now)})"

    status = request.status + (" (overdue: past its expiry, awaiting expiry)" if request.overdue else "")
    fields = [
        ("id", request.id),
        ("project", f"{request.project_id} ({request.project_name or '?'})"
         + ("  [being deleted]" if request.project_deleting else "")),
        ("run", request.execution_run_id),
        ("kind", request.action_kind),
        ("status", status),
        ("requester", request.requester or "-"),
        ("expires", when(request.expires_at)),
        ("decided", when(request.decision_at)),
        ("consumed", when(request.consumed_at)),
        ("created", when(request.created_at)),
        ("updated", when(request.updated_at)),
        ("fingerprint", request.action_fingerprint),
    ]
    width = max(len(k) for k, _ in fields)
    lines = [f"{k.ljust(width)}  {one_line(v)}" for k, v in fields]
    options = request.options or {}
    can = [a for a, why in options.items() if why is None]
    # Status mismatches ("it is denied, not pending") are plain from the status line; say the rest.
    blocked = [f"not {a}: {why}" for a, why in options.items() if why and not why.startswith("it is ")]
    lines.append(f"{'you can'.ljust(width)}  {', '.join(can) if can else 'nothing'}")
    lines.extend(f"{''.ljust(width)}  {one_line(item)}" for item in blocked)
    for action, problem in (request.confirm or {}).items():
        lines.append(f"{''.ljust(width)}  {one_line(action)} needs --requester-unknown-ok: {one_line(problem)}")
    say("\n".join(lines))
    say("\naction:\n" + _pretty(request.action, request.action_json))
    say("\nauthority:\n" + _pretty(request.authority, request.authority_json))
    events = [
        [e.sequence, when(e.created_at), e.event_type, f"{e.from_status or '-'} -> {e.to_status}",
         _actor_cell(e.actor_reference, e.actor_classification, e.columns.get("metadata_json")), e.reason or ""]
        for e in request.events
    ]
    say("\nhistory:")
    if request.events_hidden:
        say(f"…and {request.events_hidden:,} earlier events (only the newest {len(events)} are shown; `audit` lists them all)")
    say(table(events, ["#", "WHEN", "EVENT", "STATUS", "ACTOR", "REASON"], max_width=60) if events else "(no events)")
    return 0


def _print_results(ctx, results, *, empty: str | None = None) -> int:
    from console.cli.output import emit_json, say

    note = ctx.write_note
    if ctx.json:
        emit_json([{**r.to_json(), **({"clock_note": note} if note else {})} for r in results])
    else:
        if not results and empty:
            say(empty)
        for r in results:
            if r.ok:
                say(r.message)
            else:
                say(f"refused: {r.message}", err=True)
        if note:
            say(note, err=True)
    return 0 if all(r.ok for r in results) else 1


def run_decide(ctx) -> int:
    from console.errors import EXIT_REFUSED, Refusal
    from console.services.approvals import decide_many
    from console.models.results import ActionResult

    args = ctx.args
    with ctx.open() as handle:
        try:
            results = decide_many(
                handle, args.ids, args.decision, actor=ctx.actor, reason=args.reason, now=ctx.write_now(),
                requester_unknown_ok=bool(getattr(args, "requester_unknown_ok", False)),
            )
        except Refusal as exc:
            if not ctx.json or exc.exit_code != EXIT_REFUSED:
                raise  # a usage error (no --reason) is one error object, not one result per id
            message = exc.reason if not exc.hint else f"{exc.reason} {exc.hint}"
            results = [ActionResult(False, i, None, message) for i in dict.fromkeys(args.ids)]
    return _print_results(ctx, results)


def run_expire(ctx) -> int:
    from console.services.approval_expiry import expire_overdue

    with ctx.open() as handle:
        results = expire_overdue(handle, actor=ctx.actor, now=ctx.write_now())
    if not ctx.json and results:
        from console.cli.output import say

        say(f"Expired {len(results)} request{'s' if len(results) != 1 else ''}:")
    return _print_results(ctx, results, empty="Nothing to expire: no pending or approved request is past its expiry.")


def show_as_of(ctx, as_of, now) -> int:
    """`show ID --as-of TIME` (approvals and envs): the state then, from the event log."""
    from console.cli.output import emit_json, say
    from console.services.history import format_as_of, parse_as_of

    at = parse_as_of(ctx.args.as_of, now)
    with ctx.open(read_only=True) as handle:
        view = as_of(handle.conn, ctx.args.id, at)
    if ctx.json:
        emit_json(view.to_json())
    else:
        say(format_as_of(view))
    return 0
