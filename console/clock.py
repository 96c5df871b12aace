"""Time as archon stores it, a clock that screenshots can freeze for display, and the real
clock every write uses.

Archon writes `CURRENT_TIMESTAMP` text (`YYYY-MM-DD HH:MM:SS`, UTC) and some values in ISO 8601;
both must compare as instants, never as raw text.
"""

from __future__ import annotations

import os
import re
from datetime import datetime, timedelta, timezone
from collections.abc import Callable  # (not typing: the start-up budget, issue 22)

Clock = Callable[[], datetime]

_FROZEN_ENV = "ARCHON_CONSOLE_NOW"


def frozen_now() -> datetime | None:
    """The instant `$ARCHON_CONSOLE_NOW` freezes the *displayed* clock at, if it is set.

    A value that is not a time (`nan`, `inf`, `2026-13-45`) is a usage error, never ignored: a
    clock silently left running would show the operator other times than the ones they asked for.
    """
    frozen = os.environ.get(_FROZEN_ENV)
    if not frozen:
        return None
    at = parse_time(frozen)
    if at is None:
        from console.errors import UsageError

        raise UsageError(f"${_FROZEN_ENV} is not a time: use YYYY-MM-DD HH:MM:SS (UTC) or ISO 8601, or unset it.")
    return at


def real_clock() -> datetime:
    return datetime.now(timezone.utc).replace(microsecond=0)


def system_clock() -> datetime:
    """Now for reading and rendering; `$ARCHON_CONSOLE_NOW` freezes it (screenshots, demos)."""
    return frozen_now() or real_clock()


def write_clock() -> datetime:
    """Now for every write: always the real clock.

    The one rule for writes (issue 8, rule 4): `$ARCHON_CONSOLE_NOW` may freeze what is shown, but
    a decision, an expiry, a claim or an activation stamped with a made-up time would be judged
    by archon against the real one (a request approved after it expired, live requests expired
    early). Commands and screens take `now` for a write from `Context.write_now()` /
    `Session.write_now()`, which call this.
    """
    return real_clock()


def frozen_write_note(used: datetime) -> str | None:
    """What a write says while `$ARCHON_CONSOLE_NOW` is set: the real clock was used, not the frozen one."""
    frozen = frozen_now()
    if frozen is None:
        return None
    return (f"Note: $ARCHON_CONSOLE_NOW ({db_time(frozen)} UTC) freezes only what is shown; this write used "
            f"the real clock ({db_time(used)} UTC).")


class ScreenClock:
    """The one clock every screen reads "now" from (console/tui/session.py `Session.now`): every
    countdown, "… ago", expiry colour and staleness on every screen, and the `now` the screens hand
    to the services that read for them.

    Live, it is the reading clock (`system_clock`, or whatever the context was given). Over a support
    snapshot (`inspect`) it can instead stand still at the instant the snapshot is "as of"
    (console/models/support.py `SupportInfo.as_of`): a day-old customer file then shows what its
    owner saw, not everything expired. `toggle` switches between the two. Writes never read it
    (`write_clock`); a snapshot is read-only anyway.
    """

    def __init__(self, live: Clock) -> None:
        self.live = live
        self.snapshot_at: datetime | None = None
        self.snapshot_why = ""
        self.as_of = False

    def __call__(self) -> datetime:
        if self.as_of and self.snapshot_at is not None:
            return self.snapshot_at
        return self.live()

    def pin(self, at: datetime, why: str) -> None:
        """Stand still at `at` (`why`: where that time comes from, in words)."""
        self.snapshot_at, self.snapshot_why, self.as_of = at, why, True

    def toggle(self) -> bool:
        """Between the snapshot's time and now; False when there is no snapshot time to go back to."""
        if self.snapshot_at is None:
            return False
        self.as_of = not self.as_of
        return True

    @property
    def label(self) -> str:
        """Which clock the screens use, for the header: "as of 2026-12-01 14:03Z" or "as of now"."""
        if self.as_of and self.snapshot_at is not None:
            return "as of " + self.snapshot_at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%MZ")
        return "as of now"

    @property
    def sentence(self) -> str:
        if self.as_of and self.snapshot_at is not None:
            return f"Times are shown as of {db_time(self.snapshot_at)} UTC, {self.snapshot_why}."
        return "Times are shown as of now (the running clock)."


