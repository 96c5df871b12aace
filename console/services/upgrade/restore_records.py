"""Which record vouches for a snapshot's content: the database's upgrade ledger or a manifest, by hash.

Split from console/services/upgrade/restore.py, which replaces the file once this (and
restore_origin.py, which database it was taken from) has answered.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from console.db import ledger
from console.db.connect import untouched_read_uri
from console.db.connection import sqlite_connection
from console.db.file_trust import Judged, untrusted_because
from console.db.snapshot_manifest import Manifest, manifest_beside, manifest_path, manifests_with_hash
from console.errors import DatabaseUnusable, Refusal


@dataclass(frozen=True)
class LedgerRecords:
    records: list[tuple[str, str]]  # (path, SHA-256) of every snapshot it remembers
    untrusted: str | None  # why it cannot vouch for anything; None: it counts
    instance: str | None = None  # the database's identity (console/db/ledger.py `instance_id`)


def ledger_records(db_path: Path) -> LedgerRecords:
    """The snapshots the database's upgrade ledger remembers, and whether it may vouch for them.

    The ledger is a table in the database: whoever can write the database (or replace it, through
    its directory) can write any row. So it counts only when the database passes the same rule as
    a manifest (console/db/file_trust.py), and only when it is the exact history this console
    writes (`ledger.read_verified`). Judged without opening the file outside SQLite."""
    if not os.path.lexists(db_path):
        return LedgerRecords([], None)
    try:
        conn = sqlite_connection(untouched_read_uri(db_path), uri=True)
    except (sqlite3.Error, OSError):
        return LedgerRecords([], None)
    instance = None
    try:
        records = ledger.recorded_snapshots(conn)
        instance = ledger.instance_id(conn)
        if not records:
            return LedgerRecords([], None, instance)
        ledger.read_verified(conn)
    except DatabaseUnusable as exc:
        first = exc.reason.split(". ")[0]
        return LedgerRecords(records, f"it is not the history this console writes ({first})", instance)
    except sqlite3.Error:
        return LedgerRecords([], None, instance)
    finally:
        conn.close()
    return LedgerRecords(records, untrusted_because(db_path), instance)


def _same_file(stored: str, snapshot: Path, db_path: Path) -> bool:
    """The ledger's path names `snapshot`. Rows of older consoles may hold a path relative to the
    working directory of the upgrade, unknown now: tried from here and from the database's directory."""
    try:
        mine = snapshot.resolve()
        stored_path = Path(stored)
        if stored_path.is_absolute():
            return stored_path.resolve() == mine
        return mine in {stored_path.resolve(), (db_path.parent / stored_path).resolve()}
    except OSError:
        return False


def _changed(snapshot: Path, record: str, aside: str = "") -> DatabaseUnusable:
    return DatabaseUnusable(
        f"{snapshot} does not match the SHA-256 recorded in {record} when it was taken{aside}; "
        "the snapshot (or the record) was changed. Nothing was restored.",
        "Use another snapshot.",
    )


def _manifest_why(manifest: Manifest, db_path: Path, known: LedgerRecords, digest: str,
                  foreign: bool) -> str | None:
    """Why a manifest of the right hash still cannot vouch for the snapshot's content, or None.

    It must be one only the operator or root could have placed (with the snapshot); and a database
    whose ledger records snapshots is answered by its ledger alone, so a manifest for one it does
    not record does not count (docs/decisions.md, "A manifest names its database"), unless the
    operator said it is another database's snapshot (`foreign`, --other-database). Which database
    it was taken from is the next question (console/services/upgrade/restore_origin.py)."""
    if manifest.untrusted is not None:
        return manifest.untrusted
    if known.records and not foreign and digest not in {sha for _stored, sha in known.records}:
        return f"{db_path.name}'s upgrade ledger records its own snapshots and this one is not among them"
    return None


@dataclass(frozen=True)
class Identified:
    verified_by: str | None  # the record that vouched for the content; None: --unverified
    known: LedgerRecords
    manifest: Manifest | None  # the manifest that vouched, else the first one of this hash (its origin)
    in_ledger: bool  # the database's own ledger, one that counts, records this SHA-256


def identify(db_path: Path, held: Judged, digest: str, unverified: bool, foreign: bool = False) -> Identified:
    """Which record vouches for the snapshot's content (console/db/snapshot_manifest.py), by hash.

    The ledger inside the database being replaced outranks every manifest: a manifest is a file
    beside the snapshot, and whoever could swap the snapshot could rewrite it too. So a ledger row
    for this path with another SHA-256 refuses the restore whatever any manifest says, and a row
    with this SHA-256 vouches for it, as long as the ledger itself counts (`_ledger`). In order: the
    ledger's rows for this path; the snapshot's own manifest; any ledger row with this hash (the
    snapshot was moved); a manifest of this hash beside it or beside the database (it was renamed);
    each manifest counting only under `_manifest_why`.
    No record is accepted only with `unverified`; a record that disagrees is never overridden.
    """
    snapshot = Path(held.path)
    known = ledger_records(db_path)
    ledger_record = f"{db_path.name}'s upgrade ledger"
    in_ledger = known.untrusted is None and digest in {sha for _stored, sha in known.records}
    not_counted: list[str] = []
    seen: list[Manifest] = []

    def found(by: str | None, manifest: Manifest | None = None) -> Identified:
        return Identified(by, known, manifest or (seen[0] if seen else None), in_ledger)

    if known.untrusted is None:
        here = {sha for stored, sha in known.records if _same_file(stored, snapshot, db_path)}
        if here and digest not in here:
            raise _changed(snapshot, ledger_record, ", whatever a manifest beside it says")
        if here:
            return found(f"the record in {ledger_record}")
    own = manifest_path(snapshot)
    mine = manifest_beside(held)
    if mine is not None and mine.sha256 == digest:
        seen.append(mine)
        why = _manifest_why(mine, db_path, known, digest, foreign)
        if why is None:
            return found(f"its manifest {own}", mine)
        not_counted.append(f"its manifest {own.name} does not count because {why}")
    if digest in {sha for _stored, sha in known.records}:
        if known.untrusted is None:
            return found(f"the record in {ledger_record}")
        not_counted.append(f"{ledger_record} does not count because {known.untrusted}")
    if mine is not None and mine.sha256 != digest:
        raise _changed(snapshot, f"its manifest {own}")
    own_real = own.parent.resolve() / own.name
    for other, manifest in manifests_with_hash([snapshot.parent, db_path.parent], digest):
        if other == own_real:
            continue
        seen.append(manifest)
        why = held.untrusted or _manifest_why(manifest, db_path, known, digest, foreign)
        if why is None:
            return found(f"the manifest {other}", manifest)
        not_counted.append(f"the manifest {other} does not count because {why}")
    if unverified:
        return found(None)
    aside = "".join(f" {why[0].upper()}{why[1:]}." for why in not_counted)
    raise Refusal(
        f"The SHA-256 of {snapshot} ({digest}) matches no record: no manifest that counts beside it "
        f"({own.name}) or in its directory or the database's, and no row of the database's "
        f"upgrade ledger that counts.{aside} It cannot be verified as a snapshot the console took. "
        "Nothing was restored.",
        "If you know where this file comes from, run the restore again with --unverified.",
    )


__all__ = ["Identified", "LedgerRecords", "identify", "ledger_records"]
