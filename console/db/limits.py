"""What one SQLite connection may cost: the size of a value, the time of a statement, and a stop.

A database file is hostile input. A 905 KB file can hold a generated column whose every read builds
a 300 MB string, a crafted name can make a statement recurse for ever, and a signal cannot reach
Python while SQLite runs inside one long `sqlite3_step`. So every connection the console opens
(console/db/connection.py `sqlite_connection`) is `guard`ed here:

- `SQLITE_LIMIT_LENGTH` is `MAX_VALUE_BYTES`. Archon's own CHECKs bound every value it writes to
  64 KB at most (`approval_requests.action_json`); 4 MB is 64 times that, so no legitimate value
  comes near it, while a hostile one fails at 4 MB instead of at the end of the machine's memory.
  The limit is on values and rows only: the backup API, page copies and `VACUUM INTO` move pages,
  not values, so snapshots and private copies are unaffected. An upgrade does not have it (below).
- A progress handler ends a statement that has run longer than its budget (`STATEMENT_SECONDS`,
  `ARCHON_CONSOLE_STATEMENT_SECONDS` overrides it; doctor and bundles raise it for their checks
  through `statement_budget`). Every moment the statement runs inside SQLite counts, however much
  one row costs; only the caller's pauses between fetching rows (`audit | less` waiting on the
  reader, the TUI paging) do not. Python's sqlite3 has no hook at each step, so the pauses are
  measured where they happen: every cursor of the console's connections is a `MeteredCursor`, whose
  execute and fetch calls mark when control enters SQLite and when it returns to the caller
  (`_Run`). Nothing is guessed from the gaps between handler calls: one row that builds a 3 MB
  string takes milliseconds inside SQLite between two calls, and that time is the statement's.
- `interrupt_all()` (called by console/signals.py on SIGINT, SIGTERM and SIGHUP) interrupts every
  live connection; the progress handler also refuses to go on once a stop was asked, so any step
  ends within one handler period.

The upgrade is the one exception, and it is a purpose, not a per-call case: every connection opened
while `for_upgrade()` is active (its plan, preflight and rehearsal, every step's run, the snapshot and
its checks) keeps SQLite's own value limit (`SQLITE_MAX_LENGTH`, 1e9 bytes by default: the largest value
SQLite, and so archon, can store at all) and no statement budget for its steps (`ARCHON_CONSOLE_STATEMENT_SECONDS` does
not apply to them; the read-only checks before the first write keep one, `upgrade_checks`). An upgrade must carry every value archon stored, whatever its size, and must never stop
part-way because a console limit, not the file, ended a statement: archon itself starts on such a
file. A stop asked by the operator (Ctrl-C, SIGTERM) still ends any statement, and the step rolls
back. Memory stays bounded where Python reads values: profile JSON is read through
widgets/safe_json.py `read_json`, whose own limit does not depend on the connection's.

`explain` turns what these limits raise into the one sentence the operator reads (exit 3).
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from contextlib import contextmanager

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Iterator

from console.errors import DatabaseUnusable
from console.signals import as_stop

MAX_VALUE_BYTES = 4 * 1024 * 1024
STATEMENT_SECONDS = 120.0
# Doctor's integrity scan and an upgrade's table rebuilds read every page of a file that may be
# many gigabytes: a statement of theirs may take this long.
LONG_STATEMENT_SECONDS = 900.0
# The handler runs every this many virtual-machine instructions: well under a millisecond of cheap
# work, and a few hundred rows even when each row builds a value at the 4 MB limit (about 7 ms each),
# so a statement overruns its budget by about a second at most. Checking more often costs cheap
# statements more than it saves.
_PROGRESS_STEPS = 1_000

_live: "weakref.WeakSet[sqlite3.Connection]" = weakref.WeakSet()
_live_lock = threading.Lock()
_state = {"stopping": False, "budget": None, "upgrade": 0, "checks": 0, "expired": 0}
_timed_out: "weakref.WeakSet[sqlite3.Connection]" = weakref.WeakSet()
_over_temp: "weakref.WeakSet[sqlite3.Connection]" = weakref.WeakSet()
# How often the progress handler of a connection with a temp-space budget measures it.
_TEMP_CHECK_SECONDS = 0.1
_TEMP_PREFIX = "etilqs_"  # SQLite's name for its temporary files (SQLITE_TEMP_FILE_PREFIX)


def statement_seconds() -> float:
    """The budget of one statement: `ARCHON_CONSOLE_STATEMENT_SECONDS`, else what the operation
    in progress asked for (`statement_budget`), else `STATEMENT_SECONDS`."""
    raw = os.environ.get("ARCHON_CONSOLE_STATEMENT_SECONDS")
    if raw:
        try:
            value = float(raw)
        except ValueError:
            value = 0.0
        if value > 0 and value == value and value != float("inf"):
            return value
    return _state["budget"] or STATEMENT_SECONDS


@contextmanager
def statement_budget(seconds: float) -> Iterator[None]:
    """A longer budget per statement while the block runs (doctor's integrity scan, an upgrade's
    table rebuilds read every page of a large file)."""
    before = _state["budget"]
    _state["budget"] = max(seconds, before or 0)
    try:
        yield
    finally:
        _state["budget"] = before


@contextmanager
def for_upgrade() -> Iterator[None]:
    """Connections opened while the block runs are an upgrade's: SQLite's own value limit, no
    statement budget, still stopped by `interrupt_all` (module docstring). Process-wide, like
    `statement_budget`: the snapshot's checks open their connections in worker threads, and the TUI
    plans and runs an upgrade in a child process of its own (console/tui/screens/upgrade.py)."""
    _state["upgrade"] += 1
    try:
        yield
    finally:
        _state["upgrade"] -= 1


def upgrading() -> bool:
    """True while `for_upgrade` is active."""
    return _state["upgrade"] > 0


class CheckBudget:
    """What `upgrade_checks` yields: its budget, and whether a statement ran past it."""

    def __init__(self) -> None:
        self.seconds = statement_seconds()
        self._expired_before = _state["expired"]

    @property
    def expired(self) -> bool:
        return _state["expired"] > self._expired_before

    def refusal(self) -> DatabaseUnusable:
        return DatabaseUnusable(
            f"The upgrade's checks did not finish: one ran longer than {self.seconds:g} seconds and was "
            "stopped, so the upgrade cannot tell whether every step would succeed. Nothing was written.",
            f"Set ARCHON_CONSOLE_STATEMENT_SECONDS to more seconds than {self.seconds:g} (a very large file "
            "needs longer) and run it again.",
        )


@contextmanager
def upgrade_checks() -> Iterator[CheckBudget]:
    """The upgrade's own read-only checks (its plan, preflight and rehearsal on private copies) keep
    a statement budget even on an upgrade's connections: they run before any write, so a check that
    does not finish refuses the whole upgrade (`CheckBudget.refusal`) instead of stopping it
    part-way. `LONG_STATEMENT_SECONDS` unless `ARCHON_CONSOLE_STATEMENT_SECONDS` says otherwise."""
    with statement_budget(LONG_STATEMENT_SECONDS):
        _state["checks"] += 1
        try:
            yield CheckBudget()
        finally:
            _state["checks"] -= 1


class _Run:
    """One cursor's statement: the seconds it spent inside SQLite before the current call, and when
    the current call entered SQLite. `renew`: executemany and executescript run many statements,
    each with its own budget (SQLite's trace callback marks each start)."""

    __slots__ = ("renew", "since", "spent")

    def __init__(self, renew: bool = False) -> None:
        self.renew, self.since, self.spent = renew, 0.0, 0.0


class _Meter:
    """A guarded connection's clock: the run inside SQLite now, per thread (a connection shared
    with a worker thread may have a call waiting on SQLite's mutex while another runs; SQLite calls
    the handler on the thread that steps), else when the last statement started (one run outside a
    `MeteredCursor`, e.g. `commit`, counts wall time)."""

    __slots__ = ("running", "started", "temp_checked", "temp_limit")

    def __init__(self) -> None:
        self.running: dict[int, _Run] = {}
        self.started = time.monotonic()
        self.temp_limit: int | None = None  # bytes of temporary files allowed (`limit_temp_space`)
        self.temp_checked = 0.0


def _inside(cursor: sqlite3.Cursor, run: _Run, call, *args: object, **kwargs: object):
    """`call` with `run` counting: from now until control returns to the caller."""
    meter = getattr(cursor.connection, "_meter", None)
    if meter is None:
        return call(cursor, *args, **kwargs)
    thread = threading.get_ident()
    outer = meter.running.get(thread)
    meter.running[thread], run.since = run, time.monotonic()
    try:
        return call(cursor, *args, **kwargs)
    except sqlite3.OperationalError as exc:
        stop = as_stop(exc)  # a signal handled inside one of SQLite's callbacks: the stop, not an error
        if stop is not None:
            raise stop from exc
        raise
    finally:
        run.spent += time.monotonic() - run.since
        if outer is None:
            del meter.running[thread]
        else:
            meter.running[thread] = outer


class MeteredCursor(sqlite3.Cursor):
    """A cursor whose time inside SQLite is measured call by call (module docstring)."""

    _run: _Run | None = None

    def execute(self, sql: str, parameters: object = (), /) -> "MeteredCursor":
        self._run = _Run()
        return _inside(self, self._run, sqlite3.Cursor.execute, sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: object, /) -> "MeteredCursor":
        self._run = _Run(renew=True)
        return _inside(self, self._run, sqlite3.Cursor.executemany, sql, seq_of_parameters)

    def executescript(self, sql_script: str, /) -> "MeteredCursor":
        self._run = _Run(renew=True)
        return _inside(self, self._run, sqlite3.Cursor.executescript, sql_script)

    def _fetch(self, call, *args: object, **kwargs: object):
        if self._run is None:
            self._run = _Run()
        return _inside(self, self._run, call, *args, **kwargs)

    def __next__(self):
        return self._fetch(sqlite3.Cursor.__next__)

    def fetchone(self):
        return self._fetch(sqlite3.Cursor.fetchone)

    def fetchmany(self, *args: object, **kwargs: object):
        return self._fetch(sqlite3.Cursor.fetchmany, *args, **kwargs)

    def fetchall(self):
        return self._fetch(sqlite3.Cursor.fetchall)


class MeteredConnection(sqlite3.Connection):
    """A connection whose statements all run through `MeteredCursor`s (sqlite3's own
    `Connection.execute` would make a plain cursor)."""

    def cursor(self, factory: type = MeteredCursor) -> sqlite3.Cursor:  # type: ignore[override]
        return super().cursor(factory)

    def execute(self, sql: str, parameters: object = (), /) -> sqlite3.Cursor:  # type: ignore[override]
        return self.cursor().execute(sql, parameters)

    def executemany(self, sql: str, seq_of_parameters: object, /) -> sqlite3.Cursor:  # type: ignore[override]
        return self.cursor().executemany(sql, seq_of_parameters)

    def executescript(self, sql_script: str, /) -> sqlite3.Cursor:  # type: ignore[override]
        return self.cursor().executescript(sql_script)


def guard(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Bound `conn`'s values and statements (unless it is an upgrade's, `for_upgrade`), and make
    it interruptible by `interrupt_all`."""
    budgeted = not upgrading()
    if budgeted:
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
    meter = _Meter()
    conn._meter = meter  # type: ignore[attr-defined]  # read by `MeteredCursor`
    ref = weakref.ref(conn)

    def began(sql: str) -> None:
        run = meter.running.get(threading.get_ident())
        if run is None:
            meter.started = time.monotonic()
        elif run.renew and not sql.startswith("--"):  # "-- name": a trigger inside the statement
            run.since, run.spent = time.monotonic(), 0.0

    def progress() -> int:
        if _state["stopping"]:
            return 1
        if not budgeted and not _state["checks"]:
            return 0  # an upgrade's step: only a stop ends it
        now = time.monotonic()
        run = meter.running.get(threading.get_ident())
        spent = now - meter.started if run is None else run.spent + now - run.since
        if spent > statement_seconds():
            owner = ref()
            if owner is not None:
                _timed_out.add(owner)
            _state["expired"] += 1
            return 1
        if meter.temp_limit is not None and now - meter.temp_checked >= _TEMP_CHECK_SECONDS:
            meter.temp_checked = now
            if temp_bytes() > meter.temp_limit:
                owner = ref()
                if owner is not None:
                    _over_temp.add(owner)
                return 1
        return 0

    conn.set_trace_callback(began)
    conn.set_progress_handler(progress, _PROGRESS_STEPS)
    with _live_lock:
        _live.add(conn)
    return conn


def temp_bytes() -> int:
    """The size of the temporary files SQLite holds open in this process. SQLite unlinks them as it
    creates them, so only the process's descriptors find them (Linux's /proc; 0 where there is none)."""
    total = 0
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return 0
    for fd in fds:
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
            if os.path.basename(target).startswith(_TEMP_PREFIX):
                total += os.fstat(int(fd)).st_size
        except (OSError, ValueError):
            continue
    return total


def limit_temp_space(conn: sqlite3.Connection, max_bytes: int) -> None:
    """End any statement of `conn` (a `guard`ed connection) once SQLite's temporary files in this
    process exceed `max_bytes`. Neither `mode=ro` nor `query_only` nor an authorizer sees them: a
    sort or a `UNION` too big for memory spills to /var/tmp or $TMPDIR, often the file system the
    database lives on, at the disk's speed for the whole statement deadline."""
    conn._meter.temp_limit = max_bytes  # type: ignore[attr-defined]


