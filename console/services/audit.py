"""The audit trail as one time-ordered stream: approval, environment and profile events.

Why a merge and not one UNION query: each event table is read by its own cursor, sorted by SQLite
(its sorter spills to temporary files, so memory stays flat however many events there are; the
jsonl export sorts only keys and rowids, `_documents`, so it rarely spills at all), and the three
sorted streams are merged in Python holding one row of each (`heapq.merge`). Nothing is
written: the stream runs in one read transaction, so it is one consistent moment of the database.

Times: archon writes `CURRENT_TIMESTAMP` text ("YYYY-MM-DD HH:MM:SS", UTC), ISO 8601, or epoch
milliseconds; every form is normalised inside SQLite to exact UTC ("…T…Z" with milliseconds), which
also orders them. A value SQLite cannot read as a time is kept as stored and sorts first.

`--follow` keys on each table's rowid (its insertion order) after the snapshot; archon only inserts
into these tables (its triggers forbid updates), so a row with a larger rowid is a new event. Rows
deleted with their project are never seen again; that is not a change worth reporting here.
"""

from __future__ import annotations

import heapq
import sqlite3
from console.records import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any, Iterator, NamedTuple

from console.clock import parse_time
from console.db.rows import textual
from console.errors import UsageError

KINDS = ("approval", "environment", "profile")

# SQL that turns archon's timestamp forms into exact UTC text that sorts as time does.
_AT = ("CASE WHEN typeof({c}) IN ('integer', 'real') "
       "THEN strftime('%Y-%m-%dT%H:%M:%fZ', {c} / 1000.0, 'unixepoch') "
       "ELSE coalesce(strftime('%Y-%m-%dT%H:%M:%fZ', {c}), {c}) END")

# One SELECT per kind, every one giving the same named columns in the same order (`COLUMNS`, rowid).
_NAMES = ("at", "kind", "project_id", "subject_id", "event_type", "from_state", "to_state", "actor",
          "actor_class", "reason", "event_id", "sequence", "os_account", "rowid")


_META = "CASE WHEN json_valid(metadata_json) THEN json_extract(metadata_json, '$.{}') END"
# Who acted by the OS account the console recorded (console/services/identity.py, `account_of`:
# `login@host`, `uid N@host`, "(unverified)"), at most 200 characters; NULL for events without it.
_J = "json_extract(metadata_json, '$.{}')"
_ACCOUNT = (
    f"CASE WHEN json_valid(metadata_json) AND {_J.format('os_uid')} IS NOT NULL THEN substr("
    f"coalesce(nullif({_J.format('os_login')}, ''), 'uid ' || {_J.format('os_uid')})"
    f" || coalesce('@' || nullif({_J.format('os_host')}, ''), '')"
    f" || CASE WHEN {_J.format('os_identity')} = 'unverified' THEN ' (unverified)' ELSE '' END, 1, 200) END"
)
# Per kind: its table and, for each field of `_NAMES`, the SQL that reads it and where it comes from:
# the column (or, inside metadata_json, the key) the redactor judges the value by. None only for
# the console's own constants (the kind, NULL, rowid, which is never shown); `redacted` passes every
# other field through the redactor, so no field can be left out of a redacted export.
FIELDS: dict[str, tuple[str, tuple[tuple[str, str | None], ...]]] = {
    "approval": ("approval_request_events", (
        (_AT.format(c="created_at"), "created_at"), ("'approval'", None), ("project_id", "project_id"),
        ("approval_request_id", "approval_request_id"), ("event_type", "event_type"),
        ("from_status", "from_status"), ("to_status", "to_status"), ("actor_reference", "actor_reference"),
        ("actor_classification", "actor_classification"), ("reason", "reason"), ("id", "id"),
        ("sequence", "sequence"), (_ACCOUNT, "os_login"), ("rowid", None))),
    "environment": ("execution_environment_events", (
        (_AT.format(c="created_at"), "created_at"), ("'environment'", None), ("project_id", "project_id"),
        ("environment_id", "environment_id"), ("event_type", "event_type"), ("from_state", "from_state"),
        ("to_state", "to_state"), ("actor_reference", "actor_reference"),
        ("actor_classification", "actor_classification"), ("reason", "reason"), ("id", "id"),
        ("sequence", "sequence"), (_ACCOUNT, "os_login"), ("rowid", None))),
    "profile": ("execution_profile_audit_events", (
        (_AT.format(c="created_at"), "created_at"), ("'profile'", None), ("project_id", "project_id"),
        ("profile_revision_id", "profile_revision_id"), ("event_type", "event_type"),
        ("previous_profile_revision_id", "previous_profile_revision_id"),
        ("profile_revision_id", "profile_revision_id"), (_META.format("actor"), "actor"), ("NULL", None),
        (_META.format("reason"), "reason"), ("id", "id"), ("NULL", None), (_ACCOUNT, "os_login"),
        ("rowid", None))),
}


