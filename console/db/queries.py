"""Keyset pages and capped counts: how the console reads tables of a million rows quickly.

OFFSET paging reads and discards every skipped row, and `count(*)` visits every matching row, so
both grow with the table. A keyset page instead continues from the last key it showed with a
row-value comparison, `(k1, k2) > (?, ?)`, which SQLite answers by seeking an index whose columns
start with the query's equality filters followed by the keys. A capped count stops at `cap + 1`
rows and says "more than 500" rather than walking the whole table.

Archon's indexes lead with `project_id` (for example `(project_id, status, expires_at, id)`), so
an ordering across projects cannot be read from one index. `fetch_merged_page` opens the same keyset
query once per partition (project, status) and merges the sorted scans lazily, stepping each only as
far as the page needs: a handful of index seeks and about one page of rows instead of sorting the
table, and without adding indexes to a database the console did not build. The last page is read
the same way from the far end (`fetch_last_page`), so jumping to the end is as cheap as the start.
"""

from __future__ import annotations

import heapq
import sqlite3
from console.records import dataclass, replace
from itertools import islice
from operator import itemgetter

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Iterable, Iterator, Literal, Sequence

from console.db.rows import textual

if TYPE_CHECKING:
    Direction = Literal["after", "before"]


@dataclass(frozen=True)
class Cursor:
    """Where a page continues: strictly after (or before) the row whose key is `key`."""

    key: tuple[Any, ...]
    direction: Direction = "after"

    def to_json(self) -> dict[str, Any]:
        return {"key": list(self.key), "direction": self.direction}

    @classmethod
    def from_json(cls, data: dict[str, Any] | None) -> "Cursor | None":
        if not data:
            return None
        direction = data.get("direction", "after")
        if direction not in ("after", "before"):
            raise ValueError(f"cursor direction must be 'after' or 'before', not {direction!r}")
        return cls(tuple(data["key"]), direction)


@dataclass(frozen=True)
class KeysetQuery:
    """`SELECT columns FROM source WHERE where... ORDER BY keys`, pageable by its keys.

    `keys` are SQL expressions as they appear in ORDER BY (usually plain column names, the tail
    of an index); `key_names` are the names under which the same values appear in each result
    row (by default the part after the last dot of each key). The keys must identify a row
    uniquely (end them with the primary key), or rows sharing a key can be skipped.
    """

    source: str
    keys: tuple[str, ...]
    columns: str = "*"
    where: tuple[str, ...] = ()
    params: tuple[Any, ...] = ()
    descending: bool = False
    key_names: tuple[str, ...] | None = None

    def names(self) -> tuple[str, ...]:
        if self.key_names is not None:
            return self.key_names
        return tuple(k.rsplit(".", 1)[-1].strip('"') for k in self.keys)

    def filtered(self, clause: str, *params: Any) -> "KeysetQuery":
        """The same query with one more WHERE clause."""
        return replace(self, where=self.where + (clause,), params=self.params + tuple(params))


@dataclass
class Page:
    """One page of rows in display order, and cursors to the neighbouring pages.

    The flag in the direction that was fetched is exact; the other one is only "a cursor was
    given", because rows before a cursor may since have been removed.
    """

    rows: list[dict[str, Any]]
    key_names: tuple[str, ...]
    has_next: bool
    has_previous: bool
    first_key: tuple[Any, ...] | None = None
    last_key: tuple[Any, ...] | None = None

    @property
    def next_cursor(self) -> Cursor | None:
        return Cursor(self.last_key, "after") if self.has_next and self.last_key is not None else None

    @property
    def previous_cursor(self) -> Cursor | None:
        if self.has_previous and self.first_key is not None:
            return Cursor(self.first_key, "before")
        return None


