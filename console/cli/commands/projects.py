"""`archon-console projects list`: every project and what needs attention in it.

Module-level imports stay light (argparse only); see `commands/approvals.py`.
"""

from __future__ import annotations

import argparse

from console.cli.options import stale_after, stale_after_parent


def register(subparsers: argparse._SubParsersAction, parents: list[argparse.ArgumentParser]) -> None:
    family = subparsers.add_parser(
        "projects", help="projects and what needs attention in them", parents=parents,
        description="Projects with their active execution profile revision, approvals waiting, "
        "environments by state and operation claims.",
    )
    commands = family.add_subparsers(dest="projects_command", metavar="ACTION", required=True)
    p = commands.add_parser(
        "list", parents=[*parents, stale_after_parent()], help="one line per project",
        description="One line per project. '-' marks what this database's archon release does not have "
        "(profiles and approvals need 1.8.22, operation claims 1.10.0).",
    )
    p.set_defaults(handler=run_list)


def _dash(value) -> str:
    return "-" if value is None else str(value)


def run_list(ctx) -> int:
    from console.services.projects import list_projects

    now = ctx.clock()
    with ctx.open(read_only=True) as handle:
        projects = list_projects(handle, now=now, stale_after=stale_after(ctx.args))
    from console.cli.output import emit_json, say, table

    if ctx.json:
        emit_json([p.to_json() for p in projects])
        return 0
    if not projects:
        say("No projects in this database.")
        return 0
    rows = []
    for p in projects:
        revision = "-"
        if p.active_revision is not None:
            revision = f"#{p.active_revision} (schema {p.active_schema_version})"
        approvals = _dash(p.pending_approvals)
        if p.pending_approvals:
            notes = []
            if p.pending_expiring_within_hour:
                notes.append(f"{p.pending_expiring_within_hour} < 1 h")
            if p.pending_overdue:
                notes.append(f"{p.pending_overdue} overdue")
            if notes:
                approvals += f" ({', '.join(notes)})"
        envs = ", ".join(f"{state} {n}" for state, n in p.environments.items()) or "none"
        claims = "-"
        if p.claims_held is not None:
            claims = str(p.claims_held) + (f" ({p.claims_stale} stale)" if p.claims_stale else "")
        name = p.name + (" [being deleted]" if p.deleting else "")
        rows.append([p.id, name, p.columns.get("build_execution_provider", "-"), revision, approvals, envs, claims])
    say(table(rows, ["ID", "NAME", "PROVIDER", "PROFILE", "PENDING", "ENVIRONMENTS", "CLAIMS"], max_width=60))
    return 0
