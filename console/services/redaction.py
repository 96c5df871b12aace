"""Redaction for support bundles: an allow-list, not a deny-list.

Every value and every JSON key read from the database is replaced by a placeholder (`actor-1`,
`path-2`, `id-3`, `key-4`, ...) unless it is one of these, which identify no person, machine or
payload and are needed to follow a report:

- a word of archon's own vocabularies: the string literals of archon's schema (statuses, lifecycle
  states, operation kinds, action kinds, safety classes, ...; read from the console's migration
  registry, which reproduces that schema), plus the short lists below (event types, archon's own
  actor names, migration names, JSON keys archon writes); these are kept wherever they appear;
- a value whose *shape* is a time, a short number or version, a digest or a generated id
  (`apr-00000042`, `env-0001`, `run-build-00001`, a UUID, a hex digest), but only where archon
  keeps such values: in a column of archon's schema (`shaped_columns`) or under a JSON key path
  (`JSON_SHAPES`) known to hold them. A shape proves nothing by itself: a 32-hex API key, a UUID
  token, `123456789` or `1984-07-12` under `env`, `command`, an unknown key, a free-text column or a
  table that is not archon's is replaced like any other value, and so is a number there.

Ids are split at `:` and each part is judged alone, so `prj-atlas-api:execution-profile:2` becomes
`id-1:execution-profile:2` and `prj-atlas-api` becomes `id-1` in every table, column and member.
The same original always maps to the same placeholder within one bundle (the mapping is never
written anywhere); different bundles number independently.

console/services/redacted_copy.py builds a database with every row redacted and the schema as a
redacted bundle may show it (archon's DDL where the definition is archon's, placeholders and no text
elsewhere: console/services/redaction_schema.py), so the doctor report in a redacted bundle is
produced by running doctor on redacted data: the console's own sentences are never rewritten after
the fact. Names follow the same rule as values: a table, index or trigger name is kept when it is
archon's, a column name when archon's schema has a column so named; any other is a placeholder.
"""

from __future__ import annotations

import enum
import json
import re
from collections import Counter
from functools import lru_cache
from typing import Any, Callable

from console.db.connection import scratch_connection
from console.text import MAX_DEPTH, read_json

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


class Shape(enum.Flag):
    """Which shapes may prove a value harmless in one place (a column, or a key path in its JSON)."""

    NONE = 0
    TIME = enum.auto()  # 2026-05-01T12:00:00Z
    NUMBER = enum.auto()  # a short number or a version: 42, 1.10.0
    DIGEST = enum.auto()  # a hex digest, a UUID, sha256:...
    GENERATED = enum.auto()  # a generated id: apr-00000042, run-build-00001


ID = Shape.GENERATED | Shape.DIGEST | Shape.NUMBER  # an id, judged part by part
CLAIM = Shape.DIGEST | Shape.NUMBER  # console:<actor>@<host>:<hex>: the actor part is a person's
CLAIM_COLUMNS = frozenset({"operation_claim_id", "cleanup_claim_id", "deletion_claim_id"})
# Archon's columns of ids that do not end in `_id`.
OTHER_ID_COLUMNS = frozenset({"target_key", "external_id"})

# Key paths (dict keys from the document's root; list levels add nothing) under which the JSON in
# archon's columns holds generated ids, digests, counts or times. Anything under another path
# (`env`, `command`, a key archon does not write, a known key inside an unknown one) has no shape
# that keeps it.
JSON_SHAPES: dict[tuple[str, ...], Shape] = {
    ("run_id",): ID, ("definition_id",): ID, ("profile_revision",): ID,
    ("claim_id",): CLAIM, ("previous_claim_id",): CLAIM,
    ("commit",): Shape.DIGEST, ("base_commit",): Shape.DIGEST,
    ("commit_count",): Shape.NUMBER, ("timeout_seconds",): Shape.NUMBER, ("exit_code",): Shape.NUMBER,
    ("port",): Shape.NUMBER, ("attempt",): Shape.NUMBER,
}


