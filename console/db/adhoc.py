"""The connection an operator's own SQL runs on (`archon-console query`, `:sql`, `:tables`): reads only,
by construction.

Four locks, each enough on its own for the writes the others miss, none of them trusting the text:

- the file is opened read-only (console/db/connect.py `open_database(read_only=True)`: `mode=ro`, or a
  private copy, never a trace beside the file) and `PRAGMA query_only = ON`;
- an authorizer (`_authorize`) that SQLite consults while it prepares every statement on the connection:
  it allows reading tables and columns, SELECT, recursive CTEs, a short list of schema PRAGMAs that
  only read, and every function but the few that reach outside the database. Everything else is
  denied before the statement exists: ATTACH (`mode=ro` does not cover an attached file: SQLite
  creates it), DETACH, every write and schema change (temp tables too: `query_only` allows them),
  ANALYZE, REINDEX, transactions and savepoints (a `BEGIN` would hold a read transaction open across
  statements, and archon's WAL checkpoints wait for it), any PRAGMA that sets or runs something
  (`query_only`, `writable_schema`, `journal_mode`, `wal_checkpoint`, ...);
- VACUUM consults the authorizer only after it has created its `INTO` file, so the statement's first
  word is checked before SQLite sees it (`first_word`): only SELECT, WITH, VALUES, EXPLAIN and PRAGMA;
- SQLite's own limits: `SQLITE_LIMIT_SQL_LENGTH` is `MAX_STATEMENT_BYTES`, every value is bounded by
  `SQLITE_LIMIT_LENGTH` and every statement by the deadline of console/db/limits.py (a progress
  handler), like every other connection of the console;
- the disk SQLite writes without asking anyone: temporary files for a sort or a `UNION` too big for
  memory, which the three locks above never see, are bounded by `MAX_TEMP_BYTES`
  (console/db/limits.py `limit_temp_space`).

Python's sqlite3 runs one statement per `execute` and raises for a second one ("You can only execute
one statement at a time"); console/services/query.py turns that, and every refusal here, into one
sentence.
"""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

from console.db.connect import ArchonDatabase, open_database
from console.db.limits import limit_temp_space
from console.errors import UsageError

# Longer than any statement typed or pasted by hand (archon's whole schema is about 40 KB), short
# enough that parsing it costs nothing: the same bound as any other text the console takes from outside
# (console/text.py `MAX_CHARS`, the JSON it parses).
from console.text import MAX_CHARS

MAX_STATEMENT_BYTES = MAX_CHARS

# SQLite's temporary files (a sort or a UNION too big for memory) for one statement: a sort of a few
# hundred thousand rows of archon's size; beyond, the statement wants a LIMIT or an indexed ORDER BY.
MAX_TEMP_BYTES = 256 * 1024 * 1024

# The statements that only read. VACUUM, ATTACH, REPLACE, INSERT, ... never reach SQLite.
READING_WORDS = frozenset({"select", "with", "values", "pragma"})  # and EXPLAIN before one (`first_word`)

# PRAGMAs that report the schema and change nothing, as `PRAGMA name(arg)` or `pragma_name(...)`.
# `table_list` and friends take a table name as their argument, never a value to set.
READING_PRAGMAS = frozenset({
    "table_info", "table_xinfo", "table_list", "index_list", "index_info", "index_xinfo",
    "foreign_key_list", "collation_list", "database_list", "function_list", "module_list",
    "pragma_list", "compile_options", "data_version", "schema_version", "user_version", "application_id",
    "page_count", "page_size", "freelist_count", "encoding", "foreign_key_check", "integrity_check",
    "quick_check",
})
# PRAGMAs that read when given no value, and set when given one: allowed only bare.
_BARE_ONLY = frozenset({"schema_version", "user_version", "application_id", "page_size", "encoding"})

# Functions that reach outside the database (files, shared libraries, the tokenizer pointer). The
# library Python links has no `readfile`/`writefile`/`edit` (those are the sqlite3 shell's) and
# never enables extension loading; denied by name anyway, should a build ever add them.
DENIED_FUNCTIONS = frozenset({"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer"})

_ALLOWED_ACTIONS = {sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE}

_LEADING = re.compile(r"\s*(?:--[^\n]*(?:\n|$)|/\*.*?(?:\*/|$))", re.S)
_WORD = re.compile(r"\s*([A-Za-z_]+)")

_DENIED_NAMES = {
    sqlite3.SQLITE_ATTACH: "ATTACH", sqlite3.SQLITE_DETACH: "DETACH", sqlite3.SQLITE_INSERT: "INSERT",
    sqlite3.SQLITE_UPDATE: "UPDATE", sqlite3.SQLITE_DELETE: "DELETE", sqlite3.SQLITE_TRANSACTION: "a transaction",
    sqlite3.SQLITE_SAVEPOINT: "a savepoint", sqlite3.SQLITE_ANALYZE: "ANALYZE", sqlite3.SQLITE_REINDEX: "REINDEX",
    sqlite3.SQLITE_ALTER_TABLE: "ALTER TABLE",
}


