"""What a command run over several hosts prints: the hosts' answers merged into one view, each row
with its host, one line per host that did not answer, and one exit code for the whole run.

Everything here reads `HostOutcome`s (console/fleet/client.py: `host`, `state`, `sentence`, `exit`,
`data`, `age_seconds`) and nothing else, so the views are tested with outcomes built by hand
(tests/fleet/test_fleet_views.py). Every remote string is data: the text goes through `table()`
and `line()` (`one_line`, the one sanitiser) and out through the CLI's `SafeStream`, never Rich.

Exit codes over hosts: a host's code is its command's exit code on the host (0, 1, 3) when it
answered, and `EXIT_PARTIAL` (4) when it did not (unreachable, timed out, refused the session, or
only its cached answer is shown); the run's code is the worst host's, 4 above 3 above 1 above 0. So
0 means every host answered and was content, and 4 always means "some hosts are not in this".
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Sequence

from console.clock import duration, relative
from console.errors import EXIT_OK, EXIT_PARTIAL
from console.fleet.protocol import read_wire_json
from console.text import line, one_line

ANSWERED = ("ok",)
CACHED = "stale"


def answered(outcome) -> bool:
    return outcome.state in ANSWERED


def host_exit(outcome) -> int:
    """This host's part of the exit code (see the module docstring)."""
    if not answered(outcome):
        return EXIT_PARTIAL
    from console.fleet.answers import EXIT_CODES

    # only one of the console's own codes is ever taken from a host (exit 256 would end this process 0)
    return outcome.exit if type(outcome.exit) is int and outcome.exit in EXIT_CODES else EXIT_PARTIAL


def fleet_exit(codes: Iterable[int]) -> int:
    """The worst of the hosts' codes; 4 (a host not in the answer) counts worse than 3."""
    rank = {EXIT_PARTIAL: 10}
    worst = EXIT_OK
    for code in codes:
        if rank.get(code, code) > rank.get(worst, worst):
            worst = code
    return worst


def remote_error(outcome) -> str | None:
    """The sentence of a command that ran on its host and failed there (`{"ok": false, "error": ...}`)."""
    data = outcome.data
    if isinstance(data, dict) and data.get("ok") is False:
        return one_line(data.get("error") or "the command failed on the host", 300)
    return None


def host_entry(outcome) -> dict[str, Any]:
    """The `"hosts"` element of a fleet --json answer: how each host took part."""
    sentence = outcome.sentence
    if answered(outcome) and host_exit(outcome) != EXIT_OK:
        sentence = remote_error(outcome) or sentence
    return {"host": outcome.host, "state": outcome.state, "sentence": sentence,
            "age_seconds": outcome.age_seconds, "exit": host_exit(outcome)}


# What a report command's exit code says when its host answered (the report itself is in the table).
VERDICTS = {
    "doctor": {1: "errors found (with --strict, warnings too)", 3: "the console cannot use this database"},
    "upgrade.plan": {3: "the upgrade would be refused: the profile evidence contradicts it (see its plan)"},
}


def host_line(outcome, verdicts: dict[int, str] | None = None) -> str | None:
    """One line for a host that is not simply in the view: down, stale, or its command failed
    (`verdicts`: what a report's exit code means, where the report is the answer)."""
    if outcome.state == CACHED:
        age = duration(outcome.age_seconds) if outcome.age_seconds is not None else "unknown age"
        return line(f"{one_line(outcome.host, 60)}: STALE ({age} old): its rows are its last answer, from the cache",
                    (outcome.sentence or "", 300), sep="; ").rstrip("; ")
    if not answered(outcome):
        return line(f"{one_line(outcome.host, 60)}: {one_line(outcome.state, 30)}",
                    (outcome.sentence or "no answer", 300), sep=": ")
    if host_exit(outcome) != EXIT_OK:
        said = remote_error(outcome) or (verdicts or {}).get(host_exit(outcome)) or outcome.sentence
        return line(f"{one_line(outcome.host, 60)}: exit {host_exit(outcome)}",
                    (said or "the command failed on the host", 300), sep=": ")
    return None


