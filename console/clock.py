"""Time as archon stores it, and a clock that tests and screenshots can freeze.

Archon writes `CURRENT_TIMESTAMP` text (`YYYY-MM-DD HH:MM:SS`, UTC) and some values in ISO 8601;
both must compare as instants, never as raw text.
"""

from __future__ import annotations

import os
from datetime import datetime, timedelta, timezone
from typing import Callable

Clock = Callable[[], datetime]

_FROZEN_ENV = "ARCHON_CONSOLE_NOW"


def system_clock() -> datetime:
    """Now in UTC; `$ARCHON_CONSOLE_NOW` freezes it (screenshots, demos)."""
    frozen = os.environ.get(_FROZEN_ENV)
    if frozen:
        parsed = parse_time(frozen)
        if parsed is not None:
            return parsed
    return datetime.now(timezone.utc).replace(microsecond=0)


def fixed_clock(at: datetime) -> Clock:
    return lambda: at


def parse_time(value: object) -> datetime | None:
    """Parse archon's timestamp forms; naive values are UTC. None for what is not a time."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    text = str(value).strip()
    if not text:
        return None
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:  # epoch milliseconds, as JavaScript writes them
            number = float(text)
        except ValueError:
            return None
        if number > 1e11:
            number /= 1000.0
        return datetime.fromtimestamp(number, timezone.utc)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


def db_time(at: datetime) -> str:
    """The `CURRENT_TIMESTAMP` form archon's defaults write."""
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def seconds_between(later: datetime, earlier: datetime) -> int:
    return int((later - earlier).total_seconds())


__all__ = [
    "Clock",
    "db_time",
    "fixed_clock",
    "parse_time",
    "seconds_between",
    "system_clock",
    "timedelta",
    "timezone",
]
