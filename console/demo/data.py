"""The vocabulary of the demo database: names, people, reasons, and payload templates.

Kept apart from the writers so a screenshot's wording can change without touching any SQL.
Payload templates are `%`-formatted JSON text rather than `json.dumps` per row: at a million
requests the difference is several seconds, and every value put into them is JSON-safe by
construction (hex, plain names). The untrusted-data payloads are the exception and go through
`json.dumps`.
"""

from __future__ import annotations

import hashlib
import json

# (slug, display name, repository path). Index 1 is the markup trap, the last one is being deleted.
PROJECTS = (
    ("atlas-api", "atlas-api", "/srv/repos/atlas-api"),
    ("markup-trap", "[@click=app.quit]x[/]", "/srv/repos/untrusted[bold]"),
    ("billing-worker", "billing-worker", "/srv/repos/billing-worker"),
    ("checkout-web", "checkout-web", "/home/dev/src/checkout-web"),
    ("ml-pipeline", "ml-pipeline", "/srv/repos/ml-pipeline"),
    ("legacy-monolith", "legacy-monolith", "/srv/repos/legacy-monolith"),
    ("docs-site", "docs-site", "/srv/repos/docs-site"),
    ("mobile-app", "mobile-app", "/home/dev/src/mobile-app"),
    ("infra-terraform", "infra-terraform", "/srv/repos/infra-terraform"),
    ("search-indexer", "search-indexer", "/srv/repos/search-indexer"),
)
MARKUP_PROJECT_NAME = PROJECTS[1][1]
ESCAPE_PAYLOAD_MARK = "\x1b[2J"
MARKUP_PAYLOAD_MARK = "[red]markup[/red]"

HUMANS = ("alice", "bob", "carol", "dave", "erin")
AGENTS = ("opencode", "claude-code", "codex", "aider")
SYSTEM_ACTOR = "archon"
EXECUTOR_ACTOR = "archon-action-executor"
WORKERS = ("archon-worker:42", "archon-worker:7", "archon-worker:13", "console:alice@ops-1:3f9a2c1d7e4b5a60-0c1d2e3f4a5b")

BRANCH_TOPICS = (
    "fix-login-timeout", "add-rate-limit", "refactor-db-pool", "bump-deps", "retry-webhooks",
    "cache-invalidation", "flaky-test-quarantine", "api-v2-pagination", "dark-mode",
    "oom-in-exporter", "i18n-fr", "faster-ci", "typed-config", "audit-log", "s3-multipart",
)
BRANCH_PREFIXES = ("agent/", "feature/", "fix/", "chore/")

CHECKS = (  # (definition_id, command, timeout seconds)
    ("lint", '["npm","run","lint"]', 300),
    ("unit-tests", '["pytest","-q","tests/unit"]', 900),
    ("typecheck", '["npx","tsc","--noEmit"]', 600),
    ("integration", '["make","integration"]', 1800),
    ("migrations-dry-run", '["./scripts/migrate","--dry-run"]', 600),
    ("security-scan", '["trivy","fs","--exit-code","1","."]', 1200),
)

DENY_REASONS = (
    "force-push to a protected branch is not allowed",
    "the diff touches billing code; needs a second reviewer",
    "commit message does not reference a ticket",
    "please squash the fixup commits first",
    "this check downloads from an untrusted mirror",
    "wrong remote: pushes go through the fork",
    "not during the release freeze",
)
APPROVE_REASONS = (
    None, None, None, "looks good", "reviewed the diff", "ok for staging", "LGTM, small change",
)
INVALIDATE_REASONS = (
    "branch moved: the ref no longer matches the requested commit",
    "run authority changed after the request",
    "execution run was superseded",
)
CANCEL_REASONS = ("run cancelled by the user", "agent withdrew the request", "ticket closed")
EXPIRE_REASON = "approval window elapsed"

FAILURE_MESSAGES = (
    "docker: Error response from daemon: pull access denied for sandbox-base",
    "workspace validation failed: lockfile changed during preparation",
    "provider timed out after 600 s while starting the sandbox",
)


