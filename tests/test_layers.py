"""The layers hold: import-linter's contracts (pyproject.toml), and the two rules it cannot see.

`make test` runs `lint-imports` before pytest; this test runs it too, so a plain `pytest` fails when
a contract breaks. import-linter reads the import graph only: a call of `sqlite3.connect` and a
private name imported from another module are found here by reading the source.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("console", "widgets")

# The one module that opens SQLite connections (console/db/connect.py `sqlite_connection`).
CONNECTS = "console/db/connect.py"
# Entries in another branch's area of the architecture restructuring (issue 12): each is removed at
# merge, and a test fails while a stale one is left.
CONNECT_ALLOWED: set[str] = set()  # every connection opens through console/db/connect.py
# What the screens and the app may not touch: the database handle and its connection (reads and
# writes go through `session.run(service_function, ...)`).
HANDLE_PARTS = {"handle", "conn", "shape", "execute", "executemany", "executescript"}
HANDLE_ALLOWED: set[tuple[str, str]] = set()  # screens and the app call services through session.run
PRIVATE_IMPORT_ALLOWED = {
    # Kept: backfills.py is part of the checksum of released steps 005, 006, 021 and 022
    # (tests/test_step_checksums.py), so its names cannot change.
    ("console/db/migrations/preflight.py", "backfills", "_normalized"),
}

def _sources():
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def test_the_contracts_are_the_layers():
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contracts = {c["id"]: c for c in config["contracts"]}
    assert set(contracts) == {"core-without-ui", "screens-without-sql", "widgets-know-nothing-of-archon"}
    core = contracts["core-without-ui"]
    assert set(core["source_modules"]) == {"console.services", "console.db", "console.cli.commands"}
    assert {"textual", "console.tui.screens", "widgets"} <= set(core["forbidden_modules"])
    assert not core.get("allow_indirect_imports")  # through any chain of imports, not just directly


def test_import_contracts_hold():
    code = "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())"
    out = subprocess.run([sys.executable, "-c", code, "--no-cache", "--no-logo"], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "0 broken" in out.stdout and " kept" in out.stdout, out.stdout


def _connect_calls(tree: ast.AST) -> list[int]:
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "connect":
            if isinstance(node.func.value, ast.Name) and node.func.value.id == "sqlite3":
                lines.append(node.lineno)
        elif isinstance(node, ast.ImportFrom) and node.module == "sqlite3":
            if any(a.name == "connect" for a in node.names):
                lines.append(node.lineno)
    return lines


@pytest.mark.slow
def test_only_the_connect_module_opens_sqlite():
    found = {path: lines for path, tree in _sources() if (lines := _connect_calls(tree))}
    assert CONNECTS in found, "the one sqlite3.connect moved: update CONNECTS"
    stray = {path: lines for path, lines in found.items() if path != CONNECTS and path not in CONNECT_ALLOWED}
    assert not stray, f"open connections through console/db/connect.py `sqlite_connection`: {stray}"
    stale = CONNECT_ALLOWED - set(found)
    assert not stale, f"no longer needed, remove from CONNECT_ALLOWED: {stale}"


def _module_of(path: str) -> str:
    parts = path.removesuffix(".py").split("/")
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _absolute(path: str, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    package = _module_of(path).split(".")
    if not path.endswith("__init__.py"):
        package = package[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _private_attributes(tree: ast.AST) -> set[tuple[str, str]]:
    """`module._name` where `module` was imported from the console or the widgets."""
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules |= {a.asname or a.name.split(".")[0] for a in node.names if a.name.split(".")[0] in PACKAGES}
        elif isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").split(".")[0] in PACKAGES):
            modules |= {a.asname or a.name for a in node.names}
    return {(node.value.id, node.attr) for node in ast.walk(tree)
            if isinstance(node, ast.Attribute) and _private(node.attr)
            and isinstance(node.value, ast.Name) and node.value.id in modules}


@pytest.mark.slow
def test_no_private_name_is_imported_from_another_module():
    found = set()
    for path, tree in _sources():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _absolute(path, node)
                if source.split(".")[0] not in PACKAGES:
                    continue
                for alias in node.names:
                    if _private(alias.name):
                        found.add((path, source, alias.name))
        found |= {(path, module, name) for module, name in _private_attributes(tree)}
    stray = found - PRIVATE_IMPORT_ALLOWED
    assert not stray, f"a name used by another module is public (no leading underscore): {sorted(stray)}"
    stale = PRIVATE_IMPORT_ALLOWED - found
    assert not stale, f"no longer needed, remove from PRIVATE_IMPORT_ALLOWED: {stale}"


@pytest.mark.slow
def test_screens_reach_the_database_only_through_the_services():
    """import-linter sees `import console.db`; this sees `session.handle.conn.execute(...)`."""
    found = set()
    for path, tree in _sources():
        if path.startswith("console/tui/screens/") or path == "console/tui/app.py":
            found |= {(path, node.attr) for node in ast.walk(tree)
                      if isinstance(node, ast.Attribute) and node.attr in HANDLE_PARTS}
    stray = found - HANDLE_ALLOWED
    assert not stray, f"call a service through session.run instead: {sorted(stray)}"
    stale = HANDLE_ALLOWED - found
    assert not stale, f"no longer needed, remove from HANDLE_ALLOWED: {stale}"


def test_the_checks_see_what_they_look_for():
    """Each check finds a planted offence, so an empty answer means the code is clean."""
    planted = ast.parse("import sqlite3\nfrom sqlite3 import connect\nc = sqlite3.connect(':memory:')\n")
    assert _connect_calls(planted) == [2, 3]
    assert _private_attributes(ast.parse("from console.db import tx\ntx._rollback(c)\n")) == {("tx", "_rollback")}
    relative = ast.parse("from .queries import _private\n").body[0]
    assert _absolute("console/db/readonly.py", relative) == "console.db.queries"
    assert _absolute("console/db/__init__.py", relative) == "console.db.queries"
