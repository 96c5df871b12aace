"""Which database a snapshot was taken from, and whether that is the one a restore would replace.

A snapshot's content proves nothing about its origin, and `ARCHON_DB_PATH` may name another database
than the one the "To undo" line was printed for. So every snapshot names its database: its identity
(console/db/ledger.py `instance_id`), path and ledger length, in the manifest written beside it
(console/db/snapshot_manifest.py), and the identity again inside its own ledger once the database had
been upgraded before. The rules, in order (docs/decisions.md, "A snapshot names its database"):

1. the replaced database's own upgrade ledger records this snapshot (and counts): it is its own;
2. both identities are known: they must be equal, except that a snapshot of a database never
   upgraded before is named by its own SHA-256, which the database forgets when it is restored and
   upgraded again; then the path decides;
3. the path the manifest records must be the database's (resolved), equal identities or not: the
   identity is derived from content, so a copy of a database (`cp` to staging) carries it too, and
   only the path tells the copy from the original; a database moved to another path is restored
   with `--other-database`;
4. nothing says where it comes from (a manifest of an older console, or no record at all): only
   `--unverified`, the operator vouching for the file, accepts it.

Every refusal says what was found; `--other-database` overrides it.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from console.db import ledger
from console.db.connect import untouched_read_uri
from console.db.connection import sqlite_connection
from console.db.snapshot_manifest import Manifest
from console.errors import DatabaseUnusable

OVERRIDE = "--other-database"


class OtherDatabase(DatabaseUnusable):
    """The snapshot was taken from another database than the one it would replace (exit 3).

    `unknown`: nothing says which database it was taken from (rule 4), rather than another one."""

    unknown = False


@dataclass(frozen=True)
class Origin:
    how: str  # how the snapshot is known to be this database's, in words
    source: str | None  # the path the manifest records
    instance: str | None  # the identity the snapshot carries


def snapshot_instance(snapshot: Path) -> str | None:
    """The identity recorded inside the snapshot's own ledger (None: it has none, or it cannot say)."""
    try:
        conn = sqlite_connection(untouched_read_uri(snapshot), uri=True)
    except (sqlite3.Error, OSError):
        return None
    try:
        return ledger.instance_id(conn)
    except sqlite3.Error:
        return None
    finally:
        conn.close()


def _short(identity: str | None) -> str:
    return "none" if identity is None else identity[:12]


def _refuse(snapshot: Path, db_path: Path, why: str) -> OtherDatabase:
    return OtherDatabase(
        f"{snapshot} {why}; a restore would put one database's snapshot over another. Nothing was restored.",
        f"Check --db (and ARCHON_DB_PATH): name the database the snapshot was taken from. If the database "
        f"was moved since the snapshot, or to put it over {db_path} all the same, run the restore again "
        f"with {OVERRIDE}.",
    )


def check_origin(
    db_path: Path,
    snapshot: Path,
    digest: str,
    *,
    manifest: Manifest | None,
    in_ledger: bool,
    this_instance: str | None,
    unverified: bool,
    other_database: bool,
) -> Origin:
    """How the snapshot is known to come from `db_path`, or `OtherDatabase` (unless overridden).

    `manifest`: the record that vouched for its content, if a manifest did; `in_ledger`: the
    database's own ledger (one that counts) records this SHA-256; `this_instance`: the database's
    identity."""
    source = manifest.source if manifest is not None else None
    inside = snapshot_instance(snapshot)
    claimed = inside or (manifest.instance if manifest is not None else None)
    target = str(db_path.resolve())

    def decided(how: str) -> Origin:
        return Origin(how, source, claimed)

    if in_ledger:
        return decided(f"{db_path.name}'s upgrade ledger records it")
    if other_database:
        return decided(f"not checked ({OVERRIDE})")
    same = this_instance is not None and claimed == this_instance
    if this_instance is not None and claimed is not None and not same and claimed != digest:
        # (an identity that is the snapshot's own hash: its database had never been upgraded)
        taken = f" ({source})" if source else ""
        raise _refuse(snapshot, db_path, f"was taken from another database{taken}, identity "
                      f"{_short(claimed)}; {db_path} is identity {_short(this_instance)}")
    identity = f" and it carries the database's identity {_short(claimed)}" if same else ""
    if source is not None:
        if source == target or os.path.realpath(source) == target:
            return decided(f"its manifest names {target}{identity}")
        # An equal identity does not outweigh the path: a copy of a database carries its identity.
        copy = (f" (it carries the same identity, {_short(claimed)}: this database is a copy of that one, "
                f"or that one moved here)" if same else "")
        raise _refuse(snapshot, db_path, f"was taken from another database, {source}, not from {target}{copy}")
    if same:
        if unverified:
            return decided(f"it carries the database's identity {_short(claimed)}; no path is recorded "
                           "(--unverified)")
        raise _refuse(snapshot, db_path, f"carries {db_path.name}'s identity {_short(claimed)} but records no "
                      "path, and a copy of a database carries its identity too")
    if unverified:
        return decided("not known (--unverified)")
    unknown = _refuse(snapshot, db_path, "does not say which database it was taken from (its record was "
                      "written by an older console), and the database's ledger does not record it")
    unknown.unknown = True
    raise unknown


__all__ = ["OVERRIDE", "Origin", "OtherDatabase", "check_origin", "snapshot_instance"]
