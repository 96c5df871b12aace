"""Page sources for `widgets.lazy_table.LazyTable`, one per list, all reading through services.

A source is called from worker threads; every database call goes through `Session.run`, which
serialises use of the shared connection. Keyset cursors come from the services' own pagers.
"""

from __future__ import annotations

from typing import Any

from console.db.queries import Cursor, fetch_merged_page
from console.services import approval_queue as queue
from console.services import environments as envs
from console.workers import Session

COUNT_CAP = 10**9  # an exact count, taken after the first page is on screen


class ApprovalsSource:
    def __init__(self, session: Session, filters: queue.Filters) -> None:
        self.session = session
        self.filters = filters

    def count(self) -> int:
        return self.session.run(queue.count_requests, self.filters, cap=COUNT_CAP, now=self.session.now()).value

    def page(self, after: Any | None, limit: int) -> tuple[list[dict], Any | None]:
        page = self.session.run(queue.list_requests, self.filters, limit=limit, cursor=after, now=self.session.now())
        last = Cursor(tuple(page.rows[-1][k] for k in queue.ORDER_KEYS)) if page.rows else after
        return page.rows, last

    def key(self, row: dict) -> Any:
        return row["id"]

    def _queries(self, handle) -> list:
        return queue._partitions(handle, self.filters, self.session.now())[0]

    def index_of(self, key: Any) -> int | None:
        """How many rows sort before the row `key` (None when it is gone): one seek per partition."""
        def work(handle):
            row = handle.conn.execute("SELECT expires_at, id FROM approval_requests WHERE id = ?", (key,)).fetchone()
            if row is None:
                return None
            total = 0
            for q in self._queries(handle):
                where = " AND ".join(f"({w})" for w in (*q.where, "(expires_at, id) < (?, ?)"))
                total += handle.conn.execute(f"SELECT count(*) FROM approval_requests WHERE {where}",
                                             (*q.params, row[0], row[1])).fetchone()[0]
            return total
        return self.session.run(work)

    def cursor_at(self, offset: int) -> Any | None:
        """The cursor before row `offset`, walking in large keyset steps (a jump, not a scroll)."""
        if offset <= 0:
            return None

        def work(handle):
            queries = self._queries(handle)
            cursor, remaining = None, offset
            while remaining > 0:
                step = min(remaining, 5000)
                page = fetch_merged_page(handle.conn, queries, cursor=cursor, limit=step)
                if not page.rows:
                    break
                cursor = Cursor(page.last_key)
                remaining -= len(page.rows)
            return cursor
        return self.session.run(work)


class EnvironmentsSource:
    def __init__(self, session: Session, *, state: str | None = None, project: str | None = None,
                 claimed: bool = False, stale: bool = False) -> None:
        self.session = session
        self.kwargs = {"state": state, "project": project, "claimed": claimed, "stale": stale}

    def _where(self, handle) -> tuple[str, list]:
        where, params = ["1"], []
        if self.kwargs["state"]:
            where.append("lifecycle_state = ?")
            params.append(self.kwargs["state"])
        if self.kwargs["project"]:
            where.append("project_id = ?")
            params.append(self.kwargs["project"])
        if self.kwargs["claimed"] or self.kwargs["stale"]:
            where.append("operation_claim_id IS NOT NULL")
        return " AND ".join(where), params

    def count(self) -> int:
        def work(handle):
            if self.kwargs["stale"]:
                return len(envs.list_environments(handle, now=self.session.now(), limit=0,
                                                  stale_after=envs.default_stale_after(), **self.kwargs).rows)
            where, params = self._where(handle)
            return handle.conn.execute(f"SELECT count(*) FROM execution_environments WHERE {where}", params).fetchone()[0]
        return self.session.run(work)

    def page(self, after: Any | None, limit: int) -> tuple[list[dict], Any | None]:
        page = self.session.run(envs.list_environments, now=self.session.now(), after=after, limit=limit,
                                stale_after=envs.default_stale_after(), **self.kwargs)
        return page.rows, (page.rows[-1]["id"] if page.rows else after)

    def key(self, row: dict) -> Any:
        return row["id"]

    def index_of(self, key: Any) -> int | None:
        def work(handle):
            where, params = self._where(handle)
            if self.kwargs["stale"]:
                return None
            return handle.conn.execute(f"SELECT count(*) FROM execution_environments WHERE {where} AND id < ?",
                                       [*params, key]).fetchone()[0]
        return self.session.run(work)


class ListSource:
    """A small list already computed by a service (projects, revisions), served as pages."""

    def __init__(self, load, key: str = "id") -> None:
        self.load = load
        self.key_name = key
        self._rows: list[dict] | None = None

    def _all(self) -> list[dict]:
        if self._rows is None:
            self._rows = self.load()
        return self._rows

    def count(self) -> int:
        return len(self._all())

    def page(self, after: Any | None, limit: int) -> tuple[list[dict], Any | None]:
        start = after or 0
        rows = self._all()[start:start + limit]
        return rows, start + len(rows)

    def cursor_at(self, offset: int) -> Any:
        return offset

    def key(self, row: dict) -> Any:
        return row[self.key_name]

    def index_of(self, key: Any) -> int | None:
        for i, row in enumerate(self._all()):
            if row[self.key_name] == key:
                return i
        return None
