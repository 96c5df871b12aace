"""Support bundles: a zip a user can send, with the doctor report and what explains it.

Members: README.txt (says plainly whether the bundle is redacted), MANIFEST.json, report.txt,
report.json, schema.sql, row_counts.json, ledger.json and evidence.json (the rows the findings
point at, with the events of those requests and environments).

`redact=True` replaces every value that can identify a person, a machine or a payload by a
placeholder (`actor-1`, `path-2`, `value-3`, ...). The same original always maps to the same
placeholder within one bundle, so "the same person approved both" stays visible; different
bundles number independently. What is kept: ids, statuses, kinds, timestamps, counts, sequence
numbers and fingerprints (needed to follow the report). The manifest counts what was replaced per
field, never the originals. As a last guard every replaced original is searched for in every text
member and replaced there too (the report names a claim or a path at most by accident).
"""

from __future__ import annotations

import json
import re
import sqlite3
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import console
from console.clock import db_time
from console.db.readonly import open_read_only
from console.errors import Refusal
from console.services.doctor import Report
from console.text import json_text
from widgets.safe_text import clean

EVIDENCE_PER_FINDING = 20
EVENTS_PER_ROW = 50

# Columns whose values are structure, not content: kept as they are.
SAFE_COLUMNS = {
    "id", "status", "from_status", "to_status", "from_state", "to_state", "sequence", "event_type", "action_kind",
    "actor_classification", "relationship", "lifecycle_state", "provider_kind", "operation_kind",
    "target_kind", "workspace_mode", "build_execution_provider", "purpose", "outcome", "revision",
    "environment_revision", "cleanup_attempts", "schema_version", "position", "safety", "checksum",
    "target_release", "tool_version", "migration_set", "kind", "active_target_kind",
    "output_retention_state", "exit_code", "spec_aware_code_review_enabled",
    "execution_profile_selection_reason", "provider_version",
}
SAFE_SUFFIXES = ("_id", "_at", "_status", "_version", "fingerprint", "_sha256", "_count", "_attempts")
# ...except these, which carry names (claim ids are `console:<actor>@<host>:...`).
SENSITIVE_COLUMNS = {
    "actor_reference", "operation_claim_id", "cleanup_claim_id", "deletion_claim_id", "external_id",
    "reason", "repo_path", "target_workspace_path", "name", "snapshot_path", "failure_message",
}
CATEGORY = {
    "actor_reference": "actor", "operation_claim_id": "claim", "cleanup_claim_id": "claim",
    "deletion_claim_id": "claim", "repo_path": "path", "target_workspace_path": "path",
    "snapshot_path": "path", "reason": "text", "failure_message": "text", "name": "name",
}


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

    def column(self, table: str, column: str, value: Any) -> Any:
        if not self.enabled or value is None:
            return value
        if column not in SENSITIVE_COLUMNS and (
            column in SAFE_COLUMNS or column.endswith(SAFE_SUFFIXES)
        ):
            return value
        self.fields[f"{table}.{column}"] += 1
        if column.endswith("_json") and isinstance(value, str):
            try:
                parsed = json.loads(value)
            except ValueError:
                return self.placeholder(value, "value")
            return json.dumps(self._json(parsed), ensure_ascii=False, sort_keys=True)
        if isinstance(value, bytes):
            return self.placeholder(value.hex(), "blob")
        return self.placeholder(str(value), CATEGORY.get(column, "value"))

    def _json(self, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: self._json(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._json(v) for v in value]
        if value is None or isinstance(value, bool):
            return value
        return self.placeholder(str(value), "value")

    def scrub(self, text: str) -> str:
        """Replace any remaining original (4+ characters) inside free text, longest first."""
        if not self.enabled or not self._by_value:
            return text
        originals = sorted((v for v in self._by_value if len(v) >= 4), key=len, reverse=True)
        if not originals:
            return text
        # Whole tokens only, so a value like "host" does not eat into "hostname".
        pattern = re.compile(r"(?<![\w])(?:" + "|".join(re.escape(v) for v in originals) + r")(?![\w])")
        return pattern.sub(lambda m: self._by_value[m.group(0)], text)

    def manifest(self) -> dict[str, Any]:
        return {
            "redacted": self.enabled,
            "fields": dict(sorted(self.fields.items())),
            "placeholders": dict(sorted(self._next.items())),
        }


@dataclass
class BundleResult:
    path: Path
    redacted: bool
    members: list[str] = field(default_factory=list)
    manifest: dict[str, Any] = field(default_factory=dict)


def _tables(conn) -> list[str]:
    return [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]


def _schema_sql(conn) -> str:
    parts = []
    for kind, name, sql in conn.execute(
        "SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
        "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'index' THEN 1 WHEN 'trigger' THEN 2 ELSE 3 END, name"
    ):
        parts.append(f"-- {kind} {name}\n{sql};\n")
    return "\n".join(parts)


def _row_counts(conn) -> dict[str, Any]:
    counts: dict[str, Any] = {}
    for table in _tables(conn):
        try:
            counts[table] = conn.execute(f'SELECT count(*) FROM "{table}"').fetchone()[0]
        except sqlite3.DatabaseError as exc:
            counts[table] = f"unreadable: {exc}"
    return counts


def _dump(conn, table: str, where: str, params, redactor: Redactor, limit: int) -> list[dict[str, Any]]:
    try:
        cur = conn.execute(f'SELECT * FROM "{table}" WHERE {where} LIMIT {int(limit)}', params)
    except sqlite3.DatabaseError:
        return []
    names = [d[0] for d in cur.description]
    return [{n: redactor.column(table, n, v) for n, v in zip(names, row)} for row in cur.fetchall()]


def _ledger(conn, redactor: Redactor) -> dict[str, Any]:
    out: dict[str, Any] = {}
    tables = set(_tables(conn))
    for table in ("_sqlite_migrations", "_archon_console_ledger"):
        out[table] = _dump(conn, table, "1", (), redactor, 10_000) if table in tables else None
    return out


def _evidence(conn, report: Report, redactor: Redactor) -> list[dict[str, Any]]:
    tables = set(_tables(conn))
    evidence = []
    for finding in report.findings:
        rows = []
        for ref in finding.rows[:EVIDENCE_PER_FINDING]:
            table, key = ref["table"], ref["id"]
            if table not in tables:
                continue
            item: dict[str, Any] = {"table": table, "id": key,
                                    "row": (_dump(conn, table, "id = ?", (key,), redactor, 1) or [None])[0]}
            if table == "approval_requests" and "approval_request_events" in tables:
                item["events"] = _dump(conn, "approval_request_events", "approval_request_id = ? ORDER BY sequence",
                                       (key,), redactor, EVENTS_PER_ROW)
            if table == "execution_environments" and "execution_environment_events" in tables:
                item["events"] = _dump(conn, "execution_environment_events", "environment_id = ? ORDER BY sequence",
                                       (key,), redactor, EVENTS_PER_ROW)
            rows.append(item)
        if rows:
            evidence.append({"finding": finding.id, "rows": rows})
    return evidence


README_REDACTED = """archon-console support bundle (REDACTED)

Actor references, claim ids, repository and workspace paths, project names, reasons, failure
messages and every value inside JSON payloads (action, authority, placement, profile, metadata)
have been replaced by placeholders such as actor-1, path-2, value-3. The same original always has
the same placeholder within this bundle. Kept as they are: ids, statuses, kinds, timestamps,
counts, sequence numbers, fingerprints and the schema. MANIFEST.json lists which fields were
replaced and how often; it never contains the originals.
"""

README_PLAIN = """archon-console support bundle -- NOT REDACTED

This bundle is NOT redacted. evidence.json and ledger.json contain actor names, repository paths,
reasons and request payloads exactly as they are stored in the database, and report.txt names the
database's path. Share it only with people allowed to see that data, or make a new one with
`archon-console doctor --bundle OUT.zip --redact`.
"""


def write_bundle(
    report: Report,
    out: str | Path,
    *,
    source: str | Path | None = None,
    redact: bool = False,
    now: datetime,
) -> BundleResult:
    """Write the zip at `out` (never overwrites). `source` defaults to the report's database."""
    out = Path(out).expanduser()
    if out.exists():
        raise Refusal(f"{out} already exists; a bundle never overwrites a file.")
    source = Path(source or report.path)
    if out.resolve().parent == source.resolve().parent:
        raise Refusal("Write the bundle outside the database's directory (nothing is written beside it).")
    redactor = Redactor(redact)
    conn, cleanup, _how = open_read_only(source)
    try:
        schema = _schema_sql(conn)
        counts = _row_counts(conn)
        ledger = _ledger(conn, redactor)
        evidence = _evidence(conn, report, redactor)
    finally:
        conn.close()
        cleanup()
    report_json = report.to_json()
    report_text = report.to_text()
    if redact:
        shown_path = redactor.placeholder(str(report.path), "path")
        report_json["path"] = shown_path
        report_text = report_text.replace(str(report.path), shown_path)
    members: dict[str, str] = {
        "README.txt": README_REDACTED if redact else README_PLAIN,
        "report.txt": clean(report_text) + "\n",
        "report.json": json_text(report_json),
        "schema.sql": clean(schema),
        "row_counts.json": json.dumps(counts, indent=2),
        "ledger.json": json_text(ledger),
        "evidence.json": json_text(evidence),
    }
    if redact:
        members = {name: redactor.scrub(text) for name, text in members.items()}
    manifest = {
        "tool": "archon-console",
        "version": getattr(console, "__version__", "?"),
        "generated_at": db_time(now),
        "redaction": redactor.manifest(),
        "members": sorted([*members, "MANIFEST.json"]),
        "report_counts": report.counts(),
    }
    members["MANIFEST.json"] = json.dumps(manifest, indent=2)
    out.parent.mkdir(parents=True, exist_ok=True)
    partial = out.with_name(out.name + ".partial")
    with zipfile.ZipFile(partial, "x", compression=zipfile.ZIP_DEFLATED) as archive:
        for name in ["README.txt", "MANIFEST.json", *[m for m in members if m not in ("README.txt", "MANIFEST.json")]]:
            archive.writestr(name, members[name])
    partial.rename(out)
    return BundleResult(out, redact, list(members), manifest)


__all__ = ["BundleResult", "Redactor", "write_bundle"]
