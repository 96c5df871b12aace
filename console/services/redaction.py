"""Redaction for support bundles: an allow-list, not a deny-list.

Every value and every JSON key read from the database is replaced by a placeholder (`actor-1`,
`path-2`, `id-3`, `key-4`, ...) unless it is one of these, which identify no person, machine or
payload and are needed to follow a report:

- a word of archon's own vocabularies: the string literals of archon's schema (statuses, lifecycle
  states, operation kinds, action kinds, safety classes, ...; read from the console's migration
  registry, which reproduces that schema), plus the short lists below (event types, archon's own
  actor names, migration names, JSON keys archon writes);
- a number, a version (`1.10.0`) or a timestamp;
- a generated id or a hash: a short prefix and digits or hex (`apr-00000042`, `env-0001`,
  `run-build-00001`), a UUID, a hex digest.

Ids are split at `:` and each part is judged alone, so `prj-atlas-api:execution-profile:2` becomes
`id-1:execution-profile:2` and `prj-atlas-api` becomes `id-1` in every table, column and member.
The same original always maps to the same placeholder within one bundle (the mapping is never
written anywhere); different bundles number independently.

`redacted_copy` builds an in-memory database with the same schema and every row redacted, so the
doctor report in a redacted bundle is produced by running doctor on redacted data: the console's
own sentences are never rewritten after the fact.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections import Counter
from functools import lru_cache
from typing import Any

from console.db.connect import scratch_connection
from console.db.sql import quote_identifier, stored_columns

# Archon's words that are not string literals in its schema: event types, its own actor and claim
# names, the console's own markers, and the kinds of runs it names ids after.
EXTRA_VOCABULARY = frozenset({
    # execution environment events (archon's and the console's)
    "created", "preparation_started", "ready", "started", "stopped", "retirement_started",
    "cleanup_pending", "cleanup_failed", "retired", "failed", "unavailable", "operation_claimed",
    "operation_taken_over", "operation_released", "operation_completed", "requested", "activated",
    # archon's and the console's own names
    "archon", "archon-worker", "archon-action-executor", "archon-console", "console", "agent", "system",
    "execution-profile", "sha256", "settings",
    # run kinds and workloads; the agents archon runs (product names, not people)
    "build", "service", "check", "check_batch", "environment_validation", "chat_build", "review",
    "opencode", "claude-code", "codex", "gemini", "aider", "agent_template", "project_commands", "post_build",
})

# JSON object keys archon (or the console) writes; any other key is replaced like a value.
JSON_KEYS = frozenset({
    "actor", "agent", "attempt", "base_commit", "branch", "check_template_policy", "claim_id", "command",
    "commit", "commit_count", "cwd", "definition_id", "eligible_workloads", "env", "exit_code", "force",
    "granted_by", "grants", "message", "mode", "operation_kind", "port", "profile_revision", "provider",
    "provider_preference", "reason", "ref", "remote", "repository", "requested_by", "run_id", "source",
    "timeout_seconds", "user", "workloads", "workspace", "previous_claim_id", "previous_operation_kind",
    "note",
})

# Which placeholder a replaced value gets (by column, or by JSON key), so a reader can tell an actor
# from a path. Anything else is `value-N`; id parts are `id-N`.
CATEGORY = {
    "actor_reference": "actor", "actor": "actor", "requested_by": "actor", "granted_by": "actor",
    "operation_claim_id": "claim", "cleanup_claim_id": "claim", "deletion_claim_id": "claim",
    "claim_id": "claim", "previous_claim_id": "claim",
    "repo_path": "path", "target_workspace_path": "path", "snapshot_path": "path", "cwd": "path",
    "workspace": "path", "repository": "path",
    "reason": "text", "failure_message": "text", "message": "text", "retained_output": "text",
    "name": "name",
}
# Columns and JSON keys whose values are ids or references: judged part by part (split at ':').
ID_COLUMNS = frozenset({"id", "actor_reference", "target_key", "actor", "requested_by", "granted_by",
                        "external_id", "claim_id", "previous_claim_id", "run_id", "profile_revision"})

_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}(?:[ T]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?)?(?:Z|[+-]\d{2}:?\d{2})?")
# Short numbers and versions only: a long digit string can be a phone or account number, and four
# dotted groups an IPv4 address.
_NUMBER = re.compile(r"[-+]?\d{1,9}(?:\.\d+)?|v?\d{1,4}\.\d{1,4}\.\d{1,6}")
# Digests and random ids: hex with at least one digit and one letter (a long run of digits alone
# could be a phone or account number).
_HEX = re.compile(r"(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
_DIGEST = re.compile(r"sha(?:1|256|512):[0-9a-f]{8,}")
_TAIL = re.compile(r"(?=[0-9a-f]*\d)[0-9a-f]+")  # one group of a generated id's number


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    """Archon's words: the literals of its schema at every release, migration names, the lists above."""
    from console.db.detect import MIGRATION_SET
    from console.db.migrations.registry import MIGRATIONS, RELEASES, SAFETY_CLASSES, migrations_through
    from console.db.migrations.runner import apply_all

    words: set[str] = set(EXTRA_VOCABULARY) | {MIGRATION_SET} | set(SAFETY_CLASSES) | set(RELEASES)
    words |= {m.id for m in MIGRATIONS}
    for release in RELEASES:
        conn = scratch_connection()
        try:
            apply_all(conn, migrations_through(release))
            for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE sql IS NOT NULL"):
                for literal in re.findall(r"'((?:[^']|'')*)'", sql):
                    literal = literal.replace("''", "'")
                    if re.fullmatch(r"[a-z][a-z0-9_]{0,40}", literal):
                        words.add(literal)
                    elif literal.startswith("{"):
                        words |= _json_words(literal)
        finally:
            conn.close()
    return frozenset(words)


