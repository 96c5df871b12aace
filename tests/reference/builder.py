"""Archon's start-up, replayed from archon's own statements: the oracle the console is held to.

Archon has no migration ledger: every start re-runs its `db.js` top to bottom (CREATE ... IF NOT
EXISTS, `ensureColumn`, marker-driven rebuilds, backfills). `archon_start(conn, release)` replays
that, in `db.js` order, using only the statements in tests/reference/data/ (copied from the seed
diffs with their line numbers by extract.py) plus the few objects borrowed from the console's
baseline, which carry `"borrowed": "not from archon's text"` in the data. A database *created
fresh* at a release is `archon_start` on an empty file; one *upgraded in place by archon* is
`archon_start` of each earlier release first (`upgraded`, the chained path); one *started directly*
is a 1.8.20 file started once by the release (`direct`: the releases in between never start on it).
Nothing here imports console.db.migrations.

The profile algorithms (create / normalize / serialize / fingerprint, hasConfiguredCheckPolicy)
are archon's `lib/` code, which the seeds only name; tests/reference/profiles.py writes them from
their call sites. Nothing in tests/reference imports console.
"""

from __future__ import annotations

import json
import re
import sqlite3
from functools import lru_cache
from pathlib import Path
from typing import Any

from tests.reference import profiles

DATA = Path(__file__).resolve().parent / "data"
RELEASES = ("1.8.20", "1.8.22", "1.10.0")
# EXECUTION_PROFILE_SCHEMA_VERSION: the 1.8.22 backfill writes `:execution-profile:v2` into a table
# whose CHECK allows (1, 2); 1.10.0 widens it to (1, 2, 3) and writes `v${...}` ids.
SCHEMA_VERSION = {"1.8.22": 2, "1.10.0": 3}
# 1.10.0 is archon 1.8.23's db.js changed by seed 000; no seed shows 1.8.22 -> 1.8.23, and every
# region both seeds show agrees, so where seed 000 shows nothing the 1.8.22 text is used.


class ReferenceError_(Exception):
    """The seeds' text cannot be assembled as the builder expects (a data problem, not a test result)."""


@lru_cache(maxsize=None)
def entries(release: str) -> tuple[dict, ...]:
    path = DATA / f"archon_{release}.json"
    return tuple(json.loads(path.read_text(encoding="utf-8")))


@lru_cache(maxsize=None)
def borrowed() -> dict[str, dict]:
    rows = json.loads((DATA / "borrowed_1.8.20.json").read_text(encoding="utf-8"))
    return {row["name"]: row for row in rows}


def seen(release: str, name: str, *, function: str | None = None, var: str | None = None, nth: int = 0) -> str:
    """The complete statement `name` (e.g. 'create table approval_requests') as seed `release` shows it."""
    found = [
        e for e in entries(release)
        if e["complete"] and e["name"] == name
        and (function is None or e.get("function") == function)
        and (var is None or e.get("var") == var)
    ]
    if len(found) <= nth:
        raise ReferenceError_(f"seed side {release} has no complete statement {name!r} ({function}, {var})")
    return found[nth]["sql"]


def prepared(release: str, var: str, function: str | None = None) -> str:
    for e in entries(release):
        if e["call"] == "prepare" and e.get("var") == var and e["complete"] \
                and (function is None or e.get("function") == function):
            return e["sql"]
    raise ReferenceError_(f"seed side {release} has no db.prepare for {var} in {function}")


def fragments(release: str, seed_prefix: str) -> list[dict]:
    return [e for e in entries(release) if not e["complete"] and e["seed"].startswith(seed_prefix)]


_CLOSE = re.compile(r"^\s{0,2}\)\s*;?\s*$")


def _to_statement_end(text: str) -> str:
    """A hunk may run past the statement it patches (into the next one): keep it up to the `)` closing it."""
    lines = text.split("\n")
    for index, line in enumerate(lines):
        if _CLOSE.match(line):
            return "\n".join(lines[:index] + [line.rstrip().rstrip(";")])
    return text