def _column_shape(column: str, declared: str) -> Shape:
    """The rule that makes `shaped_columns` from archon's schema: what the column's name and type say it holds."""
    declared = declared.upper()
    if column in CLAIM_COLUMNS:
        return CLAIM
    if column == "id" or column.endswith("_id") or column in OTHER_ID_COLUMNS:
        return ID
    if column.endswith("_at") or "DATE" in declared or "TIME" in declared:
        return Shape.TIME | Shape.NUMBER  # archon writes times as text or as epoch numbers
    if column.endswith(("fingerprint", "_digest", "_sha256")) or column == "checksum":
        return Shape.DIGEST
    if "INT" in declared or column.endswith("_version"):
        return Shape.NUMBER
    return Shape.NONE

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
_PREFIX, _KIND, _GROUP = re.compile(r"[a-z]{1,5}"), re.compile(r"[a-z]{1,3}"), re.compile(r"[0-9a-f]+")


@lru_cache(maxsize=1)
def vocabulary() -> frozenset[str]:
    """Archon's words: the literals of its schema at every release, migration names, the lists above."""
    return _schema()[0]


def shaped_columns() -> dict[tuple[str, str], Shape]:
    """(table, column) -> the shapes kept there, for every column of archon's schema at every release
    and of the console's ledger: `Shape.NONE` unless its name or type says it holds ids, digests,
    numbers or times. A column not in it is not archon's, and keeps no shape."""
    return _schema()[1]


