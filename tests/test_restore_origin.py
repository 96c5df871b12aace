"""`restore` puts back only the database's own snapshot, and every "To undo" line names it (issue 18, finding 11).

On main `upgrade --force` ended with "To undo: archon-console restore SNAPSHOT": pasted into a shell
whose ARCHON_DB_PATH names another database, it replaced that one with the first one's snapshot
(`--unverified` got past the only check, a manifest that did not count). Now each snapshot names its
database (console/services/upgrade/restore_origin.py) and `restore` refuses another's with exit 3
unless --other-database; the "To undo" line carries `--db`, shell-quoted. Real files, real processes.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.errors import EXIT_OK, EXIT_UNUSABLE
from console.services.upgrade.run import run_upgrade
from tests.upgrade_helpers import REPO, db_1820, dump, fingerprint_dir, sha256

pytestmark = pytest.mark.slow

NOW = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
LATER = datetime(2026, 5, 1, 13, 0, 0, tzinfo=timezone.utc)


def _cli(*args: str, db_env: Path | None = None) -> subprocess.CompletedProcess:
    """`python -m console ARGS`, with ARCHON_DB_PATH set as the operator's shell may have it."""
    env = {k: v for k, v in os.environ.items() if k != "ARCHON_DB_PATH"}
    if db_env is not None:
        env["ARCHON_DB_PATH"] = str(db_env)
    return subprocess.run([sys.executable, "-m", "console", *args], cwd=REPO, env=env,
                          stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60)


def _two(tmp_path: Path) -> tuple[Path, Path]:
    """Database A (to be upgraded) in a directory whose name needs quoting, and another, B, that
    archon 1.8.20 left (no approval tables, as in the report)."""
    a_dir = tmp_path / "first db's dir"
    a_dir.mkdir()
    (tmp_path / "b").mkdir()
    return db_1820(a_dir / "archon.db"), db_1820(tmp_path / "b" / "archon.db", projects=3)


def test_the_undo_line_names_the_database_and_runs_where_archon_db_path_names_another(tmp_path):
    a, b = _two(tmp_path)
    before_a, b_state = dump(a), fingerprint_dir(b.parent)
    proc = _cli("--db", str(a), "upgrade", "--force")
    assert proc.returncode == EXIT_OK, proc.stderr
    undo = [line for line in proc.stdout.splitlines() if line.startswith("To undo: ")]
    assert len(undo) == 1
    words = shlex.split(undo[0][len("To undo: "):])
    assert words[:3] == ["archon-console", "--db", str(a.resolve())] and words[3] == "restore"
    done = _cli(*words[1:], "--yes", db_env=b)  # pasted as printed, in a shell where ARCHON_DB_PATH is B
    assert done.returncode == EXIT_OK, done.stderr
    assert dump(a) == before_a
    assert fingerprint_dir(b.parent) == b_state


def test_another_databases_snapshot_is_refused_with_exit_3(tmp_path):
    a, b = _two(tmp_path)
    snapshot = run_upgrade(a, force=True, now=NOW).snapshot_path
    state = fingerprint_dir(b.parent), fingerprint_dir(a.parent)
    for extra in ((), ("--unverified",)):
        proc = _cli("restore", snapshot, "--yes", *extra, db_env=b)  # --db left out: ARCHON_DB_PATH is B
        assert proc.returncode == EXIT_UNUSABLE, proc.stdout + proc.stderr
        assert "another database" in proc.stderr and "--other-database" in proc.stderr
        assert "Traceback" not in proc.stderr
        assert (fingerprint_dir(b.parent), fingerprint_dir(a.parent)) == state
    plan = _cli("restore", snapshot, "--plan", db_env=b)
    assert plan.returncode == EXIT_UNUSABLE and "another database" in plan.stdout
    forced = _cli("restore", snapshot, "--yes", "--other-database", db_env=b)
    assert forced.returncode == EXIT_OK, forced.stderr
    assert "not checked (--other-database)" in forced.stdout


def test_a_snapshot_carrying_another_identity_is_refused_at_the_same_path(tmp_path):
    """Two upgrades each: the second snapshot of A carries A's identity inside its own ledger. With B's
    file moved to A's path, the path alone would have let A's snapshot over B."""
    a, b = _two(tmp_path)
    run_upgrade(a, target="1.8.22", force=True, now=NOW)
    run_upgrade(b, target="1.8.22", force=True, now=NOW)
    second_a = Path(run_upgrade(a, force=True, now=LATER).snapshot_path)
    run_upgrade(b, force=True, now=LATER)
    os.replace(b, a)  # B now lives where A did
    state = fingerprint_dir(a.parent)
    for extra in ((), ("--unverified",)):  # main: refused for want of a record, then restored --unverified
        proc = _cli("--db", str(a), "restore", str(second_a), "--yes", *extra)
        assert proc.returncode == EXIT_UNUSABLE, proc.stdout + proc.stderr
        assert "identity" in proc.stderr and "another database" in proc.stderr
        assert fingerprint_dir(a.parent) == state


