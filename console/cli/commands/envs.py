"""`archon-console envs ...`: browse execution environments and claim operations on them.

The text of the claim rules comes from `console.services.environment_rules`, so help, TUI and code
say the same thing.
"""

from __future__ import annotations

import argparse
from datetime import timedelta

from console.clock import duration, relative
from console.cli.output import emit_json, say, table
from console.text import line
from console.cli.options import stale_after, stale_after_parent, whole_number
from console.services.environment_queries import list_environments, show_environment
from console.services.environment_rules import OPERATIONS, STATES, operations_help
from console.models.environments import EnvironmentView

CLAIM_EPILOG = (
    "Which states allow which operation, and what completing it hands to archon:\n  "
    + operations_help().replace("\n", "\n  ")
    + "\n\nA claim stops new runs from being placed on the environment at once. The console cannot stop or "
    "delete a container, so it never changes the lifecycle state: the holder runs `envs complete ID` to hand "
    "the operation to archon's own scheduling column and clear the claim, or `envs release ID` to clear it "
    "with nothing handed off. `envs show ID` says what archon has been handed and since when. A reset claim "
    "cannot be completed, only released; a stop cannot be completed while an execution lease is active or other "
    "work is placed in it (a binding not released, a service run not completed, an unfinished check batch or "
    "attempt naming it; what archon's idle-stop sweep does to a running run is not known): wait for the run to "
    "end, or release the claim. A cleanup retry is neither claimed nor completed while archon's cleanup worker "
    "holds its cleanup claim. "
    "A claim older than the stale threshold (--stale-after, $ARCHON_CONSOLE_STALE_MINUTES, default 15 minutes) "
    "can be taken over, or released by someone else, with --takeover --reason TEXT. A takeover keeps the "
    "operation it takes over (leave out --op); to change the kind, release the claim first, with a reason. "
    "For a claim the console did not create (archon's own, e.g. archon-worker:7) the same threshold is only "
    "the console's assumption (how long archon keeps its claims is not known, and archon may still be working "
    "on it), so taking it over or releasing it also needs --confirm-holder naming the holder exactly as shown. "
    "A retire claim records a retirement request, which stays after a release."
)
CONFIRM_HELP = ("the holder of a claim the console did not create (e.g. archon-worker:7), exactly as shown: "
                "required to take it over or release it, since the console only assumes such a claim is "
                "abandoned once older than the stale threshold")


def _stale_after(ctx) -> timedelta:
    return stale_after(ctx.args)


def _claim_cell(row: EnvironmentView) -> str:
    if not row.operation_claim_id:
        return "-"
    stale = " (stale)" if row.stale else ""
    return f"{row.operation_kind} by {row.claimed_by}{stale}"


def _age(row: EnvironmentView) -> str:
    if row.claim_age_seconds is None:
        return "-"
    return f"{duration(row.claim_age_seconds)} ago"


def _with_view(handle, args):
    """(state, project, claimed, search) from a saved view, under the options given on the command line."""
    from console.services import views

    view, note = views.open_view(handle, args.view, "envs")
    if note:
        say(note, err=True)
    state = view.get("state")
    return (args.state or (None if state in (None, "any") else state), args.project or view.get("project"),
            args.claimed or view.get("claimed") == "yes", view.get("search"))


def _actor_cell(event) -> str:
    """The declared actor, and the OS account the console recorded beside it (docs/decisions.md, D21)."""
    from console.services.identity import account_of
    from console.text import one_line

    who = event.actor_reference or event.actor_classification or "-"
    who = one_line(who.strip() or repr(who), 40) if isinstance(who, str) else str(who)
    account = account_of(event.columns.get("metadata_json"))
    return f"{who} (OS {account})" if account else who


def cmd_list(ctx) -> int:
    args = ctx.args
    now = ctx.clock()
    from console.services.resolve import project_id

    with ctx.open(read_only=True) as handle:  # a listing writes nothing, not even a checkpoint
        state, project, claimed, search = args.state, args.project, args.claimed, None
        if args.view:
            state, project, claimed, search = _with_view(handle, args)
        page = list_environments(
            handle, now=now, state=state, project=project_id(handle.conn, project), claimed=claimed, stale=args.stale,
            search=search,
            stale_after=_stale_after(ctx), after=args.after, limit=args.limit,
        )
    if ctx.json:
        emit_json([r.to_json() for r in page.rows])
        return 0
    rows = [
        (
            r.id, r.project_id, r.lifecycle_state, _claim_cell(r),
            _age(r),
            r.active_lease_count, "yes" if r.admits_leases else "no",
            relative(r.idle_stop_at, now), relative(r.cleanup_retry_at, now),
        )
        for r in page.rows
    ]
    if not rows:
        say("No environments match.")
        return 0
    print(table(rows, ["ID", "PROJECT", "STATE", "CLAIM", "CLAIMED", "LEASES", "ADMITS", "IDLE STOP", "CLEANUP RETRY"]))
    if page.next_after is not None:
        say(f"{len(rows)} shown; more with --after {page.next_after}")
    return 0


