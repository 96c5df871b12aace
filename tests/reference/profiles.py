"""Archon's profile algorithms for the oracle, written from their call sites in the seeds alone.

Archon's `lib/executionProfiles.js` and `lib/executionProfileCheckPolicy.js` are only called by the
`db.js` the seeds show: `createExecutionProfile(provider)`, `normalizeExecutionProfile(JSON.parse(json))`
-> `{ ok, profile }`, `serializeExecutionProfile(profile)` (a string put between SQL quotes),
`fingerprintExecutionProfile(profile)` (64 characters, hex wherever it is copied),
`hasConfiguredCheckPolicy(row)` (the four `*_check_definition_ids` columns). This module does not
share code with the console's reconstruction on purpose: tests/test_reference_profiles.py compares
the two on generated profiles, so an error in either shows as a disagreement.

Archon runs on Node, so values follow JavaScript: numbers are doubles written as
`Number.prototype.toString` writes them, strings as `JSON.stringify` escapes them. Every assumption
beyond what the seeds show is listed in tests/reference/README.md ("The profile algorithms").
"""

from __future__ import annotations

import hashlib
import json
import math
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

HOST, DOCKER = "host", "docker_sandbox"
# The column values hasConfiguredCheckPolicy(row) receives (seed 000, listActiveRows).
CHECK_POLICY_COLUMNS = ("required_check_definition_ids", "pre_review_check_definition_ids",
                        "post_build_check_definition_ids", "auto_fix_check_definition_ids")
# What a profile without a check_template_policy means (assumption A7): not 'agent_template'.
UNSET_POLICY = {"mode": "project_commands", "agent": None}


@dataclass(frozen=True)
class Normalized:
    ok: bool
    profile: dict | None = None


def create(provider: Any, version: int) -> dict:
    """createExecutionProfile(provider) of a release whose EXECUTION_PROFILE_SCHEMA_VERSION is `version`."""
    # The trigger's CASE: 'docker_sandbox' gets the docker profile, anything else the host one (A2).
    profile: dict = {"provider_preference": DOCKER if provider == DOCKER else HOST}
    if version >= 3:  # A4: the 1.10.0 repair makes build imply chat_build, so its default has it
        profile["eligible_workloads"] = ["build", "chat_build", "check"]
        profile["check_template_policy"] = {"mode": "agent_template", "agent": "opencode"}
    elif version == 2:  # A3
        profile["eligible_workloads"] = ["build", "check"]
    return profile


def normalize(value: Any, version: int) -> Normalized:
    """normalizeExecutionProfile(value): a fresh profile of the current schema, or ok False (A5-A8)."""
    if not isinstance(value, dict) or value.get("provider_preference") not in (HOST, DOCKER):
        return Normalized(False)
    profile: dict = {"provider_preference": value["provider_preference"]}
    if version < 2:
        return Normalized(True, profile)
    workloads = value.get("eligible_workloads", ["build", "check"])
    if not isinstance(workloads, list) or any(not isinstance(w, str) for w in workloads):
        return Normalized(False)
    profile["eligible_workloads"] = list(dict.fromkeys(workloads))  # A6: first occurrence kept
    if version >= 3:
        policy = value.get("check_template_policy", UNSET_POLICY)
        if not isinstance(policy, dict):
            return Normalized(False)
        mode, agent = policy.get("mode"), policy.get("agent")
        if not isinstance(mode, str) or not (agent is None or isinstance(agent, str)):
            return Normalized(False)
        profile["check_template_policy"] = {"mode": mode, "agent": agent}
    return Normalized(True, profile)


def _utf16(key: str) -> bytes:
    """JavaScript's default sort compares UTF-16 code units (A9)."""
    return key.encode("utf-16-be", "surrogatepass")


def _number(value: float | int) -> str:
    """`JSON.stringify` of a JavaScript number: the double nearest `value`, as Number#toString writes it."""
    try:
        x = float(value)
    except OverflowError:
        return "null"
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"
    sign, digits, exponent = Decimal(repr(abs(x))).normalize().as_tuple()
    d = "".join(map(str, digits))
    k, n = len(d), exponent + len(d)
    if k <= n <= 21:
        text = d + "0" * (n - k)
    elif 0 < n <= 21:
        text = d[:n] + "." + d[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + d
    else:
        e = n - 1
        text = (d if k == 1 else d[0] + "." + d[1:]) + "e" + ("+" if e > 0 else "-") + str(abs(e))
    return ("-" if x < 0 else "") + text


_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _string(text: str) -> str:
    """`JSON.stringify` of a string (well-formed: a lone surrogate is written as an escape)."""
    out = []
    for ch in text:
        code = ord(ch)
        if ch in _ESCAPES:
            out.append(_ESCAPES[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def serialize(value: Any) -> str:
    """serializeExecutionProfile: canonical JSON, keys in sorted order at every level, no spaces (A9)."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, (int, float)):
        return _number(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list):
        return "[" + ",".join(serialize(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ",".join(_string(k) + ":" + serialize(value[k]) for k in sorted(value, key=_utf16)) + "}"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def fingerprint(profile: Any) -> str:
    """fingerprintExecutionProfile: SHA-256 hex of the serialised profile's UTF-8 (A10)."""
    return hashlib.sha256(serialize(profile).encode("utf-8")).hexdigest()


def has_configured_check_policy(row: dict) -> bool:
    """hasConfiguredCheckPolicy(row): any of the four id lists holds an entry (A11)."""
    for column in CHECK_POLICY_COLUMNS:
        value = row.get(column)
        if not isinstance(value, str):
            continue
        try:
            parsed = json.loads(value)
        except ValueError:
            continue
        if isinstance(parsed, list) and parsed:
            return True
    return False
