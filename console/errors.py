"""The three ways an operation can end badly, each with its own exit code.

Every layer raises these instead of printing, so the CLI and the TUI can say the same
sentence in their own way. None of them carries a traceback to the user.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_UNUSABLE = 3
EXIT_PARTIAL = 4  # over several hosts (--host/--group/--fleet): some hosts did not answer (console/cli/fleet_views.py)


class ConsoleError(Exception):
    """Base class: a plain sentence for the operator, and what would make it possible."""

    exit_code = EXIT_REFUSED

    def __init__(self, reason: str, hint: str | None = None):
        # A refusal is one sentence (and one hint), whatever it quotes: the database text it names
        # (an account, a claim kind, a time) cannot break it into a second, forged line. Made one
        # line here, where every refusal is born, so no caller can forget it.
        from widgets.safe_text import clean

        reason = clean(reason, one_line=True)
        hint = clean(hint, one_line=True) if hint is not None else None
        super().__init__(reason)
        self.reason = reason
        self.hint = hint

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
