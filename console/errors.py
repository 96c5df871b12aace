"""The three ways an operation can end badly, each with its own exit code.

Every layer raises these instead of printing, so the CLI and the TUI can say the same
sentence in their own way. None of them carries a traceback to the user.
"""

from __future__ import annotations

from console.records import dataclass
from collections.abc import Callable, Sequence  # (not typing: the start-up budget, issue 22)

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNUSABLE = 3
EXIT_PARTIAL = 4  # over several hosts (--host/--group/--fleet): some hosts did not answer (console/cli/fleet_views.py)


@dataclass(frozen=True)
class Remedy:
    """The way out a refusal names, said by each front end its own way: the command line as
    `option` (what to pass or run), a screen as the key bound to its `action` when it has one (a
    screen without that key says `option` too). So the console never tells someone at a screen
    to "use --takeover" when `t` does it, and the sentence is written once."""

    option: str
    action: str


Said = str | Sequence[str | Remedy]
# A screen's answer to "which key does `action`?": its key as shown ("t"), or None when it has none.
KeyFor = Callable[[str], str | None]


def _parts(text: Said) -> tuple[str | Remedy, ...]:
    return (text,) if isinstance(text, str) else tuple(text)


def _render(parts: tuple[str | Remedy, ...], key_for: KeyFor | None) -> str:
    from widgets.safe_text import clean

    out = []
    for part in parts:
        if isinstance(part, Remedy):
            key = key_for(part.action) if key_for is not None else None
            out.append(f"key {key}" if key else part.option)
        else:
            out.append(part)
    return clean("".join(out), one_line=True)


class ConsoleError(Exception):
    """Base class: a plain sentence for the operator, and what would make it possible. Either may be
    plain text or text with `Remedy` parts; `reason` and `hint` are the command line's words,
    `render(key_for)` a screen's."""

    exit_code = EXIT_REFUSED

    def __init__(self, reason: Said, hint: Said | None = None):
        # A refusal is one sentence (and one hint), whatever it quotes: the database text it names
        # (an account, a claim kind, a time) cannot break it into a second, forged line. Made one
        # line here, where every refusal is born, so no caller can forget it.
        self.reason_parts = _parts(reason)
        self.hint_parts = _parts(hint) if hint is not None else None
        reason_text = _render(self.reason_parts, None)
        super().__init__(reason_text)
        self.reason = reason_text
        self.hint = _render(self.hint_parts, None) if self.hint_parts is not None else None

    def render(self, key_for: KeyFor | None) -> tuple[str, str | None]:
        """The reason and the hint as a screen says them: each `Remedy` as the key `key_for` names."""
        hint = _render(self.hint_parts, key_for) if self.hint_parts is not None else None
        return _render(self.reason_parts, key_for), hint

    def __str__(self) -> str:  # pragma: no cover - trivial
        return self.reason if not self.hint else f"{self.reason} {self.hint}"


class Refusal(ConsoleError):
    """A rule said no. Nothing was written (exit code 1)."""

    exit_code = EXIT_REFUSED


class DatabaseUnusable(ConsoleError):
    """The file cannot be used as an archon database at all (exit code 3)."""

    exit_code = EXIT_UNUSABLE


class UsageError(ConsoleError):
    """The command line itself is wrong (exit code 2)."""

    exit_code = EXIT_USAGE


class MissingArgument(Refusal):
    """A value the command needs was not given (a required --reason left out or blank).

    A usage error on the command line (exit code 2), whichever command it is; still a `Refusal`,
    so the console's dialogs show it like any other.
    """

    exit_code = EXIT_USAGE