_SHOW_FIELDS = (
    "id", "project_id", "lifecycle_state", "provider_kind", "target_kind", "target_key", "target_workspace_path",
    "environment_revision", "external_id", "retirement_requested_at", "idle_stop_at", "cleanup_retry_at",
    "cleanup_claim_id", "cleanup_attempts", "failure_message", "created_at", "updated_at",
)


def cmd_show(ctx) -> int:
    now = ctx.clock()
    if getattr(ctx.args, "as_of", None):
        from console.cli.commands.approvals import show_as_of
        from console.services.history import environment_as_of

        return show_as_of(ctx, environment_as_of, now)
    with ctx.open(read_only=True) as handle:  # a listing writes nothing, not even a checkpoint
        env = show_environment(handle, ctx.args.id, now=now, stale_after=_stale_after(ctx))
    if ctx.json:
        emit_json(env.to_json())
        return 0
    lines = []
    for field in _SHOW_FIELDS:  # archon's columns as stored, those this release has
        if field in env.columns:
            value = env.columns[field]
            if field.endswith("_at") and value:
                value = f"{value} ({relative(value, now)})"
            lines.append((field, "-" if value is None else value))
    if env.operation_claim_id:
        age = _age(env)
        lines.append(("claim", f"{env.operation_kind} by {env.claimed_by} since "
                               f"{env.operation_claimed_at} ({age}){' - stale' if env.stale else ''}"))
        lines.append(("claim_id", env.operation_claim_id))
    else:
        lines.append(("claim", "-"))
    lines.append(("admits leases", f"{'yes' if env.admits_leases else 'no'} ({env.admission_reason})"))
    print(table(lines, ["FIELD", "VALUE"], max_width=100))
    if env.pending_handoffs:
        print()
        print("Handed to archon, not performed yet:")
        for handoff in env.pending_handoffs:
            late = " - overdue: archon not running?" if handoff.overdue else ""
            say("  " + line(handoff.text) + late)
    print()
    print("Active execution leases:")
    if env.active_leases:
        print(table([(lease.execution_run_id, lease.bound_at, relative(lease.bound_at, now))
                     for lease in env.active_leases], ["RUN", "BOUND AT", "AGE"]))
    else:
        print("  none")
    others = [lease for lease in env.bound_runs or () if lease.relationship != "execution"]
    if others:  # they hold it against a stop hand-off too (environment_rules.lease_blocks_stop)
        print()
        print("Other runs bound to it, not released:")
        print(table([(lease.relationship, lease.execution_run_id, lease.bound_at, relative(lease.bound_at, now))
                     for lease in others], ["RELATIONSHIP", "RUN", "BOUND AT", "AGE"]))
    placed = [(kind, run) for kind, run in env.holding_work or () if kind in ("service_run", "check_batch", "check_attempt")]
    if placed:  # they hold it against a stop hand-off as well (environment_queries.holding_work)
        print()
        print("Other work placed in it, not finished:")
        print(table(placed, ["KIND", "RUN"]))
    print()
    print("Timeline:")
    if env.events:
        print(table([
            (e.sequence, e.created_at, e.event_type,
             f"{e.from_state or '-'} -> {e.to_state or '-'}",
             _actor_cell(e), e.reason or "")
            for e in env.events
        ], ["#", "AT", "EVENT", "STATE", "ACTOR", "REASON"], max_width=60))
    else:
        print("  no events")
    return 0


def cmd_claim(ctx) -> int:
    from console.cli.actions import run_action
    from console.services.environment_claims import claim

    a = ctx.args
    return run_action(ctx, a.id, lambda h: claim(
        h, a.id, a.op, ctx.actor, now=ctx.write_now(), takeover=a.takeover, reason=a.reason,
        stale_after=_stale_after(ctx), confirm_holder=a.confirm_holder))