def patch(base: str, old: str, new: str) -> str:
    """Apply one hunk (its old side -> new side) to a statement; the old side must occur exactly once."""
    old, new = _to_statement_end(old), _to_statement_end(new)
    old_lines, new_lines = old.split("\n"), new.split("\n")
    # Trailing context the borrowed text cannot match (a line the seeds show with a comma because
    # more unseen lines follow) may be dropped, keeping at least three lines of the hunk.
    while base.count("\n".join(old_lines)) != 1 and len(old_lines) > 3 and old_lines[-1] == new_lines[-1]:
        old_lines, new_lines = old_lines[:-1], new_lines[:-1]
    old, new = "\n".join(old_lines), "\n".join(new_lines)
    if base.count(old) != 1:
        raise ReferenceError_(f"hunk does not apply:\n{old}\n--- to ---\n{base[:200]}")
    return base.replace(old, new)


def hunk_pairs(old_release: str, new_release: str, seed_prefix: str) -> list[tuple[dict, dict]]:
    """Fragments of both sides of one seed, paired by the hunk (seed lines) they come from."""
    olds, news = fragments(old_release, seed_prefix), fragments(new_release, seed_prefix)
    pairs = []
    for new in news:
        for old in olds:
            if old["lines"][0] <= new["lines"][1] and new["lines"][0] <= old["lines"][1]:
                pairs.append((old, new))
                break
    return pairs


def patched(base: str, old_release: str, new_release: str, seed_prefix: str, *, table: str,
            expect: int | None = None) -> str:
    """`base` with every hunk of the seed that applies to it (the hunks of other statements do not).

    tests/test_reference_upgrade.py checks that every changed hunk applies to exactly one statement.
    """
    out, applied = base, 0
    for old, new in hunk_pairs(old_release, new_release, seed_prefix):
        if old["sql"] == new["sql"]:
            continue
        try:
            out = patch(out, old["sql"], new["sql"])
            applied += 1
        except ReferenceError_:
            continue
    if expect is not None and applied != expect:
        raise ReferenceError_(f"{table}: {applied} hunk(s) of seed {seed_prefix} applied, expected {expect}")
    return out


# --- statement texts per release ------------------------------------------------------------------

BASE_TABLES = (
    "projects", "worktree_bundles", "tickets", "ticket_dependencies", "build_sequences",
    "build_sequence_tickets", "execution_runs", "execution_environments", "execution_environment_events",
    "execution_environment_run_bindings", "repository_graph_scans", "check_batch_details",
    "check_attempt_details", "check_attempt_diagnostic_parsers", "project_links", "integration_connections",
    "bundle_automation_state",
)


@lru_cache(maxsize=None)
def table_text(release: str, table: str, unseen_line: str | None = None) -> str:
    """The CREATE TABLE IF NOT EXISTS text of a base table at `release` (borrowed 1.8.20 + seed hunks)."""
    text = borrowed()[f"create table {table}"]["sql"]
    if unseen_line and table == "check_attempt_details":
        text = insert_unseen_line(text, unseen_line)
    if release in ("1.8.22", "1.10.0"):
        text = patched(text, "1.8.20", "1.8.22", "001_", table=table)
    if release == "1.10.0":
        text = patched(text, "1.8.23", "1.10.0", "000_", table=table)
    return text


def insert_unseen_line(text: str, line: str) -> str:
    """Old db.js line 3419 (1.8.23) lies between the last FOREIGN KEY and the first CHECK of
    check_attempt_details; no seed shows it. Tests may put a stand-in there to see who keeps it."""
    anchor = "    CHECK (length(definition_fingerprint)"
    return text.replace(anchor, f"    {line},\n{anchor}", 1)


@lru_cache(maxsize=None)
def replacement_text(release: str, unseen_line: str | None = None) -> str:
    """check_attempt_details_replacement as archon's rebuild creates it.

    The seeds show its first lines and its CHECKs (indented by 8 inside the rebuild's JavaScript);
    the lines between are taken to be those of the CREATE TABLE IF NOT EXISTS text of 1.8.22 (the
    seeds show both changed identically). 1.10.0 changes only its outcome list (no hunk adds
    placement_json to it; archon adds that column again with ensureColumn after the rebuild).
    """
    body = table_text("1.8.22", "check_attempt_details", unseen_line).split("\n")[1:]
    text = "\n".join(["      CREATE TABLE check_attempt_details_replacement ("]
                     + ["    " + line for line in body]).lstrip()
    for fragment in fragments("1.8.22", "001_"):
        if fragment["lines"] in ([874, 877], [879, 893]):
            seen_part = _to_statement_end(fragment["sql"]).strip()
            if seen_part.split("\n")[0].strip().startswith("CHECK"):
                seen_part = "\n".join(seen_part.split("\n")[:7])  # its CHECKs, before the INSERT
            if seen_part not in text:
                raise ReferenceError_(f"replacement text disagrees with seed 001 lines {fragment['lines']}")
    if release == "1.10.0":
        text = patched(text, "1.8.23", "1.10.0", "000_", table="check_attempt_details_replacement", expect=1)
    return text