def over_temp_space(conn: sqlite3.Connection) -> int | None:
    """The budget `conn`'s last statement was ended by (`limit_temp_space`; then forgotten), or None."""
    if conn in _over_temp:
        _over_temp.discard(conn)
        return conn._meter.temp_limit  # type: ignore[attr-defined]
    return None


def interrupt_all() -> None:
    """Stop whatever every live connection is running (safe from a signal handler and any thread);
    statements started afterwards stop at their first progress check."""
    _state["stopping"] = True
    with _live_lock:
        live = list(_live)
    for conn in live:
        try:
            conn.interrupt()
        except sqlite3.Error:  # already closed
            pass


def resume() -> None:
    """Statements may run again (tests run many commands in one process; the TUI after a refused
    second signal)."""
    _state["stopping"] = False


def stopping() -> bool:
    return _state["stopping"]


def _oversize_table(conn: sqlite3.Connection) -> str | None:
    """Which table holds a value over the limit: the first one whose values cannot all be measured."""
    from console.db.sql import quote_identifier

    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    except sqlite3.Error:
        return None
    for table in tables:
        try:
            columns = [r[1] for r in conn.execute(f"PRAGMA table_xinfo({quote_identifier(table)})")]
            if not columns:
                continue
            sizes = " + ".join(f"coalesce(length(CAST({quote_identifier(c)} AS BLOB)), 0)" for c in columns)
            conn.execute(f"SELECT count(*) FROM {quote_identifier(table)} WHERE {sizes} < 0").fetchone()
        except sqlite3.DataError:
            return table
        except sqlite3.Error:
            continue
    return None


