"""The shell face of the upgrade: JSON output, the terminal progress bar, a WAL database killed
mid-rebuild, and `python -m console` end to end."""

from __future__ import annotations

import io
import json
import shutil
import signal

import pytest

from console.cli.cli import main
from console.cli.commands.upgrade import ProgressBar
from console.services.upgrade.model import UpgradeProgress
from tests.upgrade_helpers import ledger_names, normalized_dump, run_cli, run_cli_crashing_at

pytestmark = pytest.mark.slow


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_bar_only_on_a_terminal():
    tty = _Tty()
    bar = ProgressBar(tty, min_interval=0)
    bar(UpgradeProgress("snapshot", 50, 100, "copying pages"))
    bar(UpgradeProgress("snapshot", 100, 100, "copying pages"))
    bar(UpgradeProgress("migration", 3, 29, "003-profile-tables: \x1b[31mred\x1b[0m"))
    bar(UpgradeProgress("done", 29, 29, ""))
    text = tty.getvalue()
    assert "\r" in text and " 50.0% 50/100 pages" in text and "3/29 steps" in text
    assert "\x1b[31m" not in text  # database strings cannot steer the terminal
    assert text.endswith("\n")
    pipe = io.StringIO()
    ProgressBar(pipe, min_interval=0)(UpgradeProgress("snapshot", 1, 2, "x"))
    assert pipe.getvalue() == ""


def test_json_output(tmp_path, capsys):
    from tests.upgrade_helpers import db_1820

    path = db_1820(tmp_path / "archon.db")
    assert main(["--db", str(path), "--json", "upgrade"]) == 1
    refused = json.loads(capsys.readouterr().out)
    assert refused["status"] == "force-required" and refused["plan"]["force_required"]
    assert main(["--db", str(path), "--json", "upgrade", "--force", "--to", "1.8.22"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["status"] == "upgraded" and len(done["applied"]) == 19
    assert done["release_after"] == "1.8.22" and len(done["snapshot_sha256"]) == 64
    assert main(["--db", str(path), "--json", "upgrade", "--to", "1.8.22"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "up-to-date"


def test_wal_demo_database_killed_mid_rebuild(tmp_path):
    from console.demo.writer import generate

    original = tmp_path / "original.db"
    generate(original, release="1.8.22", requests=400, seed=5, now="2026-04-01T00:00:00Z")
    control, crashed = tmp_path / "control", tmp_path / "crashed"
    control.mkdir()
    crashed.mkdir()
    for where in (control, crashed):
        shutil.copyfile(original, where / "archon.db")
    assert run_cli("--db", str(control / "archon.db"), "upgrade", "--force").returncode == 0
    proc = run_cli_crashing_at("mid:020-profile-revisions-rebuild-v3", "--db", str(crashed / "archon.db"),
                               "upgrade", "--force")
    assert proc.returncode == -signal.SIGKILL
    rerun = run_cli("--db", str(crashed / "archon.db"), "upgrade", "--force")
    assert rerun.returncode == 0, rerun.stderr
    assert ledger_names(crashed / "archon.db") == ledger_names(control / "archon.db")
    assert normalized_dump(crashed / "archon.db") == normalized_dump(control / "archon.db")