CHECK_ATTEMPT_COPY = (
    "execution_run_id, batch_run_id, definition_id, command_snapshot_json, definition_fingerprint, "
    "initial_workspace_identity_json, final_workspace_identity_json, outcome, rerun_of_attempt_run_id, "
    "exit_code, exit_signal, exit_error, output_revision, retained_start_offset, retained_end_offset, "
    "total_persisted_bytes, retained_output, output_retention_state"
)


def profile_sql(release: str, name: str) -> str:
    """Profile objects: 1.8.22's text, with seed 000's hunks for 1.10.0."""
    text = seen("1.8.22", name)
    if release == "1.10.0" and name in ("create table execution_profile_revisions",
                                        "create table execution_profile_revisions_v2"):
        text = patched(text, "1.8.23", "1.10.0", "000_", table=name, expect=1)
    return text


def defaults_trigger(release: str) -> str:
    version = SCHEMA_VERSION[release]
    host = profiles.create("host", version)
    docker = profiles.create("docker_sandbox", version)
    values = {
        "${EXECUTION_PROFILE_SCHEMA_VERSION}": str(version),
        "${dockerProfileFingerprint}": profiles.fingerprint(docker),
        "${hostCompatibilityFingerprint}": profiles.fingerprint(host),
        "${dockerProfileJson}": profiles.serialize(docker).replace("'", "''"),
        "${hostCompatibilityProfileJson}": profiles.serialize(host).replace("'", "''"),
    }
    text = seen("1.8.22", "create trigger create_project_execution_profile")
    for key, value in values.items():
        text = text.replace(key, value)
    return text


def version_sql(text: str, release: str) -> str:
    return text.replace("${EXECUTION_PROFILE_SCHEMA_VERSION}", str(SCHEMA_VERSION[release]))


# --- start-up replay ------------------------------------------------------------------------------


def table_sql(conn: sqlite3.Connection, table: str) -> str:
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", (table,)).fetchone()
    return row[0] if row else ""


def ensure_column(conn: sqlite3.Connection, table: str, column: str, declaration: str) -> None:
    """archon's ensureColumn (body unseen): ALTER TABLE ADD COLUMN when PRAGMA table_info lacks it."""
    names = {row[1] for row in conn.execute(f'PRAGMA table_info("{table}")')}
    if names and column not in names:
        conn.execute(f'ALTER TABLE "{table}" ADD COLUMN {column} {declaration}')


def exec_script(conn: sqlite3.Connection, statements: list[str]) -> None:
    for statement in statements:
        conn.execute(statement)


def drop_triggers_mentioning(conn: sqlite3.Connection, word: str, *, like: bool = False) -> None:
    query = ("SELECT name FROM sqlite_master WHERE type = 'trigger' AND sql LIKE ?" if like else
             "SELECT name FROM sqlite_master WHERE type = 'trigger' AND instr(sql, ?) > 0")
    for (name,) in conn.execute(query, (f"%{word}%" if like else word,)).fetchall():
        conn.execute(f'DROP TRIGGER IF EXISTS "{name.replace(chr(34), chr(34) * 2)}"')


class ArchonStopped(Exception):
    """archon_start(stop_after_rebuild=True) stopped the start (a crash) right after the revisions
    rebuild committed."""


