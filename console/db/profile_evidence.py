"""Does this database prove the console's profile algorithms right, wrong, or neither?

Serialisation, normalisation, fingerprint and the default profiles are archon's code
(`lib/executionProfiles.js`), which the seeds only call; console/db/execution_profiles.py is a
reconstruction. Before the console writes profile data it checks that reconstruction against what
archon itself left in the database:

* every revision: `fingerprint` recomputes from `profile_json`, and `profile_json` is exactly what
  the console would serialise after parsing it (archon stores `serializeExecutionProfile(profile)`
  beside `fingerprintExecutionProfile(profile)` of the same object, seed 001); at a schema version
  the console normalises to (2, 3) the stored profile is also a fixed point of its normaliser
  (archon only stores normalised profiles). Schema 1 is never produced by the console, so its
  normaliser is not put to the test;
* revision 1 as archon's default writes it (`<project>:execution-profile:1` with its
  `<id>:created` event): the console's default profile for that provider and schema version;
* the schema backfills (`<revision>:v2-backfill`, `<revision>:schema-backfill` events): normalising
  the previous revision to the new schema gives the new revision's fingerprint;
* an existing `create_project_execution_profile` trigger: the default JSON and fingerprints it
  embeds are the console's defaults for the schema version it embeds.

Evidence counts only when archon wrote it, and only for the schema version it is at:

* never what the console's own upgrade wrote. The console's profile steps (those that reach
  console/db/execution_profiles.py: 004-007, 020-022) write archon's fixed ids (`<project>:execution-profile:1`, `...:v<N>`, `...:<repair>-v<N>`, the
  `:v2-backfill` / `:schema-backfill` events) and install `create_project_execution_profile`
  with its own defaults embedded, which archon then keeps (CREATE TRIGGER IF NOT EXISTS) and which
  writes revision 1 of every later project. Such rows cannot be told from archon's by their ids, so
  once the database's ledger records any of those steps, no row of those shapes and not the
  trigger count as proof (`console_rows`): evidence lost, never evidence invented. They still count
  as contradictions where the console cannot have written them: every row it writes is
  `serialize(p)` beside `fingerprint(p)`, so a set-aside row whose fingerprint does not recompute or
  whose JSON does not round-trip is not the console's (`_check_written`);
* a revision or trigger at schema version N proves the defaults and normaliser at N only
  (`proves`): schema-2 evidence says nothing of what archon writes at schema 3.

Reads only; the cost is one pass over the revisions (a few per project).
"""

from __future__ import annotations

import importlib
import re
import sqlite3
from dataclasses import asdict, dataclass, field

from console.db import execution_profiles as profiles
from console.db import ledger
from console.db.migrations.base import step_sources
from console.db.migrations.registry import MIGRATIONS
from console.db.rows import textual
from console.text import UnreadableJson

REVISIONS = "execution_profile_revisions"
EVENTS = "execution_profile_audit_events"
TRIGGER = "create_project_execution_profile"
SHOWN = 10  # contradictions spelled out in a summary

VERIFIED, CONTRADICTED, NONE = "verified", "contradicted", "no-evidence"

# The console's steps that may write profile revisions, their events or create_project_execution_profile:
# every step that reaches the profile algorithms by its imports (the same walk as its checksum), so a
# new profile step is set aside without being listed here.
CONSOLE_PROFILE_STEPS = frozenset(
    m.id for m in MIGRATIONS if profiles.__name__ in step_sources(importlib.import_module(m.module)))
# Archon's fixed revision ids after `<project>:execution-profile:`, which those steps also write.
_FIXED_SUFFIX = re.compile(r"1|v\d+|[a-z][a-z-]*-v\d+")

_TRIGGER_VERSION = re.compile(r"NEW\.id\s*,\s*1\s*,\s*(\d+)\s*,")
_TRIGGER_CASE = re.compile(r"THEN\s*'((?:[^']|'')*)'\s*ELSE\s*'((?:[^']|'')*)'\s*END", re.S)


@dataclass(frozen=True)
class Contradiction:
    """One row whose stored value differs from what the console's algorithms give."""

    table: str
    row_id: str
    what: str

    @property
    def text(self) -> str:
        return f"{self.row_id}: {self.what}"


