"""Schema and ledger: the detected release, objects that release should have, the upgrade ledger."""

from __future__ import annotations

import sqlite3
from functools import lru_cache

from console.db.rules import rule_of, rules_present
from console.db.sql import generated_columns
from console.db.detect import LEDGER_META_TABLE, LEDGER_TABLE
from console.db.introspect import schema_of
from console.services.doctor.context import Ctx, ids_text, rows_of
from console.services.doctor.report import ROW_LIMIT, Finding
from console.text import one_line

# --- schema and ledger -----------------------------------------------------------------------

# Archon's start-up creates this index (CREATE INDEX IF NOT EXISTS) *before* it rebuilds
# execution_profile_revisions (1.8.22: schema (1) -> (1, 2); 1.10.0: -> (1, 2, 3)); the rebuild
# drops the old table with its index, and only archon's next start creates it again. The console's
# own rebuild (console/db/migrations/base.py `rebuild_table`) keeps the table's indexes.
ARCHON_REBUILD_LOSES = ("index", "idx_execution_profile_revisions_project")


def _console_reached(ctx: Ctx, release: str) -> bool:
    """True when the console's ledger records every step up to `release`: it, not archon, upgraded."""
    from console.db.ledger import read_entries
    from console.db.migrations.registry import migrations_through

    try:
        names = {e.name for e in read_entries(ctx.conn)}
    except Exception:  # an odd ledger is check_ledger's finding; treat it as not the console's upgrade
        return False
    return all(m.id in names for m in migrations_through(release))


@lru_cache(maxsize=4)
def _reference(release: str) -> tuple[frozenset[tuple[str, str]], dict[tuple[str, str], tuple[tuple, str]]]:
    """The objects a database of `release` should have, and what each trigger and index enforces
    (with its text)."""
    from console.db.migrations.registry import migrations_through
    from console.db.connection import scratch_connection
    from console.db.migrations.runner import apply_all

    conn = scratch_connection()
    try:
        conn.execute("PRAGMA foreign_keys = ON")
        apply_all(conn, migrations_through(release))
        objects = frozenset(
            (r[0], r[1])
            for r in conn.execute(
                "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger') "
                "AND name NOT LIKE 'sqlite_%'"
            )
        )
        rules = {}
        for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master WHERE type IN ('trigger', 'index')"):
            rule = rule_of(conn, kind, name)
            if rule is not None:
                rules[(kind, name)] = (rule, sql)
        return objects, rules
    finally:
        conn.close()


def reference_objects(release: str) -> frozenset[tuple[str, str]]:
    """(type, name) of every table, index and trigger a database of `release` should have."""
    return _reference(release)[0]


def held_under_another_name(ctx: Ctx, release: str, objects) -> dict[tuple[str, str], tuple[str, bool]]:
    """Those of `objects` (missing by the console's name) that the database claims under its own
    name: same table, same event and RAISE messages (a trigger), same keys and WHERE (an index).
    -> the name the database holds each under, and whether it enforces the rule as strongly as the
    console's text (console/db/rules.py `same_strength`: a trigger's text apart from its name)."""
    expected = {key: (rule, sql) for key, (rule, sql) in _reference(release)[1].items() if key in objects}
    if not expected:
        return {}
    present = rules_present(ctx.conn, {rule: sql for rule, sql in expected.values()})
    return {key: present[rule] for key, (rule, _sql) in expected.items() if rule in present}


@lru_cache(maxsize=1)
def reconstructed_rules() -> dict[tuple, tuple[str, ...]]:
    """What each trigger and index of the console's 1.8.20 reconstruction enforces, at any release
    -> the console's texts for it (a redacted copy stands one in for a rule held under another name,
    the one the original is as strong as, console/services/redaction_schema.py `renamed_rule`)."""
    from console.db.migrations.registry import RELEASES
    from console.db.migrations.steps.s001_baseline_1_8_20 import reconstructed_objects

    found: dict[tuple, tuple[str, ...]] = {}
    for release in RELEASES:
        for key, (rule, sql) in _reference(release)[1].items():
            if key in reconstructed_objects() and sql not in found.get(rule, ()):
                found[rule] = (*found.get(rule, ()), sql)
    return found


