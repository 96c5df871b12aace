"""Item 2: the TUI's start-up check "anything pending?" and its page queries, in process.

Each run opens the database as the TUI does (`open_database(read_only=True)`: in place on the live
file, `immutable=1` on the idle one; opening is not timed) and times one call on it, against a
bare `sqlite3` read-only connection running the baseline SQL, alternated A B A B:

- `approval_queue.any_pending` (per-project seek) against the plain
  `status = 'pending' LIMIT 1` it replaced (target: <= 1 ms warm; cold is not measured by default,
  since dropping the page cache slows everyone on a shared machine: `ARCHON_BENCH_COLD=1`);
- the queue's first page and the next one (`list_requests`, 50 rows each, all statuses and
  pending) against the same rows selected by SQL that seeks per project and merges.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import time
from pathlib import Path

from bench import harness as h

OLD_SQL = "SELECT 1 FROM approval_requests WHERE status = 'pending' LIMIT 1"


def _seek_page(projects: list[str], statuses: tuple[str, ...] | None, limit: int, after: tuple | None) -> tuple[str, list]:
    """The same rows as the queue's page, each (project, status) range read by seek, then merged."""
    from console.services.approval_queue import STATUSES

    parts, args = [], []
    for p in projects:
        for status in statuses or STATUSES:
            cond = "project_id = ? AND status = ?" + (" AND (expires_at, id) > (?, ?)" if after else "")
            parts.append(f"SELECT * FROM (SELECT * FROM approval_requests WHERE {cond} "
                         f"ORDER BY expires_at, id LIMIT {limit})")
            args += [p, status, *(after or ())]
    return f"SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY expires_at, id LIMIT {limit}", args


def _drop_caches() -> None:
    subprocess.run(["sync"], check=True)
    Path("/proc/sys/vm/drop_caches").write_text("3\n")


def main() -> None:
    from console.clock import parse_time
    from console.db.connect import open_database
    from console.db.readonly import ro_uri
    from console.services import approval_queue as q

    d = h.data()
    now = parse_time(d.now)
    cold = os.environ.get("ARCHON_BENCH_COLD") == "1"
    for state, path, info in h.states(d):
        extra = {"holder": info} if info else {}

        def console(call, path=path):
            def run() -> float:
                if cold:
                    _drop_caches()
                handle = open_database(path, read_only=True)
                try:
                    started = time.perf_counter()
                    call(handle)
                    return time.perf_counter() - started
                finally:
                    handle.close()
            return run

        def bare(sql: str, args=(), path=path, state=state):
            def run() -> float:
                if cold:
                    _drop_caches()
                conn = sqlite3.connect(ro_uri(path, immutable="1") if state == "idle" else ro_uri(path), uri=True)
                try:
                    conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
                    started = time.perf_counter()
                    conn.execute(sql, args).fetchall()
                    return time.perf_counter() - started
                finally:
                    conn.close()
            return run

        handle = open_database(path, read_only=True)
        extra["opened"] = str(getattr(handle, "opened", ""))
        pages = {}
        for label, statuses in (("pending", ("pending",)), ("all", None)):
            first = q.list_requests(handle, q.Filters(statuses=statuses), limit=50, now=now)
            last = first.rows[-1]
            pages[label] = (statuses, first.next_cursor, (last.expires_at, last.id))
        handle.close()

        c, b = h.paired(console(lambda hd: q.any_pending(hd)), bare(OLD_SQL), h.pairs(15))
        c, b = [v * 1000 for v in c], [v * 1000 for v in b]
        h.record(f"pending-check-{state}", "2", "TUI start: `any_pending` (per-project seek)", state=state,
                 console="any_pending", values=c, unit="ms", baseline="plain `status='pending' LIMIT 1`",
                 base_values=b, target="<= 1 ms" + (" cold" if cold else " warm"), on="console",
                 check=lambda v: v <= 1.0, extra=extra)
        for label, (statuses, cursor, after) in pages.items():
            filters = q.Filters(statuses=statuses)
            for which in ("first", "next"):
                sql, args = _seek_page(d.projects, statuses, 50, after if which == "next" else None)
                call = (lambda hd, f=filters: q.list_requests(hd, f, limit=50, now=now)) if which == "first" else \
                    (lambda hd, f=filters, cur=cursor: q.list_requests(hd, f, limit=50, cursor=cur, now=now))
                c, b = h.paired(console(call), bare(sql, args), h.pairs(15))
                c, b = [v * 1000 for v in c], [v * 1000 for v in b]
                h.record(f"page-{label}-{which}-{state}", "2", f"queue page query, {label}, {which} page of 50",
                         state=state, console="list_requests", values=c, unit="ms",
                         baseline="bare SQL, same rows by per-project seek", base_values=b,
                         target="<= 2x (bench's bound; item 2 asks for a seek)", check=lambda r: r <= 2.0,
                         extra=extra)
