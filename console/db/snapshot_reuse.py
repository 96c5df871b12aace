"""A resumed upgrade keeps the snapshot its interrupted run took, instead of writing a second one.

An upgrade killed after its snapshot (console/services/upgrade/run.py, `after-snapshot` and later crash
points) leaves a verified, full-size snapshot; the rerun used to write another one of the same size.
A snapshot is kept only when it is still what it claims to be:

* its bytes hash to its record (the SHA-256 in the ledger row or in its manifest,
  console/db/snapshot_manifest.py), so it is the file that was verified when it was taken; and
* it is the undo for what the rerun is about to do: either the ledger shows the interrupted run
  (its last row aims at the same release, which the ledger does not yet reach, and names the
  snapshot), or, when that run committed nothing, the snapshot holds exactly what the database holds
  now, compared under the writer lock: schema, header values and every row of every table.

Anything else (a file missing, changed, or the database written since) takes a new snapshot.
"""

from __future__ import annotations

import os
import re
import sqlite3
from itertools import zip_longest
from pathlib import Path

from console.db.sql import quote_identifier, stored_columns
from console.db import ledger
from console.db.snapshot import Snapshot, open_ro, sha256_file
from console.db.snapshot_manifest import manifest_path, read_manifest


def _intact(path: Path, sha256: str) -> Snapshot | None:
    """The snapshot, if its bytes still hash to `sha256` and its manifest (if any) agrees."""
    try:
        if not path.is_file() or path.is_symlink():
            return None
        manifest = read_manifest(manifest_path(path))
        if manifest is not None and manifest != sha256:
            return None
        if sha256_file(path) != sha256:
            return None
        return Snapshot(path=path, sha256=sha256, size=path.stat().st_size, tables=0, rows=0)
    except OSError:
        return None


def _from_interrupted_run(conn: sqlite3.Connection, target_release: str) -> Snapshot | None:
    entries = ledger.read_entries(conn)
    if not entries:
        return None
    last = entries[-1]
    if last.target_release != target_release or not last.snapshot_path or not last.snapshot_sha256:
        return None
    return _intact(Path(last.snapshot_path), last.snapshot_sha256)


def _tables(conn: sqlite3.Connection) -> list[tuple]:
    rows = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY type, name")
    return [tuple(row) for row in rows]  # plain tuples whatever the connection's row_factory


def _rows(conn: sqlite3.Connection, table: str):
    for row in conn.execute(f"SELECT {stored_columns(conn, table)} FROM {quote_identifier(table)}"):
        yield tuple((type(value), value) for value in row)


def same_content(live: sqlite3.Connection, copy: sqlite3.Connection) -> bool:
    """Both hold the same schema, header values and rows (in the same scan order), compared lazily."""
    for pragma in ("user_version", "application_id", "page_size"):
        if live.execute(f"PRAGMA {pragma}").fetchone()[0] != copy.execute(f"PRAGMA {pragma}").fetchone()[0]:
            return False
    schema = _tables(live)
    if schema != _tables(copy):
        return False
    for kind, name, _, sql in schema:
        if kind != "table" or (sql or "").upper().startswith("CREATE VIRTUAL"):
            continue  # a virtual table's rows live in its shadow tables, compared as tables
        for mine, theirs in zip_longest(_rows(live, name), _rows(copy, name)):
            if mine != theirs:
                return False
    return True


def _candidates(directory: Path, db_name: str) -> list[Path]:
    pattern = re.compile(rf"^{re.escape(db_name)}\.pre-upgrade-\d{{8}}T\d{{6}}Z(-\d+)?\.sqlite3$")
    try:
        with os.scandir(directory) as entries:
            found = [Path(e.path) for e in entries if pattern.match(e.name) and e.is_file(follow_symlinks=False)]
    except OSError:
        return []
    return sorted(found, key=lambda p: p.stat().st_mtime_ns, reverse=True)


def _equal_to_database(conn: sqlite3.Connection, directory: Path, db_name: str) -> Snapshot | None:
    """The newest snapshot beside the database whose content equals the database's now."""
    candidates = _candidates(directory, db_name)
    if not candidates:
        return None
    newest = candidates[0]  # one candidate: each costs a full read
    recorded = read_manifest(manifest_path(newest))
    if recorded is None:
        return None
    size = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
    try:
        if newest.stat().st_size != size:
            return None
        copy = open_ro(newest)
    except (OSError, sqlite3.Error):
        return None
    try:
        if not same_content(conn, copy):
            return None
    except sqlite3.Error:
        return None
    finally:
        copy.close()
    return _intact(newest, recorded)


def reusable_snapshot(
    conn: sqlite3.Connection, target_release: str, directory: Path, db_name: str
) -> Snapshot | None:
    """The snapshot an interrupted run of this upgrade left, if it can stand for a new one.

    `conn` holds the writer lock (the rerun's first step, before its first write).
    """
    return _from_interrupted_run(conn, target_release) or _equal_to_database(conn, directory, db_name)


__all__ = ["reusable_snapshot", "same_content"]