def _word_at(sql: str, position: int) -> tuple[str, int]:
    """The keyword at `position` after any comments, lower-case, and where it ends ("" when none)."""
    while True:
        match = _LEADING.match(sql, position)
        if match is None or match.end() == position:
            break
        position = match.end()
    word = _WORD.match(sql, position)
    return (word.group(1).lower(), word.end()) if word else ("", position)


def first_word(sql: str) -> str:
    """The statement's first keyword, lower-case, after any comments ("" when there is none); for
    `EXPLAIN [QUERY PLAN] X`, X's (EXPLAIN prepares X: it must be a read too)."""
    word, end = _word_at(sql, 0)
    if word == "explain":
        word, end = _word_at(sql, end)
        if word == "query":
            plan, end = _word_at(sql, end)
            word = _word_at(sql, end)[0] if plan == "plan" else plan
    return word


def denial(action: int, arg1: str | None, arg2: str | None) -> str | None:
    """Why the authorizer refuses (`action`, `arg1`, `arg2`), or None when it only reads."""
    if action in _ALLOWED_ACTIONS:
        return None
    if action == sqlite3.SQLITE_FUNCTION:
        name = (arg2 or "").lower()
        return f"the function {name}() reaches outside the database" if name in DENIED_FUNCTIONS else None
    if action == sqlite3.SQLITE_PRAGMA:
        name = (arg1 or "").lower()
        if name in READING_PRAGMAS and not (arg2 is not None and name in _BARE_ONLY):
            return None
        return f"PRAGMA {name} is not one of the PRAGMAs that only read"
    if action == sqlite3.SQLITE_UPDATE and (arg1 or "").lower() in ("sqlite_master", "sqlite_temp_master"):
        # SQLite asks this the first time a connection builds a table-valued function (json_each(),
        # pragma_table_info(), ...): refused with the rest, and the sentence says so, naming the way round
        return ("a table-valued function (json_each(), json_tree(), pragma_table_info(), ...) is not run here "
                "(SQLite asks to write the schema to build one); use json_extract() for JSON and the statement "
                "PRAGMA table_info(NAME) for a PRAGMA")
    return f"{_DENIED_NAMES.get(action, 'a statement that changes the database')} is not a read"


class _Authorizer:
    """The callback, remembering its last refusal so the sentence can name it."""

    def __init__(self) -> None:
        self.refused: str | None = None

    def __call__(self, action: int, arg1: str | None, arg2: str | None, _db: str | None, _source: str | None) -> int:
        why = denial(action, arg1, arg2)
        if why is None:
            return sqlite3.SQLITE_OK
        self.refused = why
        return sqlite3.SQLITE_DENY


def lock_down(conn: sqlite3.Connection) -> sqlite3.Connection:
    """Make `conn` read-only by construction (module docstring); for good: nothing undoes it."""
    conn.execute("PRAGMA query_only = ON")
    conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_STATEMENT_BYTES)
    conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
    limit_temp_space(conn, MAX_TEMP_BYTES)
    authorizer = _Authorizer()
    conn.set_authorizer(authorizer)
    conn._adhoc = authorizer  # type: ignore[attr-defined]  # read by `refusal_of` and `is_locked_down`
    return conn


def is_locked_down(conn: sqlite3.Connection) -> bool:
    return isinstance(getattr(conn, "_adhoc", None), _Authorizer)


def last_refusal(conn: sqlite3.Connection) -> str | None:
    """What the authorizer refused last on `conn` (then forgotten), for the sentence."""
    authorizer = getattr(conn, "_adhoc", None)
    if not isinstance(authorizer, _Authorizer):
        return None
    why, authorizer.refused = authorizer.refused, None
    return why


def check_statement(sql: str) -> str:
    """`sql` when it may be handed to SQLite at all; else the one sentence, as a `UsageError`."""
    try:
        size = len(sql.encode("utf-8"))
    except UnicodeEncodeError:  # a lone surrogate: undecodable bytes from stdin or a file
        raise UsageError("The statement is not valid UTF-8 text; nothing was run.") from None
    if size > MAX_STATEMENT_BYTES:
        raise UsageError(f"The statement is {size:,} bytes long; the limit is {MAX_STATEMENT_BYTES:,}. "
                         "Nothing was run.")
    word = first_word(sql)
    if not word:
        raise UsageError("There is no statement to run: give one SELECT (or WITH, VALUES, EXPLAIN, PRAGMA).")
    if word not in READING_WORDS:
        raise UsageError(f"Refused: only reads run here (SELECT, WITH, VALUES, EXPLAIN or a schema PRAGMA), "
                         f"and a statement starting with {word.upper()} is not one; nothing was run.")
    return sql


def query_database(path: str | Path, *, busy_timeout_ms: int) -> ArchonDatabase:
    """The database at `path` opened for an operator's SQL: read-only, locked down."""
    handle = open_database(path, read_only=True, busy_timeout_ms=busy_timeout_ms)
    try:
        lock_down(handle.conn)
    except BaseException:
        handle.close()
        raise
    return handle


__all__ = ["DENIED_FUNCTIONS", "MAX_STATEMENT_BYTES", "MAX_TEMP_BYTES", "READING_PRAGMAS", "READING_WORDS", "check_statement",
           "denial", "first_word", "is_locked_down", "last_refusal", "lock_down", "query_database"]