@dataclass
class ProfileEvidence:
    revisions: int = 0  # revisions checked
    schema_versions: list[int] = field(default_factory=list)
    trigger_schema_version: int | None = None  # of a trigger whose defaults were checked
    contradictions: list[Contradiction] = field(default_factory=list)
    console_rows: int = 0  # revisions and triggers set aside because the console may have written them
    console_steps: list[str] = field(default_factory=list)  # the ledger's profile steps that made them so

    def proves(self, schema_version: int) -> bool:
        """Archon's own rows at `schema_version` agree with the console, and nothing contradicts it."""
        return not self.contradictions and (
            schema_version in self.schema_versions or self.trigger_schema_version == schema_version)

    @property
    def contradicted_rows(self) -> list[str]:
        seen: list[str] = []
        for c in self.contradictions:
            if c.row_id not in seen:
                seen.append(c.row_id)
        return seen

    @property
    def status(self) -> str:
        if self.contradictions:
            return CONTRADICTED
        if self.revisions or self.trigger_schema_version is not None:
            return VERIFIED
        return NONE

    def _set_aside(self) -> str:
        if not self.console_rows:
            return ""
        return (f"; {self.console_rows} row(s) the console's own upgrade wrote (steps "
                f"{', '.join(self.console_steps)} in its ledger) are not evidence")

    def summary(self) -> str:
        if self.status == CONTRADICTED:
            rows = self.contradicted_rows
            shown = "; ".join(
                next(c.text for c in self.contradictions if c.row_id == row) for row in rows[:SHOWN]
            )
            more = f"; and {len(rows) - SHOWN} more" if len(rows) > SHOWN else ""
            return f"contradicted by {len(rows)} row(s): {shown}{more}"
        if self.status == VERIFIED:
            parts = [f"verified on {self.revisions} revision(s) archon wrote"]
            if self.schema_versions:
                parts.append("schema " + ", ".join(map(str, self.schema_versions)))
            if self.trigger_schema_version is not None:
                parts.append(f"and the {TRIGGER} trigger's schema-{self.trigger_schema_version} defaults")
            text = " ".join([parts[0]] + ([f"({'; '.join(parts[1:])})"] if parts[1:] else []))
            return text + self._set_aside()
        return ("no evidence: the database holds no profile revision and no profile trigger archon wrote"
                + self._set_aside())

    def to_json(self) -> dict:
        return {
            "status": self.status,
            "summary": self.summary(),
            "revisions": self.revisions,
            "schema_versions": list(self.schema_versions),
            "trigger_schema_version": self.trigger_schema_version,
            "console_rows": self.console_rows,
            "console_steps": list(self.console_steps),
            "contradictions": [asdict(c) for c in self.contradictions],
        }


def _exists(conn: sqlite3.Connection, kind: str, name: str) -> bool:
    return conn.execute(
        "SELECT 1 FROM sqlite_master WHERE type = ? AND name = ?", (kind, name)
    ).fetchone() is not None


def _first_difference(stored: str, ours: str) -> str:
    at = next((i for i, (a, b) in enumerate(zip(stored, ours)) if a != b), min(len(stored), len(ours)))
    start = max(0, at - 12)
    return (f"differs at character {at}: stored {stored[start:at + 12]!r}, "
            f"the console writes {ours[start:at + 12]!r}")


def _check_written(stored_fp, profile_json) -> tuple[dict | None, list[str]]:
    """The parsed profile and what differs between the row and what the console would write for it:
    `serialize(p)` beside `fingerprint(p)` of one object, which is how every row the console writes
    is made. A row with a difference here is therefore never the console's, whatever its id."""
    try:
        parsed = profiles.parse(profile_json)
    except UnreadableJson as exc:
        return None, [f"profile_json is {exc}" if exc.over_limit else "profile_json is not JSON"]
    if not isinstance(parsed, dict):
        return None, ["profile_json is not a JSON object"]
    problems = []
    ours = profiles.serialize(parsed)
    if ours != profile_json:
        problems.append("serialisation does not round-trip byte for byte; " + _first_difference(profile_json, ours))
    fp = profiles.fingerprint(parsed)
    if fp != stored_fp:
        problems.append(f"fingerprint {str(stored_fp)[:12]}… does not recompute (the console gets {fp[:12]}…)")
    return parsed, problems


