"""The tests' own shape, read from their source (issue 19, item 7).

- No module under tests/ imports from a test module: what two modules share lives in tests/conftest.py
  or a helper module whose name does not start with `test_` (pytest collects those, and a test module
  imported elsewhere runs its fixtures and module set-up under another module's name).
- One home for databases, connections and projects: tests/conftest.py (`make_db`, `db`, `connect`,
  `add_project`). Every `db` fixture is built on `make_db` (or on conftest's `db`).
- No test reads a private attribute of Textual's own classes where a public API or a posted message
  will do; the few left are listed in TEXTUAL_PRIVATE_ALLOWED with why, so a new one is seen.
"""

from __future__ import annotations

import ast
from pathlib import Path

import textual

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# Where a function of these names may be defined: conftest holds the one factory; the approval tests'
# projects are named by their id under /srv (a thin use of conftest's); the reference oracle may import
# nothing that imports `console` (tests/reference/README.md), so it cannot use conftest.
HOMES = {
    "connect": {"tests/conftest.py", "tests/reference/builder.py"},
    "add_project": {"tests/conftest.py", "tests/approvals_helpers.py"},
    "make_db": {"tests/conftest.py"},
    "raw": set(),  # environments_support.raw is conftest's connect
}

# (file, attribute) -> why no public API does it. Textual 8 has no public way to read the composited
# screen as text: `App.export_screenshot` returns SVG with every character escaped, which would hide
# exactly the control characters these sweeps look for.
_COMPOSITOR = "no public API returns the painted screen's text segments (export_screenshot is escaped SVG)"
TEXTUAL_PRIVATE_ALLOWED = {
    ("tests/adversarial/test_terminal_doors.py", "_compositor"): _COMPOSITOR,
    ("tests/adversarial/test_invisible_text.py", "_compositor"): _COMPOSITOR,
    ("tests/adversarial/tui.py", "_compositor"): _COMPOSITOR,
    ("tests/tui/test_first_use.py", "_compositor"): _COMPOSITOR,
    ("tests/tui/test_support_view.py", "_compositor"): _COMPOSITOR,
    # The defect is inside Textual's batching: a frame dropped while `_batch_count` holds updates, and
    # whether its end wakes the screen (`_repaint_required`, `_message_queue`); no public API shows it.
    ("tests/tui/test_lost_frames.py", "_batch_count"): "the batch Textual holds repaints in",
    ("tests/tui/test_lost_frames.py", "_repaint_required"): "the repaint the batch's end must schedule",
    ("tests/tui/test_lost_frames.py", "_message_queue"): "the wake-up the batch's end must send",
}


def _python_files(root: Path):
    for path in sorted(root.rglob("*.py")):
        yield path.relative_to(ROOT).as_posix(), ast.parse(path.read_text(), filename=str(path))


def _is_test_module(dotted: str) -> bool:
    return dotted.rsplit(".", 1)[-1].startswith("test_")