def archon_start(conn: sqlite3.Connection, release: str, *, unseen_check_attempt_line: str | None = None,
                 stop_after_rebuild: bool = False) -> None:
    """One start of archon `release` on `conn` (autocommit connection), in db.js order;
    `stop_after_rebuild` kills it right after its revisions rebuild committed (ArchonStopped)."""
    if release not in RELEASES:
        raise ValueError(release)
    conn.isolation_level = None
    conn.execute("PRAGMA foreign_keys = ON")
    new = release != "1.8.20"
    for table in BASE_TABLES:
        conn.execute(table_text(release, table, unseen_check_attempt_line))
    conn.execute(seen("1.8.20", "exec top level: UPDATE projects SET"))
    if new:
        ensure_column(conn, "projects", "active_execution_profile_revision_id", "TEXT NOT NULL DEFAULT ''")
        _profiles(conn, release, stop_after_rebuild)
        _build_sequences(conn)
        _environments(conn, release)
    else:
        for name in ("validate_project_build_execution_provider_insert", "preserve_execution_environment_identity",
                     "validate_execution_environment_binding_identity",
                     "preserve_execution_environment_binding_identity"):
            conn.execute(borrowed()[f"create trigger {name}"]["sql"])
        conn.execute(seen("1.8.20", "drop trigger validate_execution_environment_binding_authority"))
        conn.execute(borrowed()["create trigger archon_binding_evidence_name_unseen"]["sql"])
        conn.execute(seen("1.8.20", "create index idx_execution_environments_reuse"))
        for name in ("idx_execution_environments_external_id", "idx_execution_environments_cleanup",
                     "idx_execution_environment_events_sequence"):
            conn.execute(seen("1.8.20", f"create index {name}"))
        for name in ("idx_execution_environment_bindings_run", "idx_execution_environment_active_execution_lease"):
            conn.execute(borrowed()[f"create index {name}"]["sql"])
    _check_details(conn, release, unseen_check_attempt_line)
    _late_indexes(conn, release)


def _profiles(conn: sqlite3.Connection, release: str, stop_after_rebuild: bool = False) -> None:
    for name in ("create table execution_profile_revisions", "create table execution_profile_audit_events",
                 "create index idx_execution_profile_revisions_project", "create index idx_execution_profile_audit_project"):
        conn.execute(profile_sql(release, name))
    marker = "schema_version IN (1, 2, 3)" if release == "1.10.0" else "schema_version IN (1, 2)"
    if marker not in table_sql(conn, "execution_profile_revisions"):
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute("BEGIN")
        drop_triggers_mentioning(conn, "execution_profile_revisions")
        conn.execute(profile_sql(release, "create table execution_profile_revisions_v2"))
        conn.execute(seen("1.8.22", "exec top level: INSERT INTO execution_profile_revisions_v2"))
        conn.execute(seen("1.8.22", "drop table execution_profile_revisions"))
        conn.execute(seen("1.8.22", "exec top level: ALTER TABLE execution_profile_revisions_v2"))
        conn.execute("COMMIT")
        conn.execute("PRAGMA foreign_keys = ON")
        if stop_after_rebuild:
            raise ArchonStopped(release)
    backfill_initial(conn, release)
    backfill_current_schema(conn, release)
    if release == "1.10.0":
        backfill_workload_eligibility(conn, release)
    conn.execute(defaults_trigger(release))
    for name in ("validate_project_execution_profile_owner_insert", "validate_project_execution_profile_owner_update",
                 "validate_project_execution_profile_projection_insert",
                 "validate_project_execution_profile_projection_update", "preserve_execution_profile_revision",
                 "preserve_execution_profile_audit_event"):
        conn.execute(seen("1.8.22", f"create trigger {name}"))


def _rows(conn: sqlite3.Connection, sql: str, *params: Any) -> list[dict]:
    cursor = conn.execute(sql, params)
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row)) for row in cursor.fetchall()]


def backfill_initial(conn: sqlite3.Connection, release: str) -> None:
    """backfillExecutionProfiles (seed 001 lines 117-148)."""
    f = "backfillExecutionProfiles"
    version = SCHEMA_VERSION[release]
    projects = _rows(conn, prepared("1.8.22", "projects", f))
    conn.execute("BEGIN")
    for project in projects:
        active = project["active_execution_profile_revision_id"]
        if active and conn.execute(prepared("1.8.22", "findOwnedRevision", f), (project["id"], active)).fetchone():
            continue
        profile = profiles.create(project["build_execution_provider"], version)
        revision_id = f"{project['id']}:execution-profile:1"
        conn.execute(version_sql(prepared("1.8.22", "insertRevision", f), release),
                     (revision_id, project["id"], profiles.fingerprint(profile), profiles.serialize(profile)))
        conn.execute(prepared("1.8.22", "activateRevision", f), (revision_id, project["id"]))
        conn.execute(prepared("1.8.22", "insertEvent", f), (f"{revision_id}:created", project["id"], revision_id))
    conn.execute("COMMIT")


class ArchonStartFailed(Exception):
    """archon would throw here and not start (the message is archon's)."""