def _check_revision(rev_id: str, version, stored_fp: str, profile_json) -> list[str]:
    """What differs for one revision (empty when the console's algorithms reproduce it)."""
    parsed, problems = _check_written(stored_fp, profile_json)
    if parsed is None:
        return problems
    ours = profiles.serialize(parsed)
    if version in profiles.SCHEMA_VERSION_BY_RELEASE.values():
        normalized = profiles.normalize(parsed, version)
        if not normalized.ok:
            problems.append(f"the console cannot normalise it at schema {version} ({normalized.error})")
        elif profiles.serialize(normalized.profile) != ours:
            problems.append(f"normalising at schema {version} changes it; "
                            + _first_difference(ours, profiles.serialize(normalized.profile)))
    return problems


def _check_default(rev_id: str, version, profile_json) -> str | None:
    try:
        provider = profiles.parse(profile_json).get("provider_preference")
    except (ValueError, AttributeError):
        return None  # reported by _check_revision
    expected = profiles.serialize(profiles.create(provider, version))
    if expected != profile_json:
        return f"archon's default revision 1 (schema {version}, {provider}) " + _first_difference(profile_json, expected)
    return None


def _check_backfills(conn: sqlite3.Connection) -> list[Contradiction]:
    """Archon's schema backfills normalised the previous revision into the activated one (only
    asked when the console's ledger records no profile step: its backfills write the same ids)."""
    if not _exists(conn, "table", EVENTS):
        return []
    found = []
    rows = conn.execute(
        f"""SELECT e.id, new.schema_version, new.fingerprint, old.profile_json, typeof(old.profile_json)
            FROM {EVENTS} e
            JOIN {REVISIONS} new ON new.id = e.profile_revision_id AND new.project_id = e.project_id
            JOIN {REVISIONS} old ON old.id = e.previous_profile_revision_id AND old.project_id = e.project_id
            WHERE e.event_type = 'revision_activated'
              AND (e.id LIKE '%:v2-backfill' OR e.id LIKE '%:schema-backfill')
            ORDER BY e.id"""
    ).fetchall()
    for row in rows:
        event_id, version, fp, old_json, stored_as = textual(tuple(row))
        if stored_as != "text":
            continue  # the previous revision's own check reports it (`verify`)
        try:
            normalized = profiles.normalize(profiles.parse(old_json), version)
        except (TypeError, ValueError):
            continue  # the previous revision's own check reports it
        if not normalized.ok:
            found.append(Contradiction(EVENTS, event_id, f"the console cannot normalise the previous "
                                                         f"revision to schema {version} ({normalized.error})"))
        elif profiles.fingerprint(normalized.profile) != fp:
            found.append(Contradiction(EVENTS, event_id, f"normalising the previous revision to schema "
                                                         f"{version} does not give the backfilled revision"))
    return found


def _unquote(literal: str) -> str:
    return literal.replace("''", "'")


def _check_trigger(sql: str) -> tuple[int | None, list[str]]:
    version_match = _TRIGGER_VERSION.search(sql)
    cases = _TRIGGER_CASE.findall(sql)
    if version_match is None or len(cases) != 2:
        return None, ["its text does not have archon's shape (schema version and two CASE defaults)"]
    version = int(version_match.group(1))
    (docker_fp, host_fp), (docker_json, host_json) = cases
    problems = []
    for provider, fp, embedded in (("docker_sandbox", docker_fp, docker_json), ("host", host_fp, host_json)):
        default = profiles.create(provider, version)
        ours = profiles.serialize(default)
        if _unquote(embedded) != ours:
            problems.append(f"embedded {provider} default (schema {version}) " + _first_difference(_unquote(embedded), ours))
        if _unquote(fp) != profiles.fingerprint(default):
            problems.append(f"embedded {provider} fingerprint differs from the console's default's")
    return version, problems