def _select(table: str, fields: tuple[tuple[str, str | None], ...]) -> str:
    return "SELECT " + ", ".join(f"{e} AS {n}" for (e, _origin), n in zip(fields, _NAMES)) + f" FROM {table}"


_SOURCES = {kind: (table, _select(table, fields)) for kind, (table, fields) in FIELDS.items()}

COLUMNS = ("at", "kind", "project_id", "subject_id", "event_type", "from", "to", "actor", "actor_class",
           "reason", "event_id", "sequence", "os_account")
_WHY_MISSING = {
    "approval": "approval events: none here; this database has no approval_request_events table "
                "(archon added approvals in 1.8.22)",
    "environment": "environment events: none here; this database has no execution_environment_events table",
    "profile": "profile events: none here; this database has no execution_profile_audit_events table "
               "(archon added profile revisions in 1.8.22)",
}


class AuditEvent(NamedTuple):
    """One event of the trail; `to_json` is what jsonl and csv write (exact UTC in `at`).

    A NamedTuple rather than a dataclass: an export builds millions of them."""

    at: str | None
    kind: str
    project_id: str | None
    subject_id: str | None
    event_type: str | None
    from_state: str | None
    to_state: str | None
    actor: str | None
    actor_class: str | None
    reason: str | None
    event_id: str | None
    sequence: int | None
    os_account: str | None = None  # the OS account the console recorded (D21); added last, never renamed

    def to_json(self) -> dict[str, Any]:
        return dict(zip(COLUMNS, self))


@dataclass(frozen=True)
class AuditFilter:
    since: datetime | None = None
    until: datetime | None = None
    project_id: str | None = None
    actor: str | None = None
    kinds: tuple[str, ...] = KINDS


def parse_moment(text: str, now: datetime, *, option: str) -> datetime:
    """A time for --since/--until: archon's timestamp forms, or an age such as 30m, 24h, 7d."""
    raw = (text or "").strip()
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}
    try:
        if len(raw) >= 2 and raw[-1] in units and raw[:-1].isdigit() and len(raw) <= 9:
            return now - timedelta(seconds=int(raw[:-1]) * units[raw[-1]])
        at = None if raw.isdigit() else parse_time(raw)
    except (OverflowError, ValueError, OSError):  # "99999999w", "1e308": no calendar has them
        at = None
    if at is None:
        raise UsageError(f"{option} {raw!r} is not a time; use 'YYYY-MM-DD[ HH:MM[:SS]]' (UTC), ISO 8601, "
                         "or an age such as 30m, 24h or 7d.")
    return at


