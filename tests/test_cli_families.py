"""Every command family has the shape docs/architecture.md ("Add a command") describes, checked on
the parser the command line really builds."""

from __future__ import annotations

import argparse
import ast
import inspect
import re
from pathlib import Path

from console.cli.parser import COMMAND_MODULES, COMMAND_OWNERS, build_parser, global_options

ROOT = Path(__file__).resolve().parents[1]
COMMANDS = ROOT / "console" / "cli" / "commands"


def _families() -> dict[str, str]:
    """module name -> file, for every module of console/cli/commands that defines `register`."""
    found = {}
    for path in sorted(COMMANDS.glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body):
            found[f"console.cli.commands.{path.stem}"] = path.read_text(encoding="utf-8")
    return found


def _leaves(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        yield path, parser
        return
    for action in subs:
        for name, child in action.choices.items():
            yield from _leaves(child, (*path, name))


def test_the_recipe_counts_the_families():
    families = _families()
    words = {1: "one", 10: "ten", 11: "eleven", 12: "twelve", 13: "thirteen", 14: "fourteen"}
    recipe = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    assert f"{words.get(len(families), len(families))} today" in recipe, len(families)


def test_every_family_is_reached_from_the_command_line():
    """Listed in COMMAND_MODULES, or registered by a listed family (watch by approvals)."""
    families = _families()
    listed = set(COMMAND_MODULES)
    assert listed <= set(families)
    for module in set(families) - listed:
        stem = module.rsplit(".", 1)[1]
        owners = [m for m in listed if re.search(rf"console\.cli\.commands\.{stem}\b", families[m])]
        assert owners, f"{module} defines register but no family registers it"


def test_every_word_is_registered_by_its_owner():
    assert set(COMMAND_OWNERS.values()) == set(COMMAND_MODULES)
    full = {path[0] for path, _leaf in _leaves(build_parser())}
    assert full == set(COMMAND_OWNERS)
    for word, owner in COMMAND_OWNERS.items():
        built = {path[0] for path, _leaf in _leaves(build_parser([word]))}
        assert word in built and built <= {w for w, o in COMMAND_OWNERS.items() if o == owner}, (word, built)


def test_every_action_has_a_handler_of_ctx_and_the_global_options():
    global_flags = {o for a in global_options(suppress=True)._actions for o in a.option_strings} - {"-h", "--help"}
    leaves = list(_leaves(build_parser()))
    assert len(leaves) > 20
    for path, leaf in leaves:
        handler = leaf.get_default("handler")
        assert callable(handler), path
        signature = inspect.signature(handler)
        assert list(signature.parameters) == ["ctx"], (path, signature)
        assert signature.return_annotation in (int, "int"), (path, signature)
        flags = {o for a in leaf._actions for o in a.option_strings}
        assert global_flags <= flags, (path, global_flags - flags)


def test_a_family_building_one_action_builds_the_same_handler():
    """Families with `ACTIONS` build only the parser of the action named; it is the full one's."""
    full = {path: leaf.get_default("handler") for path, leaf in _leaves(build_parser())}
    for path, handler in full.items():
        alone = dict(_leaves(build_parser(list(path))))
        assert alone[path].get_default("handler") is handler, path