def test_a_database_keeps_its_identity_across_a_restore_and_a_new_upgrade(tmp_path):
    a, _ = _two(tmp_path)
    first = Path(run_upgrade(a, target="1.8.22", force=True, now=NOW).snapshot_path)
    second = Path(run_upgrade(a, force=True, now=LATER).snapshot_path)
    assert _cli("--db", str(a), "restore", str(second), "--yes").returncode == EXIT_OK
    third = Path(run_upgrade(a, force=True, now=datetime(2026, 5, 1, 14, tzinfo=timezone.utc)).snapshot_path)
    # named by its first upgrade's snapshot, kept in its ledger through the restore
    assert f'# source-instance: "{sha256(first)}"' in Path(f"{third}.sha256").read_text()
    proc = _cli("--db", str(a), "restore", str(second), "--yes")
    assert proc.returncode == EXIT_OK, proc.stderr
    assert "carries the database's identity" in proc.stdout or "ledger records it" in proc.stdout


def _drop_identity(snapshot: Path) -> None:
    """The manifest of issue 17's console: the hash and the path, no identity."""
    manifest = Path(f"{snapshot}.sha256")
    lines = [line for line in manifest.read_text().splitlines() if not line.startswith(
        ("# source-instance:", "# source-ledger:"))]
    manifest.unlink()
    manifest.write_text("\n".join(lines) + "\n")


def test_an_older_manifest_is_judged_by_its_path(tmp_path):
    a, b = _two(tmp_path)
    before = dump(a)
    snapshot = Path(run_upgrade(a, force=True, now=NOW).snapshot_path)
    _drop_identity(snapshot)
    refused = _cli("restore", str(snapshot), "--yes", db_env=b)
    assert refused.returncode == EXIT_UNUSABLE and f"was taken from another database, {a.resolve()}" in refused.stderr
    done = _cli("--db", str(a), "restore", str(snapshot), "--yes")
    assert done.returncode == EXIT_OK, done.stderr
    assert "ledger records it" in done.stdout and dump(a) == before
    again = _cli("--db", str(a), "restore", str(snapshot), "--yes")  # no ledger now: the path decides
    assert again.returncode == EXIT_OK, again.stderr
    assert f"its manifest names {a.resolve()}" in again.stdout and dump(a) == before


def test_a_copys_equal_identity_does_not_outweigh_the_recorded_path(tmp_path):
    """Attack round, finding 4: A upgraded (it gets an identity), copied to B, both upgraded again;
    main put A's snapshot over B with `--unverified` as "Taken from this database: it carries the
    database's identity". The path the manifest records decides; a moved database says so itself."""
    import shutil
    import sqlite3

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = db_1820(tmp_path / "a" / "archon.db")
    run_upgrade(a, target="1.8.22", force=True, now=NOW)
    b = tmp_path / "b" / "archon.db"
    shutil.copyfile(a, b)
    conn = sqlite3.connect(a)
    conn.execute("UPDATE projects SET name = name || '-A-only'")
    conn.commit()
    conn.close()
    snapshot_a = run_upgrade(a, force=True, now=LATER).snapshot_path
    run_upgrade(b, force=True, now=LATER)
    state = fingerprint_dir(tmp_path)
    for extra in ((), ("--unverified",)):
        refused = _cli("--db", str(b), "restore", snapshot_a, "--yes", *extra)
        assert refused.returncode == EXIT_UNUSABLE, refused.stdout + refused.stderr
        assert f"was taken from another database, {a}" in refused.stderr
        assert "same identity" in refused.stderr and "--other-database" in refused.stderr
    assert fingerprint_dir(tmp_path) == state
    plan = _cli("--db", str(b), "restore", snapshot_a, "--plan", "--unverified", "--other-database")
    assert plan.returncode == EXIT_OK, plan.stderr  # the operator who moved the database says so
    own = _cli("--db", str(a), "restore", snapshot_a, "--plan")
    assert own.returncode == EXIT_OK and "Taken from this database" in own.stdout, own.stderr


def test_the_undo_line_names_the_file_behind_a_symbolic_link(tmp_path):
    """Attack round, finding 5: `--db link.db upgrade` printed `--db …/link.db`, which restore refuses
    (it would replace the link); the line names the resolved file and runs as printed."""
    (tmp_path / "real").mkdir()
    real = db_1820(tmp_path / "real" / "archon.db")
    link = tmp_path / "link.db"
    os.symlink(real, link)
    upgraded = _cli("--db", str(link), "upgrade", "--force")
    assert upgraded.returncode == EXIT_OK, upgraded.stderr
    undo = next(line for line in upgraded.stdout.splitlines() if line.startswith("To undo: "))
    words = shlex.split(undo[len("To undo: "):])
    assert words[:3] == ["archon-console", "--db", os.path.realpath(real)]
    restored = _cli(*words[1:], "--plan")
    assert restored.returncode == EXIT_OK, restored.stdout + restored.stderr
    assert "Taken from this database" in restored.stdout


def test_no_text_quotes_the_undo_line_without_its_database():
    """Attack round, finding 10: restore's hint still quoted "To undo: archon-console restore ...",
    the form that replaced whatever ARCHON_DB_PATH named."""
    for source in (Path(REPO) / "console").rglob("*.py"):
        assert "To undo: archon-console restore" not in source.read_text(encoding="utf-8"), source
