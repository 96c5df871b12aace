"""What the console needs to find its way: where to start, the project names the command palette
offers (`:project NAME`), where a `:` command goes (`resolve_target`), and the project a
`:project NAME` screen opens on."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass

from console.db.sql import stored_columns
from console.db.connect import ArchonDatabase
from console.models.projects import ProfileAuditEvent, Project
from console.services.approval_queue import any_pending
from console.errors import ConsoleError
from console.services.resolve import resolve_project
from console.suggest import did_you_mean, near_matches

PALETTE_PROJECTS = 200
CHOICES_SHOWN = 10  # projects offered to pick from; more and the typed text is too short
SCANNED = 2000  # projects compared with a typo beyond those starting with it (by name, then id)


def start_screen(handle: ArchonDatabase) -> str:
    """The approval queue when anything is pending, else the overview of projects."""
    return "approvals" if any_pending(handle) else "projects"


def project_names(handle: ArchonDatabase, limit: int = PALETTE_PROJECTS) -> list[tuple[str, str]]:
    """(id, name) of the first projects by name: the palette's `:project` suggestions."""
    rows = handle.conn.execute("SELECT id, name FROM projects ORDER BY name LIMIT ?", (limit,)).fetchall()
    return [(r[0], r[1]) for r in rows]


def project_with_audit(handle: ArchonDatabase, project: str) -> tuple[Project, list[ProfileAuditEvent]]:
    """The project (by id, else unique name) and its profile audit events, oldest first."""
    from console.services.profiles import require_profiles  # not needed to start the console

    require_profiles(handle)
    row = resolve_project(handle.conn, project)
    found = Project(dict(handle.conn.execute(
        f"SELECT {stored_columns(handle.conn, 'projects')} FROM projects WHERE id = ?", (row["id"],)).fetchone()))
    audit = [ProfileAuditEvent(dict(r)) for r in handle.conn.execute(
        f"SELECT {stored_columns(handle.conn, 'execution_profile_audit_events')} FROM execution_profile_audit_events "
        "WHERE project_id = ? ORDER BY created_at, id", (row["id"],))]
    return found, audit


@dataclass(frozen=True)
class Target:
    """Where a `:` command goes, decided before anything is pushed: the argument to open the screen
    with, or several projects to pick from, or why nothing opens (with "did you mean")."""

    argument: str | None = None
    choices: tuple[tuple[str, str], ...] = ()  # (what is shown, the argument it opens with)
    refusal: str | None = None


def resolve_target(handle: ArchonDatabase, screen: str, argument: str | None,
                   feature: str | None = None) -> Target:
    """Where `:screen argument` goes. A project is named by id or unique name as everywhere
    (console/services/resolve.py), and here also by what it starts with or contains (k9s's `:ns`):
    one such project opens, several are offered, none is refused with the names it is near. A
    bare word after `:approvals` or `:envs` is a project too, or near one of their filter words
    (`:envs clam` -> `claimed=yes`). Screens without an argument to check get theirs unchanged."""
    from console.services import views
    from console.text import one_line

    if feature is not None:
        from console.services.base import require_feature

        try:  # before the screen is pushed: pushed first, it stayed empty behind "needs 1.8.22"
            require_feature(handle, feature, what=f":{screen}")
        except ConsoleError as exc:
            return Target(refusal=f"{exc.reason} :upgrade shows what an upgrade would do.")
    if argument is None:
        return Target()
    if screen == "project" and not argument.strip():  # `:project` alone: the projects to pick from
        shown = tuple((f"{one_line(name)}  ({one_line(pid)})", pid) for pid, name in project_names(handle, CHOICES_SHOWN)
                      if isinstance(pid, str))
        return Target(choices=shown) if shown else Target(refusal="This database has no projects yet.")
    if screen == "project":
        return _project_target(handle, screen, argument, lambda found: found)
    if screen == "tables":
        return _table_target(handle.conn, argument)
    if screen not in views.KEYS:
        return Target(argument)
    if views.is_expression(argument):
        try:
            view = views.parse(screen, argument)
        except ConsoleError as exc:
            return Target(refusal=exc.reason)
        typed = view.get("project")
        if typed is None:
            return Target(argument)

        def rewrite(found: str) -> str:
            return " ".join(f"{k}{views.KEYS[screen][k]}{found if k == 'project' else v}" for k, v in view.filters)

        return _project_target(handle, screen, typed, rewrite, expression=argument)
    return _project_target(handle, screen, argument, lambda found: found, words=filter_words(screen))


def project_target(handle: ArchonDatabase, screen: str, typed: str) -> Target:
    """A list's `p` project filter: the project found as `:project` finds it (the screen's name
    only words the hint, `:approvals atlas-api`)."""
    return _project_target(handle, screen, typed, lambda found: found)


