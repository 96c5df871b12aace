"""The command palette's navigation hits (`ctrl+p`): every screen, and one per project.

Imported only when the palette opens (see `ArchonConsole.COMMANDS`). Project names are read
once per opening, in a thread, through `services.navigation`; they are shown literally.
"""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

from rich.text import Text
from textual.command import DiscoveryHit, Hit, Hits, Provider

from console.tui.screens.registry import SCREENS
from console.services import navigation
from widgets.safe_text import clean


def prompt(text: str, help_text: str) -> Text:
    """A hit's two lines as one `Text`. Textual parses a hit's `help=` string as markup (a project
    id holding `[@click=app.quit]` would become an action), so help is never passed that way."""
    shown = Text(clean(text, one_line=True), end="")
    shown.append("\n")
    shown.append(clean(help_text, one_line=True), style="dim")
    return shown


class NavigationCommands(Provider):
    """Palette hits for every screen, and one per project (names shown literally)."""

    async def startup(self) -> None:
        # Read once per palette, in a thread: the connection may be busy with a long read.
        app: Any = self.app
        try:
            self._names = await asyncio.to_thread(app.session.run, navigation.project_names)
        except Exception:
            self._names = []
        from console.services import views

        self._views = views.load()[0]

    def _commands(self) -> list[tuple[str, str, Any]]:
        app: Any = self.app
        items = [(f":{e.name}", e.help, partial(app.navigate, e.name)) for e in SCREENS if not e.argument]
        items.append((":help", "Keys of this screen and what the words mean", app.action_help))
        for name, view in getattr(self, "_views", {}).items():
            items.append((f":view {name}", f":{view.screen} {clean(view.expression(), one_line=True)}",
                          partial(app.navigate, "view", name)))
        return items

    async def discover(self) -> Hits:
        for text, help_text, command in self._commands():
            yield DiscoveryHit(prompt(text, help_text), command, text=text)

    async def search(self, query: str) -> Hits:
        matcher = self.matcher(query)
        for text, help_text, command in self._commands():
            score = matcher.match(text)
            if score > 0:
                yield Hit(score, prompt(text, help_text), command, text=text)
        app: Any = self.app
        for project_id, name in getattr(self, "_names", []):
            label = f":project {clean(name, one_line=True)}"
            score = matcher.match(label)
            if score > 0:
                yield Hit(score, prompt(label, f"profiles of project {project_id}"),
                          partial(app.navigate, "project", project_id), text=label)
