"""Counting and jumping in the environment list, for callers that page it (the TUI's table).

`environment_queries.list_environments` reads one keyset page ordered by id; a paged view also needs the
exact count, where a row sits after a reload, and cursors for jumps (End reads backwards from the
end of the index instead of walking to it). All of them page `environment_queries.environment_query`,
the one definition of the list's filters, so a position counted here is a position in its pages.
"""

from __future__ import annotations

from typing import Any

from console.db.connect import ArchonDatabase
from console.db.queries import Cursor, advance, position_of, retreat
from console.services.environment_queries import environment_query


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


__all__ = ["advance_after", "count_environments", "environment_position", "retreat_after"]
