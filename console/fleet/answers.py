"""A host's answer is data, never the verdict: what a method's result must look like before any
view, write report or exit code believes it.

A host runs the console's own command and answers `{"exit": CODE, "output": JSON}`; a hostile,
broken or other-version host can answer anything. Every method's result passes `problem` here
(console/fleet/client.py `answer_outcome`, for the CLI and the TUI alike) before its outcome says `ok`:
`exit` must be one of the console's exit codes, and `output` must have the shape the command's
`--json` prints (or, for a failure, the one error object of console/cli/output.py `error_json`).
An answer that is not is never shown as a result: a read's host is "not understood"
(`remote_error`, exit 4), a write's outcome is unknown (it was sent; it is read back).
"""

from __future__ import annotations

from typing import Any

from console.text import one_line

EXIT_CODES = frozenset({0, 1, 2, 3, 4})  # console/errors.py: ok, refused, usage, unusable, partial
LISTS = frozenset({"approvals.list", "envs.list", "projects.list", "profiles.list"})
SHOWS = frozenset({"approvals.show", "envs.show", "profiles.show"})
BATCH_WRITES = frozenset({"approvals.approve", "approvals.deny", "approvals.revoke", "approvals.expire"})
ONE_WRITES = frozenset({"envs.claim", "envs.release", "envs.complete", "profiles.activate"})
# The state a decision's item must carry to be this decision done (a repeat "already ... by you" too).
DECIDED = {"approvals.approve": "approved", "approvals.deny": "denied", "approvals.revoke": "invalidated"}
# One-id writes whose answer names the id it was sent (an environment's id); profiles.activate
# answers with the revision id it resolved (`PROJECT:N`, `rN`), which the console cannot compare.
ECHOES_ID = frozenset({"envs.claim", "envs.release", "envs.complete"})


def _dicts(value: Any) -> bool:
    return isinstance(value, list) and all(isinstance(item, dict) for item in value)


def _result_item(item: Any) -> bool:
    """One id's outcome of a write (console/models/results.py `ActionResult.to_json`)."""
    return isinstance(item, dict) and type(item.get("ok")) is bool and isinstance(item.get("id"), str)


def is_error_object(output: Any) -> bool:
    """The one shape of a failure under `--json` (console/cli/output.py `error_json`)."""
    return isinstance(output, dict) and output.get("ok") is False and isinstance(output.get("error"), str)


def is_doctor_report(output: Any) -> bool:
    return isinstance(output, dict) and _dicts(output.get("findings"))


def _shaped(method: str, output: Any) -> bool:
    """Whether `output` has the shape `method`'s command prints under `--json` when it succeeds."""
    if method in LISTS:
        return _dicts(output) or (isinstance(output, dict) and _dicts(output.get("rows")))
    if method == "audit":  # JSON lines: none, one object, or a list of them
        return output is None or output == "" or isinstance(output, dict) or _dicts(output)
    if method in SHOWS or method == "approvals.watch":
        return isinstance(output, dict)
    if method == "doctor":
        return is_doctor_report(output)
    if method == "upgrade.plan":
        return isinstance(output, dict) and _dicts(output.get("pending"))
    if method in BATCH_WRITES:
        return isinstance(output, list) and all(_result_item(item) for item in output)
    if method in ONE_WRITES:
        return isinstance(output, dict) and type(output.get("ok")) is bool
    return False  # a method this table does not know: nothing is assumed


def problem(method: str, value: Any) -> str | None:
    """Why `value` is not an answer to `method` this console can believe, or None when it is."""
    if not isinstance(value, dict):
        return "its answer is not an object"
    code = value.get("exit")
    if type(code) is not int or code not in EXIT_CODES:
        shown = repr(code)[:40] if type(code) is int else type(code).__name__
        return f"its exit code {shown} is not one of the console's (0 to 4)"
    output = value.get("output")
    if _shaped(method, output):
        if code == 0 and is_error_object(output):  # a read's too: no clean result is a failure object
            return "it answered exit 0 with a failure"
        return None
    if code != 0 and is_error_object(output):
        return None
    return f"its output is not what `{method}` prints" + (" (exit 0)" if code == 0 else f" (exit {code})")


def report_exit(report: dict[str, Any], *, strict: bool = False) -> int:
    """The exit code a doctor report stands for (console/services/doctor/report.py `exit_code`):
    unusable 3, an error finding (or a warning under --strict) 1. A host's exit 0 under a report
    saying otherwise contradicts it: the verdict is the report's, never only the host's word."""
    if report.get("usable", True) is not True:
        return 3
    severities = {f.get("severity") for f in report.get("findings") or () if isinstance(f, dict)}
    return 1 if "error" in severities or (strict and "warning" in severities) else 0


def one_write_items(method: str, sent: str, output: Any) -> Any:
    """A one-id write's answer as a batch write's items, for the one matching rule (console/cli/fleet_writes.py
    `_matched`): the host's own `id` is kept, so an answer for another id is no answer for the one sent."""
    if not isinstance(output, dict):
        return output
    if method in ECHOES_ID and "id" in output:
        return [output]
    return [{**output, "id": sent}]


def item_problem(method: str, item: dict[str, Any]) -> str | None:
    """Why an item saying ok is not `method` done: a decision answered with another state."""
    expected = DECIDED.get(method)
    state = item.get("state")
    if item.get("ok") is True and expected is not None and state != expected:
        shown = state if isinstance(state, str) else type(state).__name__
        return f"answered ok with the state {one_line(shown, 40)}, not {expected}"
    return None


__all__ = ["BATCH_WRITES", "DECIDED", "ECHOES_ID", "EXIT_CODES", "LISTS", "ONE_WRITES", "SHOWS", "is_doctor_report", "is_error_object",
           "item_problem", "one_write_items", "problem", "report_exit"]