def fixed_clock(at: datetime) -> Clock:
    return lambda: at


def parse_time(value: object) -> datetime | None:
    """Parse archon's timestamp forms; naive values are UTC. None for what is not a time, whatever
    it is (`nan`, `inf`, an epoch or a date beyond the calendar): this never raises."""
    try:
        return _parse_time(value)
    except (ValueError, OverflowError, OSError):
        return None


_NUMBER = re.compile(r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?")


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _parse_time(value: object) -> datetime | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    text = str(value).strip()
    if not text:
        return None
    if (isinstance(value, (int, float)) and not isinstance(value, bool)) or _NUMBER.fullmatch(text):
        # epoch milliseconds, as JavaScript writes them, read before ISO 8601: fromisoformat takes
        # 1712030400000 (2024-04-02) for the basic-format date 1712-03-04
        number = float(text)
        if number > 1e11:
            # Milliseconds counted exactly: divided as a float, 2243's instants read back a
            # microsecond short and printed one millisecond early.
            exact = int(text) if isinstance(value, int) or text.lstrip("+").isdigit() else number
            return _EPOCH + timedelta(milliseconds=exact)
        return datetime.fromtimestamp(number, timezone.utc)
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        try:  # nan, inf and other spellings float() reads
            number = float(text)
        except ValueError:
            return None
        return datetime.fromtimestamp(number, timezone.utc)
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc)


# --- the one form of an instant in --json --------------------------------------------------------
# Archon stores `YYYY-MM-DD HH:MM:SS` text, ISO 8601 (with or without an offset) and epoch
# milliseconds, so printing values as stored gave scripts three forms. Every `--json` output (and a
# hook's stdin) prints an instant as JavaScript's `toISOString()` does: UTC, milliseconds always,
# `Z` (`2026-12-02T03:31:09.000Z`): one fixed width, so the text sorts as time does across hosts and
# releases. `audit --format jsonl` writes the same form in SQL (console/services/audit.py `_AT`). A
# field is an instant by its name: `at`, `since`, `until`, `now`, or ending in `_at` (archon's columns and
# the console's own). A value that is not a time (hostile text, `nan`) stays as stored, so nothing a
# reader might need is lost; the database is never changed, only what `--json` prints.

_TIME_KEYS = frozenset({"at", "since", "until", "now"})
# Parsed copies of archon's own JSON documents (`action_json`, `authority_json`): their content is
# archon's, printed as archon wrote it, whatever its keys are called.
_DOCUMENT_KEYS = frozenset({"action", "authority"})


def json_time(value: object) -> object:
    """An instant in the one `--json` form; anything that is not one, as it is."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return value
    at = parse_time(value)
    if at is None:
        return value
    return (f"{at.year:04d}-{at.month:02d}-{at.day:02d}T{at.hour:02d}:{at.minute:02d}:{at.second:02d}."
            f"{at.microsecond // 1000:03d}Z")


def is_time_key(key: object) -> bool:
    return isinstance(key, str) and (key in _TIME_KEYS or key.endswith("_at"))


def json_times(value: object) -> object:
    """`value` (a `--json` document) with every instant-named field in the one form (`json_time`);
    a list under such a name (`activated_at`) has each of its items converted."""
    if isinstance(value, dict):
        return {k: (_times_of(v) if is_time_key(k) else v if k in _DOCUMENT_KEYS else json_times(v))
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_times(v) for v in value]
    return value


def _times_of(value: object) -> object:
    if isinstance(value, (list, tuple)):
        return [_times_of(v) for v in value]
    if isinstance(value, dict):
        return json_times(value)
    return json_time(value)


# A text bound wide enough for any stored form of an instant (ISO offsets shift dates by < 1 day):
# a comparison on the stored text lets an index narrow the range, and `julianday` then decides exactly.
TEXT_SLACK = timedelta(days=1)


def db_time(at: datetime) -> str:
    """The `CURRENT_TIMESTAMP` form archon's defaults write."""
    return at.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def seconds_between(later: datetime, earlier: datetime) -> int:
    return int((later - earlier).total_seconds())


