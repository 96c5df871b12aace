"""Starting databases for the oracle tests, and the two ways to move them to a release.

Each scenario is a database at some release; the tests run the console's `upgrade` service on a
copy (tests/test_reference_upgrade.py, `console_upgrade`: nothing in tests/reference imports
console), `archon_upgrade` runs the reference's archon start-ups on another copy, and the tests
compare the two.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

from tests.reference import builder, profiles
from tests.reference.rows import FP, T0, populate_1820_rows

# A stand-in for old db.js line 3419, which no seed shows (see builder.insert_unseen_line).
UNSEEN_CHECK_ATTEMPT_LINE = "CHECK (exit_code IS NULL OR exit_code BETWEEN -2147483648 AND 2147483647)"


def fingerprint_json(text: str) -> str:
    return profiles.fingerprint(json.loads(text))


def populate(conn: sqlite3.Connection, release: str) -> None:
    """Rows of a working archon: projects (one with a configured check policy), in-flight build
    sequences, an environment with a lease, check batches with attempts and parsers."""
    if release == "1.8.20":
        populate_1820_rows(conn)
        # A project being deleted: the initial backfill gives it a revision, the later ones skip it.
        conn.execute(
            "INSERT INTO projects (id, name, repo_path, build_execution_provider, deletion_started_at, created_at) "
            "VALUES ('proj-gone', 'Gone', '/srv/gone', 'docker_sandbox', ?, ?)", (T0, T0))


# Profile shapes for the direct path: provider x which check-definition list is configured x
# deleted or not (archon's initial backfill covers deleted projects, the later ones skip them).
SHAPE_PROJECTS = (
    # id, provider, column with a configured policy (None: none), value, deleted
    ("shape-docker-prereview", "docker_sandbox", "pre_review_check_definition_ids", '["unit"]', False),
    ("shape-host-empty-lists", "host", "post_build_check_definition_ids", "[]", False),
    ("shape-docker-autofix", "docker_sandbox", "auto_fix_check_definition_ids", '["fmt"]', False),
    ("shape-host-postbuild", "host", "post_build_check_definition_ids", '["e2e"]', False),
    ("shape-host-plain", "host", None, None, False),
    ("shape-host-gone-lint", "host", "required_check_definition_ids", '["lint"]', True),
    ("shape-docker-gone-plain", "docker_sandbox", None, None, True),
    ("shape-o'quote", "docker_sandbox", "required_check_definition_ids", '["a","b"]', False),
)


def populate_shapes(conn: sqlite3.Connection, release: str) -> None:
    """`populate`, plus one project per profile shape of SHAPE_PROJECTS (1.8.20 rows only)."""
    populate(conn, release)
    if release != "1.8.20":
        return
    conn.execute("BEGIN")
    for pid, provider, column, value, deleted in SHAPE_PROJECTS:
        extra = {column: value} if column else {}
        row = {"id": pid, "name": pid, "repo_path": f"/srv/{pid}", "build_execution_provider": provider,
               "created_at": T0, **extra, **({"deletion_started_at": T0} if deleted else {})}
        conn.execute(f"INSERT INTO projects ({', '.join(row)}) VALUES ({', '.join('?' * len(row))})",
                     tuple(row.values()))
    conn.execute("COMMIT")


def add_legacy_profile(conn: sqlite3.Connection) -> None:
    """proj-1 runs on a schema-1 revision (as a 1.8.21 archon left it)."""
    conn.execute("BEGIN")
    conn.execute(
        "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
        "profile_json, created_at) VALUES ('proj-1:legacy', 'proj-1', 2, 1, ?, ?, ?)",
        (fingerprint_json('{"provider_preference":"docker_sandbox"}'), '{"provider_preference":"docker_sandbox"}', T0),
    )
    conn.execute(
        "UPDATE projects SET active_execution_profile_revision_id = 'proj-1:legacy', "
        "build_execution_provider = 'docker_sandbox' WHERE id = 'proj-1'"
    )
    conn.execute("COMMIT")


def ref_1820(path: Path, **options) -> Path:
    return builder.upgraded(path, "1.8.20", populate=populate, **options)


def ref_1820_shapes(path: Path) -> Path:
    return builder.upgraded(path, "1.8.20", populate=populate_shapes)


def ref_1822(path: Path, kind: str) -> Path:
    if kind == "fresh":
        builder.fresh(path, "1.8.22")
        conn = builder.connect(path)
        populate_1820_rows(conn)
        conn.close()
    else:
        builder.upgraded(path, "1.8.22", populate=populate)
    return path


def ref_1821_shape(path: Path, *, old_trigger_text: bool = True) -> Path:
    """1.8.20 plus the tables a 1.8.21 archon made in their older shapes (docs/decisions.md, Q16): a
    schema-1-only execution_profile_revisions, approval_requests with a 16384-byte action limit, and
    (with `old_trigger_text`) approval triggers whose text differs from 1.8.22's."""
    ref_1820(path)
    conn = builder.connect(path)
    revisions = builder.seen("1.8.22", "create table execution_profile_revisions").replace(
        "schema_version IN (1, 2)", "schema_version IN (1)")
    conn.execute(revisions)
    conn.execute(builder.seen("1.8.22", "create table execution_profile_audit_events"))
    conn.execute("ALTER TABLE projects ADD COLUMN active_execution_profile_revision_id TEXT NOT NULL DEFAULT ''")
    conn.execute(builder.seen("1.8.22", "create table approval_requests").replace(
        "BETWEEN 2 AND 65536", "BETWEEN 2 AND 16384"))
    conn.execute(builder.seen("1.8.22", "create table approval_request_events"))
    for name in ("preserve_approval_request_identity", "preserve_approval_request_decision_evidence",
                 "validate_approval_request_status_transition"):
        text = builder.seen("1.8.22", f"create trigger {name}")
        if old_trigger_text:
            text = text.replace("RAISE(ABORT, '", "RAISE(ABORT, '1.8.21: ")
        conn.execute(text)
    revision_trigger = builder.seen("1.8.22", "create trigger preserve_execution_profile_revision")
    if old_trigger_text:
        revision_trigger = revision_trigger.replace("RAISE(ABORT, '", "RAISE(ABORT, '1.8.21: ")
    conn.execute(revision_trigger)
    conn.execute("BEGIN")
    for p in ("proj-1", "proj-2"):
        conn.execute(
            "INSERT INTO execution_profile_revisions (id, project_id, revision, schema_version, fingerprint, "
            "profile_json, created_at) VALUES (?, ?, 1, 1, ?, ?, ?)",
            (f"{p}:execution-profile:1", p, fingerprint_json('{"provider_preference":"host"}'),
             '{"provider_preference":"host"}', T0),
        )
        conn.execute("UPDATE projects SET active_execution_profile_revision_id = ? WHERE id = ?",
                     (f"{p}:execution-profile:1", p))
        conn.execute(
            "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
            "action_json, action_fingerprint, authority_schema_version, authority_json, status, expires_at, "
            "created_at, updated_at) VALUES (?, ?, ?, 'git_push', 1, '{}', ?, 1, '{}', 'pending', ?, ?, ?)",
            (f"apr-{p}", p, f"{p}-run-build", FP, "2024-03-02 10:00:00", T0, T0),
        )
    conn.execute("COMMIT")
    conn.close()
    return path


def archon_upgrade(start: Path, out: Path, start_release: str, target: str, *, chain: bool = True,
                   **options) -> Path:
    """archon started on a copy: every release after `start_release` up to `target` (or only
    `target` without `chain`), then `target` once more, the state archon converges to."""
    path = Path(shutil.copy(start, out))
    conn = builder.connect(path)
    try:
        releases = builder.RELEASES[builder.RELEASES.index(start_release) + 1: builder.RELEASES.index(target) + 1]
        for release in (releases if chain else [target]):
            builder.archon_start(conn, release, **options)
        builder.archon_start(conn, target, **options)
    finally:
        conn.close()
    return path
