"""Execution-profile revisions written as archon writes them, and the profiles the profile tests use."""

from __future__ import annotations

from console.db import execution_profiles as ep

DOCKER = {"provider_preference": "docker_sandbox", "eligible_workloads": ["build", "chat_build", "check"],
          "check_template_policy": {"mode": "agent_template", "agent": "opencode"}}
HOST_V2 = {"provider_preference": "host", "eligible_workloads": ["build", "check"]}
DOCKER_V2 = {"provider_preference": "docker_sandbox", "eligible_workloads": ["build", "check"]}
POLICY_CMDS = {"mode": "project_commands", "agent": None}
AGENT = {"mode": "agent_template", "agent": "opencode"}
# What archon 1.10.0 makes of DOCKER_V2: schema 3 (default policy), then chat_build appended.
DOCKER_REPAIRED = {"provider_preference": "docker_sandbox", "eligible_workloads": ["build", "check", "chat_build"],
                   "check_template_policy": POLICY_CMDS}
NO_CHAT = {"provider_preference": "docker_sandbox", "eligible_workloads": ["build", "check"],
           "check_template_policy": AGENT}
FULL = {"provider_preference": "docker_sandbox", "eligible_workloads": ["build", "chat_build", "check"],
        "check_template_policy": AGENT}


def add_revision(conn, project_id, revision, profile, schema_version=3, *, fingerprint=None, rev_id=None,
                 dated: bool = True):
    """Revision `revision` of `project_id`'s profile; `dated` writes created_at as 2026-10-0N 12:00:00
    (N = revision), otherwise the database's own CURRENT_TIMESTAMP fills it."""
    rev_id = rev_id or f"{project_id}:execution-profile:r{revision}"
    values = {"id": rev_id, "project_id": project_id, "revision": revision, "schema_version": schema_version,
              "fingerprint": fingerprint or ep.fingerprint(profile), "profile_json": ep.serialize(profile)}
    if dated:
        values["created_at"] = f"2026-10-0{revision} 12:00:00"
    conn.execute(f"INSERT INTO execution_profile_revisions ({', '.join(values)}) "
                 f"VALUES ({', '.join('?' for _ in values)})", list(values.values()))
    return rev_id