# --- time in words ---------------------------------------------------------------------------
# The one spelling of a duration and of a time relative to now, for every sentence, table and
# screen: humanize's words ("4 minutes", "a moment"), "in ..." ahead of now, "... ago" behind it.

def duration(seconds: float | None) -> str:
    """How long, in words ("4 minutes", "a moment"); "an unknown time" when it cannot be read."""
    if seconds is None or seconds == float("inf"):
        return "an unknown time"
    return _words(timedelta(seconds=max(0.0, seconds)))


def relative(value: object, now: datetime, *, unknown: str = "-", present: str | None = None,
             ahead: float = 0.0) -> str:
    """`value` (any stored form of an instant) as "in 12 minutes" / "3 hours ago"; `unknown` when it
    is not a time. With `present`, a time within a second of now (or up to `ahead` seconds ahead of
    it: a clock slightly ahead of ours) is that word instead ("now", "just now")."""
    at = parse_time(value)
    if at is None:
        return unknown
    delta = at - now
    seconds = delta.total_seconds()
    if present is not None and (abs(seconds) < 1 or 0 < seconds < ahead):
        return present
    if seconds >= 0:
        return "in " + _words(delta)
    return _words(-delta) + " ago"


def ago(value: object, now: datetime) -> str:
    """When something happened, inside a sentence: "4 minutes ago"; "just now" for this second (or a
    writer's clock up to a minute ahead of ours); "at an unknown time" when it cannot be read."""
    return relative(value, now, unknown="at an unknown time", present="just now", ahead=60)


def _words(delta: timedelta) -> str:
    """humanize's `naturaldelta(delta)` (months on, seconds the smallest unit, English), word for
    word: importing humanize (and typing with it) cost every command that prints a time a twentieth
    of its start (issue 22). tests/test_one_home.py holds the two to the same words."""
    delta = abs(delta)
    years, days = delta.days // 365, delta.days % 365
    months = round(days / 30.5)
    if years == 0 and days < 1:
        seconds = delta.seconds
        if seconds == 0:
            return "a moment"
        if seconds == 1:
            return "a second"
        if seconds < 60:
            return f"{seconds} seconds"
        if seconds < 3600:
            minutes = round(seconds / 60)
            return "a minute" if minutes == 1 else "an hour" if minutes == 60 else f"{minutes} minutes"
        hours = round(seconds / 3600)
        return "an hour" if hours == 1 else "a day" if hours == 24 else f"{hours} hours"
    if years == 0:
        if days == 1:
            return "a day"
        if months == 0:
            return f"{days} days"
        return "a month" if months == 1 else "a year" if months == 12 else f"{months} months"
    if years == 1:
        if months == 0:
            return "a year" if days == 0 else "1 year, 1 day" if days == 1 else f"1 year, {days} days"
        if months == 1:
            return "1 year, 1 month"
        if months == 12:
            return "2 years"
        return f"1 year, {months} months"
    return f"{round(delta.days / 365):,} years"


__all__ = [
    "Clock",
    "ScreenClock",
    "TEXT_SLACK",
    "ago",
    "db_time",
    "duration",
    "fixed_clock",
    "frozen_now",
    "frozen_write_note",
    "parse_time",
    "real_clock",
    "relative",
    "seconds_between",
    "system_clock",
    "timedelta",
    "timezone",
    "write_clock",
]
