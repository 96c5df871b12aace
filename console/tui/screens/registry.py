"""`:name [argument]` -> screen. The command line, the palette and the help read this table.

To add a screen (the doctor screen, say): write `console/tui/screens/doctor.py` with a
`ConsoleScreen` subclass and add one `ScreenEntry` here.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ScreenEntry:
    name: str
    module: str
    cls: str
    help: str
    aliases: tuple[str, ...] = ()
    argument: str | None = None  # e.g. "NAME" for `:project NAME`
    # What may follow the name, when something may (`:tables NAME`, `:envs claimed=yes`); a screen with
    # neither refuses an argument rather than drop it (`:doctor foo` opened doctor as if foo were not there).
    optional: str | None = None
    # What the file's release must support for the screen to show anything (console/services/base.py
    # FEATURE_RELEASE): checked before the screen is pushed, so an old file refuses with nothing opened.
    feature: str | None = None

    def screen_class(self) -> Any:
        return getattr(importlib.import_module(self.module), self.cls)

    def build(self, argument: str | None = None) -> Any:
        screen_cls = self.screen_class()
        # approvals and envs take an optional argument: a project, or a filter expression (console/services/views.py)
        return screen_cls(argument) if self.argument or argument else screen_cls()


SCREENS: tuple[ScreenEntry, ...] = (
    ScreenEntry("approvals", "console.tui.screens.approvals", "ApprovalsScreen",
                "Approval queue: decide pending requests", aliases=("a", "approval", "queue"),
                optional="PROJECT|FILTER", feature="approvals"),
    ScreenEntry("envs", "console.tui.screens.environments", "EnvironmentsScreen",
                "Execution environments, leases and claims", aliases=("e", "env", "environments"),
                optional="PROJECT|FILTER"),
    ScreenEntry("projects", "console.tui.screens.projects", "OverviewScreen",
                "Overview of every project", aliases=("p", "overview", "home")),
    ScreenEntry("project", "console.tui.screens.profiles", "ProfilesScreen",
                "One project's execution profile revisions", aliases=("profiles",), argument="NAME",
                feature="profiles"),
    ScreenEntry("upgrade", "console.tui.screens.upgrade", "UpgradeScreen",
                "Schema upgrade: plan, snapshot and run", aliases=("u",)),
    ScreenEntry("doctor", "console.tui.screens.doctor", "DoctorScreen",
                "Doctor: what is wrong with this database (Enter goes to the row)", aliases=("dr", "health")),
    ScreenEntry("tables", "console.tui.screens.tables", "TablesScreen",
                "Every table with its row count; Enter opens one, read-only", aliases=("t", "table"),
                optional="TABLE"),
    ScreenEntry("sql", "console.tui.screens.sql", "SqlScreen",
                "One read-only SQL statement, its rows paged", aliases=("query",),
                optional="STATEMENT"),
)


def command_words() -> str:
    """Every screen as typed after `:` (`approvals | envs | ... | project NAME | doctor`), for the
    command line's placeholder and the "No screen called" hint: new screens appear in both."""
    return " | ".join(f"{e.name} {e.argument}" if e.argument else e.name for e in SCREENS)


def lookup(name: str) -> ScreenEntry | None:
    name = name.strip().lstrip(":").lower()
    for entry in SCREENS:
        if name == entry.name or name in entry.aliases:
            return entry
    return None


def parse_command(text: str) -> tuple[ScreenEntry | None, str | None, str]:
    """(entry, argument, the word typed) for `:name [argument]`."""
    words = text.strip().lstrip(":").split(maxsplit=1)
    if not words:
        return None, None, ""
    entry = lookup(words[0])
    argument = words[1].strip() if len(words) > 1 else None
    return entry, argument, words[0]
