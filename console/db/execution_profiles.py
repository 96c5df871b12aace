"""Archon's execution-profile algorithms, as this console reconstructs them.

The seeds call `createExecutionProfile`, `normalizeExecutionProfile`, `serializeExecutionProfile`
and `fingerprintExecutionProfile` but do not show them (docs/decisions.md, Q13). We assume the obvious
forms: canonical JSON (sorted keys, no spaces) and SHA-256 hex of it. Everything that writes or
checks a profile goes through here, so a real archon definition replaces one module.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from typing import Any

# The bounded JSON reader itself, not console/text.py's re-export: every module imported here is in
# the checksum of the steps that write profiles (console/db/migrations/base.py `step_sources`),
# and console/text.py also carries the output sanitiser, which decides nothing they write.
from widgets.safe_json import read_json

PROVIDERS = ("host", "docker_sandbox")
WORKLOADS = ("build", "chat_build", "check", "review", "service")
CHECK_TEMPLATE_MODES = ("project_commands", "agent_template", "disabled")

# EXECUTION_PROFILE_SCHEMA_VERSION per release (docs/decisions.md, Q14).
SCHEMA_VERSION_BY_RELEASE = {"1.8.22": 2, "1.10.0": 3}


@dataclass(frozen=True)
class Normalized:
    ok: bool
    profile: dict[str, Any] | None = None
    error: str | None = None


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def serialize(profile: dict[str, Any]) -> str:
    """Canonical serialisation: sorted keys, compact separators, UTF-8 kept. A lone surrogate (read
    from a `\\ud800` escape) stays an escape, as JavaScript's `JSON.stringify` writes it: UTF-8
    cannot encode it, and the fingerprint is taken over UTF-8."""
    text = json.dumps(profile, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def fingerprint(profile: dict[str, Any]) -> str:
    return hashlib.sha256(serialize(profile).encode("utf-8")).hexdigest()


def fingerprint_json(profile_json: str) -> str | None:
    """Fingerprint of stored JSON after canonicalisation; None when it is not a JSON object."""
    try:
        value = read_json(profile_json)
    except ValueError:  # UnreadableJson
        return None
    if not isinstance(value, dict):
        return None
    return fingerprint(value)


def create(provider: str, schema_version: int) -> dict[str, Any]:
    """The built-in default profile of a provider at a schema version."""
    provider = provider if provider in PROVIDERS else "host"
    if schema_version <= 1:
        return {"provider_preference": provider}
    profile: dict[str, Any] = {
        "provider_preference": provider,
        "eligible_workloads": ["build", "check"],
    }
    if schema_version >= 3:
        profile["eligible_workloads"] = ["build", "chat_build", "check"]
        profile["check_template_policy"] = {"mode": "agent_template", "agent": "opencode"}
    return profile


def normalize(raw: Any, schema_version: int) -> Normalized:
    """Bring any stored profile to `schema_version`'s shape, or say why it cannot be."""
    if not isinstance(raw, dict):
        return Normalized(False, error="profile is not a JSON object")
    provider = raw.get("provider_preference")
    if provider not in PROVIDERS:
        return Normalized(False, error=f"unknown provider_preference {provider!r}")
    if schema_version <= 1:
        return Normalized(True, {"provider_preference": provider})
    workloads = raw.get("eligible_workloads", ["build", "check"])
    if not isinstance(workloads, list) or not all(isinstance(w, str) for w in workloads):
        return Normalized(False, error="eligible_workloads is not a list of names")
    unknown = [w for w in workloads if w not in WORKLOADS]
    if unknown:
        return Normalized(False, error=f"unknown workloads {unknown}")
    seen: list[str] = []
    for workload in workloads:
        if workload not in seen:
            seen.append(workload)
    profile: dict[str, Any] = {"provider_preference": provider, "eligible_workloads": seen}
    if schema_version >= 3:
        policy = raw.get("check_template_policy", {"mode": "project_commands", "agent": None})
        if not isinstance(policy, dict) or policy.get("mode") not in CHECK_TEMPLATE_MODES:
            return Normalized(False, error="check_template_policy is not valid")
        agent = policy.get("agent")
        if agent is not None and not isinstance(agent, str):
            return Normalized(False, error="check_template_policy.agent is not a name")
        profile["check_template_policy"] = {"mode": policy["mode"], "agent": agent}
    for key, value in raw.items():  # keep fields this console does not know, untouched
        if key not in profile and key not in ("eligible_workloads", "check_template_policy"):
            profile[key] = value
    return Normalized(True, profile)


def has_configured_check_policy(row: dict[str, Any]) -> bool:
    """docs/decisions.md, Q15: true when any of the project's four check-definition id lists is non-empty."""
    for column in (
        "required_check_definition_ids",
        "pre_review_check_definition_ids",
        "post_build_check_definition_ids",
        "auto_fix_check_definition_ids",
    ):
        value = row.get(column)
        if value in (None, "", "[]"):
            continue
        try:
            parsed = read_json(value) if isinstance(value, str) else value
        except ValueError:  # UnreadableJson
            return True
        if parsed:
            return True
    return False