def backfill_current_schema(conn: sqlite3.Connection, release: str) -> None:
    """backfillExecutionProfilesToSchemaV2 (1.8.22) / ...ToCurrentSchema (1.10.0)."""
    f = "backfillExecutionProfilesToSchemaV2"
    version = SCHEMA_VERSION[release]
    legacy = prepared("1.8.22", "legacyRows", f)
    if release == "1.10.0":  # seed 000 lines 50-54 change only this line of the query
        wanted = "WHERE revisions.schema_version IN (1, 2) AND projects.deletion_started_at IS NULL"
        if not any(wanted in e["sql"] for e in fragments("1.10.0", "000_")):
            raise ReferenceError_("seed 000 no longer shows the 1.10.0 legacyRows filter")
        legacy = legacy.replace("WHERE revisions.schema_version = 1 AND projects.deletion_started_at IS NULL", wanted)
    rows = _rows(conn, legacy)
    conn.execute("BEGIN")
    try:
        for row in rows:
            try:
                normalized = profiles.normalize(json.loads(row["profile_json"]), version)
            except ValueError:
                normalized = None
            if not normalized or not normalized.ok:
                raise ArchonStartFailed(f"Stored execution profile revision {row['revision_id']} is invalid")
            fingerprint = profiles.fingerprint(normalized.profile)
            existing = conn.execute(prepared("1.8.22", "findRevisionByFingerprint", f),
                                    (row["project_id"], fingerprint)).fetchone()
            if existing:
                revision_id = existing[0]
            else:
                revision_id = f"{row['project_id']}:execution-profile:v{version}"
                number = conn.execute(prepared("1.8.22", "nextRevisionNumber", f), (row["project_id"],)).fetchone()[0]
                conn.execute(version_sql(prepared("1.8.22", "insertRevision", f), release),
                             (revision_id, row["project_id"], number, fingerprint, profiles.serialize(normalized.profile)))
            changed = conn.execute(prepared("1.8.22", "activateRevision", f),
                                   (revision_id, row["project_id"], row["revision_id"])).rowcount
            if changed > 0:
                suffix = "schema-backfill" if release == "1.10.0" else "v2-backfill"
                conn.execute(prepared("1.8.22", "insertEvent", f),
                             (f"{revision_id}:{suffix}", row["project_id"], revision_id, row["revision_id"]))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def backfill_workload_eligibility(conn: sqlite3.Connection, release: str) -> None:
    """backfillExecutionProfileWorkloadEligibility (seed 000 lines 75-160), in BEGIN IMMEDIATE."""
    f = "backfillExecutionProfileWorkloadEligibility"
    version = SCHEMA_VERSION[release]
    conn.execute("BEGIN IMMEDIATE")
    try:
        for row in _rows(conn, version_sql(prepared("1.10.0", "listActiveRows", f), release)):
            try:
                normalized = profiles.normalize(json.loads(row["profile_json"]), version)
            except ValueError:
                normalized = None
            if not normalized or not normalized.ok:
                raise ArchonStartFailed(f"Stored execution profile revision {row['revision_id']} is invalid")
            profile = normalized.profile
            workloads = profile.get("eligible_workloads", [])
            build = "build" in workloads
            needs_chat = build and "chat_build" not in workloads
            needs_check = (build and profiles.has_configured_check_policy(row)
                           and (profile.get("check_template_policy") or {}).get("mode") != "agent_template")
            if not needs_chat and not needs_check:
                continue
            repaired = profiles.normalize({
                **profile,
                "eligible_workloads": [*workloads, *(["chat_build"] if needs_chat else []),
                                       *(["check"] if needs_check else [])],
                "check_template_policy": ({"mode": "agent_template", "agent": "opencode"} if needs_check
                                          else profile.get("check_template_policy")),
            }, version)
            if not repaired.ok:
                raise ArchonStartFailed(f"Stored execution profile revision {row['revision_id']} is invalid")
            fingerprint = profiles.fingerprint(repaired.profile)
            find = prepared("1.10.0", "findRevisionByFingerprint", f)
            target = conn.execute(find, (row["project_id"], fingerprint)).fetchone()
            key = "chat-build-check" if needs_chat and needs_check else "chat-build" if needs_chat else "configured-check"
            if not target:
                revision_id = f"{row['project_id']}:execution-profile:{key}-v{version}"
                number = conn.execute(prepared("1.10.0", "nextRevisionNumber", f), (row["project_id"],)).fetchone()[0]
                inserted = conn.execute(version_sql(prepared("1.10.0", "insertRevision", f), release),
                                        (revision_id, row["project_id"], number, fingerprint,
                                         profiles.serialize(repaired.profile))).rowcount
                target = conn.execute(find, (row["project_id"], fingerprint)).fetchone()
                if not target:
                    raise ArchonStartFailed(f"Failed to migrate stored execution profile revision {row['revision_id']}")
                if inserted > 0:
                    conn.execute(prepared("1.10.0", "insertEvent", f),
                                 (f"{target[0]}:{key}-backfill-created", row["project_id"], "revision_created",
                                  target[0], row["revision_id"]))
            changed = conn.execute(prepared("1.10.0", "activateRevision", f),
                                   (target[0], row["project_id"], row["revision_id"])).rowcount
            if changed > 0:
                conn.execute(prepared("1.10.0", "insertEvent", f),
                             (f"{target[0]}:{key}-backfill-activated", row["project_id"], "revision_activated",
                              target[0], row["revision_id"]))
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _build_sequences(conn: sqlite3.Connection) -> None:
    conn.execute(seen("1.8.22", "create table build_sequence_ticket_replacements"))
    for column in ("execution_profile_revision_id", "execution_profile_fingerprint",
                   "execution_profile_selection_reason", "activation_execution_run_id"):
        ensure_column(conn, "build_sequence_tickets", column, "TEXT")
    conn.execute("BEGIN")
    for (sequence_id,) in conn.execute(prepared("1.8.22", "incompleteSequenceIds")).fetchall():
        for var in ("failActive", "cancelQueued", "failSequence"):
            conn.execute(prepared("1.8.22", var), (sequence_id,))
    conn.execute("COMMIT")
    for name in ("validate_build_sequence_ticket_profile_insert", "validate_build_sequence_ticket_profile_activation",
                 "preserve_build_sequence_ticket_profile"):
        conn.execute(seen("1.8.22", f"create trigger {name}"))


