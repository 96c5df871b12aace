"""Compact times and sizes for tables and panels ("14m05s", "3h", "1.7 GB").

A time relative to now in words ("in 14 minutes", "3 hours ago") has one home, console/clock.py
`relative`, shared by the screens, the commands and the services' sentences."""

from __future__ import annotations

from datetime import datetime

import humanize


def countdown(when: datetime | None, now: datetime) -> str:
    """A compact live countdown: 14m05s, 2h03m, 3d04h; negative values say 'expired'."""
    if when is None:
        return "—"
    seconds = int((when - now).total_seconds())
    if seconds <= 0:
        return "expired"
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    return f"{minutes}m{secs:02d}s"


def plural(count: int, word: str, plural_word: str | None = None) -> str:
    """'1 environment', '2 environments', '0 errors' (with thousands separators)."""
    return f"{count:,} {word if count == 1 else (plural_word or word + 's')}"


def age(seconds: float | None) -> str:
    """How old, in one unit and at most four characters: 45s, 28m, 3h, 29d."""
    if seconds is None:
        return "?"
    seconds = max(0, int(seconds))
    for unit, size_ in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size_:
            return f"{seconds // size_}{unit}"
    return f"{seconds}s"


def exact(when: datetime | None) -> str:
    return "—" if when is None else when.strftime("%Y-%m-%d %H:%M:%S UTC")


def size(n_bytes: int | None) -> str:
    return "—" if n_bytes is None else humanize.naturalsize(n_bytes)