def _generated_columns(ctx: Ctx) -> list[Finding]:
    """Generated columns: archon declares none, and SQLite computes one at every read from an
    expression the file's author chose (a 300 MB `printf`), so the console never reads them
    (console/db/sql.py `stored_columns`); doctor says they are there."""
    found = []
    for (table,) in ctx.conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name"):
        try:
            found += [f"{one_line(table, 80)}.{one_line(c, 80)}" for c in generated_columns(ctx.conn, table)]
        except sqlite3.DatabaseError:
            continue  # a table SQLite cannot describe is the integrity check's finding
    if not found:
        return []
    return [Finding(
        "schema.generated_columns", "warning", "Tables have generated columns archon never declares",
        f"{len(found)} generated column(s): {', '.join(found[:ROW_LIMIT])}.",
        "SQLite computes a generated column at every read from an expression stored in the file; a hostile "
        "expression can take any amount of memory or time. The console never reads them.",
        "Find out who added them; archon does not need them (drop them on a copy with ALTER TABLE ... DROP "
        "COLUMN).",
        rows=[{"table": "sqlite_master", "id": name} for name in found][:ROW_LIMIT], count=len(found),
    )]


def _missing_revision_triggers(ctx: Ctx) -> list[str]:
    """The triggers naming execution_profile_revisions that 1.10.0's rebuild drops and its start
    re-creates only after its backfills, missing from a file whose table has 1.10.0's text."""
    from console.db.migrations.profile_triggers import release_revision_triggers

    table = ctx.conn.execute(
        "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'execution_profile_revisions'"
    ).fetchone()
    if not table or "schema_version IN (1, 2, 3)" not in (table[0] or ""):
        return []
    present = {trigger.name for trigger in schema_of(ctx.conn).triggers}
    return sorted(name for name in release_revision_triggers(3) if name not in present)


def _recorded_target(ctx: Ctx) -> str | None:
    """The latest release the ledger's steps were applied for (the run the next one must continue)."""
    from console.db.ledger import read_entries
    from console.db.migrations.registry import RELEASES

    try:
        aimed = [e.target_release for e in read_entries(ctx.conn) if e.target_release in RELEASES]
    except Exception:  # an odd ledger is check_ledger's finding
        return None
    return max(aimed, key=RELEASES.index) if aimed else None


def _interrupted_upgrade(ctx: Ctx) -> Finding | None:
    """A schema between two releases that the console's own ledger explains: an upgrade stopped
    after a step committed (each step commits on its own). The next `upgrade` run finishes it. Between
    steps 020 and 022 the profile guard triggers are missing, as after an archon 1.10.0 start stopped
    right after its rebuild (console/db/migrations/steps/s020_profile_revisions_rebuild_v3.py)."""
    from console.db.migrations.registry import MIGRATIONS

    ledger = ctx.shape.ledger
    names = tuple(m.id for m in MIGRATIONS)
    if not ledger or len(ledger) >= len(names) or ledger != names[: len(ledger)]:
        return None
    target = _recorded_target(ctx) or MIGRATIONS[len(ledger)].release
    missing = _missing_revision_triggers(ctx)
    guards = (
        f" Missing until step 022 runs: {', '.join(missing)} (archon's 1.10.0 rebuild drops them and its "
        "start re-creates them after its profile backfills, which have not run yet)." if missing else ""
    )
    return Finding(
        "schema.interrupted_upgrade", "warning", "An upgrade stopped part-way",
        f"The ledger ends at step {ledger[-1]}; the schema is between two releases ({ctx.shape.reason}).{guards}",
        "Each upgrade step commits on its own; a run stopped between steps (Ctrl-C, a busy database, a "
        "crash) leaves the steps it finished, and the schema is no release's until the rest have run.",
        f"Finish it with `archon-console upgrade --to {target}` (it resumes after the last step), or restore "
        "the snapshot the interrupted run took. Do not start an older archon on it.",
        count=1,
    )