def _environments(conn: sqlite3.Connection, release: str) -> None:
    if release == "1.10.0":
        for name in ("create table service_run_details", "create index idx_active_service_run_context",
                     "create index idx_service_run_profile"):
            conn.execute(seen("1.10.0", name))
    for column, declaration in (("execution_profile_revision_id", "TEXT"), ("execution_profile_fingerprint", "TEXT"),
                                ("credential_requirements_fingerprint", "TEXT"), ("retirement_requested_at", "DATETIME")):
        ensure_column(conn, "execution_environments", column, declaration)
    if release == "1.10.0":
        for column, declaration in (("cleanup_retry_at", "DATETIME"), ("idle_stop_at", "DATETIME"),
                                    ("operation_claim_id", "TEXT"), ("operation_kind", "TEXT"),
                                    ("operation_claimed_at", "DATETIME")):
            ensure_column(conn, "execution_environments", column, declaration)
    ensure_column(conn, "execution_environment_run_bindings", "execution_profile_fingerprint", "TEXT")
    ensure_column(conn, "execution_environment_run_bindings", "authority_json", "TEXT")
    ensure_column(conn, "execution_environment_run_bindings", "placement_json", "TEXT")
    for name in ("create table execution_run_authorities", "create trigger preserve_execution_run_authority",
                 "create table approval_requests", "create table approval_request_events"):
        conn.execute(seen("1.8.22", name))
    for name in ("create trigger preserve_approval_request_identity",
                 "create trigger preserve_approval_request_decision_evidence",
                 "create trigger validate_approval_request_status_transition",
                 "create trigger preserve_approval_request_events", "create trigger prevent_approval_request_event_deletion",
                 "create index idx_approval_requests_project_created",
                 "create index idx_approval_requests_project_status_expiry",
                 "create index idx_approval_requests_action_kind", "create index idx_approval_request_events_sequence"):
        conn.execute(seen("1.8.22", name))
    _approval_rebuild(conn)
    for name in ("create table build_setup_evidence", "create index idx_build_setup_evidence_active_target",
                 "create index idx_build_setup_evidence_reuse", "create index idx_build_setup_evidence_execution_run",
                 "create trigger preserve_build_setup_evidence_identity"):
        conn.execute(seen("1.8.22", name))
    for name in ("preserve_execution_environment_identity", "validate_execution_environment_binding_identity",
                 "preserve_execution_environment_binding_identity"):
        conn.execute(seen("1.8.22", f"drop trigger {name}"))
    for name in ("preserve_execution_environment_identity", "validate_execution_environment_binding_identity",
                 "preserve_execution_environment_binding_identity"):
        conn.execute(seen("1.8.22", f"create trigger {name}"))
    conn.execute(seen("1.8.22", "drop trigger validate_execution_environment_binding_authority"))
    conn.execute(borrowed()["create trigger validate_project_build_execution_provider_insert"]["sql"])
    conn.execute(borrowed()["create trigger archon_binding_evidence_name_unseen"]["sql"])
    conn.execute(seen("1.8.22", "drop index idx_execution_environments_reuse"))
    conn.execute(seen("1.8.22", "create index idx_execution_environments_reuse"))
    side = "1.10.0" if release == "1.10.0" else "1.8.22"
    for name in ("idx_execution_environments_external_id", "idx_execution_environments_cleanup"):
        conn.execute(seen(side, f"create index {name}"))
    if release == "1.10.0":
        for name in ("idx_execution_environments_cleanup_retry", "idx_execution_environments_idle_stop",
                     "idx_execution_environments_operation_claim", "idx_execution_environment_events_sequence",
                     "idx_execution_environment_bindings_run", "idx_execution_environment_active_execution_lease"):
            conn.execute(seen("1.10.0", f"create index {name}"))
        for name in ("validate_execution_environment_operation_claim", "validate_execution_environment_lease_admission"):
            conn.execute(seen("1.10.0", f"create trigger {name}"))
    else:
        conn.execute(seen("1.8.22", "create index idx_execution_environment_events_sequence"))
        for name in ("idx_execution_environment_bindings_run", "idx_execution_environment_active_execution_lease"):
            conn.execute(borrowed()[f"create index {name}"]["sql"])