def _json_words(text: str) -> set[str]:
    """The strings inside one of archon's default JSON documents (its default profiles)."""
    try:
        value = json.loads(text)
    except ValueError:
        return set()
    out: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            out |= set(item)
            stack += list(item.values())
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, str):
            out.add(item)
    return out


def _generated_id(part: str, words: frozenset[str]) -> bool:
    """`apr-00000042`, `env-0001`, `run-build-00001`, `seq-0-1`: a prefix of at most five letters,
    optionally one known kind, then groups of digits or hex (the first with a digit)."""
    pieces = part.split("-")
    if len(pieces) < 2 or not re.fullmatch(r"[a-z]{1,5}", pieces[0]):
        return False
    rest = pieces[1:]
    if rest and (rest[0] in words or re.fullmatch(r"[a-z]{1,3}", rest[0])) and len(rest) > 1:
        rest = rest[1:]
    return bool(rest) and _TAIL.fullmatch(rest[0]) is not None and all(
        re.fullmatch(r"[0-9a-f]+", p) for p in rest)


@lru_cache(maxsize=65536)
def kept(text: str, *, ids: bool = False) -> bool:
    """Whether a database string is on the allow-list (shown as it is in a redacted bundle).

    Generated-id shapes count only where `ids` says the column holds ids: `alice-2` in an actor
    column is a person, `apr-00000042` in an id column is a row."""
    if text == "":
        return True
    words = vocabulary()
    if text in words:
        return True
    if any(p.fullmatch(text) for p in (_TIMESTAMP, _NUMBER, _HEX, _UUID, _DIGEST)):
        return True
    return ids and _generated_id(text, words)