@lru_cache(maxsize=1)
def _schema() -> tuple[frozenset[str], dict[tuple[str, str], Shape], dict[str, dict[str, tuple[str, tuple[str, ...]]]]]:
    from console.db.detect import MIGRATION_SET
    from console.db.ledger import ensure_tables
    from console.db.migrations.registry import MIGRATIONS, RELEASES, SAFETY_CLASSES, migrations_through
    from console.db.migrations.runner import apply_all

    words: set[str] = set(EXTRA_VOCABULARY) | {MIGRATION_SET} | set(SAFETY_CLASSES) | set(RELEASES)
    words |= {m.id for m in MIGRATIONS}
    columns: dict[tuple[str, str], Shape] = {}
    definitions: dict[str, dict[str, tuple[str, tuple[str, ...]]]] = {}
    for release in RELEASES:
        conn = scratch_connection()
        try:
            apply_all(conn, migrations_through(release))
            ensure_tables(conn)
            for kind, name, sql in conn.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL"):
                for literal in re.findall(r"'((?:[^']|'')*)'", sql):
                    literal = literal.replace("''", "'")
                    if re.fullmatch(r"[a-z][a-z0-9_]{0,40}", literal):
                        words.add(literal)
                    elif literal.startswith("{"):
                        words |= _json_words(literal)
                names: tuple[str, ...] = ()
                if kind == "table":
                    names = tuple(r[1] for r in conn.execute("SELECT * FROM pragma_table_info(?)", (name,)))
                definitions.setdefault(name, {})[_normal(sql)] = (sql, names)
            tables = [row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                for _cid, column, declared, *_rest in conn.execute("SELECT * FROM pragma_table_info(?)", (table,)):
                    columns[(table, column)] = _column_shape(column, declared or "")
        finally:
            conn.close()
    return frozenset(words), columns, definitions


def _normal(sql: str) -> str:
    return " ".join(sql.split())


def known_definition(name: str, sql: str | None) -> str | None:
    """Archon's DDL text for the object `name` that `sql` is (whitespace aside), or None.

    The only schema text a redacted bundle shows: a definition is archon's by what it says, never by
    its name (see console/services/redaction_schema.py)."""
    if sql is None:
        return None
    found = _schema()[2].get(name, {}).get(_normal(sql))
    return found[0] if found else None


def known_tables(name: str) -> list[tuple[str, tuple[str, ...]]]:
    """Archon's DDL texts for the table `name` at every release (oldest first), with their columns."""
    return [(sql, columns) for sql, columns in _schema()[2].get(name, {}).values() if sql.startswith("CREATE TABLE")]


# SQLite's messages name schema objects and quote their text ("no such module: <name>", "malformed
# database schema (<name>) - ..."); a redacted bundle keeps only which of these it was.
ERROR_CATEGORIES = (
    "no such module", "no such table", "no such column", "no such collation sequence", "no such function",
    "database disk image is malformed", "malformed database schema", "file is not a database",
    "disk I/O error", "database is locked", "out of memory", "interrupted", "string or blob too big",
    "unable to open database file", "parser stack overflow", "foreign key mismatch", "too many columns",
)


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
    if len(pieces) < 2 or not _PREFIX.fullmatch(pieces[0]):
        return False
    rest = pieces[1:]
    if rest and (rest[0] in words or _KIND.fullmatch(rest[0])) and len(rest) > 1:
        rest = rest[1:]
    return bool(rest) and _TAIL.fullmatch(rest[0]) is not None and all(_GROUP.fullmatch(p) for p in rest)


# `Redactor.cell`'s memo: texts up to this long (ids, names, paths: what repeats from row to row),
# this many per column; and `kept`'s cache. Small: memory must not grow with the rows redacted.
MEMO_TEXT = 96
MEMO_ENTRIES = 1024
KEPT_CACHE = 4096


@lru_cache(maxsize=KEPT_CACHE)
def kept(text: str, shapes: Shape = Shape.NONE) -> bool:
    """Whether a database string is on the allow-list (shown as it is in a redacted bundle).

    Archon's words are kept anywhere; a shape only where `shapes` (the place the value was read
    from) allows it: `alice-2` in an actor column is a person, `apr-00000042` in an id column is a
    row, and a UUID under `env` is a credential."""
    return keeper(shapes)(text)


@lru_cache(maxsize=None)
def keeper(shapes: Shape) -> Callable[[str], bool]:
    """`kept(text, shapes)` for one place's `shapes`, with the tests that place allows chosen once:
    what the redacted copy asks for every cell of a column (uncached: most such values are unique)."""
    words = vocabulary()
    tests = []
    if Shape.TIME in shapes:
        tests.append(_TIMESTAMP.fullmatch)
    if Shape.NUMBER in shapes:
        tests.append(_NUMBER.fullmatch)
    if Shape.DIGEST in shapes:
        tests += [_HEX.fullmatch, _UUID.fullmatch, _DIGEST.fullmatch]
    generated = Shape.GENERATED in shapes

    def keep(text: str) -> bool:
        if text == "" or text in words:
            return True
        for test in tests:
            if test(text):
                return True
        return generated and _generated_id(text, words)

    return keep


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
        if not self.enabled or value is None:
            return value
        if isinstance(value, bytes):
            self.fields[self._field(table, column)] += 1
            return self.placeholder(value.hex(), "blob")
        shapes = shaped_columns().get((table, column), Shape.NONE)
        if isinstance(value, (int, float)):
            if shapes & (Shape.NUMBER | Shape.TIME):
                return value
            self.fields[self._field(table, column)] += 1
            return self.placeholder(str(value), CATEGORY.get(column, "value"))
        split = column == "id" or column.endswith("_id") or column in ID_COLUMNS
        json_paths = (table, column) in shaped_columns()
        out = self._text(column, str(value), shapes, split, json_paths, 0)
        if out != value:
            self.fields[self._field(table, column)] += 1
        return out

    def cell(self, table: str, column: str) -> Callable[[Any], Any]:
        """`column(table, column, value)` for one column's cells, as a function of the value alone.

        The redacted copy calls it for every stored cell, so the cells whose answer is known skip
        the rest: NULL, a number where the column keeps numbers, a text `kept` there (or an id whose
        parts all are): `column` would return each unchanged and count nothing. A text seen before
        gets its remembered answer (`memo`) with the manifest's count it adds: a placeholder, once
        made, is the value's for the whole bundle, so that is what `column` would say again. The memo
        is bounded (short texts, emptied when full): memory stays the same however many rows."""
        if not self.enabled:
            return lambda value: value
        shapes = shaped_columns().get((table, column), Shape.NONE)
        numbers_kept = bool(shapes & (Shape.NUMBER | Shape.TIME))
        split = column == "id" or column.endswith("_id") or column in ID_COLUMNS
        keep = keeper(shapes)
        memo: dict[str, tuple[str, str | None]] = {}
        fields = self.fields

        def one(value: Any) -> Any:
            kind = type(value)
            if kind is str:
                if keep(value) or (split and ":" in value and value[:1] not in "{[" and all(
                        keep(part) for part in value.split(":") if part)):
                    return value
                known = memo.get(value)
                if known is not None:
                    if known[1] is not None:
                        fields[known[1]] += 1
                    return known[0]
                out = self.column(table, column, value)
                if len(value) <= MEMO_TEXT and value[:1] not in "{[":  # JSON documents rarely repeat
                    if len(memo) >= MEMO_ENTRIES:
                        memo.clear()
                    memo[value] = (out, self._field(table, column) if out != value else None)
                return out
            if value is None or (numbers_kept and (kind is int or kind is float)):
                return value
            return self.column(table, column, value)

        return one

    def _field(self, table: str, column: str) -> str:
        """`table.column` for the manifest, named as the redacted copy names them."""
        return f"{self.name(table, 'table')}.{self.column_name(table, column)}"

    def name(self, name: str, category: str) -> str:
        """A schema object's name: archon's own are kept, any other is replaced."""
        if not self.enabled or name in _archon_objects() or name.startswith("sqlite_"):
            return name
        return self.placeholder(name, category)

    def column_name(self, table: str, column: str) -> str:
        """A column's name: kept when archon's schema (at some release) names a column so, a word of its
        vocabulary like a table's name (`id`, `project_id`); any other name is replaced."""
        if not self.enabled or column in _archon_columns():
            return column
        return self.placeholder(column, "column")

    def error(self, exc: BaseException) -> str:
        """SQLite's message, or in a redacted bundle only its fixed category: the rest quotes the database."""
        text = str(exc)
        if not self.enabled:
            return text
        return next((c for c in ERROR_CATEGORIES if text.lower().startswith(c.lower())), "SQLite error")

    def _text(self, key: str, text: str, shapes: Shape, split: bool, json_paths: bool, depth: int) -> str:
        """`key`: the column or JSON key (names the placeholder's category); `json_paths`: JSON inside
        is archon's, so `JSON_SHAPES` applies to it. `depth`: the nesting already walked above this
        text, counted across JSON held in strings of JSON: each re-parse may go only as deep as
        `MAX_DEPTH` minus that, so layered documents (8 layers of 63 in 1.5 KB) are bounded as one."""
        if kept(text, shapes):
            return text
        if text[:1] in "{[" and depth < MAX_DEPTH:
            try:
                parsed = read_json(text, max_depth=MAX_DEPTH - depth)
            except ValueError:  # not JSON or over the reader's limits: replaced whole, below
                parsed = None
            if isinstance(parsed, (dict, list)):
                spaced = ", " in text or ": " in text
                return json.dumps(self._json(parsed, key, () if json_paths else None, depth), ensure_ascii=False,
                                  separators=(", ", ": ") if spaced else (",", ":"))
        if split and ":" in text:
            return ":".join(self._text(key, part, shapes, True, False, depth) if part else part
                            for part in text.split(":"))
        return self.placeholder(text, CATEGORY.get(key, "id" if split else "value"))

    def _json(self, value: Any, key: str, path: tuple[str, ...] | None, depth: int) -> Any:
        """`path`: the keys from the document's root, or None where no key path keeps a shape."""
        if isinstance(value, dict):
            return {(k if k in JSON_KEYS else self.placeholder(k, "key")):
                    self._json(v, k, None if path is None else (*path, k), depth + 1) for k, v in value.items()}
        if isinstance(value, list):
            return [self._json(v, key, path, depth + 1) for v in value]
        if value is None or isinstance(value, bool):
            return value
        shapes = JSON_SHAPES.get(path, Shape.NONE) if path else Shape.NONE
        if isinstance(value, (int, float)):
            return value if shapes & Shape.NUMBER else self.placeholder(str(value), CATEGORY.get(key, "value"))
        return self._text(key, str(value), shapes, key in ID_COLUMNS or key.endswith("_id"), False, depth)

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
    from console.services.doctor.checks_schema import reference_objects

    names = {LEDGER_TABLE, LEDGER_META_TABLE, "idx__sqlite_migrations_migration_set_name"}
    for release in RELEASES:
        names |= {name for _kind, name in reference_objects(release)}
    return frozenset(names)


@lru_cache(maxsize=1)
def _archon_columns() -> frozenset[str]:
    return frozenset(column for _table, column in shaped_columns())


def archon_object(name: str) -> bool:
    return name in _archon_objects() or name.startswith("sqlite_")



__all__ = ["ERROR_CATEGORIES", "JSON_SHAPES", "Redactor", "Shape", "archon_object", "kept", "known_definition",
           "known_tables", "shaped_columns", "vocabulary"]