def _approval_rebuild(conn: sqlite3.Connection) -> None:
    """migrateApprovalRequestActionLimit (seed 001 lines 615-713)."""
    if "BETWEEN 2 AND 65536" in table_sql(conn, "approval_requests"):
        return
    f = "migrateApprovalRequestActionLimit"
    conn.execute("PRAGMA foreign_keys = OFF")
    conn.execute("BEGIN")
    try:
        conn.execute(seen("1.8.22", "create table approval_requests_v2"))
        conn.execute(seen("1.8.22", "exec migrateApprovalRequestActionLimit: INSERT INTO approval_requests_v2"))
        conn.execute(seen("1.8.22", "drop table approval_requests", function=f))
        conn.execute(seen("1.8.22", "exec migrateApprovalRequestActionLimit: ALTER TABLE approval_requests_v2"))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    finally:
        conn.execute("PRAGMA foreign_keys = ON")
    for name in ("create trigger preserve_approval_request_identity",
                 "create trigger preserve_approval_request_decision_evidence",
                 "create trigger validate_approval_request_status_transition",
                 "create index idx_approval_requests_project_created",
                 "create index idx_approval_requests_project_status_expiry",
                 "create index idx_approval_requests_action_kind"):
        conn.execute(seen("1.8.22", name, nth=1))