def filter_words(screen: str) -> dict[str, str]:
    """A bare word after `:approvals`/`:envs` that is near a filter word means that filter."""
    from console.models.approvals import STATUSES
    from console.services.environment_rules import STATES

    if screen == "envs":
        words = {"claimed": "claimed=yes", "unclaimed": "claimed=no"}
        words.update({state: f"state={state}" for state in STATES})
        return words
    words = {status: f"status={status}" for status in STATUSES}
    words.update({"expiring": "expiring<60", "all": "status=all"})
    return words


def _project_target(handle: ArchonDatabase, screen: str, typed: str, argument_for, *,
                    expression: str | None = None, words: dict[str, str] | None = None) -> Target:
    from console.text import one_line

    try:
        resolve_project(handle.conn, typed)
        return Target(expression or typed)  # an id or a unique name: exactly as typed
    except ConsoleError as exc:
        if not exc.reason.startswith("More than one"):
            exc = None
    labels = _project_labels(handle.conn, typed)
    strong = near_matches(typed, labels, limit=CHOICES_SHOWN * 2, cutoff=1.0)  # equal, starts, contains
    found = list(dict.fromkeys(pid for label in strong for pid in labels[label]))
    if len(found) == 1:
        return Target(argument_for(found[0]))
    if found:
        names = {pid: name for name, ids in labels.items() for pid in ids if name != pid}
        shown = tuple((f"{one_line(names.get(pid, pid))}  ({one_line(pid)})" if pid in names else one_line(pid),
                       argument_for(pid)) for pid in found[:CHOICES_SHOWN])
        return Target(choices=shown)
    words = words or {}

    def show(label: str) -> str:  # a project by its name when the name is its alone, else by its id
        if label in words:
            return f":{screen} {words[label]}"
        pid = labels[label][0]
        name = next((n for n, ids in labels.items() if ids == [pid] and n != pid), pid)
        return f":{screen} {argument_for(one_line(name))}"

    hint = did_you_mean(typed, list(labels) + list(words), show=show)
    what = f"No project {one_line(typed)!r} in this database (neither an id nor a name, nor the start of one)."
    return Target(refusal=f"{what} {hint or 'See :projects for every project.'}")


def table_names(conn: sqlite3.Connection) -> list[str]:
    """Every table of the main schema, as `:tables` lists them (console/services/query.py)."""
    rows = conn.execute("PRAGMA table_list").fetchall()
    if rows:
        return sorted(r[1] for r in rows if r[0] == "main" and r[2] == "table")
    # SQLite before 3.37 has no table_list (an unknown PRAGMA returns nothing)
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def _table_target(conn: sqlite3.Connection, typed: str) -> Target:
    """`:tables NAME`: the table by its name (SQLite's names ignore case), or the one it starts with
    or contains; several are offered; none is refused with the names it is near. Checked here, before
    the table screen is pushed: pushed first, a typo left an empty table "loading…" behind an error."""
    from console.text import one_line

    names = table_names(conn)
    if typed in names:
        return Target(typed)
    found = near_matches(typed, names, limit=CHOICES_SHOWN, cutoff=1.0)  # equal, starts, contains
    if len(found) == 1:
        return Target(found[0])
    if found:
        return Target(choices=tuple((one_line(name), name) for name in found))
    hint = did_you_mean(typed, names, show=lambda name: f":tables {one_line(name)}")
    return Target(refusal=f"No table {one_line(typed)!r} in this database. {hint or ':tables lists every table.'}")


def _project_labels(conn: sqlite3.Connection, typed: str) -> dict[str, list[str]]:
    """Every id and name a typo is compared with -> the project ids it names: those starting with
    `typed` (an index range, so a million projects cost what ten do) and the first `SCANNED`."""
    end = typed + "\U0010ffff"
    rows = conn.execute("SELECT id, name FROM projects WHERE id >= ? AND id < ? ORDER BY id LIMIT ?",
                        (typed, end, CHOICES_SHOWN + 1)).fetchall()
    rows += conn.execute("SELECT id, name FROM projects WHERE name >= ? AND name < ? ORDER BY name LIMIT ?",
                         (typed, end, CHOICES_SHOWN + 1)).fetchall()
    rows += conn.execute("SELECT id, name FROM projects ORDER BY name LIMIT ?", (SCANNED,)).fetchall()
    labels: dict[str, list[str]] = {}
    for pid, name in rows:
        if not isinstance(pid, str):
            continue
        for label in (pid, name):
            if isinstance(label, str) and label and pid not in labels.setdefault(label, []):
                labels[label].append(pid)
    return labels


__all__ = ["Target", "project_names", "project_target", "project_with_audit", "resolve_target", "start_screen"]
