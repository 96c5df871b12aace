"""`--json` is produced from the services' read models; these goldens pin it byte for byte.

The goldens were written by the console before its services returned typed models (when rows were
dictionaries), on the demo database at a fixed instant; a model's `to_json` must reproduce them.
Regenerate only for a deliberate change of the JSON: `ARCHON_CONSOLE_WRITE_GOLDEN=1 pytest this file`.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from console.cli.cli import main
from tests.conftest import pin_real_clock

GOLDEN = Path(__file__).parent / "golden"
CASES = {
    "projects-list": ["projects", "list"],
    "profiles-list": ["profiles", "list", "prj-atlas-api"],
    "profiles-show": ["profiles", "show", "prj-atlas-api", "r1"],
    "approvals-list": ["approvals", "list", "--status", "all", "--limit", "12"],
    "approvals-show": ["approvals", "show", "apr-00000192"],
}


@pytest.fixture(scope="module")
def demo(tmp_path_factory) -> Path:
    from console.demo.writer import generate

    path = tmp_path_factory.mktemp("golden") / "demo.db"
    generate(path, requests=200, seed=7, now="2025-06-01 12:00:00", overwrite=True, wal=False)
    return path


@pytest.mark.parametrize("name", sorted(CASES))
def test_json_output_matches_its_golden(demo, capsys, monkeypatch, name):
    pin_real_clock(monkeypatch, "2025-06-01 12:00:00")
    monkeypatch.setenv("ARCHON_CONSOLE_ACTOR", "alice")
    assert main(["--json", *CASES[name], "--db", str(demo), "--read-only"]) == 0
    out = capsys.readouterr().out
    golden = GOLDEN / f"{name}.json"
    if os.environ.get("ARCHON_CONSOLE_WRITE_GOLDEN"):
        golden.write_text(out, encoding="utf-8")
    assert out == golden.read_text(encoding="utf-8")