def sqlite_sort_key(value: Any) -> tuple[int, Any]:
    """Python ordering that matches SQLite's BINARY ordering: NULL < numbers < text < blobs.

    UTF-8 byte order equals code point order, so Python's str comparison agrees with memcmp.
    """
    if value is None:
        return (0, 0)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (1, value)
    if isinstance(value, bool):
        return (1, int(value))
    if isinstance(value, (bytes, bytearray, memoryview)):
        return (3, bytes(value))
    return (2, str(value))


class KeyedRow(dict):
    """A row as it is shown (BLOBs read as text, console/db/rows.py) that keeps its keyset key as
    SQLite stored it: a cursor made from the shown value of a BLOB key would not be the value SQLite
    compares, and the next page would skip or repeat rows."""

    __slots__ = ("key",)


def row_key(row: dict[str, Any], names: Sequence[str]) -> tuple[Any, ...]:
    key = getattr(row, "key", None)
    return key if key is not None else tuple(row[name] for name in names)


def _sql(query: KeysetQuery, key: tuple[Any, ...] | None, scan_descending: bool, limit: int) -> tuple[str, list[Any]]:
    """The partition's rows strictly beyond `key` in scan order (all of them when None)."""
    where = list(query.where)
    params = list(query.params)
    if key is not None:
        if len(key) != len(query.keys):
            raise ValueError(f"cursor has {len(key)} key values; the query orders by {len(query.keys)}")
        op = "<" if scan_descending else ">"
        placeholders = ", ".join("?" for _ in query.keys)
        where.append(f"({', '.join(query.keys)}) {op} ({placeholders})")
        params.extend(key)
    order = ", ".join(f"{k} {'DESC' if scan_descending else 'ASC'}" for k in query.keys)
    sql = f"SELECT {query.columns} FROM {query.source}"
    if where:
        sql += " WHERE " + " AND ".join(f"({w})" for w in where)
    sql += f" ORDER BY {order} LIMIT ?"
    params.append(int(limit))
    return sql, params


def _stream(
    conn: sqlite3.Connection, sql: str, params: Sequence[Any], names: Sequence[str], first: int, most: int
) -> Iterator[tuple[tuple[Any, ...], tuple[Any, ...], list[str], tuple[Any, ...]]]:
    """One partition's rows as (sort key, stored key, column names, shown values), stepped only as
    the merge asks.

    Chunks start at `first` rows and double up to `most`, so a partition the merge keeps drawing
    from is read in few steps and one it hardly touches costs a few rows. The statement stays
    open between chunks; the caller closes the generator (which resets the statement), so no read
    transaction outlives the page.
    """
    cur = conn.cursor()
    cur.row_factory = None  # plain tuples: dicts are built only for the rows that are kept
    try:
        cur.execute(sql, params)
        columns = [d[0] for d in cur.description]
        positions = [columns.index(n) for n in names]
        size = first
        while True:
            chunk = cur.fetchmany(size)
            for values in chunk:
                # The order and the key from the stored values (SQLite's); what is shown, with BLOBs as text.
                key = tuple(values[i] for i in positions)
                yield tuple(map(sqlite_sort_key, key)), key, columns, textual(values)
            if len(chunk) < size:
                return
            size = min(size * 2, most)
    finally:
        cur.close()