def check_schema(ctx: Ctx) -> list[Finding]:
    shape = ctx.shape
    findings: list[Finding] = _generated_columns(ctx)
    if shape.newer:
        findings.append(Finding(
            "schema.newer", "error", "The schema is newer than this console knows",
            f"{shape.reason}.",
            "A newer archon changed the schema; this console's checks and writes may not fit it.",
            "Use a console release that knows the newer archon release.",
            count=1,
        ))
        return findings
    if shape.release is None and (interrupted := _interrupted_upgrade(ctx)) is not None:
        findings.append(interrupted)
        return findings
    if shape.release is None:
        missing = _missing_revision_triggers(ctx)
        stopped = (f" The table execution_profile_revisions has 1.10.0's text but {', '.join(missing)} "
                   "are missing: what an archon 1.10.0 start stopped right after its rebuild leaves (its next "
                   "start re-creates them after its profile backfills)." if missing else "")
        findings.append(Finding(
            "schema.unknown_shape", "error", "The schema matches no known archon release",
            f"{shape.reason}.{stopped}",
            "The markers of one release are only partly there: an interrupted upgrade, a hand edit, or an "
            "archon release this console does not know.",
            "Compare `schema.sql` of a support bundle with the release the user runs; do not upgrade until "
            "it is understood.",
            count=1,
        ))
        return findings
    findings.append(Finding(
        "schema.release", "info", "Detected archon release",
        f"archon {shape.release} shape{_unless_plain(shape)}; {len(shape.tables)} tables.",
        "Checks, features and upgrades depend on the release the schema shows.", "",
    ))
    present = {
        (r[0], r[1])
        for r in ctx.conn.execute(
            "SELECT type, name FROM sqlite_master WHERE type IN ('table', 'index', 'trigger')"
        )
    }
    from console.db.migrations.steps.s001_baseline_1_8_20 import reconstructed_objects

    missing_all = reference_objects(shape.release) - present
    held = held_under_another_name(ctx, shape.release, missing_all & reconstructed_objects())
    elsewhere = {key: other for key, (other, strong) in held.items() if strong}
    conditioned = {key: other for key, (other, strong) in held.items() if not strong}
    reconstructed = sorted(missing_all & reconstructed_objects() - set(held))
    missing = sorted(missing_all - reconstructed_objects())
    if conditioned:
        findings.append(Finding(
            "schema.reconstructed_renamed_unproven", "warning",
            "Rules of the console's 1.8.20 reconstruction are held under another name, but with a condition "
            "the console's rule does not have",
            f"{len(conditioned)} held: " + ", ".join(
                f"{t} {n} as {one_line(other, 80)}" for (t, n), other in sorted(conditioned.items())) + ".",
            "A trigger of another name raises the same message on the same table and event, but its text "
            "differs from the console's rule (a WHEN, a CASE or a WHERE around its RAISE may make it raise "
            "less often, or never); the console does not vouch for a rule it cannot show equal.",
            "Check it enforces the rule: compare its text in `schema.sql` of a support bundle with the "
            "console's reconstruction and with archon's own schema.",
            rows=[{"table": "sqlite_master", "id": other} for other in sorted(conditioned.values())][:ROW_LIMIT],
            count=len(conditioned),
        ))
    if elsewhere:
        findings.append(Finding(
            "schema.reconstructed_renamed", "info",
            "Rules of the console's 1.8.20 reconstruction are held under archon's own names",
            f"{len(elsewhere)} held: " + ", ".join(
                f"{t} {n} as {one_line(other, 80)}" for (t, n), other in sorted(elsewhere.items())) + ".",
            "The console names these rules itself (archon's text never shows their names); the database "
            "enforces the same rule (the same trigger text apart from its name, or the same index keys and WHERE) "
            "under another name.",
            "", rows=[{"table": "sqlite_master", "id": other} for other in sorted(elsewhere.values())][:ROW_LIMIT],
            count=len(elsewhere),
        ))
    if reconstructed:
        findings.append(Finding(
            "schema.reconstructed_missing", "warning",
            "Objects of the console's 1.8.20 reconstruction are not in this database",
            f"{len(reconstructed)} absent: " + ", ".join(f"{t} {n}" for t, n in reconstructed) + ".",
            "Archon's own text for these is not known to the console, only its reconstruction; archon may "
            "hold the same rule under another name, or lack it. An upgrade never creates them on a database "
            "it adopts, so they stay absent.",
            "Compare `schema.sql` of a support bundle with archon's own schema; if archon lacks the rule, "
            "let archon start once (it creates what its release has).",
            rows=[{"table": "sqlite_master", "id": n} for _t, n in reconstructed][:ROW_LIMIT],
            count=len(reconstructed),
        ))
    if ARCHON_REBUILD_LOSES in missing and not _console_reached(ctx, shape.release):
        missing.remove(ARCHON_REBUILD_LOSES)
        findings.append(Finding(
            "schema.profile_index_after_archon_upgrade", "info",
            f"{ARCHON_REBUILD_LOSES[1]} is missing until archon's next start",
            f"Index {ARCHON_REBUILD_LOSES[1]} is missing on a database archon upgraded (the console's ledger does "
            f"not record an upgrade to {shape.release}).",
            "Archon creates this index before it rebuilds execution_profile_revisions, so its own upgrade drops it; "
            "its next start creates it again. Until then listing a project's revisions is slower; nothing is wrong.",
            "Nothing, or start archon once more.",
            rows=[{"table": "sqlite_master", "id": ARCHON_REBUILD_LOSES[1]}], count=1,
        ))
    if missing:
        kinds = {k: [n for t, n in missing if t == k] for k in ("table", "index", "trigger")}
        text = "; ".join(f"{len(v)} {k}(s): {', '.join(v)}" for k, v in kinds.items() if v)
        findings.append(Finding(
            "schema.missing_objects", "error", f"Objects archon {shape.release} should have are missing",
            f"{len(missing)} missing: {text}.",
            "Missing triggers stop guarding their rules (immutability, transitions); missing indexes make "
            "archon slow or let duplicates in.",
            "Let archon start once (it re-creates most of them), or run `archon-console upgrade`, which "
            "re-applies the release's steps.",
            rows=[{"table": "sqlite_master", "id": n} for _t, n in missing][:ROW_LIMIT],
            count=len(missing),
        ))
    return findings