def cmd_release(ctx) -> int:
    from console.cli.actions import run_action
    from console.services.environment_claims import release

    a = ctx.args
    return run_action(ctx, a.id, lambda h: release(
        h, a.id, ctx.actor, now=ctx.write_now(), takeover=a.takeover, reason=a.reason, stale_after=_stale_after(ctx),
        confirm_holder=a.confirm_holder))


def cmd_complete(ctx) -> int:
    from console.cli.actions import run_action
    from console.services.environment_claims import complete

    a = ctx.args
    return run_action(ctx, a.id, lambda h: complete(h, a.id, ctx.actor, now=ctx.write_now()))


# As in console/cli/commands/approvals.py: a command line naming its action builds that action's
# parser alone (console/cli/parser.py `build_parser`); the family's help builds them all.
ACTIONS = ("list", "show", "claim", "release", "complete")


def register(subparsers, parents, action: str | None = None) -> None:
    family = subparsers.add_parser(
        "envs", parents=parents, help="execution environments and their operation claims",
        description="Browse execution environments; claim, release and complete (hand to archon) "
                    "stop/retire/cleanup_retry; claim and release reset.",
        epilog=CLAIM_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = family.add_subparsers(dest="envs_command", metavar="ACTION", required=True)
    stale = stale_after_parent()
    for name in (action,) if action in ACTIONS else ACTIONS:
        _ADDERS[name](sub, parents, stale)


def _add_list(sub, parents, stale) -> None:
    p = sub.add_parser("list", parents=[*parents, stale], help="list environments (keyset pages by id)")
    p.add_argument("--state", choices=STATES, help="only this lifecycle state")
    p.add_argument("--project", metavar="P", help="only this project (id or unique name)")
    p.add_argument("--claimed", action="store_true", help="only environments holding an operation claim")
    p.add_argument("--stale", action="store_true", help="only environments whose claim is stale")
    p.add_argument("--limit", type=whole_number("rows"), default=100, metavar="N", help="page size (default 100; 0 = all)")
    p.add_argument("--after", metavar="ID", help="continue after this environment id")
    p.add_argument("--view", metavar="NAME", help="the filters of a view saved in the console (:save NAME); "
                   "options given here override them")
    p.set_defaults(handler=cmd_list)


def _add_show(sub, parents, stale) -> None:
    p = sub.add_parser("show", parents=[*parents, stale], help="one environment: claim, leases, timeline")
    p.add_argument("id", metavar="ID")
    p.add_argument("--as-of", metavar="TIME", help="the environment as it was at TIME, rebuilt from its events "
                   "('YYYY-MM-DD HH:MM' UTC, ISO 8601, or HH:MM for today)")
    p.set_defaults(handler=cmd_show)


def _add_claim(sub, parents, stale) -> None:
    p = sub.add_parser("claim", parents=[*parents, stale], help="claim an operation (see the states below)",
                       epilog=CLAIM_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("id", metavar="ID")
    p.add_argument("--op", choices=OPERATIONS, help="the operation to claim (required unless --takeover, "
                   "which keeps the operation of the claim it takes over; another kind is refused)")
    p.add_argument("--takeover", action="store_true", help="take over a stale claim, keeping its operation "
                   "(needs --reason)")
    p.add_argument("--reason", metavar="TEXT", help="why (required with --takeover; at most 2000 bytes)")
    p.add_argument("--confirm-holder", metavar="HOLDER", help=CONFIRM_HELP)
    p.set_defaults(handler=cmd_claim)


def _add_release(sub, parents, stale) -> None:
    p = sub.add_parser("release", parents=[*parents, stale], help="drop a claim without a state change",
                       epilog=CLAIM_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("id", metavar="ID")
    p.add_argument("--takeover", action="store_true", help="release someone else's stale claim (needs --reason)")
    p.add_argument("--reason", metavar="TEXT", help="why (required with --takeover)")
    p.add_argument("--confirm-holder", metavar="HOLDER", help=CONFIRM_HELP)
    p.set_defaults(handler=cmd_release)


def _add_complete(sub, parents, stale) -> None:
    p = sub.add_parser("complete", parents=parents, help="hand your claimed operation to archon and clear the claim",
                       epilog=CLAIM_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("id", metavar="ID")
    p.set_defaults(handler=cmd_complete)


_ADDERS = {"list": _add_list, "show": _add_show, "claim": _add_claim, "release": _add_release,
           "complete": _add_complete}


__all__ = ["register"]
