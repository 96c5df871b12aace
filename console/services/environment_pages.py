"""Counting and jumping in the environment list, for callers that page it (the TUI's table).

`environments.list_environments` reads one keyset page ordered by id; a paged view also needs the
exact count, where a row sits after a reload, and cursors for jumps (End reads backwards from the
end of the index instead of walking to it). The filters mirror `list_environments` exactly, so a
position counted here is a position in its pages.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from console.clock import db_time
from console.db.connect import ArchonDatabase
from console.db.queries import Cursor, KeysetQuery, advance, position_of, retreat
from console.errors import UsageError
from console.services.base import require_feature
from console.services.environments import DEFAULT_STALE_AFTER, STATES


def environment_query(
    handle: ArchonDatabase,
    *,
    now: datetime,
    state: str | None = None,
    project: str | None = None,
    claimed: bool = False,
    stale: bool = False,
    stale_after: timedelta = DEFAULT_STALE_AFTER,
) -> KeysetQuery:
    """The ids of the environments `list_environments` would list with the same filters, by id."""
    if state is not None and state not in STATES:
        raise UsageError(f"Unknown state {state!r}; one of: {', '.join(STATES)}.")
    if (claimed or stale) and not handle.shape.supports("claims"):
        require_feature(handle, "claims", what="Filtering by operation claims")
    where: list[str] = []
    params: list[Any] = []
    if state:
        where.append("e.lifecycle_state = ?")
        params.append(state)
    if project:
        where.append("e.project_id = ?")
        params.append(project)
    if claimed or stale:
        where.append("e.operation_claim_id IS NOT NULL")
    if stale:
        where.append("(julianday(e.operation_claimed_at) IS NULL OR julianday(e.operation_claimed_at) < julianday(?))")
        params.append(db_time(now - stale_after))
    return KeysetQuery("execution_environments e", keys=("e.id",), key_names=("id",), columns="e.id",
                       where=tuple(where), params=tuple(params))


def count_environments(handle: ArchonDatabase, **filters: Any) -> int:
    """How many environments match (exact: environments number thousands, not millions)."""
    q = environment_query(handle, **filters)
    sql = f"SELECT count(*) FROM {q.source}"
    if q.where:
        sql += " WHERE " + " AND ".join(f"({w})" for w in q.where)
    return int(handle.conn.execute(sql, q.params).fetchone()[0])


def environment_position(handle: ArchonDatabase, env_id: str, **filters: Any) -> int:
    """How many matching environments sort before `env_id` (where it is, or was, in the list)."""
    return position_of(handle.conn, [environment_query(handle, **filters)], (env_id,))


def advance_after(handle: ArchonDatabase, after: str | None, count: int, **filters: Any) -> str | None:
    """The id `count` environments after id `after` (None = the start): the `after` of a jump."""
    cursor = advance(handle.conn, [environment_query(handle, **filters)],
                     None if after is None else Cursor((after,)), count)
    return None if cursor is None else cursor.key[0]


def retreat_after(handle: ArchonDatabase, after: str | None, count: int, **filters: Any) -> str | None:
    """The id `count` environments before id `after`, where None is the *end* of the list."""
    cursor = retreat(handle.conn, [environment_query(handle, **filters)],
                     None if after is None else Cursor((after,)), count)
    return None if cursor is None else cursor.key[0]


__all__ = ["advance_after", "count_environments", "environment_position", "environment_query", "retreat_after"]
