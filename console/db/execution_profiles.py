"""Archon's execution-profile algorithms, as this console reconstructs them.

The seeds call `createExecutionProfile`, `normalizeExecutionProfile`, `serializeExecutionProfile`
and `fingerprintExecutionProfile` but do not show them (docs/decisions.md, Q13). We assume the obvious
forms: canonical JSON (sorted keys, no spaces) and SHA-256 hex of it. Everything that writes or
checks a profile goes through here, so a real archon definition replaces one module.

Archon runs on Node, so the JSON is JavaScript's: `parse` reads stored text as `JSON.parse` does
(every number a double, no `NaN`/`Infinity` tokens) and `serialize` writes it as `JSON.stringify`
does (numbers as `Number#toString`, keys in JavaScript's default sort order). Python's own `json`
differs on both (`1.0`, `1e-07`, exact big integers, `-0.0`, code-point key order).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

# The bounded JSON reader itself, not console/text.py's re-export: every module imported here is in
# the checksum of the steps that write profiles (console/db/migrations/base.py `step_sources`),
# and console/text.py also carries the output sanitiser, which decides nothing they write.
from widgets.safe_json import NOT_JSON, UnreadableJson, read_json

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


def _not_javascript(token: str) -> Any:
    raise UnreadableJson(NOT_JSON)  # `NaN`, `Infinity`, `-Infinity`: JSON.parse throws on them


# JSON.parse: every number is a double (`float` of the literal is the nearest one, as JavaScript's
# conversion is; an integer beyond 2**53 is rounded, 1e400 is Infinity), and the non-standard
# constants Python accepts are not JSON.
_JAVASCRIPT = json.JSONDecoder(parse_int=float, parse_constant=_not_javascript)


def parse(text: Any) -> Any:
    """Stored profile JSON as archon's `JSON.parse` reads it (bounded like every read, `read_json`);
    UnreadableJson (a ValueError) where JSON.parse would throw."""
    return read_json(text, decoder=_JAVASCRIPT)


def _number(value: int | float) -> str:
    """ECMAScript Number::toString(10) of the double nearest `value`, as JSON.stringify writes it
    (a non-finite number is `null`). `repr` gives the shortest digits that round-trip, which is the
    digit string the specification asks for; only the placement of point and exponent differs."""
    try:
        x = float(value)
    except OverflowError:  # an int beyond the largest double is Infinity in JavaScript
        return "null"
    if not math.isfinite(x):
        return "null"
    if x == 0:
        return "0"  # -0 too
    mantissa, _, exponent = repr(abs(x)).partition("e")
    whole, _, fraction = mantissa.partition(".")
    digits = whole + fraction
    point = len(whole) + int(exponent or 0)  # x = 0.<digits> * 10**point
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * -n + digits
    else:
        e = n - 1
        text = digits[0] + ("." + digits[1:] if k > 1 else "") + ("e+" if e > 0 else "e-") + str(abs(e))
    return "-" + text if x < 0 else text


def _string(text: str) -> str:
    """JSON.stringify of a string: non-ASCII kept, a lone surrogate (read from a `\\ud800` escape)
    written as its escape, since UTF-8 cannot encode it and the fingerprint is taken over UTF-8."""
    quoted = json.dumps(text, ensure_ascii=False)
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", quoted)


def _utf16(key: str) -> bytes:
    """JavaScript's default sort compares UTF-16 code units: U+10000 (D800 DC00) before U+FFFF."""
    return key.encode("utf-16-be", "surrogatepass")


def serialize(profile: Any) -> str:
    """Canonical serialisation: JSON.stringify with keys sorted at every level (JavaScript's order),
    no spaces. Values come from `parse` or the console's own dicts, so bounded in depth."""
    if profile is None or isinstance(profile, bool):
        return {None: "null", True: "true", False: "false"}[profile]
    if isinstance(profile, (int, float)):
        return _number(profile)
    if isinstance(profile, str):
        return _string(profile)
    if isinstance(profile, list):
        return "[" + ",".join(serialize(item) for item in profile) + "]"
    if isinstance(profile, dict):
        return "{" + ",".join(_string(key) + ":" + serialize(profile[key])
                              for key in sorted(profile, key=_utf16)) + "}"
    raise TypeError(f"not a JSON value: {type(profile).__name__}")


def fingerprint(profile: dict[str, Any]) -> str:
    return hashlib.sha256(serialize(profile).encode("utf-8")).hexdigest()


def fingerprint_json(profile_json: str) -> str | None:
    """Fingerprint of stored JSON after canonicalisation; None when it is not a JSON object."""
    try:
        value = parse(profile_json)
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
