"""The repository explains itself: docs/ names code that exists, and nothing cites a file outside
the repository (a user's clone has only what is in it)."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

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


# --- every code name the documents cite exists -----------------------------------------------------

DOCUMENTS = (*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md", ROOT / "SECURITY.md")
CODE = ("console", "widgets", "tests", "bench")
SPAN = re.compile(r"`([^`\n]+)`")
PATH = re.compile(r"(?:console|widgets|tests|bench|docs)/[\w./-]*")
FILE_NAME = re.compile(r"[\w-]+\.(?:py|md|tcss|toml)")
PRIVATE = re.compile(r"_[a-z]\w*")
CALL = re.compile(r"([A-Za-z_]\w*)(?:\.\w+)*\(.*\)")
CAMEL = re.compile(r"([A-Z][a-z0-9]+[A-Z]\w*)(?:\.\w+)?")
# `path` `name`, `path`, `name` and `path` (`name`, `name`, ...): the names belong to that module.
PAIR = re.compile(r"`((?:console|widgets|tests|bench)/[\w./-]+\.py)`,?\s+(?:`([^`]+)`|\(((?:[^()]|\([^()]*\))*)\))")
NAME = re.compile(r"([A-Za-z_]\w*)(?:\.\w+)?(?:\(.*\))?")

# Code-shaped words that are not the repository's code, each with what it is.
NOT_OURS = {
    "VmHWM": "a field of Linux's /proc/PID/status",
    "NaN": "a JSON/JavaScript number the readers refuse",
    "_legacy": "the suffix archon's 1.8.20 rebuild gives a table (`check_attempt_details_legacy`)",
    "_update": "the `_update` twin of a trigger named just before it (archon-schema.md)",
    "_activation": "the `_activation` twin of a trigger named just before it (archon-schema.md)",
    "_x": "architecture.md's example of a private name",
    "Horizontal": "textual's container (architecture.md's example)",
    "Database": "sqlite-utils' class (decisions.md, D26)",
    "Index": "sqlite-utils' index record (decisions.md, D26)",
    "geteuid": "os.geteuid",
    "stat": "os.stat",
    "toISOString": "JavaScript's Date method, whose form --json prints instants in",
    "_at": "the suffix of archon's time columns (README, --json)",
}
# Generated at run time, not in the repository.
NOT_YET = {"bench/out/"}


def _documents():
    for doc in DOCUMENTS:
        yield doc.relative_to(ROOT).as_posix(), re.sub(r"```.*?```", "", doc.read_text(encoding="utf-8"), flags=re.S)


def _definitions() -> dict[str, set[str]]:
    """Every name a module of the repository defines (def, class, assignment, attribute
    assignment), with the modules that define it."""
    found: dict[str, set[str]] = {}
    for top in CODE:
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=rel)):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    names = [node.name]
                elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    names = [t.id if isinstance(t, ast.Name) else t.attr
                             for target in targets for t in ast.walk(target) if isinstance(t, (ast.Name, ast.Attribute))]
                else:
                    continue
                for name in names:
                    found.setdefault(name, set()).add(rel)
    return found


def _sql_words() -> set[str]:
    """Every word of archon's SQL the repository holds: the steps' DDL, the ledger's, the seeds."""
    texts = [p.read_text(encoding="utf-8") for p in (ROOT / "tests" / "reference" / "seeds").glob("*.txt")]
    texts += [p.read_text(encoding="utf-8") for p in (ROOT / "console" / "db").rglob("*.py")]
    return {word for text in texts for word in re.findall(r"\w+", text)}


def _cited_name(span: str) -> str | None:
    """The name a backticked span cites when it has a code shape, else None (prose, SQL, flags)."""
    for shape in (PRIVATE, CALL, CAMEL):
        match = shape.fullmatch(span)
        if match:
            return match.group(1) if match.groups() else span
    return None


def test_every_cited_path_exists():
    missing = []
    for doc, text in _documents():
        for span in (s.strip() for s in SPAN.findall(text)):
            if PATH.fullmatch(span) and span not in NOT_YET:
                if not (ROOT / span.rstrip("/")).exists():
                    missing.append(f"{doc}: {span}")
            elif FILE_NAME.fullmatch(span) and span != "struct.py":  # SECURITY.md: a planted file
                if not any(ROOT.glob(f"**/{span}")):
                    missing.append(f"{doc}: {span}")
    assert missing == []


@pytest.mark.slow
def test_every_cited_code_name_is_defined():
    import builtins

    defined, sql = _definitions(), _sql_words()
    missing = []
    for doc, text in _documents():
        for span in (s.strip() for s in SPAN.findall(text)):
            name = _cited_name(span)
            if name and name not in defined and name not in sql and name not in NOT_OURS and not hasattr(builtins, name):
                missing.append(f"{doc}: {span}")
    assert missing == []


@pytest.mark.slow
def test_a_name_cited_after_its_module_is_defined_there():
    """`console/x.py` `name` and `console/x.py` (`a`, `b`) say where a name is defined; it must be."""
    defined = _definitions()
    wrong = []
    for doc, text in _documents():
        for match in PAIR.finditer(text):
            path = match.group(1)
            names = [match.group(2)] if match.group(2) else SPAN.findall(match.group(3))
            for span in names:
                cited = NAME.fullmatch(span.strip())
                if not cited or FILE_NAME.fullmatch(span) or (ROOT / cited.group(1)).exists() or span.isupper():
                    continue  # a file, a package, or an SQL word in the list
                if path not in defined.get(cited.group(1), set()):
                    where = sorted(defined.get(cited.group(1), set())) or "nowhere"
                    wrong.append(f"{doc}: `{path}` `{span}` (defined in {where})")
    assert wrong == []


def test_the_names_not_ours_are_still_cited():
    cited = {_cited_name(s.strip()) for _doc, text in _documents() for s in SPAN.findall(text)}
    assert sorted(set(NOT_OURS) - cited) == []


def test_every_cited_snake_case_word_is_in_the_code():
    """Column names, JSON keys, event types, finding parts: a `snake_case` word a document cites is
    a word of the code or of archon's seeds, so a renamed key or column leaves no stale citation."""
    texts = [p.read_text(encoding="utf-8") for top in CODE for p in (ROOT / top).rglob("*.py")]
    texts += [p.read_text(encoding="utf-8") for p in (ROOT / "tests" / "reference" / "seeds").glob("*.txt")]
    words = {word for text in texts for word in re.findall(r"\w+", text)}
    missing = [f"{doc}: {span}" for doc, text in _documents() for span in (s.strip() for s in SPAN.findall(text))
               if re.fullmatch(r"[a-z]+(?:_[a-z0-9]+)+", span) and span not in words]
    assert missing == []