def _console_fixed_id(rev_id, project_id) -> bool:
    """A revision id of a shape the console's profile steps write (archon's fixed ids)."""
    prefix = f"{project_id}:execution-profile:"
    return (isinstance(rev_id, str) and rev_id.startswith(prefix)
            and _FIXED_SUFFIX.fullmatch(rev_id[len(prefix):]) is not None)


def console_profile_steps(conn: sqlite3.Connection) -> list[str]:
    """The profile-writing steps the database's upgrade ledger records, verified or not: a ledger
    that names one says the console may have written profile rows here."""
    try:
        names = [entry.name for entry in ledger.read_entries(conn)]
    except sqlite3.Error:
        return sorted(CONSOLE_PROFILE_STEPS)  # an unreadable ledger: assume the worst
    return sorted(set(names) & CONSOLE_PROFILE_STEPS)


def verify(conn: sqlite3.Connection) -> ProfileEvidence:
    """Check the console's profile algorithms against every piece of evidence archon left."""
    evidence = ProfileEvidence()
    evidence.console_steps = console_profile_steps(conn)
    console_wrote = bool(evidence.console_steps)
    versions: set[int] = set()
    if _exists(conn, "table", REVISIONS):
        has_events = _exists(conn, "table", EVENTS)
        created = (
            {r[0] for r in conn.execute(
                f"SELECT profile_revision_id FROM {EVENTS} WHERE event_type = 'revision_created' "
                "AND id = profile_revision_id || ':created'")}
            if has_events else set()
        )
        for row in conn.execute(
            f"SELECT id, project_id, schema_version, fingerprint, profile_json, typeof(profile_json) "
            f"FROM {REVISIONS} ORDER BY id"
        ):
            # One reader whatever the connection's row factory (the plan's, doctor's and the run's
            # differ): every value as text, and the stored type asked of SQLite itself.
            rev_id, project_id, version, fp, profile_json, stored_as = textual(tuple(row))
            if stored_as != "text":
                # Archon binds a JS string, so it stores TEXT; a BLOB (or a number) here was not
                # written by archon's profile code and proves nothing about it: on every path
                # (plan, doctor, the run) it is a contradiction, never decoded into a match.
                evidence.contradictions.append(Contradiction(
                    REVISIONS, str(rev_id), f"profile_json is stored as {stored_as}, not as the text archon writes"))
                continue
            if console_wrote and _console_fixed_id(rev_id, project_id):
                # Set aside as proof; but a row the console could not have written (its fingerprint
                # does not recompute, its JSON does not round-trip) is archon's or someone's, and
                # still contradicts.
                evidence.console_rows += 1
                for what in _check_written(fp, profile_json)[1]:
                    evidence.contradictions.append(Contradiction(
                        REVISIONS, str(rev_id), f"{what} (under an id the console's upgrade also writes, but "
                                                "the console never writes such a row)"))
                continue
            evidence.revisions += 1
            if isinstance(version, int):
                versions.add(version)
            for what in _check_revision(rev_id, version, fp, profile_json):
                evidence.contradictions.append(Contradiction(REVISIONS, str(rev_id), what))
            if (rev_id == f"{project_id}:execution-profile:1" and rev_id in created
                    and version in profiles.SCHEMA_VERSION_BY_RELEASE.values()):
                what = _check_default(rev_id, version, profile_json)
                if what:
                    evidence.contradictions.append(Contradiction(REVISIONS, str(rev_id), what))
        if not console_wrote:
            evidence.contradictions.extend(_check_backfills(conn))
    evidence.schema_versions = sorted(versions)
    row = conn.execute("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = ?", (TRIGGER,)).fetchone()
    if row is not None and row[0]:
        if console_wrote:
            evidence.console_rows += 1
        else:
            version, problems = _check_trigger(row[0])
            evidence.trigger_schema_version = version
            evidence.contradictions.extend(Contradiction("sqlite_master", TRIGGER, p) for p in problems)
    return evidence


__all__ = ["CONSOLE_PROFILE_STEPS", "CONTRADICTED", "NONE", "VERIFIED", "Contradiction", "ProfileEvidence",
           "console_profile_steps", "verify"]
