"""The layers hold: import-linter's contracts (pyproject.toml), and the rules it cannot see.

`make test` runs `lint-imports` before pytest; this test runs it too, so a plain `pytest` fails when
a contract breaks. import-linter reads the import graph only: a call of `sqlite3.connect`, a
private name imported from another module and a module that only forwards are found here by
reading the source; an import cycle between modules (the contracts see packages) by walking
grimp's graph.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("console", "widgets")

# The one module that opens SQLite connections (console/db/connection.py `sqlite_connection`).
CONNECTS = "console/db/connection.py"
# Entries in another branch's area of the architecture restructuring (issue 12): each is removed at
# merge, and a test fails while a stale one is left.
CONNECT_ALLOWED: set[str] = set()  # every connection opens through console/db/connection.py
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
    assert set(contracts) == {"acyclic-packages", "core-without-ui", "front-ends-independent", "layers",
                              "screens-without-sql", "widgets-know-nothing-of-archon"}
    assert contracts["layers"]["layers"] == [
        "console.cli : console.tui", "console.services | console.demo | console.fleet", "console.models", "console.db"]
    assert set(contracts["front-ends-independent"]["modules"]) == {"console.cli", "console.tui"}
    core = contracts["core-without-ui"]
    assert set(core["source_modules"]) == {"console.services", "console.fleet", "console.db", "console.cli.commands"}
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
    assert not stray, f"open connections through console/db/connection.py `sqlite_connection`: {stray}"
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


def _cycles(imports: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(imports):
        if root in index:
            continue
        work = [(root, iter(sorted(imports[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            target = next(targets, None)
            if target is not None:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(imports.get(target, ())))))
                elif target in on_stack:
                    low[node] = min(low[node], index[target])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def test_no_import_cycle():
    """No module reaches itself through imports: lazy ones inside functions and `TYPE_CHECKING` ones
    count, as grimp builds the graph. A cycle is broken where the shared piece belongs (a lower
    module both import, or a value passed in), never by hiding an import."""
    import grimp

    graph = grimp.build_graph(*PACKAGES)
    imports = {m: set(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    lines = []
    for component in _cycles(imports):
        lines.append(" <-> ".join(component))
        for importer in component:
            for imported in sorted(imports[importer] & set(component)):
                where = graph.get_import_details(importer=importer, imported=imported)
                lines.append(f"    {importer} -> {imported} (line {', '.join(str(d['line_number']) for d in where)})")
    assert not lines, "import cycles:\n" + "\n".join(lines)


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set(), "c": {"c"}}) == []
    assert _cycles({"a": {"b", "d"}, "b": {"a"}, "d": {"e"}, "e": {"d"}}) == [["d", "e"], ["a", "b"]]


# Names a module lists in `__all__` without defining them, kept for now: console/clock.py is being
# reworked on another branch (time formatting moves there); drop these when that lands.
REEXPORT_ALLOWED = {("console/clock.py", "timedelta"), ("console/clock.py", "timezone")}


def _body_without_docstring(tree: ast.Module) -> list[ast.stmt]:
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        body = body[1:]
    return [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]


def _is_all(node: ast.stmt) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets)


def _defined(tree: ast.Module) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for target in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
    return names


def _forwarding(tree: ast.Module) -> list[str]:
    """Why a module forwards: it holds nothing but imports (and `__all__`), or its `__all__` offers
    names it only imports. An empty or docstring-only module (a package's `__init__.py`) is fine."""
    body = _body_without_docstring(tree)
    problems = []
    if body and all(isinstance(n, (ast.Import, ast.ImportFrom)) or _is_all(n) for n in body):
        problems.append("it only imports")
    defined = _defined(tree)
    for node in body:
        if _is_all(node) and isinstance(node.value, (ast.List, ast.Tuple)):
            problems += [f"`__all__` offers {e.value}, defined elsewhere" for e in node.value.elts
                         if isinstance(e, ast.Constant) and e.value not in defined]
    return problems


def test_no_module_only_forwards():
    """Callers import a name from the module that defines it: a module that re-exports its
    neighbours hides where things live and makes two spellings of one import."""
    found = {}
    for path, tree in _sources():
        problems = [p for p in _forwarding(tree)
                    if not any(p.startswith(f"`__all__` offers {name},") for where, name in REEXPORT_ALLOWED
                               if where == path)]
        if problems:
            found[path] = problems
    assert not found, found


def test_the_forwarding_check_sees_forwarding():
    assert _forwarding(ast.parse('"""Doc."""\nfrom a import b\n__all__ = ["b"]\n'))
    assert _forwarding(ast.parse("from __future__ import annotations\nfrom a import b, c\n"))
    assert _forwarding(ast.parse("from a import b\n\ndef f():\n    pass\n\n__all__ = ['b', 'f']\n"))
    assert not _forwarding(ast.parse('"""Only a docstring."""\n'))
    assert not _forwarding(ast.parse(""))
    assert not _forwarding(ast.parse("from a import b\n\ndef f():\n    return b\n\n__all__ = ['f']\n"))