def _check_details(conn: sqlite3.Connection, release: str, unseen_line: str | None) -> None:
    ensure_column(conn, "check_attempt_details", "retained_end_offset", "INTEGER NOT NULL DEFAULT 0")
    ensure_column(conn, "check_attempt_details", "retained_output", "TEXT NOT NULL DEFAULT ''")
    if release == "1.10.0":
        ensure_column(conn, "check_attempt_details", "placement_json", "TEXT")
        ensure_column(conn, "check_batch_details", "runtime_compatibility_json", "TEXT")
        ensure_column(conn, "check_batch_details", "batch_environment_json", "TEXT")
    sql = table_sql(conn, "check_attempt_details")
    markers = ["evidence_persistence_failure"] + (["ambiguous_process_loss"] if release != "1.8.20" else []) \
        + (["environment_loss"] if release == "1.10.0" else [])
    if sql and any(m not in sql for m in markers):
        if release == "1.8.20":
            raise ReferenceError_("the 1.8.20 legacy rebuild recipe is not modelled")
        conn.execute("PRAGMA foreign_keys = OFF")
        try:
            drop_triggers_mentioning(conn, "check_attempt_details", like=True)
            conn.execute("BEGIN")
            conn.execute(replacement_text(release, unseen_line))
            conn.execute(f"INSERT INTO check_attempt_details_replacement ({CHECK_ATTEMPT_COPY}) "
                         f"SELECT {CHECK_ATTEMPT_COPY} FROM check_attempt_details")
            conn.execute("DROP TABLE check_attempt_details")
            conn.execute("ALTER TABLE check_attempt_details_replacement RENAME TO check_attempt_details")
            conn.execute("COMMIT")
        finally:
            conn.execute("PRAGMA foreign_keys = ON")
        violation = conn.execute("PRAGMA foreign_key_check").fetchone()
        if violation:
            raise ArchonStartFailed(f"Check attempt migration left an invalid foreign key: {list(violation)}")
    if release == "1.10.0":
        ensure_column(conn, "check_attempt_details", "placement_json", "TEXT")
    # The check-detail triggers: dropped and re-created at every start (seen in 1.8.23/1.10.0; the
    # bodies are borrowed, and validate_check_batch_details_insert, whose body no seed shows, is left out).
    side = "1.10.0" if release == "1.10.0" else "1.8.23"
    if release != "1.8.20":
        for name in ("validate_check_batch_details_insert", "preserve_check_batch_snapshots",
                     "preserve_completed_check_batch_details"):
            conn.execute(seen(side, f"drop trigger {name}"))
    if release == "1.10.0":
        for name in ("preserve_check_batch_environment_binding", "preserve_check_attempt_placement"):
            conn.execute(seen("1.10.0", f"drop trigger {name}"))
    for name in ("preserve_check_batch_snapshots", "preserve_completed_check_batch_details"):
        conn.execute(borrowed()[f"create trigger {name}"]["sql"])
    if release == "1.10.0":
        conn.execute(_fragment_create("1.10.0", "create trigger preserve_check_batch_environment_binding"))
    for name in ("preserve_check_attempt_snapshots", "preserve_completed_check_attempt_details"):
        conn.execute(borrowed()[f"create trigger {name}"]["sql"])
    if release == "1.10.0":
        conn.execute(_fragment_create("1.10.0", "create trigger preserve_check_attempt_placement"))


def _fragment_create(release: str, name: str) -> str:
    for e in entries(release):
        if e["name"] == name and "CREATE" in e["sql"] and e["sql"].rstrip().endswith("END"):
            return e["sql"]
    raise ReferenceError_(f"no whole {name} in seed side {release}")


def _late_indexes(conn: sqlite3.Connection, release: str) -> None:
    conn.execute(borrowed()["create index idx_project_links_linked_project_id"]["sql"])
    for name in ("idx_build_sequences_project_status", "idx_build_sequences_bundle_status",
                 "idx_build_sequence_tickets_sequence_position"):
        conn.execute(seen("1.8.20", f"create index {name}"))
    if release != "1.8.20":
        conn.execute(seen("1.8.22", "create index idx_build_sequence_tickets_activation_run"))
    for name in ("idx_integration_connections_provider_project", "idx_tickets_external_key",
                 "idx_bundle_automation_state_project_bundle"):
        conn.execute(seen("1.8.20", f"create index {name}"))


# --- databases ------------------------------------------------------------------------------------


def connect(path: Path) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA synchronous = OFF")  # test files only: no fsync per statement
    return conn


def fresh(path: Path, release: str, **options: Any) -> Path:
    """A database archon `release` created on an empty file (inline columns and CHECKs)."""
    conn = connect(path)
    try:
        archon_start(conn, release, **options)
    finally:
        conn.close()
    return path


def upgraded(path: Path, release: str, *, populate=None, **options: Any) -> Path:
    """A database created by 1.8.20 and started by every later release up to `release`.

    `populate(conn, release)` runs after each start, so rows can be added in each release's shape.
    """
    conn = connect(path)
    try:
        for step in RELEASES[: RELEASES.index(release) + 1]:
            archon_start(conn, step, **options)
            if populate:
                populate(conn, step)
    finally:
        conn.close()
    return path


def direct(path: Path, release: str, *, populate=None, **options: Any) -> Path:
    """A database created by 1.8.20 (`populate(conn, "1.8.20")` adds its rows) and then started once
    by `release` directly, as by a user who skipped every release in between: the releases between
    never start on it, so their backfills never run (1.10.0's own start gives each project revision
    1 in schema 3, with one `:created` event)."""
    conn = connect(path)
    try:
        archon_start(conn, "1.8.20", **options)
        if populate:
            populate(conn, "1.8.20")
        if release != "1.8.20":
            archon_start(conn, release, **options)
    finally:
        conn.close()
    return path


def variant(path: Path, release: str, kind: str, **options: Any) -> Path:
    return fresh(path, release, **options) if kind == "fresh" else upgraded(path, release, **options)