def _bound(at: datetime) -> str:
    return at.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.") + f"{at.microsecond // 1000:03d}Z"


def union_sql() -> str:
    """The whole trail as one UNION query with the same columns and order: what `make bench` runs in
    the sqlite3 shell as the baseline of `audit --format jsonl`."""
    return " UNION ALL ".join(sql for _, sql in _SOURCES.values()) + " ORDER BY 1, 2, 11"


def missing_kinds(conn: sqlite3.Connection, kinds: tuple[str, ...]) -> list[str]:
    """Plain-words notes for the asked-for kinds this database's release does not have."""
    present = _present_tables(conn)
    return [_WHY_MISSING[k] for k in kinds if _SOURCES[k][0] not in present]


def _present_tables(conn: sqlite3.Connection) -> set[str]:
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _query(kind: str, flt: AuditFilter, *, after_rowid: int | None = None,
           upto_rowid: int | None = None, as_json: bool = False) -> tuple[str, list[Any]]:
    _, select = _SOURCES[kind]
    where, params = [], []
    if flt.project_id is not None:
        # Following: the new rows are a short rowid range; `+` keeps SQLite on it, not the project index.
        where.append("+project_id = ?" if after_rowid is not None else "project_id = ?")
        params.append(flt.project_id)
    if flt.actor is not None:  # the declared name, or the OS login (`login@host...`) that acted
        where.append("(actor = ? OR substr(os_account, 1, length(?) + 1) = ? || '@')")
        params.extend([flt.actor, flt.actor, flt.actor])
    if flt.since is not None:
        where.append("at >= ?")
        params.append(_bound(flt.since))
    if flt.until is not None:
        where.append("at < ?")
        params.append(_bound(flt.until))
    if after_rowid is not None:
        where.append("rowid > ?")
        params.append(after_rowid)
    if upto_rowid is not None:
        where.append("rowid <= ?")
        params.append(upto_rowid)
    sql = f"SELECT * FROM ({select})" + (" WHERE " + " AND ".join(where) if where else "")
    if as_json:  # the sort keys only: `_documents` adds each row's JSON after the sort
        return (f"WITH e({_CS}) AS ({sql}) SELECT coalesce({_TEXTUAL.format(c='c0')}, ''), c1, "
                f"coalesce({_TEXTUAL.format(c='c10')}, ''), c13 FROM e ORDER BY 1, 2, 3, 4"), params
    # `id` breaks ties between events of one second; rowid orders a follow batch as inserted.
    sql += " ORDER BY rowid" if after_rowid is not None else " ORDER BY at, 11"
    return sql, params


# A BLOB where archon keeps text (its CHECKs accept one): `json_object` refuses BLOBs, so the export
# reads it as text, as every other reader does (console/db/rows.py); and a stored 9e999 (a sequence's
# CHECK >= 1 accepts it), which `json_object` writes as the bare token `Inf`, is the string naming it,
# as every other JSON output writes it (console/text.py). After the filters, so the indexes on
# project_id and the times still serve them.
_TEXTUAL = ("CASE typeof({c}) WHEN 'blob' THEN CAST({c} AS TEXT) WHEN 'real' THEN CASE "
            "WHEN {c} > 1.7976931348623157e308 THEN 'Infinity' WHEN {c} < -1.7976931348623157e308 "
            "THEN '-Infinity' ELSE {c} END ELSE {c} END")


_CS = ", ".join(f"c{i}" for i in range(len(_NAMES)))
_PAIRS = ", ".join(f"'{name}', {_TEXTUAL.format(c=f'c{i}')}" for i, name in enumerate(COLUMNS))
_BATCH = 512


def _documents(conn: sqlite3.Connection, kind: str, keys: Iterator[tuple]) -> Iterator[tuple]:
    """(at, kind, event id, JSON object) in the order of `keys` (at, kind, event id, rowid).

    Why two steps: SQLite sorts by a computed time (no index holds that order), and its sorter
    writes whole records to temporary files once they outgrow the cache. Sorting the keys and
    rowids alone, then reading each batch's JSON by rowid, spills a fraction of what sorting the
    JSON did (issue 23 item 4: less than the sqlite3 shell's UNION sorting the bare columns)."""
    table, select = _SOURCES[kind]
    while batch := [key for _, key in zip(range(_BATCH), keys)]:
        sql = (f"WITH e({_CS}) AS ({select} WHERE rowid IN ({', '.join('?' * len(batch))})) "
               f"SELECT c13, json_object({_PAIRS}) FROM e")
        found = {row[0]: row[1] for row in _rows(conn, sql, [key[3] for key in batch])}
        for at, name, event_id, rowid in batch:
            if rowid in found:  # the same read transaction: it is
                yield at, name, event_id, found[rowid]


def _rows(conn: sqlite3.Connection, sql: str, params: list[Any]) -> Iterator[tuple]:
    cursor = conn.cursor()
    cursor.row_factory = None  # plain tuples: they compare, and cost less than sqlite3.Row
    cursor.execute(sql, params)
    cursor.arraysize = 512
    while True:
        batch = cursor.fetchmany()
        if not batch:
            return
        for row in batch:
            yield textual(row)


def _event(row: tuple) -> AuditEvent:
    return AuditEvent._make(row[:len(COLUMNS)])


def _sort_key(row: tuple) -> tuple:
    # Unreadable times sort first; then kind, then event id: a total order, the same on every run.
    return (row[0] or "", row[1], row[10] or "")


@dataclass
class AuditStream:
    """The snapshot part of the trail, and where `follow` continues from (per-table rowids)."""

    conn: sqlite3.Connection
    flt: AuditFilter
    high_water: dict[str, int]

    def events(self) -> Iterator[AuditEvent]:
        streams = []
        for kind in self.flt.kinds:
            if kind not in self.high_water:
                continue
            sql, params = _query(kind, self.flt, upto_rowid=self.high_water[kind])
            streams.append(_rows(self.conn, sql, params))
        for row in heapq.merge(*streams, key=_sort_key):
            yield _event(row)

    def json_lines(self) -> Iterator[str]:
        """The same events as `events`, each already one JSON object made by SQLite's json_object.

        The export path: Python only merges the three sorted streams and never builds a field,
        which is what keeps `audit --format jsonl` near the sqlite3 shell's own speed."""
        streams = []
        for kind in self.flt.kinds:
            if kind not in self.high_water:
                continue
            sql, params = _query(kind, self.flt, upto_rowid=self.high_water[kind], as_json=True)
            streams.append(_documents(self.conn, kind, _rows(self.conn, sql, params)))
        for row in heapq.merge(*streams):
            yield row[3]

    def newer(self) -> list[AuditEvent]:
        """Events inserted since the last call (or since the snapshot), in time order."""
        batch: list[tuple] = []
        for kind in list(self.high_water):
            sql, params = _query(kind, self.flt, after_rowid=self.high_water[kind])
            for row in _rows(self.conn, sql, params):
                batch.append(row)
                self.high_water[kind] = max(self.high_water[kind], row[-1])  # rowid is last
            # Rows filtered out still move the mark: they are not new next time either.
            top = self.conn.execute(f"SELECT max(rowid) FROM {_SOURCES[kind][0]}").fetchone()[0]
            if top is not None:
                self.high_water[kind] = max(self.high_water[kind], top)
        batch.sort(key=_sort_key)
        return [_event(r) for r in batch]


def open_stream(conn: sqlite3.Connection, flt: AuditFilter) -> AuditStream:
    """Mark the snapshot: each present table's highest rowid now. Call inside a read transaction."""
    present = _present_tables(conn)
    high_water = {}
    for kind in flt.kinds:
        table = _SOURCES[kind][0]
        if table in present:
            top = conn.execute(f"SELECT max(rowid) FROM {table}").fetchone()[0]
            high_water[kind] = top or 0
    return AuditStream(conn, flt, high_water)


def redacted(event: AuditEvent, redactor) -> AuditEvent:
    """The event as the redactor shows each of its fields (judged by the column it was read from):
    people's names, free text, ids and anything not archon's own words become stable placeholders."""
    if redactor is None or not redactor.enabled:
        return event
    table, fields = FIELDS[event.kind]
    return AuditEvent._make(value if origin is None else redactor.column(table, origin, value)
                            for value, (_expr, origin) in zip(event, fields))


__all__ = ["AuditEvent", "AuditFilter", "AuditStream", "COLUMNS", "FIELDS", "KINDS", "missing_kinds", "open_stream",
           "parse_moment", "redacted", "union_sql"]