def explain(exc: BaseException, conn: sqlite3.Connection | None = None) -> DatabaseUnusable | None:
    """The sentence for what a limit raised, or None when `exc` is not one of them."""
    from console.text import one_line

    if not isinstance(exc, sqlite3.Error):
        return None
    name = getattr(exc, "sqlite_errorname", "")
    if name == "SQLITE_TOOBIG" or "string or blob too big" in str(exc):
        table = _oversize_table(conn) if conn is not None else None
        where = f"table {one_line(table, 80)}" if table else "the database"
        limit = conn.getlimit(sqlite3.SQLITE_LIMIT_LENGTH) if conn is not None else MAX_VALUE_BYTES
        return DatabaseUnusable(
            f"a value in {where} is larger than {limit:,} bytes, more than archon ever "
            "writes; the file was not read further.",
            "Run `archon-console doctor` on it; it may be hostile.",
        )
    if name == "SQLITE_INTERRUPT" or str(exc) == "interrupted":
        if conn is not None and conn in _timed_out or conn is None and not _state["stopping"]:
            return DatabaseUnusable(
                f"a database statement ran longer than {statement_seconds():g} seconds and was stopped; "
                "the file may be hostile or very large.",
                "Set ARCHON_CONSOLE_STATEMENT_SECONDS to allow longer statements.",
            )
    return None


__all__ = ["LONG_STATEMENT_SECONDS", "MAX_VALUE_BYTES", "MeteredConnection", "MeteredCursor", "STATEMENT_SECONDS", "CheckBudget", "explain", "for_upgrade",
           "guard", "interrupt_all", "limit_temp_space", "over_temp_space", "temp_bytes", "resume", "statement_budget", "stopping", "upgrade_checks", "upgrading"]
