"""`make test-fast` stays a loop a developer runs every few minutes, and still tests every area.

The rule (docs/architecture.md, "Two test commands"): a test is `slow` when it drives the whole app
through Pilot, walks every screen, runs a hypothesis state machine, or takes over ~0.3 s on an idle
machine. Speed is not asserted here (timing belongs in `make bench`): these read the source, so
they fail the same on a loaded machine. What they check is the part of the rule a reader can see:
Pilot and state machines are marked, both make targets select what they say, and the fast set keeps
a test in every area. Durations are the developer's report: `make test-fast` lists its slowest."""

from __future__ import annotations

import ast
import functools
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"

# The one Pilot test in the fast set: the app opens on the demo database and its palette answers.
PILOT_SMOKE = {("tests.tui.test_views", "test_palette_lists_saved_views")}

# Each area keeps fast tests (a fast loop that skips an area tells a developer nothing about it).
AREAS = {
    "services": "tests.test_approvals_service",
    "environments": "tests.test_environments",
    "projects": "tests.test_projects_service",
    "CLI": "tests.test_cli_contract",
    "CLI errors": "tests.adversarial.test_bad_arguments",
    "--json goldens": "tests.test_json_golden",
    "database opening": "tests.test_open_refusals",
    "read-only": "tests.test_readonly",
    "upgrade plan": "tests.test_upgrade_plan",
    "upgrade refusals": "tests.test_upgrade_refusals",
    "step checksums": "tests.test_step_checksums",
    "doctor": "tests.test_doctor",
    "snapshot": "tests.test_snapshot",
    "restore": "tests.test_restore",
    "profiles": "tests.test_profiles",
    "layers": "tests.test_layers",
    "docs": "tests.test_docs",
    "output sanitiser": "tests.adversarial.test_escapes",
    "TUI": "tests.tui.test_views",
}


@functools.cache
def _sources() -> dict[str, str]:
    return {".".join(path.relative_to(ROOT).with_suffix("").parts): path.read_text(encoding="utf-8")
            for path in sorted(TESTS.rglob("*.py"))}


@functools.cache
def _parse(module: str) -> ast.Module:
    return ast.parse(_sources()[module])


def _modules(*words: str) -> dict[str, ast.Module]:
    """The test modules that mention one of `words` or import from one that does (parsing only
    those keeps this test fast)."""
    chosen = {mod for mod, text in _sources().items() if any(w in text for w in words)}
    grown = True
    while grown:
        more = {mod for mod, text in _sources().items() if mod not in chosen
                and any(f"from {c} import" in text for c in chosen)}
        chosen |= more
        grown = bool(more)
    return {mod: _parse(mod) for mod in sorted(chosen)}


def _is_slow_mark(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and n.attr == "slow" for n in ast.walk(node))


def _module_is_slow(tree: ast.Module) -> bool:
    return any(isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "pytestmark" for t in node.targets)
               and _is_slow_mark(node.value) for node in tree.body)


def _tests(tree: ast.Module):
    """(name, node, marked slow) for every test function, methods of Test classes included."""
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name.startswith("test"):
            yield node.name, node, any(_is_slow_mark(d) for d in node.decorator_list)
        elif isinstance(node, ast.ClassDef) and node.name.startswith("Test"):
            marked = any(_is_slow_mark(d) for d in node.decorator_list)
            for item in node.body:
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name.startswith("test"):
                    yield f"{node.name}.{item.name}", item, marked or any(_is_slow_mark(d) for d in item.decorator_list)


def _pilot_functions(modules: dict[str, ast.Module]) -> set[tuple[str, str]]:
    """Every function that starts the console's app under Pilot (`run_test` beside `make_app` or
    `ArchonConsole`, or `snap_compare`), directly or through a helper of any test module. A widget
    in a small app of its own (tests/tui/test_lazy_table.py) is not the whole app."""
    functions = {(mod, node.name): node for mod, tree in modules.items() for node in tree.body
                 if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
    imported = {mod: {alias.asname or alias.name: (node.module, alias.name)
                      for node in tree.body if isinstance(node, ast.ImportFrom) and node.module
                      for alias in node.names}
                for mod, tree in modules.items()}
    def names(node):
        return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)} | {a.arg for a in node.args.args}

    pilot = {key for key, node in functions.items()
             if any(isinstance(n, ast.Attribute) and n.attr == "run_test" for n in ast.walk(node))
             and names(node) & {"make_app", "ArchonConsole"} or "snap_compare" in names(node)}
    changed = True
    while changed:
        changed = False
        for (mod, name), node in functions.items():
            if (mod, name) in pilot:
                continue
            called = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
            if any((mod, c) in pilot or imported[mod].get(c) in pilot for c in called):
                pilot.add((mod, name))
                changed = True
    return pilot


def test_every_pilot_test_is_slow_but_the_smoke():
    modules = _modules("run_test", "snap_compare")
    pilot = _pilot_functions(modules)
    unmarked = [f"{mod}::{name}" for mod, tree in modules.items() if not _module_is_slow(tree)
                for name, node, slow in _tests(tree)
                if not slow and (mod, node.name) in pilot and (mod, name) not in PILOT_SMOKE]
    assert unmarked == [], "drives the app through Pilot: mark it @pytest.mark.slow (docs/architecture.md)"
    assert len(pilot) > 60  # the search sees the Pilot tests (89 when this was written)


def test_every_state_machine_module_is_slow():
    machines = [mod for mod, tree in _modules("RuleBasedStateMachine").items()
                if any(isinstance(n, ast.ClassDef) and any(getattr(b, "id", getattr(b, "attr", "")) == "RuleBasedStateMachine"
                                                            for b in n.bases) for n in tree.body)]
    assert machines, "the search sees the state machines"
    assert [mod for mod in machines if not _module_is_slow(_parse(mod))] == []


def test_the_fast_set_keeps_a_test_in_every_area():
    modules = {mod: _parse(mod) for mod in {*AREAS.values(), *(m for m, _ in PILOT_SMOKE)}}
    empty = [area for area, mod in AREAS.items()
             if _module_is_slow(modules[mod]) or all(slow for _, _, slow in _tests(modules[mod]))]
    assert empty == []
    smoke_module, smoke = next(iter(PILOT_SMOKE))
    assert not _module_is_slow(modules[smoke_module])
    assert [slow for name, _, slow in _tests(modules[smoke_module]) if name == smoke] == [False]


def test_test_fast_deselects_slow_and_test_runs_everything():
    markers = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["pytest"]["ini_options"]["markers"]
    assert any(m.startswith("slow:") for m in markers)
    make = (ROOT / "Makefile").read_text()
    recipe = {m.group(1): m.group(2) for m in re.finditer(r"^([\w-]+):.*\n((?:\t.*\n)+)", make, re.M)}
    assert '-m "not slow"' in recipe["test-fast"]
    assert "pytest" in recipe["test"] and not re.search(r" -m [\"']", recipe["test"])
    assert "make test\n" in (ROOT / ".ci" / "run").read_text()