def check_ledger(ctx: Ctx) -> list[Finding]:
    from console.db.migrations.registry import CURRENT_RELEASE, MIGRATIONS, RELEASES

    findings: list[Finding] = []
    try:
        from console.db.ledger import read_entries

        entries = read_entries(ctx.conn)
    except Exception as exc:  # read defensively: the ledger module or table may be odd
        return [Finding(
            "ledger.unreadable", "error", "The upgrade ledger cannot be read",
            f"Reading {LEDGER_TABLE}/{LEDGER_META_TABLE} failed: {exc}.",
            "The console cannot tell which steps it applied.",
            "Inspect the two tables in a support bundle.",
            count=1, unusable=True,
        )]
    known = {m.id: m for m in MIGRATIONS}
    names = [e.name for e in entries]
    if not entries:
        findings.append(Finding(
            "ledger.state", "info", "Upgrade ledger",
            "No ledger: the console never upgraded this database, or its ledger tables were dropped "
            "(archon itself keeps none).",
            "An unversioned database is adopted by the first `upgrade --force`, after a safety copy. Without "
            "its ledger the console cannot tell rows its own upgrade wrote from archon's: they then count as "
            "archon's evidence (docs/decisions.md D6).", "",
        ))
    else:
        last = entries[-1]
        findings.append(Finding(
            "ledger.state", "info", "Upgrade ledger",
            f"{len(entries)} step(s) recorded, last {last.name} at {last.applied_at or '?'}"
            f" (target {last.target_release or '?'}).",
            "The ledger is the console's record of the steps it applied.", "",
        ))
    unknown = [n for n in names if n not in known]
    if unknown:
        findings.append(Finding(
            "ledger.unknown_steps", "error", "The ledger names steps this console does not know",
            f"{len(unknown)} unknown step(s): {ids_text(unknown, len(unknown))}.",
            "A newer archon-console upgraded this database; this one cannot vouch for its schema and refuses "
            "to write to it.",
            "Use the archon-console release that upgraded it, or a newer one.",
            rows=rows_of(LEDGER_TABLE, unknown), count=len(unknown), unusable=True,
        ))
        return findings
    expected = [m.id for m in MIGRATIONS[: len(names)]]
    if names != expected:
        position = next(i for i, (a, b) in enumerate(zip(names, expected)) if a != b)
        findings.append(Finding(
            "ledger.divergent", "error", "The ledger is not the exact ordered history of the registry",
            f"At position {position + 1} the ledger has {names[position]}, the registry {expected[position]}.",
            "Steps were skipped, reordered or recorded by another tool; upgrades fail closed.",
            "Restore a snapshot, or inspect the ledger tables by hand.",
            rows=rows_of(LEDGER_TABLE, [names[position]]), count=1, unusable=True,
        ))
        return findings
    incomplete = [e.name for e in entries if not e.has_meta or e.applied_at is None]
    if incomplete:
        findings.append(Finding(
            "ledger.incomplete", "error", "Ledger rows lack their side-table rows",
            f"{len(incomplete)} step(s): {ids_text(incomplete, len(incomplete))}.",
            "One of the two ledger tables was edited by hand or by another tool.",
            "Restore a snapshot, or inspect the ledger tables by hand.",
            rows=rows_of(LEDGER_META_TABLE, incomplete), count=len(incomplete), unusable=True,
        ))
    from console.db.ledger import checksum_accepted

    changed = [
        e.name for e in entries
        if e.has_meta and e.checksum is not None and not checksum_accepted(e, known[e.name])
    ]
    if changed:
        findings.append(Finding(
            "ledger.checksum_mismatch", "error", "Steps were applied with a different body",
            f"{len(changed)} step(s) whose recorded checksum differs from this console's: "
            f"{ids_text(changed, len(changed))}.",
            "A released step was edited after it ran here; this console cannot vouch for what it did.",
            "Use the console release that applied it.",
            rows=rows_of(LEDGER_META_TABLE, changed), count=len(changed), unusable=True,
        ))
    # Pending steps: by ledger when versioned, by detected release otherwise.
    if entries:
        pending = [m.id for m in MIGRATIONS[len(entries):]]
    elif ctx.shape.release in RELEASES:
        limit = RELEASES.index(ctx.shape.release)
        pending = [m.id for m in MIGRATIONS if RELEASES.index(m.release) > limit]
    else:
        pending = []
    if pending:
        findings.append(Finding(
            "migrations.pending", "info", f"Steps pending to reach archon {CURRENT_RELEASE}",
            f"{len(pending)} step(s): {pending[0]} ... {pending[-1]}.",
            "An older shape is fine while the user runs that archon release; an archon older than the "
            "schema cannot start on it.",
            "`archon-console upgrade --plan` shows what an upgrade would do.",
            count=len(pending),
        ))
    return findings


def _unless_plain(shape) -> str:
    """The detector's reason in brackets, unless it only repeats "archon X shape"."""
    return "" if shape.reason == f"archon {shape.release} shape" else f" ({shape.reason})"
