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


__all__ = ["keymap_path", "load_keymap", "unknown_ids"]
