"""Options several command families share, so they read and default the same way everywhere."""

from __future__ import annotations

import argparse
from datetime import timedelta


def minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of minutes: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def stale_after_parent() -> argparse.ArgumentParser:
    """`--stale-after MINUTES` (also spelled `--stale-minutes`), default from the environment."""
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument(
        "--stale-after", "--stale-minutes", dest="stale_after", type=minutes, metavar="MINUTES",
        default=None,
        help="age after which an operation claim counts as stale, and a request handed to archon as "
        "overdue (default $ARCHON_CONSOLE_STALE_MINUTES, else 15)",
    )
    return parent


def stale_after(args: argparse.Namespace) -> timedelta:
    from console.services.environments import default_stale_after

    value = getattr(args, "stale_after", None)
    return default_stale_after() if value is None else timedelta(minutes=value)