def imports_of_test_modules(tree: ast.AST, package: str) -> list[tuple[int, str]]:
    """(line, module) for each import of a test module in `tree`, a module of `package`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if _is_test_module(alias.name)]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            if base and _is_test_module(base):
                found.append((node.lineno, base))
            found += [(node.lineno, f"{base}.{alias.name}") for alias in node.names if alias.name.startswith("test_")]
    return found


def test_no_module_under_tests_imports_a_test_module():
    found = []
    for name, tree in _python_files(TESTS):
        package = name.rsplit("/", 1)[0].replace("/", ".")
        found += [f"{name}:{line}: {module}" for line, module in imports_of_test_modules(tree, package)]
    assert not found, "move what is shared into tests/conftest.py or a helper module:\n" + "\n".join(found)


def test_the_import_check_can_fail():
    tree = ast.parse("from tests.test_watch import db\nimport tests.tui.test_flows\n"
                     "from tests.tui import test_flows\nfrom .test_escapes import x\n"
                     "def f():\n    from tests.adversarial.test_snapshot_identity import _restore\n"
                     "from tests.tui.pilot import settle\nfrom tests import upgrade_helpers\n")
    assert [m for _, m in imports_of_test_modules(tree, "tests.adversarial")] == [
        "tests.test_watch", "tests.tui.test_flows", "tests.tui.test_flows", "tests.adversarial.test_escapes",
        "tests.adversarial.test_snapshot_identity"]


def _fixtures(tree: ast.AST):
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            for decorator in node.decorator_list:
                target = decorator.func if isinstance(decorator, ast.Call) else decorator
                if isinstance(target, ast.Attribute) and target.attr == "fixture":
                    yield node


def test_one_home_for_databases_connections_and_projects():
    misplaced, unbuilt = [], []
    for name, tree in _python_files(TESTS):
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef) and node.name.lstrip("_") in HOMES:
                if name not in HOMES[node.name.lstrip("_")]:
                    misplaced.append(f"{name}:{node.lineno}: def {node.name}")
        for fixture in _fixtures(tree):
            params = {a.arg for a in fixture.args.args}
            if fixture.name == "db" and not params & {"make_db", "db"}:
                unbuilt.append(f"{name}:{fixture.lineno}: db({', '.join(sorted(params))})")
    assert not misplaced, "use tests/conftest.py's connect, add_project and make_db:\n" + "\n".join(misplaced)
    assert not unbuilt, "build the module's db on conftest's make_db:\n" + "\n".join(unbuilt)


def _private_names_defined_in(root: Path) -> set[str]:
    """Every `_name` a class of the package under `root` defines: methods, class attributes, and
    attributes it assigns on self."""
    names = set()
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                names.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                names.add(node.id)
    return {n for n in names if n.startswith("_") and not n.startswith("__") and n != "_"}


def _modules_bound(tree: ast.AST) -> set[str]:
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
    return bound


def private_textual_reads(files, textual_private: set[str]) -> set[tuple[str, str]]:
    """(file, attribute) for each `x._name` in `files` where `_name` is private to Textual's classes
    and not also defined by the console or the tests (their own privates are their business)."""
    found = set()
    for name, tree in files:
        modules = _modules_bound(tree)
        for node in ast.walk(tree):
            if (isinstance(node, ast.Attribute) and node.attr in textual_private
                    and not (isinstance(node.value, ast.Name) and node.value.id in modules)):
                found.add((name, node.attr))
    return found


def _textual_only_private() -> set[str]:
    ours = set()
    for package in ("console", "widgets", "tests"):
        ours |= _private_names_defined_in(ROOT / package)
    return _private_names_defined_in(Path(textual.__file__).parent) - ours


def test_no_test_reads_textual_private_attributes_but_the_listed():
    found = private_textual_reads(_python_files(TESTS), _textual_only_private())
    assert found - set(TEXTUAL_PRIVATE_ALLOWED) == set(), (
        "a test reads a private attribute of Textual's: use its public API (app.query, screen.focused, "
        "Widget.region, tests/tui/pilot.py `notifications`) or list it here with why")
    assert set(TEXTUAL_PRIVATE_ALLOWED) - found == set(), "stale entries: remove them"


def test_the_private_attribute_check_can_fail():
    tree = ast.parse("def f(app):\n    return app._notifications, app.screen._compositor, app._poll, os._exit\n"
                     "import os\n")
    found = private_textual_reads([("tests/x.py", tree)], _textual_only_private())
    assert found == {("tests/x.py", "_notifications"), ("tests/x.py", "_compositor")}


# --- No test waits for a duration (issue 21, item 2) ------------------------------------------
# A test that sleeps "long enough" for something to happen, or gives a condition a deadline a loaded
# machine (load 7-8 on 2 cores) can outlast, fails there although the code is right. Wait for the
# condition instead (tests/tui/pilot.py `wait_until`, a polling `while` with a generous deadline);
# a deadline only bounds a test that is already failing. Sleeping is fine only inside a `while`
# loop (polling a condition) and for the few cases listed here with why.
_WAITS = {"sleep", "pause"}
_TIMEOUT_CALLS = {"wait", "communicate", "join", "get", "wait_for", "wait_until", "until", "_until", "result",
                  "exception"}
MIN_DEADLINE_S = 10.0  # a condition's failure bound below this is a bet on the machine's speed
FIXED_WAITS_ALLOWED = {
    ("tests/fleet/test_tui_answers.py", "late"): "the stand-in host answering late is the case under test",
}


def _number(node: ast.AST | None) -> float | None:
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    return None


def fixed_waits(tree: ast.AST) -> list[tuple[int, str, str]]:
    """(line, enclosing function, what) for each wait on a duration in `tree`: a sleep or pilot pause
    of a fixed time outside a polling `while`, a `for _ in range(N)` poll whose N pauses are its whole
    deadline, a `monotonic() + N` deadline, a `timeout=N` or a default `timeout` below MIN_DEADLINE_S."""
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, loops: list[ast.AST], function: str) -> None:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            loops, function = [], node.name
            arguments = node.args
            named = [*arguments.args[len(arguments.args) - len(arguments.defaults):], *arguments.kwonlyargs]
            for argument, default in zip(named, [*arguments.defaults, *arguments.kw_defaults]):
                limit = _number(default)
                if argument.arg in ("timeout", "deadline", "wait") and limit is not None and 0 < limit < MIN_DEADLINE_S:
                    found.append((node.lineno, function, f"{argument.arg}={limit:g} by default: a tight deadline"))
        polling = any(isinstance(loop, ast.While) for loop in loops)
        if isinstance(node, ast.Call):
            name = getattr(node.func, "attr", getattr(node.func, "id", ""))
            seconds = _number(node.args[0]) if node.args else None
            if name in _WAITS and seconds and not polling:
                loop = loops[-1] if loops else None
                rounds = None
                if isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and \
                        getattr(loop.iter.func, "id", "") == "range" and loop.iter.args:
                    rounds = _number(loop.iter.args[-1])
                if loop is None:
                    found.append((node.lineno, function, f"{name}({seconds:g}): waits for a duration"))
                elif rounds is not None and rounds * seconds < MIN_DEADLINE_S:
                    found.append((node.lineno, function, f"{rounds:g} x {name}({seconds:g}): a "
                                  f"{rounds * seconds:g} s deadline"))
            if name in _TIMEOUT_CALLS and not polling:
                for keyword in node.keywords:
                    limit = _number(keyword.value) if keyword.arg in ("timeout", "deadline") else None
                    if limit is not None and 0 < limit < MIN_DEADLINE_S:
                        found.append((node.lineno, function, f"{name}({keyword.arg}={limit:g}): a tight deadline"))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add) and isinstance(node.left, ast.Call) \
                and getattr(node.left.func, "attr", getattr(node.left.func, "id", "")) == "monotonic":
            limit = _number(node.right)
            if limit is not None and limit < MIN_DEADLINE_S:
                found.append((node.lineno, function, f"monotonic() + {limit:g}: a tight deadline"))
        inner = [*loops, node] if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) else loops
        for child in ast.iter_child_nodes(node):
            visit(child, inner, function)

    visit(tree, [], "<module>")
    return found


def test_no_test_waits_for_a_duration():
    found = [(name, line, function, what) for name, tree in _python_files(TESTS)
             for line, function, what in fixed_waits(tree)]
    unlisted = [f"{name}:{line}: {function}: {what}" for name, line, function, what in found
                if (name, function) not in FIXED_WAITS_ALLOWED]
    assert not unlisted, "wait for the condition (tests/tui/pilot.py wait_until), not a duration:\n" + "\n".join(unlisted)
    assert set(FIXED_WAITS_ALLOWED) <= {(name, function) for name, _, function, _ in found}, "stale entries: remove them"


def test_the_duration_check_can_fail():
    tree = ast.parse(
        "import time\n"
        "async def f(pilot, t, timeout=5.0):\n"
        "    time.sleep(0.5)\n"
        "    for _ in range(200):\n"
        "        await pilot.pause(0.01)\n"
        "    deadline = time.monotonic() + 2\n"
        "    while not t.done:\n"
        "        time.sleep(0.05)\n"  # polling: fine
        "    await wait_until(pilot, t, timeout=2)\n"
        "    for _ in range(3000):\n"
        "        await asyncio.sleep(0.01)\n"  # a 30 s bound: fine
        "    await pilot.pause()\n")
    assert [(line, what.split(":")[0]) for line, _, what in fixed_waits(tree)] == [
        (2, "timeout=5 by default"), (3, "sleep(0.5)"), (5, "200 x pause(0.01)"), (6, "monotonic() + 2"), (9, "wait_until(timeout=2)")]
