"""Saved views: a list screen and its filters under a name, shared by the TUI and the CLI.

Typed after `:` as `approvals status=pending project=alpha kind=git_push expiring<60` (or
`envs state=ready project=alpha claimed=yes`), stored by `:save NAME` in
`~/.config/archon-console/services/views.toml` (or the file `$ARCHON_CONSOLE_VIEWS` names), opened by
`:view NAME`, the command palette, and `archon-console approvals list --view NAME` / `envs list
--view NAME`. A view stores the expression as typed, so the file stays readable and editable:

    [views.mine]
    screen = "approvals"
    filters = "status=pending project=alpha expiring<60"

The file is replaced atomically (an exclusively created temporary file renamed over it).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from console.small_files import SettingsUnusable, read_toml
from console.errors import UsageError
from console.suggest import did_you_mean

VIEWS_ENV = "ARCHON_CONSOLE_VIEWS"
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
_TERM = re.compile(r"^(?P<key>[a-z_]+)(?P<op>=|<)(?P<value>.*)$")
# Which keys each screen takes, and with which operator.
KEYS = {
    "approvals": {"status": "=", "project": "=", "kind": "=", "search": "=", "expiring": "<"},
    "envs": {"state": "=", "project": "=", "claimed": "=", "search": "="},
}


@dataclass(frozen=True)
class View:
    """A screen and its filters; `filters` keeps the typed order (it is also how the view is shown)."""

    screen: str
    filters: tuple[tuple[str, str], ...] = ()

    def get(self, key: str) -> str | None:
        return dict(self.filters).get(key)

    def expression(self) -> str:
        return " ".join(f"{k}{KEYS[self.screen][k]}{v}" for k, v in self.filters)

    def without(self, key: str) -> "View":
        return View(self.screen, tuple((k, v) for k, v in self.filters if k != key))


def is_expression(text: str | None) -> bool:
    """`status=pending ...` is a filter expression; a bare word is the old `:approvals PROJECT`."""
    return bool(text) and any(_TERM.match(word) for word in text.split())


def parse(screen: str, text: str | None) -> View:
    """`key=value` terms (and `expiring<MINUTES`) for `screen`; one sentence when one is wrong."""
    if screen not in KEYS:
        raise UsageError(f"Only the approvals and envs lists have filters; :{screen} does not.")
    terms: dict[str, str] = {}
    for word in (text or "").split():
        m = _TERM.match(word)
        if not m:
            raise UsageError(f"{word!r} is not a filter; write key=value, e.g. {_example(screen)}.")
        key, op, value = m["key"], m["op"], m["value"]
        if key not in KEYS[screen]:
            hint = did_you_mean(key, KEYS[screen], show=lambda k: f"{k}{KEYS[screen][k]}{value}")
            raise UsageError(f"{screen} has no filter {key!r}; it has {', '.join(KEYS[screen])}."
                             + (f" {hint}" if hint else ""))
        if op != KEYS[screen][key]:
            raise UsageError(f"write {key}{KEYS[screen][key]}VALUE, not {key}{op}VALUE.")
        if not value:
            raise UsageError(f"{key}{op} needs a value.")
        terms[key] = _checked(screen, key, value)
    return View(screen, tuple(terms.items()))


def _example(screen: str) -> str:
    return ("status=pending project=alpha kind=git_push expiring<60" if screen == "approvals"
            else "state=ready project=alpha claimed=yes")


def _checked(screen: str, key: str, value: str) -> str:
    if key == "status":
        from console.models.approvals import parse_status_filter

        try:
            statuses = parse_status_filter(value)
        except UsageError as exc:
            from console.models.approvals import STATUSES

            typo = next((p for p in value.split(",") if p.strip().lower() not in STATUSES + ("all",)), value)
            hint = did_you_mean(typo, STATUSES + ("all",), show=lambda v: f"status={v}")
            raise UsageError(f"{exc.reason} {hint}" if hint else exc.reason) from None
        return "all" if statuses is None else ",".join(statuses)
    if key == "kind":
        from console.models.approvals import check_kind

        return check_kind(value)
    if key == "expiring":
        if not value.isdigit() or not 0 < int(value) <= 10**6:
            raise UsageError(f"expiring<{value}: give whole minutes, e.g. expiring<60.")
        return str(int(value))
    if key == "state":
        from console.services.environment_rules import STATES

        if value not in STATES + ("any",):
            hint = did_you_mean(value, STATES + ("any",), show=lambda v: f"state={v}")
            raise UsageError(f"state={value}: use {', '.join(STATES)} or any." + (f" {hint}" if hint else ""))
    if key == "claimed" and value not in ("yes", "no"):
        raise UsageError(f"claimed={value}: use yes or no.")
    return value


# ------------------------------------------------------------------ the file
def views_path() -> Path:
    explicit = os.environ.get(VIEWS_ENV)
    if explicit:
        from console.db.paths import expand_home  # `~nosuch/...` is one sentence, not a RuntimeError

        return expand_home(explicit, VIEWS_ENV)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "archon-console" / "views.toml"


def load(path: Path | None = None) -> tuple[dict[str, View], str | None]:
    """Every saved view, and a sentence about the entries that were skipped (never fatal)."""
    path = path or views_path()
    try:
        data = read_toml(path, "the saved views")
    except SettingsUnusable as exc:
        return {}, str(exc)
    if data is None:
        return {}, None
    views, skipped = {}, []
    table = data.get("views", {})
    for name, entry in (table.items() if isinstance(table, dict) else []):
        try:
            if not isinstance(entry, dict) or not NAME.match(str(name)):
                raise UsageError("not a view")
            views[str(name)] = parse(str(entry.get("screen")), str(entry.get("filters", "")))
        except UsageError:
            skipped.append(str(name))
    warning = f"Skipped saved views that are not valid: {', '.join(skipped)}" if skipped else None
    return views, warning


def find(name: str, path: Path | None = None) -> View:
    views, _ = load(path)
    if name not in views:
        from console.suggest import did_you_mean  # the one rule for "did you mean"

        known = ", ".join(sorted(views)) or "none saved yet"
        near = did_you_mean(name, views)
        raise UsageError(f"No saved view {name!r} ({known}); save one with :save NAME in the console."
                         + (f" {near}" if near else ""))
    return views[name]


def open_view(handle, name: str, screen: str | None = None) -> tuple[View, str | None]:
    """The saved view `name` as it can be opened on this database, and a sentence when it cannot be
    opened as saved: a view outlives projects, and one whose project is gone opens unfiltered.
    The TUI (`:view`) and the CLI (`--view`) both open views here."""
    from console.services.resolve import project_known

    view = find(name)
    if screen is not None and view.screen != screen:
        raise UsageError(f"The view {name!r} is a view of :{view.screen}, not of :{screen}.")
    project = view.get("project")
    if project and not project_known(handle, project):
        return View(view.screen), (f"The view {name} names project {project!r}, which is not in this database; "
                                   f"it opens unfiltered.")
    return view, None


def save(name: str, view: View, path: Path | None = None) -> Path:
    """Add or replace `name`; the whole file is rewritten from what it holds (comments are not kept)."""
    if not NAME.match(name):
        raise UsageError(f"{name!r} cannot name a view; use letters, digits, '.', '_' or '-' (at most 64).")
    path = path or views_path()
    views, _ = load(path)
    views[name] = view
    from console.db.files import replace_small_file, require_output_dir

    require_output_dir(path.parent, "The views file's directory", create=True)
    lines = ["# Saved views of archon-console (:save NAME, :view NAME, `approvals list --view NAME`)."]
    for key in sorted(views):
        v = views[key]
        lines += ["", f"[views.{key}]", f"screen = {_toml_string(v.screen)}",
                  f"filters = {_toml_string(v.expression())}"]
    replace_small_file(path, "\n".join(lines) + "\n", "views")
    return path


def _toml_string(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in escaped) + '"'


# ------------------------------------------------------------------ into each list's filters
def approval_filters(view: View):
    from console.models.approvals import parse_status_filter
    from console.services.approval_queue import Filters

    expiring = view.get("expiring")
    return Filters(statuses=parse_status_filter(view.get("status") or "pending"), project=view.get("project"),
                   kind=view.get("kind"), search=view.get("search"),
                   expiring_within_minutes=float(expiring) if expiring else None)


def approvals_view(filters) -> View:
    terms = []
    statuses = filters.statuses
    terms.append(("status", "all" if statuses is None else ",".join(statuses)))
    for key, value in (("project", filters.project), ("kind", filters.kind), ("search", filters.search)):
        if value:
            terms.append((key, value))
    if filters.expiring_within_minutes is not None:
        terms.append(("expiring", str(int(filters.expiring_within_minutes))))
    return parse("approvals", " ".join(f"{k}{KEYS['approvals'][k]}{v}" for k, v in terms))


def env_view(state: str | None, project: str | None, claimed: bool, search: str | None = None) -> View:
    terms = [("state", state or "any")]
    if project:
        terms.append(("project", project))
    if claimed:
        terms.append(("claimed", "yes"))
    if search:
        terms.append(("search", search))
    return View("envs", tuple(terms))


__all__ = ["View", "approval_filters", "approvals_view", "env_view", "find", "is_expression", "load", "open_view",
           "parse", "save", "views_path"]