def iter_merged(
    conn: sqlite3.Connection,
    queries: Sequence[KeysetQuery],
    *,
    after: tuple[Any, ...] | None = None,
    reverse: bool = False,
    limit: int,
) -> list[dict[str, Any]]:
    """Up to `limit` rows of the union of `queries` in key order (reversed when `reverse`),
    strictly beyond key `after`, merged lazily: each partition is stepped only as far as the
    merge consumes it. Rows come back in scan order."""
    first = queries[0]
    names = first.names()
    for q in queries[1:]:
        if q.keys != first.keys or q.descending != first.descending or q.names() != names:
            raise ValueError("merged keyset queries must order by the same keys in the same direction")
    scan_descending = first.descending != reverse
    # An even share of the page per partition to start with; one partition reads it all at once.
    first_chunk = min(limit, max(2, -(-limit // len(queries))))
    streams = []
    try:
        for q in queries:
            sql, params = _sql(q, after, scan_descending, limit)
            streams.append(_stream(conn, sql, params, names, first_chunk, limit))
        merged = streams[0] if len(streams) == 1 else heapq.merge(
            *streams, key=itemgetter(0), reverse=scan_descending)
        rows = []
        for _, key, columns, values in islice(merged, limit):
            row = KeyedRow(zip(columns, values))
            row.key = key
            rows.append(row)
        return rows
    finally:
        for stream in streams:
            stream.close()


def fetch_page(
    conn: sqlite3.Connection,
    query: KeysetQuery,
    *,
    cursor: Cursor | None = None,
    limit: int = 50,
) -> Page:
    """A page of at most `limit` rows continuing from `cursor` (the first page when None)."""
    return fetch_merged_page(conn, [query], cursor=cursor, limit=limit)


def fetch_merged_page(
    conn: sqlite3.Connection,
    queries: Sequence[KeysetQuery],
    *,
    cursor: Cursor | None = None,
    limit: int = 50,
) -> Page:
    """One keyset page over the union of `queries`, which must share keys and direction.

    Each partition is an open index scan from the cursor; a k-way merge (`iter_merged`) steps
    them only as far as the page needs, so a page costs about `limit` rows however many
    partitions there are. Partitions must not overlap (the same row in two partitions would be
    shown twice).
    """
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if not queries:
        return Page([], (), False, cursor is not None)
    names = queries[0].names()
    forward = cursor is None or cursor.direction == "after"
    merged = iter_merged(conn, queries, after=None if cursor is None else tuple(cursor.key),
                         reverse=not forward, limit=limit + 1)
    more = len(merged) > limit
    rows = merged[:limit]
    if not forward:
        rows.reverse()
    return _page(rows, names, has_next=more if forward else cursor is not None,
                 has_previous=cursor is not None if forward else more)


def fetch_last_page(conn: sqlite3.Connection, queries: Sequence[KeysetQuery], *, limit: int = 50) -> Page:
    """The last `limit` rows of the union of `queries`, read from the far end of each index:
    jumping to the end of a million rows costs one page, not a walk."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    if not queries:
        return Page([], (), False, False)
    merged = iter_merged(conn, queries, reverse=True, limit=limit + 1)
    rows = merged[:limit]
    rows.reverse()
    return _page(rows, queries[0].names(), has_next=False, has_previous=len(merged) > limit)


def _page(rows: list[dict[str, Any]], names: tuple[str, ...], *, has_next: bool, has_previous: bool) -> Page:
    page = Page(rows=rows, key_names=names, has_next=has_next, has_previous=has_previous)
    if rows:
        page.first_key = row_key(rows[0], names)
        page.last_key = row_key(rows[-1], names)
    return page


# Jumps walk in steps of this many rows, so memory stays bounded however far they go.
WALK_STEP = 5000


def _walk(
    conn: sqlite3.Connection, queries: Sequence[KeysetQuery], key: tuple[Any, ...] | None, *, reverse: bool, count: int
) -> tuple[tuple[Any, ...] | None, int]:
    """Step `count` rows from beyond `key` (reading only the key columns); returns the key of the
    last row stepped over and how many rows there were."""
    names = queries[0].names()
    keys_only = [replace(q, columns=", ".join(f'{k} AS "{n}"' for k, n in zip(q.keys, names))) for q in queries]
    walked = 0
    while walked < count:
        step = min(count - walked, WALK_STEP)
        rows = iter_merged(conn, keys_only, after=key, reverse=reverse, limit=step)
        if rows:
            key = row_key(rows[-1], names)
        walked += len(rows)
        if len(rows) < step:
            break
    return key, walked


def advance(conn: sqlite3.Connection, queries: Sequence[KeysetQuery], cursor: Cursor | None, count: int) -> Cursor | None:
    """The cursor `count` rows further on than `cursor` (None = the start), for jumps; it stops
    at the last row when there are fewer."""
    if count <= 0 or not queries:
        return cursor
    key, _ = _walk(conn, queries, None if cursor is None else tuple(cursor.key), reverse=False, count=count)
    return Cursor(key) if key is not None else cursor


def retreat(conn: sqlite3.Connection, queries: Sequence[KeysetQuery], cursor: Cursor | None, count: int) -> Cursor | None:
    """The cursor `count` rows back from `cursor`, where None means the end of the list (not the
    start, as elsewhere): `retreat(queries, None, n)` starts the last n rows. Reads backwards
    from the cursor, so jumping to the end costs n rows. None when that is the start."""
    if not queries:
        return None
    if cursor is None:  # the end: the row before the last `count` is the (count + 1)-th from the end
        key, walked = _walk(conn, queries, None, reverse=True, count=count + 1)
        return Cursor(key) if walked == count + 1 else None
    if count <= 0:
        return cursor
    key, walked = _walk(conn, queries, tuple(cursor.key), reverse=True, count=count)
    return Cursor(key) if walked == count else None


def position_of(conn: sqlite3.Connection, queries: Sequence[KeysetQuery], key: tuple[Any, ...]) -> int:
    """How many rows of the union sort before `key`: one counting index seek per partition."""
    total = 0
    for q in queries:
        op = ">" if q.descending else "<"
        where = [*q.where, f"({', '.join(q.keys)}) {op} ({', '.join('?' for _ in q.keys)})"]
        sql = f"SELECT count(*) FROM {q.source} WHERE " + " AND ".join(f"({w})" for w in where)
        total += conn.execute(sql, [*q.params, *key]).fetchone()[0]
    return total


@dataclass(frozen=True)
class CappedCount:
    """A count that stopped at `cap`: `exact` is False when there are more than `value` rows."""

    value: int
    exact: bool = True

    def __str__(self) -> str:
        return str(self.value) if self.exact else f">{self.value}"

    def to_json(self) -> dict[str, Any]:
        return {"count": self.value, "exact": self.exact}

    def __add__(self, other: "CappedCount") -> "CappedCount":
        return CappedCount(self.value + other.value, self.exact and other.exact)


def count_capped(
    conn: sqlite3.Connection,
    source: str,
    where: Iterable[str] = (),
    params: Sequence[Any] = (),
    *,
    cap: int = 500,
) -> CappedCount:
    """How many rows match, reading at most `cap + 1` of them."""
    clauses = list(where)
    sql = f"SELECT 1 FROM {source}"
    if clauses:
        sql += " WHERE " + " AND ".join(f"({w})" for w in clauses)
    total = conn.execute(f"SELECT count(*) FROM ({sql} LIMIT ?)", [*params, cap + 1]).fetchone()[0]
    if total > cap:
        return CappedCount(cap, exact=False)
    return CappedCount(total)


def count_queries_capped(
    conn: sqlite3.Connection, queries: Sequence[KeysetQuery], *, cap: int = 500
) -> CappedCount:
    """A capped count over the union of (non-overlapping) partitions, stopping once `cap` is passed."""
    total = 0
    for q in queries:
        part = count_capped(conn, q.source, q.where, q.params, cap=cap - total)
        total += part.value
        if not part.exact or total > cap:
            return CappedCount(min(total, cap), exact=False)
    return CappedCount(total)


def describe_count(shown: int, total: CappedCount) -> str:
    """'50 of >500', '12 of 12'."""
    return f"{shown} of {total}"


__all__ = [
    "CappedCount",
    "advance",
    "Cursor",
    "KeysetQuery",
    "Page",
    "count_capped",
    "count_queries_capped",
    "describe_count",
    "fetch_last_page",
    "fetch_merged_page",
    "fetch_page",
    "iter_merged",
    "position_of",
    "retreat",
    "KeyedRow",
    "row_key",
    "sqlite_sort_key",
]
