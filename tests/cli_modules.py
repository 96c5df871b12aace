"""What a CLI command imports, seen from a fresh interpreter: the command runs in a child that writes
its `sys.modules` to a file at exit (tests/test_cli_startup.py, tests/test_cli_imports.py)."""

from __future__ import annotations

import os
import subprocess
import sys

REPORT_MODULES = (
    "import sys\n"
    "from console.cli.cli import main\n"
    "code = main(sys.argv[2:])\n"
    "with open(sys.argv[1], 'w') as out:\n"
    "    out.write('\\n'.join(sorted(sys.modules)))\n"
    "sys.exit(code)\n"
)


def modules_of(tmp_path, *argv: str) -> set[str]:
    report = tmp_path / "modules.txt"
    tmpdir = tmp_path / "tmp"  # an empty temp directory: no leftovers for the start to remove
    tmpdir.mkdir(exist_ok=True)
    env = {**os.environ, "TMPDIR": str(tmpdir), "ARCHON_CONSOLE_NOW": "2026-11-01 09:30:00"}
    done = subprocess.run([sys.executable, "-c", REPORT_MODULES, str(report), *argv],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 0, done.stderr
    return set(report.read_text().split("\n"))
