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

A candidate counts only when nobody but the operator or root could have placed it and its manifest
(console/db/file_trust.py): a file another user planted in a shared snapshot directory would
otherwise be recorded in the ledger as this run's undo, and later restored as "verified". The
candidate is opened once; its manifest is read through the same held directory, its size and hash
come from that descriptor, and the content comparison (SQLite needs a path) is bracketed by checks
that the path still names the held file, which the trust rule guarantees no other user can change.
"""

from __future__ import annotations

import os
import re
import sqlite3
from itertools import zip_longest
from pathlib import Path

from console.db import ledger
from console.db.file_trust import Judged, open_judged
from console.db.snapshot import Snapshot, sha256_fd
from console.db.snapshot_check import open_ro
from console.db.snapshot_manifest import manifest_beside
from console.db.sql import quote_identifier, stored_columns
from console.errors import DatabaseUnusable

MAX_CANDIDATES = 64  # snapshot-named files looked at, newest first (a shared directory may hold many)


def _open_trusted(path: Path) -> Judged | None:
    try:
        held = open_judged(path)
    except OSError:
        return None
    if held.untrusted is not None:
        held.close()
        return None
    return held


def _intact_held(held: Judged, path: Path, sha256: str, *, manifest_needed: bool) -> Snapshot | None:
    """The snapshot, if the held file hashes to `sha256` and its trusted manifest (if any) agrees."""
    manifest = manifest_beside(held)
    if manifest is None and manifest_needed:
        return None
    if manifest is not None and (manifest.untrusted is not None or manifest.sha256 != sha256):
        return None
    try:
        if sha256_fd(held.fd) != sha256 or not held.still_named():
            return None
    except OSError:
        return None
    return Snapshot(path=path, sha256=sha256, size=held.status.st_size, tables=0, rows=0)


def _intact(path: Path, sha256: str) -> Snapshot | None:
    held = _open_trusted(path)
    if held is None:
        return None
    with held:
        return _intact_held(held, path, sha256, manifest_needed=False)


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
    # The newest one only another user could not have placed: each costs a full read, and a file
    # planted with a future mtime must not hide the operator's own.
    held, newest = None, None
    for newest in _candidates(directory, db_name)[:MAX_CANDIDATES]:
        held = _open_trusted(newest)
        if held is not None:
            break
    if held is None or newest is None:
        return None
    with held:
        manifest = manifest_beside(held)
        if manifest is None or manifest.untrusted is not None:
            return None
        size = conn.execute("PRAGMA page_count").fetchone()[0] * conn.execute("PRAGMA page_size").fetchone()[0]
        if held.status.st_size != size or not held.still_named():
            return None
        try:
            copy = open_ro(newest)
        except (OSError, sqlite3.Error, DatabaseUnusable):  # refused: a name leading to our own files
            return None
        try:
            if not same_content(conn, copy):
                return None
        except sqlite3.Error:
            return None
        finally:
            copy.close()
        return _intact_held(held, newest, manifest.sha256, manifest_needed=True)


def reusable_snapshot(
    conn: sqlite3.Connection, target_release: str, directory: Path, db_name: str
) -> Snapshot | None:
    """The snapshot an interrupted run of this upgrade left, if it can stand for a new one.

    `conn` holds the writer lock (the rerun's first step, before its first write).
    """
    return _from_interrupted_run(conn, target_release) or _equal_to_database(conn, directory, db_name)


__all__ = ["reusable_snapshot", "same_content"]