def rows_of(outcome) -> list[dict[str, Any]]:
    """The rows a host's answer holds: a JSON list, or JSON lines (`audit --json` prints one event
    per line); nothing for a failed command or a host without an answer."""
    if outcome.state not in (*ANSWERED, CACHED) or outcome.exit not in (0, None):
        return []
    data = outcome.data
    if isinstance(data, str):
        parsed = []
        for text in data.splitlines():
            try:
                value = read_wire_json(text)
            except ValueError:
                continue
            if isinstance(value, dict):
                parsed.append(value)
        data = parsed
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        data = data["rows"]
    return [row for row in data if isinstance(row, dict)] if isinstance(data, list) else []


def _listed(value: Any) -> list:
    """A host's list field as a list: anything else (a host's value is data) as none."""
    return value if isinstance(value, list) else []


def _seconds(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _text_key(value: Any) -> tuple[int, str]:
    """Times sort as instants across hosts, whatever form each host sent (an older console prints
    them as stored): each is put in the one `--json` form, which sorts as time does; a value that
    is not a time sorts by its text, and a missing one last."""
    from console.clock import json_time

    if value is None:
        return (1, "")
    return (0, str(json_time(value)))


SORTS: dict[str, Callable[[dict[str, Any], int], tuple]] = {
    # (row, its position in its host's answer): each host's own order is kept where it is the order
    "approvals.list": lambda r, i: (_text_key(r.get("expires_at")), r["host"], str(r.get("id"))),
    "envs.list": lambda r, i: (r["host"], str(r.get("id"))),
    "projects.list": lambda r, i: (r["host"], i),
    "profiles.list": lambda r, i: (r["host"], i),
    "audit": lambda r, i: (_text_key(r.get("at")), r["host"], i),
}


def merge(method: str, outcomes: Sequence, *, limit: int | None = None) -> tuple[list[dict[str, Any]], bool]:
    """Every host's rows with `"host"` first (`"host_stale": true` on a cached answer: an
    environment row has its own `stale`), in the method's order across hosts; and whether `limit`
    cut the merged list (each host sent its first `limit` by the same order, so the first `limit`
    of the merge are the fleet's first `limit`)."""
    keyed = []
    for outcome in outcomes:
        for index, row in enumerate(rows_of(outcome)):
            merged = {"host": outcome.host, **{k: v for k, v in row.items() if k != "host"}}
            if outcome.state == CACHED:
                merged["host_stale"] = True
            keyed.append((SORTS[method](merged, index), merged))
    keyed.sort(key=lambda pair: pair[0])
    rows = [row for _, row in keyed]
    if limit is not None and len(rows) > limit:
        return rows[:limit], True
    return rows, False


def fleet_json(rows: list[dict[str, Any]], outcomes: Sequence, **extra: Any) -> dict[str, Any]:
    codes = [host_exit(o) for o in outcomes]
    return {"ok": fleet_exit(codes) == EXIT_OK, "rows": rows, "hosts": [host_entry(o) for o in outcomes],
            "exit": fleet_exit(codes), **extra}


def host_cell(row: dict[str, Any]) -> str:
    return one_line(row["host"], 30) + (" (stale)" if row.get("host_stale") else "")


# --- the text columns of each merged list, read from the rows' JSON ---------------------------------

def _approval_cells(r: dict[str, Any], now) -> list[Any]:
    from console.services.approval_queue import action_summary, parse_json_field, requester_of

    expires = relative(r.get("expires_at"), now) + (" (overdue)" if r.get("overdue") else "")
    return [r.get("id"), r.get("project_name") or r.get("project_id"), r.get("action_kind"), r.get("status"),
            expires, requester_of(parse_json_field(r.get("authority_json"))) or "-",
            action_summary(r.get("action_kind"), parse_json_field(r.get("action_json")), r.get("action_json"))]


def _env_cells(r: dict[str, Any], now) -> list[Any]:
    claim = "-"
    if r.get("operation_claim_id"):
        claim = f"{one_line(r.get('operation_kind'))} by {one_line(r.get('claim_holder') or '?')}"
        claim += " (stale)" if r.get("stale") else ""
    age = _seconds(r.get("claim_age_seconds"))
    return [r.get("id"), r.get("project_id"), r.get("lifecycle_state"), claim,
            "-" if age is None else f"{duration(age)} ago", r.get("active_lease_count"),
            "yes" if r.get("admits_leases") else "no", relative(r.get("idle_stop_at"), now)]


def _project_cells(r: dict[str, Any], now) -> list[Any]:
    revision = "-" if r.get("active_revision") is None else \
        f"#{r.get('active_revision')} (schema {r.get('active_schema_version')})"
    envs = r.get("environments")
    envs = ", ".join(f"{one_line(k)} {one_line(v)}" for k, v in envs.items()) if isinstance(envs, dict) else "-"
    pending = "-" if r.get("pending_approvals") is None else r.get("pending_approvals")
    claims = "-" if r.get("claims_held") is None else r.get("claims_held")
    return [r.get("id"), r.get("name"), r.get("build_execution_provider") or "-", revision, pending, envs or "none",
            claims]


def _profile_cells(r: dict[str, Any], now) -> list[Any]:
    activated = r.get("activated_at")
    last = relative(activated[-1], now) if isinstance(activated, list) and activated else "-"
    return ["*" if r.get("active") else "", r.get("revision"), r.get("id"), r.get("schema_version"),
            one_line(r.get("fingerprint_short")) + ("" if r.get("fingerprint_matches") else " MISMATCH"),
            r.get("provider_preference") or "?", relative(r.get("created_at"), now), last]


def _audit_cells(r: dict[str, Any], now) -> list[Any]:
    return [relative(r.get("at"), now), r.get("kind"), r.get("project_id") or "-", r.get("subject_id"),
            r.get("event_type"), f"{one_line(r.get('from') or '-')} -> {one_line(r.get('to') or '-')}",
            r.get("actor") or "-", r.get("reason") or ""]


COLUMNS: dict[str, tuple[tuple[str, ...], Callable[[dict[str, Any], Any], list[Any]]]] = {
    "approvals.list": (("ID", "PROJECT", "KIND", "STATUS", "EXPIRES", "REQUESTER", "ACTION"), _approval_cells),
    "envs.list": (("ID", "PROJECT", "STATE", "CLAIM", "CLAIMED", "LEASES", "ADMITS", "IDLE STOP"), _env_cells),
    "projects.list": (("ID", "NAME", "PROVIDER", "PROFILE", "PENDING", "ENVIRONMENTS", "CLAIMS"), _project_cells),
    "profiles.list": (("ACTIVE", "REV", "ID", "SCHEMA", "FINGERPRINT", "PROVIDER", "CREATED", "LAST ACTIVATED"),
                      _profile_cells),
    "audit": (("AT", "KIND", "PROJECT", "SUBJECT", "EVENT", "CHANGE", "ACTOR", "REASON"), _audit_cells),
}


def list_text(method: str, rows: list[dict[str, Any]], now) -> str:
    from console.cli.output import table

    headers, cells = COLUMNS[method]
    if not rows:
        return "Nothing matches on the hosts that answered."
    return table([[host_cell(r), *cells(r, now)] for r in rows], ["HOST", *headers], max_width=60)


# --- doctor and upgrade --plan: one answer per host, not rows ---------------------------------------

def doctor_rows(outcomes: Sequence, *, strict: bool = False) -> list[dict[str, Any]]:
    """Host x finding: one row per finding of each host that answered, one row for a host without
    findings (clean), and one for a host that did not answer (never shown as clean). Each row's
    exit is the host's verdict as its REPORT says it (console/fleet/answers.py `report_exit`): a
    host's exit 0 beside error findings, --strict warnings or `usable: false` is not understood (4)."""
    from console.fleet.answers import is_doctor_report, is_error_object, report_exit

    rows: list[dict[str, Any]] = []
    for o in outcomes:
        report = o.data if isinstance(o.data, dict) else {}
        if not answered(o) and o.state != CACHED:
            rows.append({"host": o.host, "severity": "unknown", "id": f"host.{o.state}",
                         "title": o.sentence or "no answer", "exit": EXIT_PARTIAL})
            continue
        if not (is_doctor_report(o.data) or (host_exit(o) != EXIT_OK and is_error_object(o.data))):
            rows.append({"host": o.host, "severity": "unknown", "id": "host.unreadable", "exit": EXIT_PARTIAL,
                         "title": "the host's report could not be read (its answer is not a doctor report)"})
            continue
        said, found = host_exit(o), report_exit(report, strict=strict) if is_doctor_report(report) else EXIT_OK
        code = EXIT_PARTIAL if said == EXIT_OK and found != EXIT_OK else fleet_exit([said, found])
        if code == EXIT_PARTIAL and said == EXIT_OK:
            rows.append({"host": o.host, "severity": "unknown", "id": "host.contradicts", "exit": code,
                         "title": f"the host said exit 0, but its report stands for exit {found}"})
        findings = [f for f in _listed(report.get("findings")) if isinstance(f, dict)]
        if not findings:
            title = "no findings" if report.get("usable", True) else (report.get("reason") or report.get("error"))
            rows.append({"host": o.host, "severity": "none" if code == EXIT_OK else "error",
                         "id": "-", "title": title or "-", "exit": code})
        for f in findings:
            rows.append({"host": o.host, "severity": f.get("severity"), "id": f.get("id"), "title": f.get("title"),
                         "found": f.get("found"), "what_to_do": f.get("what_to_do"), "exit": code,
                         **({"host_stale": True} if o.state == CACHED else {})})
    return rows


def doctor_text(rows: list[dict[str, Any]]) -> str:
    from console.cli.output import table

    return table([[host_cell(r), r.get("severity"), r.get("id"), r.get("title"), r.get("found") or ""]
                  for r in rows], ["HOST", "SEVERITY", "FINDING", "TITLE", "FOUND"], max_width=60)


def upgrade_rows(outcomes: Sequence) -> list[dict[str, Any]]:
    """One row per host: its release now, the target, the steps pending, their safety classes."""
    rows = []
    for o in outcomes:
        plan = o.data if isinstance(o.data, dict) and answered(o) and o.exit in (0, 3) else None
        if plan is None or "pending" not in plan:
            rows.append({"host": o.host, "release": None, "target": None, "pending": None, "safety": [],
                         "needs_upgrade": None, "state": o.state,
                         "note": remote_error(o) or o.sentence or "no plan"})
            continue
        pending = [p for p in _listed(plan.get("pending")) if isinstance(p, dict)]
        safety = sorted({str(p.get("safety")) for p in pending})
        rows.append({"host": o.host, "release": plan.get("detected_release"), "target": plan.get("target"),
                     "pending": len(pending), "safety": safety, "needs_upgrade": bool(pending),
                     "force_required": bool(plan.get("force_required")), "state": o.state,
                     "note": _upgrade_note(plan, pending)})
    return rows


def _upgrade_note(plan: dict[str, Any], pending: list) -> str:
    if not pending:
        return "up to date"
    if plan.get("detected_release") == plan.get("target") and plan.get("ledger_state") == "unversioned-adoption":
        return "upgrade needed: at the target's shape, its ledger to be recorded"
    return "upgrade needed" + (", with --force" if plan.get("force_required") else "")


def upgrade_text(rows: list[dict[str, Any]]) -> str:
    from console.cli.output import table

    def dash(value):
        return "-" if value is None else value

    return table([[("* " if r["needs_upgrade"] else "  ") + one_line(r["host"], 30), dash(r["release"]),
                   dash(r["target"]), dash(r["pending"]), ", ".join(r["safety"]) or "-", r["note"]]
                  for r in rows], ["HOST", "RELEASE", "TARGET", "PENDING", "SAFETY", "NOTE"], max_width=80)


__all__ = [
    "COLUMNS", "doctor_rows", "doctor_text", "fleet_exit", "fleet_json", "host_entry", "host_exit", "host_line",
    "list_text", "merge", "rows_of", "upgrade_rows", "upgrade_text",
]
