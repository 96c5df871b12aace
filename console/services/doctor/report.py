"""Findings and the report doctor hands back: text for people, JSON for tools, an exit code."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

from console.errors import EXIT_OK, EXIT_REFUSED, EXIT_UNUSABLE
from console.text import one_line

SEVERITIES = ("error", "warning", "info")
ROW_LIMIT = 100  # rows kept per finding for "jump to row"; counts are always exact
SHOWN_IDS = 10  # ids spelled out in `found`


@dataclass
class Finding:
    id: str
    severity: str
    title: str
    found: str
    why: str
    what_to_do: str
    rows: list[dict[str, str]] = field(default_factory=list)
    count: int = 0
    unusable: bool = False
    check: str = ""  # the named check that produced it (set by the runner)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class DoctorReport:
    """What `run_doctor` returns: the CLI's text and `--json`, the bundle and the TUI all read it."""

    path: str
    mode: str
    generated_at: str
    checks_run: list[str]
    findings: list[Finding]
    opened: str = ""

    def counts(self) -> dict[str, int]:
        return {s: sum(1 for f in self.findings if f.severity == s) for s in SEVERITIES}

    @property
    def usable(self) -> bool:
        return not any(f.unusable for f in self.findings)

    def exit_code(self, *, strict: bool = False) -> int:
        if not self.usable:
            return EXIT_UNUSABLE
        counts = self.counts()
        if counts["error"] or (strict and counts["warning"]):
            return EXIT_REFUSED
        return EXIT_OK

    def finding(self, finding_id: str) -> Finding | None:
        return next((f for f in self.findings if f.id == finding_id), None)

    def ids(self) -> list[str]:
        return [f.id for f in self.findings]

    def to_json(self, *, strict: bool = False) -> dict[str, Any]:
        return {
            "path": self.path,
            "mode": self.mode,
            "generated_at": self.generated_at,
            "opened": self.opened,
            "usable": self.usable,
            "exit_code": self.exit_code(strict=strict),
            "counts": self.counts(),
            "checks_run": list(self.checks_run),
            "findings": [f.to_json() for f in self.findings],
        }

    def to_text(self, *, strict: bool = False) -> str:
        lines = [
            f"archon-console doctor: {one_line(self.path)}",
            f"mode {self.mode}, at {self.generated_at} UTC, checks: {', '.join(self.checks_run)}",
            "",
        ]
        order = {s: i for i, s in enumerate(SEVERITIES)}
        for f in sorted(self.findings, key=lambda f: order[f.severity]):
            lines.append(f"[{f.severity.upper()}] {f.id}: {one_line(f.title)}")
            lines.append(f"  found: {one_line(f.found)}")
            if f.why:
                lines.append(f"  why: {one_line(f.why)}")
            if f.what_to_do:
                lines.append(f"  what to do: {one_line(f.what_to_do)}")
            lines.append("")
        c = self.counts()
        verdict = {0: "no errors", 1: "errors found", 3: "the console cannot use this database"}[
            self.exit_code(strict=strict)
        ]
        lines.append(f"{c['error']} error(s), {c['warning']} warning(s), {c['info']} info: {verdict}.")
        return "\n".join(lines)




Report = DoctorReport  # the earlier name, still used by console/services/bundle.py


def busy_finding(what: str, exc: object) -> Finding:
    """A check another process's lock kept from running: unchecked, never damage (its advice to
    restore a snapshot would lose a healthy file's newer rows)."""
    return Finding(
        "database.busy", "warning", f"{what} could not run: the database is busy",
        f"Another process held a lock on the file past the busy timeout ({exc}).",
        "Archon (or another tool) was writing; this is not damage, but what it would have checked was not checked.",
        "Run doctor again when archon is idle, or raise --busy-timeout.",
        count=1,
    )
