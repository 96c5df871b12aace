"""Telling the approver that a request arrived, wherever the console is: toast, bell, desktop, title.

What the terminal receives:
- the bell (`App.bell`);
- a desktop notification through the terminal itself, so it works over SSH and needs nothing on
  the remote host: OSC 9 (`ESC ] 9 ; text BEL`: iTerm2, WezTerm, Windows Terminal, kitty, foot,
  ghostty) and, where the terminal is known to speak it, OSC 777 (`ESC ] 777 ; notify ; title ;
  body BEL`: rxvt, foot, WezTerm, ghostty, Konsole), always led by `archon-console: `;
- the window title `archon · N pending` (OSC 2), so a tmux window list or a taskbar shows the count;
  the previous title is pushed at start and popped at exit (XTWINOPS 22/23), as vim does.

Each is switchable in the config file (`[notify]` in ~/.config/archon-console/config.toml, or the
file `$ARCHON_CONSOLE_CONFIG` names) and `--quiet` turns the toast, bell and desktop ones off.
Database text reaches the terminal here too, inside escape sequences: it passes the one sanitiser
(`widgets.safe_text.clean`), which pictures ESC and BEL, so a project name cannot end the sequence
early; `;` is replaced in OSC 777's fields, where it separates them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from console.small_files import SettingsUnusable, read_toml

from widgets.safe_text import clean

CONFIG_ENV = "ARCHON_CONSOLE_CONFIG"
DESKTOP_CHOICES = ("auto", "osc9", "osc777", "both", "off")
_OSC777_TERMINALS = ("WezTerm", "ghostty", "foot", "konsole")
SHOWN_IN_TOAST = 3
TEXT_MAX = 180
DESKTOP_PREFIX = "archon-console: "


@dataclass(frozen=True)
class NotifyConfig:
    toast: bool = True
    bell: bool = True
    desktop: str = "auto"
    title: bool = True

    def quiet(self) -> "NotifyConfig":
        return replace(self, toast=False, bell=False, desktop="off")


def config_path() -> Path:
    explicit = os.environ.get(CONFIG_ENV)
    if explicit:
        from console.db.paths import expand_home  # `~nosuch/...` is one sentence, not a RuntimeError

        return expand_home(explicit, CONFIG_ENV)
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "archon-console" / "config.toml"


def load_notify_config(path: Path | None = None, *, quiet: bool = False) -> tuple[NotifyConfig, str | None]:
    """The `[notify]` settings and a sentence about what was wrong with the file (never fatal)."""
    path = path or config_path()
    config, warning = NotifyConfig(), None
    what = "the notification settings"
    try:
        data = read_toml(path, what) or {}
        section = data.get("notify", {})
        if not isinstance(section, dict):
            raise SettingsUnusable(what, path, "[notify] must be a table")
        values: dict[str, Any] = {}
        for key in ("toast", "bell", "title"):
            if key in section:
                if not isinstance(section[key], bool):
                    raise SettingsUnusable(what, path, f"notify.{key} must be true or false")
                values[key] = section[key]
        if "desktop" in section:
            if section["desktop"] not in DESKTOP_CHOICES:
                raise SettingsUnusable(what, path, f"notify.desktop must be one of {', '.join(DESKTOP_CHOICES)}")
            values["desktop"] = section["desktop"]
        unknown = sorted(set(section) - {"toast", "bell", "title", "desktop"})
        if unknown:
            raise SettingsUnusable(what, path, f"unknown notify settings: {', '.join(map(str, unknown))}")
        config = NotifyConfig(**values)
    except SettingsUnusable as exc:
        warning = str(exc)
    return (config.quiet() if quiet else config), warning


def _field(text: object, limit: int = TEXT_MAX) -> str:
    out = clean(text, one_line=True)
    return out if len(out) <= limit else out[: limit - 1] + "…"


def _named(text: str) -> str:
    """`archon-console: ` and the text, cut to fit: a desktop notification is shown outside the
    terminal, where nothing else says which program sent it, and its words come from the database
    (a request id "Your session expired, re-enter your password at ..." must not pass for the
    system's own). The prefix is never cut."""
    return DESKTOP_PREFIX + _field(text, TEXT_MAX - len(DESKTOP_PREFIX))


def osc9(text: str) -> str:
    return f"\x1b]9;{_named(text)}\x07"


def osc777(title: str, body: str) -> str:
    return f"\x1b]777;notify;{_named(title).replace(';', ',')};{_field(body).replace(';', ',')}\x07"


def title_sequence(text: str) -> str:
    return f"\x1b]2;{_field(text, 80)}\x07"


PUSH_TITLE = "\x1b[22;0t"
POP_TITLE = "\x1b[23;0t"


def wants_osc777(setting: str, environ: dict[str, str] | None = None) -> bool:
    environ = os.environ if environ is None else environ
    if setting in ("osc777", "both"):
        return True
    if setting != "auto":
        return False
    program = environ.get("TERM_PROGRAM", "")
    term = environ.get("TERM", "")
    return program in _OSC777_TERMINALS or term.startswith(("rxvt", "foot", "konsole"))


def summary(changes: Sequence[Any]) -> tuple[str, str]:
    """(title, body) naming the new requests: each by id, project and kind, up to three."""
    def one(c: Any) -> str:
        return f"{c.request_id} in {c.project_name or c.project_id} ({c.kind or 'request'})"

    if len(changes) == 1:
        return "Approval needed", one(changes[0])
    shown = ", ".join(one(c) for c in changes[:SHOWN_IN_TOAST])
    more = f" and {len(changes) - SHOWN_IN_TOAST} more" if len(changes) > SHOWN_IN_TOAST else ""
    return f"{len(changes)} approvals needed", shown + more


def title_text(pending: int | None) -> str:
    return "archon" if pending is None else f"archon · {pending} pending"


class Attention:
    """What the app does when requests arrive; `write` sends raw sequences to the terminal."""

    def __init__(self, config: NotifyConfig, write: Callable[[str], None], environ: dict[str, str] | None = None):
        self.config = config
        self._write = write
        self._osc777 = wants_osc777(config.desktop, environ)
        self._title_pushed = False
        self.last_title: str | None = None
        # Set when the terminal hung up (SIGHUP): nothing may be written any more. Textual's writer
        # queue is bounded and nobody drains it once the terminal is gone, so a write then blocks
        # the exit for good (a console that outlived its SSH session).
        self.terminal_gone = False

    def arrived(self, app: Any, changes: Sequence[Any]) -> None:
        if not changes or self.terminal_gone:
            return
        title, body = summary(changes)
        if self.config.toast:
            app.notify(_field(body, 400), title=title, timeout=10, markup=False)
        if self.config.bell:
            app.bell()
        if self.config.desktop != "off":
            if self.config.desktop in ("auto", "osc9", "both"):
                self._write(osc9(f"{title}: {body}"))
            if self._osc777:
                self._write(osc777(title, body))

    def count(self, pending: int | None) -> None:
        if not self.config.title or self.terminal_gone:
            return
        text = title_text(pending)
        if text == self.last_title:
            return
        if not self._title_pushed:
            self._write(PUSH_TITLE)
            self._title_pushed = True
        self._write(title_sequence(text))
        self.last_title = text

    def restore(self) -> None:
        if self._title_pushed and not self.terminal_gone:
            self._write(POP_TITLE)
            self._title_pushed = False


__all__ = ["Attention", "NotifyConfig", "config_path", "load_notify_config", "osc777", "osc9", "summary",
           "title_sequence", "title_text", "wants_osc777"]
