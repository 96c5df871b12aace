"""The layering the TUI relies on: widgets know nothing of archon, services never import textual.

The static import graph is checked by import-linter (pyproject.toml, tests/test_layers.py); these
check what is actually loaded."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_widgets_are_archon_agnostic():
    for path in (ROOT / "widgets").glob("*.py"):
        assert not any(n == "console" or n.startswith("console.") for n in _imports(path)), path


@pytest.mark.slow
def test_cli_and_services_do_not_load_textual():
    """At run time, every module of the services, the database code and the commands (import-linter
    checks the static graph; this catches an import made by name, e.g. through importlib)."""
    code = ("import importlib, pkgutil, sys, console.cli.parser as c; c.build_parser()\n"
            "for pkg in ('console.services', 'console.db', 'console.cli.commands'):\n"
            "    root = importlib.import_module(pkg)\n"
            "    for m in pkgutil.walk_packages(root.__path__, pkg + '.'):\n"
            "        importlib.import_module(m.name)\n"
            "        print(m.name, file=sys.stderr)\n"
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
    imported = out.stderr.split()
    assert {"console.services.upgrade", "console.services.doctor.checks_schema", "console.db.migrations.registry",
            "console.cli.commands.inspect"} <= set(imported)
    assert len(imported) > 60, imported