class Redactor:
    """Stable placeholders for one bundle; remembers only counts for the manifest."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self._by_value: dict[str, str] = {}
        self._next: Counter[str] = Counter()
        self.fields: Counter[str] = Counter()

    def placeholder(self, value: str, category: str) -> str:
        if value not in self._by_value:
            self._next[category] += 1
            self._by_value[value] = f"{category}-{self._next[category]}"
        return self._by_value[value]

    def mapping(self) -> dict[str, str]:
        """Original -> placeholder, for tests in this process; never written to a bundle."""
        return dict(self._by_value)

    def column(self, table: str, column: str, value: Any) -> Any:
        """The value a redacted bundle shows for one cell."""
        if not self.enabled or value is None or isinstance(value, (int, float)):
            return value
        if isinstance(value, bytes):
            self.fields[self._field(table, column)] += 1
            return self.placeholder(value.hex(), "blob")
        out = self._text(column, str(value), column == "id" or column.endswith("_id") or column in ID_COLUMNS)
        if out != value:
            self.fields[self._field(table, column)] += 1
        return out

    def _field(self, table: str, column: str) -> str:
        """`table.column` for the manifest; a table that is not archon's is named by placeholders."""
        if archon_object(table):
            return f"{table}.{column}"
        return f"{self.name(table, 'table')}.{self.placeholder(column, 'column')}"

    def name(self, name: str, category: str) -> str:
        """A schema object's name: archon's own are kept, any other is replaced."""
        if not self.enabled or name in _archon_objects() or name.startswith("sqlite_"):
            return name
        return self.placeholder(name, category)

    def _text(self, column: str, text: str, is_id: bool) -> str:
        if kept(text, ids=is_id and CATEGORY.get(column) not in ("actor", "claim")):
            return text
        if text[:1] in "{[":
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = None
            if isinstance(parsed, (dict, list)):
                spaced = ", " in text or ": " in text
                return json.dumps(self._json(parsed, column), ensure_ascii=False,
                                  separators=(", ", ": ") if spaced else (",", ":"))
        category = CATEGORY.get(column, "id" if is_id else "value")
        if is_id and ":" in text:
            return ":".join(self._text(column, part, True) if part else part for part in text.split(":"))
        return self.placeholder(text, category)

    def _json(self, value: Any, key: str) -> Any:
        if isinstance(value, dict):
            return {(k if k in JSON_KEYS else self.placeholder(k, "key")): self._json(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [self._json(v, key) for v in value]
        if value is None or isinstance(value, (bool, int, float)):
            return value
        return self._text(key, str(value), key in ID_COLUMNS or key.endswith("_id"))

    def manifest(self) -> dict[str, Any]:
        return {
            "redacted": self.enabled,
            "fields": dict(sorted(self.fields.items())),
            "placeholders": dict(sorted(self._next.items())),
        }


@lru_cache(maxsize=1)
def _archon_objects() -> frozenset[str]:
    from console.db.detect import LEDGER_META_TABLE, LEDGER_TABLE
    from console.db.migrations.registry import RELEASES
    from console.services.doctor import reference_objects

    names = {LEDGER_TABLE, LEDGER_META_TABLE, "idx__sqlite_migrations_migration_set_name"}
    for release in RELEASES:
        names |= {name for _kind, name in reference_objects(release)}
    return frozenset(names)


def archon_object(name: str) -> bool:
    return name in _archon_objects() or name.startswith("sqlite_")


def redacted_copy(conn: sqlite3.Connection, redactor: Redactor) -> sqlite3.Connection:
    """An in-memory database with `conn`'s schema and every row passed through `redactor`.

    Rows go in before indexes and triggers exist (archon's triggers would refuse some of them and
    nothing here should fire), with CHECK constraints off (a placeholder can be longer or shorter
    than what a CHECK measures); a table SQLite cannot read stays empty, as doctor reports it.
    """
    copy = scratch_connection(check_same_thread=False)
    copy.execute("PRAGMA ignore_check_constraints = ON")
    for pragma in ("user_version", "application_id"):
        copy.execute(f"PRAGMA {pragma} = {int(conn.execute(f'PRAGMA {pragma}').fetchone()[0])}")
    objects = conn.execute(
        "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'view' THEN 2 ELSE 3 END, rowid"
    ).fetchall()
    copy.execute("BEGIN")
    for kind, name, _tbl, sql in objects:
        if kind != "table" or name.startswith("sqlite_"):
            continue
        try:
            copy.execute(sql)
        except sqlite3.DatabaseError:
            continue  # a virtual table whose module this SQLite lacks
        try:
            _copy_rows(conn, copy, name, redactor)
        except sqlite3.DatabaseError:
            continue
    for kind, name, _tbl, sql in objects:
        if kind == "table" or name.startswith("sqlite_"):
            continue
        try:
            copy.execute(sql)
        except sqlite3.DatabaseError:
            continue  # e.g. a UNIQUE index that damaged rows violate
    copy.execute("COMMIT")
    copy.execute("PRAGMA ignore_check_constraints = OFF")
    copy.row_factory = sqlite3.Row
    return copy


def _copy_rows(conn: sqlite3.Connection, copy: sqlite3.Connection, table: str, redactor: Redactor) -> None:
    """Rows keep their rowids (doctor's foreign-key findings name them); WITHOUT ROWID tables have none."""
    name, stored = quote_identifier(table), stored_columns(conn, table)  # generated ones are never read
    try:
        cur = conn.execute(f"SELECT rowid AS {quote_identifier(ROWID)}, {stored} FROM {name}")
    except sqlite3.OperationalError:
        cur = conn.execute(f"SELECT {stored} FROM {name}")
    columns = [d[0] for d in cur.description]
    targets = ", ".join("rowid" if c == ROWID else quote_identifier(c) for c in columns)
    insert = f'INSERT INTO {name} ({targets}) VALUES ({", ".join("?" * len(columns))})'
    for row in cur:
        copy.execute(insert, [v if c == ROWID else redactor.column(table, c, v) for c, v in zip(columns, row)])


ROWID = "__archon_console_rowid"

__all__ = ["Redactor", "archon_object", "kept", "redacted_copy", "vocabulary"]
