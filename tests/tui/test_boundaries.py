"""The layering the TUI relies on: widgets know nothing of archon, services never import textual."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

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


def test_cli_and_services_do_not_load_textual():
    code = ("import sys, console.cli as c; c.build_parser(); import console.services.approvals, "
            "console.services.environments, console.services.profiles, console.services.upgrade; "
            "print('textual' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True)
    assert out.stdout.strip() == "False"
