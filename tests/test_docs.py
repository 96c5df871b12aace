"""The repository explains itself: docs/ names code that exists, and nothing cites a file outside
the repository (a user's clone has only what is in it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEPS = ROOT / "console" / "db" / "migrations" / "steps"

# Files whose bytes are frozen: every module a released migration step imports is part of the
# step's checksum (docs/architecture.md, "Add a migration step"), comments included.
FROZEN = {"console/db/migrations/backfills.py"}
OUTSIDE = re.compile(r"DOMAIN\.md|\.\./shared|/shared/|/work/")


def _texts():
    for top in ("console", "widgets", "tests", "docs", "bench"):
        for path in sorted((ROOT / top).rglob("*")):
            if path.suffix in {".py", ".md", ".tcss", ".toml"} and "__snapshots__" not in path.parts:
                yield path
    yield from (ROOT / name for name in ("README.md", "SECURITY.md", "pyproject.toml", "Makefile"))


def test_nothing_cites_a_file_outside_the_repository():
    this = Path(__file__).resolve()
    offenders = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in _texts()
        if path.resolve() != this and str(path.relative_to(ROOT)) not in FROZEN
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if OUTSIDE.search(line)
    ]
    assert offenders == []


def test_the_schema_and_decisions_name_files_that_exist():
    missing = []
    for doc in ("archon-schema.md", "decisions.md"):
        text = (ROOT / "docs" / doc).read_text(encoding="utf-8")
        for path in re.findall(r"`((?:console|widgets|tests)/[\w/.]+\.py)`", text):
            if not (ROOT / path).is_file():
                missing.append(f"{doc}: {path}")
        for step in set(re.findall(r"\b(s\d{3}_\w+?)(?:\.py)?`", text)):
            if not (STEPS / f"{step}.py").is_file():
                missing.append(f"{doc}: step {step}")
    assert missing == []


def test_every_trigger_message_of_a_step_is_in_the_schema():
    """archon-schema.md lists the RAISE message of every trigger whose text archon shows (the
    1.8.20 baseline's triggers are the console's reconstruction and are named there as such)."""
    schema = (ROOT / "docs" / "archon-schema.md").read_text(encoding="utf-8")
    shown = set()
    for path in [*sorted(STEPS.glob("s*.py")), *STEPS.glob("*_ddl.py"), ROOT / "console/db/migrations/profile_triggers.py"]:
        if path.name != "s001_baseline_1_8_20.py":
            shown.update(re.findall(r"RAISE\(ABORT, '([^']+)'\)", path.read_text(encoding="utf-8")))
    assert len(shown) >= 15
    assert sorted(m for m in shown if m not in schema) == []
