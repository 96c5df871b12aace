"""Page sources for `widgets.lazy_table.LazyTable`, one per list, all reading through services.

A source is called from worker threads; every database call goes through `Session.run`, which
serialises use of the shared connection. Cursors, counts, positions and jumps come from the
services (`approval_queue`, `environment_pages`); no SQL is written here.
"""

from __future__ import annotations

from typing import Any

from console.models.approvals import ApprovalRequest
from console.services import approval_queue as queue
from console.services import environment_pages as env_pages
from console.models.environments import EnvironmentView
from console.services.environment_queries import list_environments
from console.services.environment_rules import default_stale_after
from console.tui.session import Session

COUNT_CAP = 10**9  # an exact count, taken after the first page is on screen


class ApprovalsSource:
    def __init__(self, session: Session, filters: queue.Filters) -> None:
        self.session = session
        self.filters = filters

    def count(self) -> int:
        return self.session.run(queue.count_requests, self.filters, cap=COUNT_CAP, now=self.session.now()).value

    def page(self, after: Any | None, limit: int) -> tuple[list[ApprovalRequest], Any | None]:
        page = self.session.run(queue.list_requests, self.filters, limit=limit, cursor=after, now=self.session.now())
        return page.rows, page.last_cursor or after

    def key(self, row: ApprovalRequest) -> Any:
        return row.id

    def index_of(self, key: Any) -> int | None:
        return self.session.run(queue.request_position, self.filters, key, now=self.session.now())

    def cursor_of(self, key: Any) -> Any | None:
        return self.session.run(queue.cursor_of, key, self.filters)

    def advance(self, cursor: Any | None, count: int) -> Any | None:
        return self.session.run(queue.advance_cursor, self.filters, cursor, count, now=self.session.now())

    def retreat(self, cursor: Any | None, count: int) -> Any | None:
        return self.session.run(queue.retreat_cursor, self.filters, cursor, count, now=self.session.now())


class EnvironmentsSource:
    def __init__(self, session: Session, *, state: str | None = None, project: str | None = None,
                 claimed: bool = False, stale: bool = False, search: str | None = None) -> None:
        self.session = session
        self.kwargs = {"state": state, "project": project, "claimed": claimed, "stale": stale, "search": search}

    def _filters(self) -> dict[str, Any]:
        return {**self.kwargs, "now": self.session.now(), "stale_after": default_stale_after()}

    def count(self) -> int:
        return self.session.run(env_pages.count_environments, **self._filters())

    def page(self, after: Any | None, limit: int) -> tuple[list[EnvironmentView], Any | None]:
        page = self.session.run(list_environments, after=after, limit=limit, **self._filters())
        return page.rows, (page.rows[-1].id if page.rows else after)

    def key(self, row: EnvironmentView) -> Any:
        return row.id

    def index_of(self, key: Any) -> int | None:
        return self.session.run(env_pages.environment_position, key, **self._filters())

    def cursor_of(self, key: Any) -> Any | None:
        return key

    def advance(self, cursor: Any | None, count: int) -> Any | None:
        return self.session.run(env_pages.advance_after, cursor, count, **self._filters())

    def retreat(self, cursor: Any | None, count: int) -> Any | None:
        return self.session.run(env_pages.retreat_after, cursor, count, **self._filters())


class ListSource:
    """A small list already computed by a service (projects, revisions), served as pages; the
    cursor is an offset."""

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

    def advance(self, cursor: Any | None, count: int) -> Any:
        return min((cursor or 0) + count, len(self._all()))

    def retreat(self, cursor: Any | None, count: int) -> Any:
        return max(0, (len(self._all()) if cursor is None else cursor) - count)

    def key(self, row: Any) -> Any:
        # A service's read model (an attribute) or a plain row (a key).
        return row[self.key_name] if isinstance(row, dict) else getattr(row, self.key_name)

    def index_of(self, key: Any) -> int | None:
        for i, row in enumerate(self._all()):
            if self.key(row) == key:
                return i
        return None

    def cursor_of(self, key: Any) -> Any | None:
        index = self.index_of(key)
        return None if index is None else index + 1
