"""Copy that works locally and over SSH, says which way it went, and never carries a control.

pyperclip needs a local clipboard (a display, pbcopy, clip.exe); over SSH or in a bare tmux it
fails or, worse, writes to a clipboard the operator cannot see. OSC 52 asks the terminal itself.

What is copied gets pasted into a shell. An id holding a control character (`ESC [201~` ends
bracketed paste early; a tab completes), a line break, `$(...)`, a quote or a space would act there,
so `y` copies only an id that is one plain shell word, and refuses anything else with its reason,
never cleaning it into something that looks like the id but is not. `copy_json` (`Y`) is the way to take
such a value: JSON with every control and non-ASCII character escaped (`\\u001b`), whose only
line breaks are its own indentation. This module and `GuardedApp.copy_to_clipboard`
(`widgets/terminal_guard.py`) are the only ways to a clipboard (a test forbids others).
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from textual.app import App

from widgets.safe_json import finite
from widgets.safe_text import clean, first_unsafe, is_shell_word


class CopyRefused(Exception):
    """The text was not copied; `reason` says why in words for a toast."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def copy_refusal(text: str, *, structural_lines: bool = False) -> str | None:
    """Why `text` must not reach a clipboard, or None. Plain copies (`y`) take only one word a shell
    reads as exactly itself (`widgets/safe_text.py` `is_shell_word`, the test completion uses too):
    an id holding `$(...)`, a backtick, `;` or a space would run or add something when pasted after
    a command. `structural_lines` (JSON, a text selection) allows the newlines of indented JSON and
    any printable text, never a control or invisible character."""
    found = first_unsafe(text)
    if found or "\t" in text:
        shown = clean(found.group()) if found else "\u2409"
        return f"it holds a control character or an invisible one ({shown}) that could steer a terminal or shell"
    if structural_lines:
        return None
    if "\n" in text or "\r" in text:
        return "it holds a line break, which a shell would run as Enter"
    if is_shell_word(text):
        return None
    if not text or text[0] in "-=":
        return "it is empty or starts with - or =, which a shell or command would read as something else"
    odd = next(c for c in text if not is_shell_word("a" + c))
    return (f"it holds {clean(odd)!r}, which a shell would act on when pasted (only ASCII letters, digits "
            "and . _ : @ + = , / - are copied as one word)")


def local_clipboard_available() -> bool:
    if os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"):
        return False
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def copy(app: App, text: str, *, structural_lines: bool = False) -> str:
    """Copy `text`; returns how ("system clipboard" or "terminal clipboard (OSC 52)"). Raises
    `CopyRefused` when `text` holds a control character or (unless `structural_lines`) is not one
    plain shell word."""
    why = copy_refusal(text, structural_lines=structural_lines)
    if why is not None:
        raise CopyRefused(why)
    if local_clipboard_available():
        try:
            import pyperclip

            pyperclip.copy(text)
            return "system clipboard"
        except Exception:  # pyperclip raises its own exception types, or none at all
            pass
    app.copy_to_clipboard(text)
    return "terminal clipboard (OSC 52)"


# Characters a shell acts on inside the quotes people paste JSON into (`echo '...' | jq`): a `'`
# ends the quotes, `$(`, a backtick or `!` runs or recalls something inside double quotes. As JSON
# escapes the text stays exact for any JSON reader.
_SHELL_ACTIVE = str.maketrans({c: f"\\u{ord(c):04x}" for c in "'$`!"})


def json_text(payload: Any) -> str:
    """What `Y` copies: indented JSON, every control and non-ASCII character a `\\uXXXX` escape, and so
    are the characters a shell acts on inside quotes (`'`, `$`, backtick, `!`), so the copy can be
    pasted into `echo '...' | jq` without running anything."""
    options = {"indent": 2, "sort_keys": True, "default": str, "ensure_ascii": True, "allow_nan": False}
    try:
        text = json.dumps(payload, **options)
    except ValueError:  # a non-finite number: strict JSON names it as a string, as --json does
        text = json.dumps(finite(payload), **options)
    return text.translate(_SHELL_ACTIVE)


def copy_json(app: App, payload: Any) -> str:
    return copy(app, json_text(payload), structural_lines=True)