def sha256_hex(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


# --- approval payloads -------------------------------------------------------------------------

GIT_PUSH_TEMPLATE = (
    '{"remote":"origin","branch":"%s","ref":"refs/heads/%s","commit":"%s",'
    '"base_commit":"%s","force":false,"repository":"%s","commit_count":%d}'
)
CUSTOM_CHECK_TEMPLATE = (
    '{"command":%s,"cwd":"%s","definition_id":"%s","timeout_seconds":%d,"env":{}}'
)
AUTHORITY_TEMPLATE = (
    '{"requested_by":"%s","run_id":"%s","grants":["%s"],"profile_revision":%d}'
)


def git_push_action(branch: str, commit: str, base: str, repo: str, count: int) -> str:
    return GIT_PUSH_TEMPLATE % (branch, branch, commit, base, repo, count)


def custom_check_action(check_index: int, cwd: str) -> str:
    definition_id, command, timeout = CHECKS[check_index]
    return CUSTOM_CHECK_TEMPLATE % (command, cwd, definition_id, timeout)


def authority(requested_by: str, run_id: str, grant: str, revision: int) -> str:
    return AUTHORITY_TEMPLATE % (requested_by, run_id, grant, revision)


def untrusted_push_action(commit: str, base: str, repo: str) -> str:
    """A payload whose strings would clear the screen or style text if a view obeyed them."""
    return json.dumps(
        {
            "remote": "origin",
            "branch": "agent/" + MARKUP_PAYLOAD_MARK,
            "ref": "refs/heads/agent/" + MARKUP_PAYLOAD_MARK,
            "commit": commit,
            "base_commit": base,
            "force": False,
            "repository": repo,
            "commit_count": 1,
            "message": "fix: " + ESCAPE_PAYLOAD_MARK + " " + MARKUP_PAYLOAD_MARK + " [@click=app.quit]q[/]",
        },
        separators=(",", ":"),
    )


# --- 1.8.20 run history (console/demo/history.py) ----------------------------------------------

# Extra projects at 1.8.20 scale are named `<area>-<part>-<number>`; none of these words is a
# slug above, so the ids never collide with the hand-written projects.
HISTORY_AREAS = ("payments", "identity", "catalog", "notify", "reporting", "ingest", "pricing",
                 "ledger", "gateway", "scheduler", "telemetry", "storefront")
HISTORY_PARTS = ("api", "worker", "web", "cli", "sdk", "jobs")

# Diagnostic parser per check definition id (the ones whose output archon knows how to read;
# about half of all attempts).
DIAGNOSTIC_PARSERS = {"unit-tests": "pytest", "typecheck": "tsc", "security-scan": "trivy"}

# (output when the check passes, output when it fails), per check definition id.
CHECK_OUTPUTS = {
    "lint": ("\n0 problems\n",
             "src/pool.ts\n  41:7  error  'conn' is assigned a value but never used  no-unused-vars\n"
             "\n1 problem (1 error, 0 warnings)\n"),
    "unit-tests": ("........................................ [100%]\n142 passed in 18.31s\n",
                   "FAILED tests/unit/test_pool.py::test_reuse - AssertionError: 2 != 1\n"
                   "1 failed, 141 passed in 19.02s\n"),
    "typecheck": ("", "src/api/v2.ts(88,14): error TS2345: Argument of type 'string' is not "
                      "assignable to parameter of type 'number'.\n"),
    "integration": ("Ran 37 integration scenarios: all green\n",
                    "scenario checkout/refund: expected HTTP 200, got 502 from payments-stub\n"),
    "migrations-dry-run": ("12 migrations pending, all applied cleanly to the scratch copy\n",
                           "migration 0042_add_index: relation \"orders\" does not exist\n"),
    "security-scan": ("Total: 0 (UNKNOWN: 0, LOW: 0, MEDIUM: 0, HIGH: 0, CRITICAL: 0)\n",
                      "Total: 2 (HIGH: 1, CRITICAL: 1)\nCVE-2026-1234 openssl 3.0.13\n"),
}

RETIRE_REASONS = ("superseded by a newer environment revision", "idle for 12 hours",
                  "template outdated")
