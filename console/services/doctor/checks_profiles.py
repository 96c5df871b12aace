"""Projects and execution-profile revisions: the active revision and the fingerprints."""

from __future__ import annotations

from console.db import profile_evidence
from console.db.execution_profiles import fingerprint_json
from console.services.doctor.context import Ctx, columns, ids_text, rows_of
from console.services.doctor.report import Finding

# --- projects and profiles -------------------------------------------------------------------


def check_algorithm_evidence(ctx: Ctx) -> Finding:
    """The upgrade's evidence gate (console/services/profile_gate.py), as one finding."""
    evidence = profile_evidence.verify(ctx.conn)
    title = "The console's execution-profile algorithms against this database's evidence"
    if evidence.status == profile_evidence.CONTRADICTED:
        rows = evidence.contradicted_rows
        return Finding(
            "profiles.algorithm_evidence", "warning", title,
            evidence.summary() + ".",
            "Serialisation, normalisation, fingerprint and default profiles are archon's code, which the console "
            "reconstructs; here archon's own rows disagree with that reconstruction, so the console refuses any "
            "upgrade step that would write profile data (exit 3, --force does not override).",
            "Let archon upgrade this database itself (start the target archon release once); the console's "
            "reads, approvals and claims are unaffected.",
            rows=[{"table": c.table, "id": c.row_id} for c in evidence.contradictions][:100],
            count=len(rows),
        )
    if evidence.status == profile_evidence.VERIFIED:
        return Finding(
            "profiles.algorithm_evidence", "info", title, evidence.summary() + ".",
            "The console's profile algorithms reproduce every revision (and trigger default) archon stored.", "",
            count=evidence.revisions,
        )
    return Finding(
        "profiles.algorithm_evidence", "info", title, evidence.summary() + ".",
        "Nothing here can confirm the console's reconstruction of archon's profile algorithms; an upgrade that "
        "writes profile data lists that as a risk and needs --force.", "",
    )


def check_profiles(ctx: Ctx) -> list[Finding]:
    findings: list[Finding] = [check_algorithm_evidence(ctx)]
    if not ctx.has("projects", "execution_profile_revisions"):
        return findings
    if "active_execution_profile_revision_id" not in columns(ctx.conn, "projects"):
        return findings
    rows = ctx.conn.execute(
        """
        SELECT p.id, p.active_execution_profile_revision_id AS rev, p.build_execution_provider AS provider,
               r.id IS NULL AS missing, r.project_id AS owner,
               CASE WHEN json_valid(r.profile_json) THEN json_extract(r.profile_json, '$.provider_preference') END AS pref
        FROM projects p LEFT JOIN execution_profile_revisions r ON r.id = p.active_execution_profile_revision_id
        WHERE r.id IS NULL OR r.project_id IS NOT p.id
           OR p.build_execution_provider IS NOT
              (CASE WHEN json_valid(r.profile_json) THEN json_extract(r.profile_json, '$.provider_preference') END)
        ORDER BY p.id
        """
    ).fetchall()
    t = "projects"
    missing = [r for r in rows if r["missing"]]
    foreign = [r for r in rows if not r["missing"] and r["owner"] != r["id"]]
    projection = [r for r in rows if not r["missing"] and r["owner"] == r["id"] and r["provider"] != r["pref"]]
    if missing:
        findings.append(Finding(
            "projects.active_revision_missing", "error", "Projects whose active profile revision does not exist",
            f"{len(missing)} project(s): "
            + ids_text([f"{r['id']} (points at {r['rev']!r})" for r in missing], len(missing)) + ".",
            "Archon cannot resolve how to run builds for these projects.",
            "Roll back to an existing revision (`profiles activate REVISION --reason TEXT`); find out who deleted the revision.",
            rows=rows_of(t, [r["id"] for r in missing]), count=len(missing)))
    if foreign:
        findings.append(Finding(
            "projects.active_revision_foreign", "error", "Projects whose active revision belongs to another project",
            f"{len(foreign)} project(s): "
            + ids_text([f"{r['id']} (uses {r['rev']} of {r['owner']})" for r in foreign], len(foreign)) + ".",
            "Archon's owner trigger forbids this; it was written with triggers missing.",
            "Roll back to one of the project's own revisions.",
            rows=rows_of(t, [r["id"] for r in foreign]), count=len(foreign)))
    if projection:
        findings.append(Finding(
            "projects.provider_projection", "error",
            "build_execution_provider does not project the active profile",
            f"{len(projection)} project(s): "
            + ids_text([f"{r['id']} (column {r['provider']!r}, profile {r['pref']!r})" for r in projection],
                        len(projection)) + ".",
            "Builds run on a provider the active profile does not ask for.",
            "Activate a revision whose provider_preference matches (both change in one update).",
            rows=rows_of(t, [r["id"] for r in projection]), count=len(projection)))
    bad: list[str] = []
    for rev_id, fp, profile_json in ctx.conn.execute(
        "SELECT id, fingerprint, profile_json FROM execution_profile_revisions ORDER BY id"
    ):
        expected = fingerprint_json(profile_json)
        if expected is None or fp != expected:
            bad.append(rev_id)
    if bad:
        findings.append(Finding(
            "profiles.fingerprint_mismatch", "error", "Revisions whose fingerprint does not match their JSON",
            f"{len(bad)} revision(s): {ids_text(bad, len(bad))}.",
            "Environments and runs are matched by fingerprint; a wrong one breaks reuse and audit.",
            "Revisions are immutable: report it; do not edit the row.",
            rows=rows_of("execution_profile_revisions", bad), count=len(bad)))
    return findings


