"""`archon-console profiles ...`: a project's execution profile revisions, and rollback."""

from __future__ import annotations

from console.cli.actions import run_action
from console.clock import relative
from console.cli.output import emit_json, say, table
from console.services import profiles
from console.services.profiles import resolve_revision
from console.text import json_or_none, line, strip_control

REVISION_SYNTAX = (
    "A project is its id or its unique name. A revision is its full id "
    "(prj-atlas-api:execution-profile:3), or PROJECT:N / PROJECT:rN, or N / rN after a PROJECT "
    "argument (`profiles activate atlas-api r3`). The full id is tried first; an ambiguous name is "
    "refused with the candidates listed."
)


def cmd_list(ctx) -> int:
    now = ctx.clock()
    with ctx.open(read_only=True) as handle:
        rows = profiles.list_revisions(handle, ctx.args.project)  # id or unique name
    if ctx.json:
        emit_json([r.to_json() for r in rows])
        return 0
    if not rows:
        say(f"Project {ctx.args.project} has no execution profile revisions.")
        return 0
    print(table([
        (
            "*" if r.active else "", r.revision, r.id, r.schema_version,
            r.fingerprint_short + ("" if r.fingerprint_matches else " MISMATCH"),
            r.provider_preference or "?", relative(r.created_at, now),
            relative(r.activated_at[-1], now) if r.activated_at else "-",
        )
        for r in rows
    ], ["ACTIVE", "REV", "ID", "SCHEMA", "FINGERPRINT", "PROVIDER", "CREATED", "LAST ACTIVATED"]))
    return 0


def cmd_show(ctx) -> int:
    now = ctx.clock()
    with ctx.open(read_only=True) as handle:
        row = profiles.show_revision(handle, resolve_revision(handle, ctx.args.revision, project=ctx.args.project))
    if ctx.json:
        data = row.to_json()
        data["profile"] = json_or_none(row.profile_json)
        emit_json(data)
        return 0
    # Each stored field through `line` (one_line): a line break in a name cannot add a line here.
    say(line(f"{line(row.id)}: revision", row.revision, "of", row.project_id, f"({line(row.project_name or '?')}),",
             "schema", row.schema_version, "created", row.created_at, f"({relative(row.created_at, now)})"
             + (", ACTIVE" if row.active else ""), sep=" "))
    if row.fingerprint_matches:
        say(line("fingerprint", row.fingerprint, "(matches the canonical serialisation)", sep=" "))
    else:
        say(line("fingerprint MISMATCH: stored", row.fingerprint, sep=" ")
            + ("" if row.fingerprint_well_formed else " (not 64 lowercase hex digits)"))
        say(line("  recomputed", row.computed_fingerprint or "(profile is not a JSON object)", sep=" ")
            + "; shown, not fixed")
    print(strip_control(row.pretty_json))
    if row.audit_events:
        print()
        print(table([
            (e["created_at"], e["event_type"], e["profile_revision_id"], e["previous_profile_revision_id"] or "-")
            for e in row.audit_events
        ], ["AT", "EVENT", "REVISION", "PREVIOUS"]))
    return 0


def cmd_diff(ctx) -> int:
    a = ctx.args
    with ctx.open(read_only=True) as handle:
        result = profiles.diff_revisions(handle, resolve_revision(handle, a.rev_a, project=a.project),
                                         resolve_revision(handle, a.rev_b, project=a.project))
    if ctx.json:
        emit_json({"a": result.a, "b": result.b, "same": result.same, "diff": result.text})
    elif result.same:
        say(line(result.a, "and", result.b, "have the same profile.", sep=" "))
    else:
        print(strip_control(result.text), end="")
    return 0


def cmd_activate(ctx) -> int:
    a = ctx.args
    return run_action(ctx, a.revision, lambda h: profiles.activate(
        h, resolve_revision(h, a.revision, project=a.project), ctx.actor, reason=a.reason, now=ctx.write_now()))


def register(subparsers, parents) -> None:
    family = subparsers.add_parser(
        "profiles", parents=parents, help="execution profile revisions (list, show, diff, rollback)",
        description="Execution profile revisions are permanent; activating an older one is a rollback that "
        "also sets the project's build provider to the revision's provider_preference and records a "
        "revision_activated audit event.",
    )
    sub = family.add_subparsers(dest="profiles_command", metavar="ACTION", required=True)
    p = sub.add_parser("list", parents=parents, help="a project's revisions, newest first")
    p.add_argument("project", metavar="PROJECT", help="project id or unique name")
    p.set_defaults(handler=cmd_list)
    p = sub.add_parser("show", parents=parents, help="one revision as pretty JSON, fingerprint checked",
                       description=REVISION_SYNTAX)
    p.add_argument("project", nargs="?", metavar="PROJECT", help="the project rN / N refer to")
    p.add_argument("revision", metavar="REVISION", help="id, PROJECT:N, or N / rN after PROJECT")
    p.set_defaults(handler=cmd_show)
    p = sub.add_parser("diff", parents=parents, help="unified diff of two revisions' profiles",
                       description=REVISION_SYNTAX)
    p.add_argument("project", nargs="?", metavar="PROJECT", help="the project rN / N refer to")
    p.add_argument("rev_a", metavar="REV_A", help="id, PROJECT:N, or N / rN after PROJECT")
    p.add_argument("rev_b", metavar="REV_B", help="id, PROJECT:N, or N / rN after PROJECT")
    p.set_defaults(handler=cmd_diff)
    p = sub.add_parser("activate", parents=parents, help="make a revision active again (rollback)",
                       description=REVISION_SYNTAX)
    p.add_argument("project", nargs="?", metavar="PROJECT", help="the project rN / N refer to")
    p.add_argument("revision", metavar="REVISION", help="id, PROJECT:N, or N / rN after PROJECT")
    p.add_argument("--reason", required=True, metavar="TEXT", help="why (recorded in the audit event)")
    p.set_defaults(handler=cmd_activate)


__all__ = ["register"]
