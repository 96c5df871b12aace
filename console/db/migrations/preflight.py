"""Everything that would make a pending step fail, found before step 001 writes anything.

Each step commits on its own, so a step that fails halfway through an upgrade leaves the steps
before it applied (the destructive sweep 009 among them) and a schema no release has. The upgrade
therefore refuses up front (exit 3, nothing written, not even the snapshot) when:

* a FOREIGN KEY names a table that does not exist (SQLite rewrites foreign keys when a table is
  renamed, so an older archon's rename of check_attempt_details left
  check_attempt_diagnostic_parsers pointing at check_attempt_details_legacy); every rebuild's
  foreign-key check fails on such a table;
* `PRAGMA foreign_key_check` reports rows while a pending step rebuilds a table (each rebuild
  checks the whole database's foreign keys before it commits);
* a rebuild would copy rows its new table's CHECK, NOT NULL or UNIQUE constraints reject: the
  replacement is archon's fixed text (steps 004, 014, 020) or the table's own stored text with the
  outcome list widened (018, 028), whose CHECKs a row written past them (`PRAGMA
  ignore_check_constraints`, an older writer) fails when the rebuild copies it. Each rebuild's
  text is the one it created on the replayed schema, read right after that step ran there, and
  each CHECK of it is evaluated over the file's rows by one read-only query (`WHERE NOT (expr)`),
  so the scan stays inside SQLite;
* a UNIQUE index a pending step creates would reject rows already there;
* a project's active profile revision cannot be normalised by a pending profile backfill (006,
  021, 022 stop on it with archon's own "Stored execution profile revision ... is invalid");
* a fixed revision id a pending profile step would insert (`<project>:execution-profile:1`, `:v2`,
  `:v3`, `:chat-build-v3`...) is already held by a row with other content: archon's `INSERT OR
  IGNORE` skips it and the step stops or activates the wrong row (console/db/migrations/fixed_ids.py);
* a pending step fails on the database's rows: the whole pending chain runs, in order, on a private
  in-memory copy with the rows of the tables the profile steps read or update (fixed_ids.py
  `rehearse`); the first step that fails there (a guard trigger's RAISE, an invalid stored profile
  that only becomes active part-way, anything) refuses the upgrade, naming the step and its message;
* a pending step fails on the database's schema itself (for example a trigger or view naming a
  missing table makes every ALTER TABLE ... RENAME fail): found by replaying the schema, without
  rows, into a private in-memory database and running the pending steps there.

Reads only; the caller decides what a finding means (`refusal`).
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from typing import Sequence

from console.db.sql import quote_identifier
from console.db.migrations import fixed_ids
from console.db.migrations.base import Migration
from console.db.migrations.replay import replay_schema
from console.db.migrations.runner import MigrationFailed, apply_migration
from console.text import UnreadableJson, one_line, read_json

SAMPLE = 5

# Every rebuilding step -> the table it rebuilds: existing rows are checked against the text it
# creates, archon's fixed text (004, 014, 020) or the table's own with the outcome list widened
# (018, 028).
REBUILT_TABLES = {
    "004-profile-revisions-rebuild-v2": "execution_profile_revisions",
    "014-approval-requests-rebuild-action-limit": "approval_requests",
    "018-check-attempt-outcome-ambiguous": "check_attempt_details",
    "020-profile-revisions-rebuild-v3": "execution_profile_revisions",
    "028-check-attempt-outcome-environment-loss": "check_attempt_details",
}


@dataclass(frozen=True)
class Blocker:
    """One reason a pending step would fail: what, which objects, and what the operator can do."""

    code: str
    objects: tuple[str, ...]
    problem: str
    what_to_do: str


def _t(value: object) -> str:
    """Database text inside a refusal: one line, no control characters, bounded."""
    return one_line(value, 80)


def _tables(conn: sqlite3.Connection) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"
        )
    ]


def _columns(conn: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})")]


# --- foreign keys ----------------------------------------------------------------------------


def _dangling_parents(conn: sqlite3.Connection) -> list[Blocker]:
    tables = _tables(conn)
    existing = {t.lower() for t in tables}
    blockers = []
    for raw_table in tables:
        parents = sorted({r[2] for r in conn.execute(f"PRAGMA foreign_key_list({quote_identifier(raw_table)})")})
        for raw_parent in parents:
            if raw_parent.lower() in existing:
                continue
            table, parent = _t(raw_table), _t(raw_parent)
            guess = re.sub(r"_(legacy|old|v\d+|replacement)$", "", parent)
            fix = (
                f"re-create {table} with its FOREIGN KEY naming {guess} instead (keeping its rows)"
                if guess != parent and guess.lower() in existing
                else f"re-create {table} with its FOREIGN KEY naming the table that holds those rows"
            )
            blockers.append(Blocker(
                "foreign_key.missing_parent",
                (raw_table, raw_parent),
                f"table {table} has a FOREIGN KEY naming {parent}, a table that does not exist (SQLite "
                "rewrites foreign keys when a table is renamed, and an older release renamed it away); "
                "every table rebuild checks foreign keys before it commits and would stop there, "
                "after the earlier steps had committed",
                f"Repair it by hand first: {fix}, or restore a backup; archon's own rebuild fails on it "
                "the same way. The console does not edit foreign keys.",
            ))
    return blockers


def _foreign_key_violations(conn: sqlite3.Connection, skip_parents: set[str]) -> list[Blocker]:
    rows = [
        tuple(r) for r in conn.execute("PRAGMA foreign_key_check")
        if (r[2] or "").lower() not in skip_parents
    ]
    if not rows:
        return []
    tables = sorted({r[0] for r in rows})
    sample = "; ".join(_describe_violation(conn, *r) for r in rows[:SAMPLE])
    return [Blocker(
        "foreign_key.violations",
        tuple(tables),
        f"{len(rows)} row(s) break a FOREIGN KEY ({sample}); a pending table rebuild checks every "
        "foreign key before it commits and would stop there, after the earlier steps had committed",
        "Fix or delete those rows first (`archon-console doctor` lists them as foreign_keys.violations); "
        "the console does not change them.",
    )]


def _describe_violation(conn, table: str, rowid, parent: str, fkid: int) -> str:
    """"child rowid N (col = value) -> parent": the key itself, so the row can be found."""
    cols = [r[3] for r in conn.execute(f"PRAGMA foreign_key_list({quote_identifier(table)})") if r[0] == fkid]
    try:
        values = conn.execute(
            f"SELECT {', '.join(quote_identifier(c) for c in cols)} FROM {quote_identifier(table)} WHERE rowid = ?", (rowid,)
        ).fetchone()
    except sqlite3.OperationalError:
        values = None
    key = ", ".join(f"{_t(c)} = {_t(v)}" for c, v in zip(cols, values)) if values else "?"
    return f"{_t(table)} rowid {rowid} ({key}) -> {_t(parent)}"


# --- the schema, replayed without rows -------------------------------------------------------


def _dry_run(
    conn: sqlite3.Connection, pending: Sequence[Migration], rebuilt: dict[str, str] | None = None
) -> tuple[list[Blocker], sqlite3.Connection]:
    """Run `pending` on the replayed schema; `rebuilt` (step id -> table text) receives the text
    of the table each rebuilding step (`REBUILT_TABLES`) created, read right after it ran."""
    scratch = replay_schema(conn)
    for migration in pending:
        try:
            apply_migration(scratch, migration)
            if rebuilt is not None and migration.id in REBUILT_TABLES:
                row = scratch.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?",
                                      (REBUILT_TABLES[migration.id],)).fetchone()
                if row is not None:
                    rebuilt[migration.id] = row[0]
        except MigrationFailed as exc:
            return [Blocker(
                "step.fails_on_schema",
                (migration.id,),
                f"step {migration.id} fails on this database's schema ({one_line(exc.message, 240)})",
                "Find the object the error names (a trigger or view naming a missing table or column stops "
                "every table rebuild) and repair or drop it by hand, or restore a backup; nothing of the "
                "upgrade was written.",
            )], scratch
    return [], scratch


# --- rows the new constraints would reject ---------------------------------------------------


def _skipped(sql: str, i: int) -> int | None:
    """Where a string literal, quoted name or comment starting at `i` ends (the index after it), or
    None when none starts there. An unclosed one runs to the end of the text, as SQLite reads it."""
    n, ch = len(sql), sql[i]
    if ch in "'\"`[":
        close = "]" if ch == "[" else ch
        end = sql.find(close, i + 1)
        while end != -1 and close != "]" and end + 1 < n and sql[end + 1] == close:
            end = sql.find(close, end + 2)  # a doubled quote is part of the text
        return n if end == -1 else end + 1
    if sql.startswith("--", i):
        end = sql.find("\n", i + 2)
        return n if end == -1 else end + 1
    if sql.startswith("/*", i):
        end = sql.find("*/", i + 2)
        return n if end == -1 else end + 2
    return None


def check_expressions(sql: str) -> list[str]:
    """The CHECK expressions of a CREATE TABLE text, skipping string literals, quoted names and
    comments (a parenthesis inside any of them is not the expression's). An expression that cannot
    be evaluated is the caller's refusal, never a skipped CHECK."""
    found, i, n = [], 0, len(sql)
    while i < n:
        skipped = _skipped(sql, i)
        if skipped is not None:
            i = skipped
            continue
        if sql[i:i + 5].upper() == "CHECK" and (i == 0 or not (sql[i - 1].isalnum() or sql[i - 1] == "_")):
            j = i + 5
            while j < n and (sql[j].isspace() or _skipped(sql, j) is not None and sql[j] in "-/"):
                j = _skipped(sql, j) if sql[j] in "-/" else j + 1
            if j < n and sql[j] == "(":
                depth, k = 0, j
                while k < n:
                    skipped = _skipped(sql, k)
                    if skipped is not None:
                        k = skipped
                        continue
                    c = sql[k]
                    if c == "(":
                        depth += 1
                    elif c == ")":
                        depth -= 1
                        if depth == 0:
                            found.append(sql[j + 1:k])
                            break
                    k += 1
                i = k + 1
                continue
        i += 1
    return found


def _identity(conn: sqlite3.Connection, table: str) -> str:
    pk = [r[1] for r in conn.execute(f"PRAGMA table_info({quote_identifier(table)})") if r[5]]
    return quote_identifier(pk[0]) if len(pk) == 1 else "rowid"


def _rejected_rows(conn, scratch, table: str, new_sql: str, step: str) -> list[Blocker]:
    """Rows of `table` a rebuild to `new_sql` would not accept (its CHECKs; the NOT NULL and
    UNIQUE constraints of the table in `scratch`, same name, after every pending step)."""
    present = set(_columns(conn, table))
    ident = _identity(conn, table)
    blockers = []
    problems: list[str] = []
    for expr in check_expressions(new_sql):
        try:
            ids = [r[0] for r in conn.execute(
                f"SELECT {ident} FROM {quote_identifier(table)} WHERE NOT ({expr}) LIMIT {SAMPLE}"
            )]
        except sqlite3.OperationalError as exc:
            if "interrupted" in str(exc):
                raise  # a stop or an expired budget is not "no rows rejected"
            if str(exc).startswith("no such column"):
                continue  # names a column the old table lacks: the copy gives it its default
            problems.append(f"CHECK ({_t(' '.join(expr.split()))}) cannot be evaluated over the existing rows "
                            f"({_t(str(exc))}), so the console cannot tell whether the rebuild accepts them")
            continue
        if ids:
            problems.append(f"CHECK ({_t(' '.join(expr.split()))}) rejects {', '.join(map(_t, ids))}")
    for _cid, name, _type, notnull, default, _pk in scratch.execute(f"PRAGMA table_info({quote_identifier(table)})"):
        if not notnull:
            continue
        if name not in present:
            if default is None:
                problems.append(f"column {name} is NOT NULL without a default and the table lacks it")
            continue
        ids = [r[0] for r in conn.execute(
            f"SELECT {ident} FROM {quote_identifier(table)} WHERE {quote_identifier(name)} IS NULL LIMIT {SAMPLE}"
        )]
        if ids:
            problems.append(f"NOT NULL {name} rejects {', '.join(map(_t, ids))}")
    for _seq, index, unique, origin, _partial in scratch.execute(f"PRAGMA index_list({quote_identifier(table)})"):
        if unique and origin in ("u", "pk"):
            cols = [r[2] for r in scratch.execute(f"PRAGMA index_info({quote_identifier(index)})")]
            dupes = _duplicates(conn, table, cols, None)
            if dupes:
                problems.append(f"UNIQUE ({', '.join(cols)}) rejects duplicates of {dupes}")
    if problems:
        blockers.append(Blocker(
            "rebuild.rejected_rows",
            (table,),
            f"rebuilding {table} (step {step}) would reject rows: " + "; ".join(problems),
            f"Correct or remove those rows of {table} first (archon's own rebuild rejects them too); "
            "the console does not change them.",
        ))
    return blockers


def _duplicates(conn, table: str, cols: list[str | None], where: str | None) -> str | None:
    if not cols or any(c is None for c in cols) or not set(cols) <= set(_columns(conn, table)):
        return None
    names = ", ".join(quote_identifier(c) for c in cols)
    condition = " AND ".join(f"{quote_identifier(c)} IS NOT NULL" for c in cols)
    if where:
        condition += f" AND ({where})"
    try:
        rows = conn.execute(
            f"SELECT {names}, count(*) FROM {quote_identifier(table)} WHERE {condition} "
            f"GROUP BY {names} HAVING count(*) > 1 LIMIT {SAMPLE}"
        ).fetchall()
    except sqlite3.OperationalError:
        return None
    if not rows:
        return None
    return "; ".join(f"({', '.join(map(_t, r[:-1]))}) x{r[-1]}" for r in rows)


def _new_unique_indexes(conn, scratch) -> list[Blocker]:
    existing = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    tables = set(_tables(conn))
    blockers = []
    for name, table, sql in scratch.execute(
        "SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    ).fetchall():
        if name in existing or table not in tables or not re.match(r"\s*CREATE\s+UNIQUE", sql, re.I):
            continue
        cols = [r[2] for r in scratch.execute(f"PRAGMA index_info({quote_identifier(name)})")]
        where = re.search(r"\)\s*WHERE\s+(.*)$", sql, re.I | re.S)
        dupes = _duplicates(conn, table, cols, where.group(1) if where else None)
        if dupes:
            blockers.append(Blocker(
                "unique_index.duplicates",
                (name, table),
                f"the UNIQUE index {name} a pending step creates on {_t(table)} would reject rows already "
                f"there: {dupes}",
                f"Resolve the duplicate rows of {_t(table)} first (archon's own start fails on them too); the "
                "console does not change them.",
            ))
    return blockers


# --- profile backfills that would stop ------------------------------------------------------

# step id -> the schema versions it reads and the version it normalises them to.
PROFILE_BACKFILLS = {
    "006-profile-backfill-schema-v2": ((1,), 2),
    "021-profile-backfill-current-schema": ((1, 2), 3),
}
WORKLOAD_BACKFILL = "022-profile-workload-eligibility"


def _readable(profile_json: object) -> bool:
    """Whether the bounded reader can parse a stored profile: one nested too deeply or too large is
    refused here, before step 001, instead of stopping a step half-way (the backfills read with
    `execution_profiles.parse`, which refuses the same text, as a step failure)."""
    if not isinstance(profile_json, str):
        return True  # the backfill's own check names it
    try:
        read_json(profile_json)
    except UnreadableJson:
        return False
    return True


def _unmigratable_profiles(conn: sqlite3.Connection, pending: Sequence[Migration]) -> list[Blocker]:
    from console.db.migrations import backfills

    ids = {m.id for m in pending}
    if "execution_profile_revisions" not in _tables(conn) or "projects" not in _tables(conn):
        return []
    bad: dict[str, str] = {}
    for step_id, (versions, target) in PROFILE_BACKFILLS.items():
        if step_id not in ids:
            continue
        try:
            rows = conn.execute(backfills.active_rows_sql(versions)).fetchall()
        except sqlite3.OperationalError:
            continue  # the columns come with earlier pending steps: nothing to migrate yet
        for _project, revision_id, profile_json in rows:
            if not _readable(profile_json):
                bad.setdefault(revision_id, step_id)
                continue
            try:
                backfills._normalized(profile_json, revision_id, target)
            except backfills.BackfillError:
                bad.setdefault(revision_id, step_id)
    if WORKLOAD_BACKFILL in ids:
        unreadable = False
        try:
            for _project, revision_id, profile_json in conn.execute(backfills.active_rows_sql((3,))):
                if not _readable(profile_json):
                    bad.setdefault(revision_id, WORKLOAD_BACKFILL)
                    unreadable = True
        except sqlite3.OperationalError:
            pass
        try:
            if not unreadable:
                backfills.workload_repairs(conn, 3)
        except backfills.BackfillError as exc:
            bad.setdefault(str(exc).split("revision ", 1)[-1].split(" is invalid")[0], WORKLOAD_BACKFILL)
        except sqlite3.OperationalError:
            pass
    if not bad:
        return []
    listed = "; ".join(f"{_t(rid)} (step {step})" for rid, step in list(bad.items())[:SAMPLE])
    return [Blocker(
        "profiles.unmigratable",
        tuple(bad),
        f"{len(bad)} active execution profile revision(s) cannot be normalised by the profile backfill that "
        f"would read them: {listed}; the step stops there with archon's own message (\"Stored execution "
        "profile revision ... is invalid\")",
        "Activate a valid revision for those projects first (archon's own start stops on them the same way); "
        "the console does not edit stored profiles.",
    )]


def _rehearsal_blockers(conn: sqlite3.Connection, pending: Sequence[Migration],
                        explained: bool) -> list[Blocker]:
    rehearsal = fixed_ids.rehearse(conn, pending)
    taken = rehearsal.collisions
    if rehearsal.failure is not None:
        if explained:  # another blocker already stops the upgrade (and most make this run fail too)
            return []
        step, message = rehearsal.failure.step, one_line(rehearsal.failure.message, 240)
        return [Blocker(
            "step.fails_on_rows",
            (step,),
            f"step {step} fails on this database's rows ({message}), found by running every pending step "
            "on a private copy of the profile tables",
            "Correct the rows the message names by hand (archon's own start stops on most of them the same "
            "way), or restore a backup; nothing of the upgrade was written.",
        )]
    if not taken:
        return []
    listed = "; ".join(
        f"{_t(c.revision_id)} for project {_t(c.project)} (step {c.step}) is held by {_t(c.held_by)}"
        for c in taken[:SAMPLE]
    ) + (f"; and {len(taken) - SAMPLE} more" if len(taken) > SAMPLE else "")
    return [Blocker(
        "profiles.fixed_id_taken",
        tuple(c.revision_id for c in taken),
        f"{len(taken)} fixed revision id(s) a pending step would insert are already taken: {listed}; "
        "archon's INSERT OR IGNORE skips such an insert, so the step would stop (or point the project at "
        "the wrong revision) after the earlier steps had committed",
        "Resolve each named id by hand before upgrading (archon writes that id only with the content the "
        "step would write, and its own start stops on it the same way), or restore a backup; the console "
        "does not edit or delete profile revisions.",
    )]


# --- all of it -------------------------------------------------------------------------------


def _needed_now(conn: sqlite3.Connection, migration: Migration) -> bool:
    try:
        return migration.needed is None or bool(migration.needed(conn))
    except sqlite3.Error:
        return True


def find_blockers(conn: sqlite3.Connection, pending: Sequence[Migration]) -> list[Blocker]:
    """Every reason a pending step would fail on this database; empty when the upgrade can run."""
    if not pending:
        return []
    blockers = _dangling_parents(conn) + _unmigratable_profiles(conn, pending)
    rebuilding = [m for m in pending if m.rebuild and _needed_now(conn, m)]
    if rebuilding:
        missing = {b.objects[1].lower() for b in blockers if b.code == "foreign_key.missing_parent"}
        blockers += _foreign_key_violations(conn, missing)
    texts: dict[str, str] = {}
    failed, scratch = _dry_run(conn, pending, texts)
    try:
        blockers += failed
        if not failed:
            seen: set[tuple[str, ...]] = set()
            for migration in rebuilding:
                table = REBUILT_TABLES.get(migration.id)
                if table in _tables(conn) and migration.id in texts:
                    for blocker in _rejected_rows(conn, scratch, table, texts[migration.id], migration.id):
                        if blocker.objects not in seen:  # the first rebuild of a table stops the upgrade
                            seen.add(blocker.objects)
                            blockers.append(blocker)
            blockers += _new_unique_indexes(conn, scratch)
    finally:
        scratch.close()
    return blockers + _rehearsal_blockers(conn, pending, explained=bool(blockers))


def refusal_text(blockers: Sequence[Blocker]) -> tuple[str, str]:
    """The refusal's sentence and its advice, naming every blocker."""
    reason = (
        "The upgrade would fail part-way, after earlier steps had committed, so it stops before the first "
        "write: " + " | ".join(f"{b.problem}." for b in blockers) + " Nothing was written."
    )
    advice = " ".join(dict.fromkeys(b.what_to_do for b in blockers))
    return reason, advice
