"""Options several command families share, so they read and default the same way everywhere."""

from __future__ import annotations

import argparse
import math
import os
import sys
from datetime import timedelta

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Callable


class OptionParser(argparse.ArgumentParser):
    """argparse's parser with the help width found without shutil: argparse makes a formatter for
    every argument added (to check its metavar), and each asked `shutil.get_terminal_size`,
    importing shutil (and zlib, bz2, lzma with it) on every start (issue 22). Every parser of the
    CLI, parents included, is one (console/cli/parser.py `ConsoleArgumentParser`)."""

    def _get_formatter(self):
        return self.formatter_class(prog=self.prog, width=_help_width())


def _help_width() -> int:
    """`shutil.get_terminal_size().columns - 2`, argparse's help width: $COLUMNS, else the width of
    the terminal on stdout, else 80."""
    try:
        columns = int(os.environ["COLUMNS"])
    except (KeyError, ValueError):
        columns = 0
    if columns <= 0:
        try:
            columns = os.get_terminal_size(sys.__stdout__.fileno()).columns
        except (AttributeError, ValueError, OSError):
            columns = 0
    return (columns or 80) - 2


def finite_number(what: str, *, minimum: float = 0, maximum: float) -> Callable[[str], float]:
    """An argparse type for a real number in [minimum, maximum].

    `float()` accepts "nan", "inf" and "1e308"; each of them later broke an int() conversion or a
    SQLite binding deep inside a command, so the range is checked where the text is read.
    """

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number of {what}: {text!r}") from None
        if not math.isfinite(value) or not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(
                f"{what} must be between {minimum:,.10g} and {maximum:,.10g}, not {text!r}")
        return value

    return parse


def whole_number(what: str = "items", *, minimum: int = 0, maximum: int = 10**9) -> Callable[[str], int]:
    """An argparse type for an integer in [minimum, maximum] (underscores and commas allowed)."""

    def parse(text: str) -> int:
        try:
            value = int(text.replace("_", "").replace(",", ""))
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
        if not minimum <= value <= maximum:
            raise argparse.ArgumentTypeError(f"{what} must be between {minimum:,} and {maximum:,}, not {text!r}")
        return value

    return parse


def user_path(what: str, thing: str = "file") -> Callable[[str], str]:
    """An argparse type for a path a person types: a leading `~` or `~user` is expanded here, by the
    one `expand_home` (console/db/paths.py), so `~nosuch/x.db` is one usage sentence naming the
    argument (exit 2), never pathlib's "Could not determine home directory" as an unexpected error
    from deep inside a command. An empty path (an unset shell variable) is refused as `--db ""` is:
    it became "." (". is a directory", a path nobody typed) or silently meant the default (`doctor ""`
    checked the --db database, `--cursor ""` kept no cursor). Anything else is kept exactly as typed."""

    def parse(text: str) -> str:
        if not text.strip():
            from console.errors import UsageError

            raise UsageError(f"{what} was given an empty path.",
                             f"Name the {thing}" + (f", or leave {what} out." if what.startswith("--") else "."))
        if not text.startswith("~"):
            return text
        from console.db.paths import expand_home

        return str(expand_home(text, what))

    return parse


# Ten years: longer than any claim, expiry window or stale limit that means something.
MAX_MINUTES = 10 * 366 * 24 * 60
minutes = finite_number("minutes", maximum=MAX_MINUTES)


def stale_after_parent() -> argparse.ArgumentParser:
    """`--stale-after MINUTES` (also spelled `--stale-minutes`), default from the environment."""
    parent = OptionParser(add_help=False)
    parent.add_argument(
        "--stale-after", "--stale-minutes", dest="stale_after", type=minutes, metavar="MINUTES",
        default=None,
        help="age after which an operation claim counts as stale, and a request handed to archon as "
        "overdue (default $ARCHON_CONSOLE_STALE_MINUTES, else 15)",
    )
    return parent


def stale_after(args: argparse.Namespace) -> timedelta:
    from console.services.environment_rules import default_stale_after

    value = getattr(args, "stale_after", None)
    return default_stale_after() if value is None else timedelta(minutes=value)
