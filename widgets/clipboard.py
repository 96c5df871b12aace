"""Copy that works locally and over SSH, and says which way it went.

pyperclip needs a local clipboard (a display, pbcopy, clip.exe); over SSH or in a bare tmux it
fails or, worse, writes to a clipboard the operator cannot see. OSC 52 asks the terminal itself.
"""

from __future__ import annotations

import os
import sys

from textual.app import App


def local_clipboard_available() -> bool:
    if os.environ.get("SSH_CONNECTION") or os.environ.get("SSH_TTY"):
        return False
    if sys.platform in ("darwin", "win32"):
        return True
    return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))


def copy(app: App, text: str) -> str:
    """Copy `text`; returns how ("system clipboard" or "terminal clipboard (OSC 52)")."""
    if local_clipboard_available():
        try:
            import pyperclip

            pyperclip.copy(text)
            return "system clipboard"
        except Exception:  # pyperclip raises its own exception types, or none at all
            pass
    app.copy_to_clipboard(text)
    return "terminal clipboard (OSC 52)"
