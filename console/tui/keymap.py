"""User key overrides: binding id -> keys, read from a TOML file.

Every binding in the console has an `id` (`approvals.approve`, `app.help` ...); Textual's
`App.set_keymap` rebinds by id, so the file only names ids and keys:

    # ~/.config/archon-console/tui/keymap.toml
    [keys]
    "approvals.approve" = "A"
    "app.command_line" = "colon,semicolon"

`$ARCHON_CONSOLE_KEYMAP` points at another file. A broken file is reported, never fatal.
"""

from __future__ import annotations

import os
from pathlib import Path

from console.small_files import SettingsUnusable, read_toml

ENV = "ARCHON_CONSOLE_KEYMAP"


def keymap_path() -> Path:
    explicit = os.environ.get(ENV)
    if explicit:
        from console.db.paths import expand_home  # `~nosuch/...` is one sentence, not a RuntimeError

        return expand_home(explicit, ENV)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "archon-console" / "keymap.toml"


def load_keymap(path: Path | None = None) -> tuple[dict[str, str], str | None]:
    """The overrides, and a sentence saying what was wrong with the file (None when fine)."""
    path = path or keymap_path()
    try:
        data = read_toml(path, "the keymap")
        keys = {} if data is None else data.get("keys", {})
        if not isinstance(keys, dict):
            raise SettingsUnusable("the keymap", path, "[keys] must be a table of id = \"keys\"")
    except SettingsUnusable as exc:
        return {}, str(exc)
    good = {str(k): str(v) for k, v in keys.items() if isinstance(v, str) and v.strip()}
    bad = sorted(set(keys) - set(good))
    warning = f"Ignored keymap entries without a key string: {', '.join(bad)}" if bad else None
    return good, warning


def unknown_ids(overrides: dict[str, str], known: set[str]) -> str | None:
    """A sentence naming the ids the console has no binding for (a typo rebinds nothing), or None."""
    unknown = sorted(set(overrides) - known)
    if not unknown:
        return None
    return (f"The keymap names binding ids the console does not have, so they change nothing: "
            f"{', '.join(unknown)}. Ids are like approvals.approve or app.help; ? lists each screen's keys.")


MODAL_MODULES = ("bulk_results", "choose", "command_line", "confirm", "error", "help", "reason", "typed")


def known_binding_ids(app_class: type) -> set[str]:
    """Every binding id a keymap may name: the app's, every screen's and dialog's, the table's.
    Imports every screen, so it runs only when a keymap file has entries."""
    import importlib

    from textual.binding import Binding

    from console.tui.screens.base import ConsoleScreen
    from console.tui.screens.registry import SCREENS
    from widgets.lazy_table import LazyTable

    classes: list[type] = [app_class, ConsoleScreen, LazyTable]
    classes += [entry.screen_class() for entry in SCREENS]
    for name in MODAL_MODULES:
        module = importlib.import_module(f"console.tui.screens.{name}")
        classes += [v for v in vars(module).values() if isinstance(v, type) and hasattr(v, "BINDINGS")]
    ids = set()
    for cls in classes:
        for klass in cls.__mro__:
            for binding in vars(klass).get("BINDINGS", ()):
                if isinstance(binding, Binding) and binding.id:
                    ids.add(binding.id)
    return ids


__all__ = ["known_binding_ids", "keymap_path", "load_keymap", "unknown_ids"]
