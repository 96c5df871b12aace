"""kill -9 at every boundary of an upgrade, then a rerun: the same final database as an upgrade
that was never interrupted. And two upgraders at once: every step applied exactly once.

The crash points are injected by the test around the run's seams (tests/upgrade_helpers.py
`run_cli_crashing_at`): `after-snapshot`
(inside the first step's transaction, the snapshot published), `mid:<id>` (the step's SQL and its
ledger rows written, not committed), `after:<id>` (committed, before the next step).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys

import pytest

from console.db.migrations.registry import MIGRATIONS
from tests.upgrade_helpers import (
    REPO,
    add_old_approval_tables,
    connect,
    db_1820,
    ledger_names,
    normalized_dump,
    run_cli,
    run_cli_crashing_at,
)

pytestmark = pytest.mark.slow

ALL_IDS = [m.id for m in MIGRATIONS]

BOUNDARIES = [
    "after-snapshot",
    "mid:001-archon-1.8.20-baseline",
    "after:005-profile-backfill-initial",
    "mid:009-build-sequence-incomplete-sweep",
    "mid:014-approval-requests-rebuild-action-limit",
    "after:014-approval-requests-rebuild-action-limit",
    "mid:020-profile-revisions-rebuild-v3",
    "after:028-check-attempt-outcome-environment-loss",
]


@pytest.fixture(scope="module")
def original(tmp_path_factory):
    """A populated 1.8.20 database with old-shape approvals (so 014 really rebuilds)."""
    path = db_1820(tmp_path_factory.mktemp("original") / "archon.db")
    conn = connect(path)
    add_old_approval_tables(conn, requests=12, events_each=3)
    conn.close()
    return path


@pytest.fixture(scope="module")
def expected(original, tmp_path_factory):
    path = tmp_path_factory.mktemp("control") / "archon.db"
    shutil.copyfile(original, path)
    proc = run_cli("--db", str(path), "upgrade", "--force")
    assert proc.returncode == 0, proc.stderr
    return normalized_dump(path)


@pytest.mark.parametrize("boundary", BOUNDARIES)
def test_kill_at_boundary_then_rerun_reaches_the_same_database(tmp_path, original, expected, boundary):
    path = tmp_path / "archon.db"
    shutil.copyfile(original, path)
    crashed = run_cli_crashing_at(boundary, "--db", str(path), "upgrade", "--force")
    assert crashed.returncode == -signal.SIGKILL, crashed.stderr
    kind, _, step = boundary.partition(":")
    done = ledger_names(path)
    if kind == "after-snapshot":
        assert done == []
        assert len(list(tmp_path.glob("archon.db.pre-upgrade-*.sqlite3"))) == 1
    elif kind == "mid":
        assert done == ALL_IDS[: ALL_IDS.index(step)]  # the interrupted step left nothing
    else:
        assert done == ALL_IDS[: ALL_IDS.index(step) + 1]
    rerun = run_cli("--db", str(path), "upgrade", "--force")
    assert rerun.returncode == 0, rerun.stderr
    assert ledger_names(path) == ALL_IDS
    assert normalized_dump(path) == expected
    again = run_cli("--db", str(path), "upgrade")
    assert again.returncode == 0 and "Up to date" in again.stdout


SLOW_STEP = """
import os, sys, time
from console.db.migrations import registry
import console.db.migrations.steps.s013_approval_tables as s013
original = s013.up
def slow(conn):
    time.sleep(0.3)  # widen the window in which the other upgrader waits for the lock
    original(conn)
object.__setattr__(next(m for m in registry.MIGRATIONS if m.id.startswith("013")), "up", slow)
from console.cli.cli import main
# A start barrier: both upgraders plan only once both are up, however loaded the machine is.
barrier = os.environ.get("UPGRADE_BARRIER")
if barrier:
    open(os.path.join(barrier, f"ready-{os.getpid()}"), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(barrier)) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
sys.exit(main(sys.argv[1:]))
"""


def test_two_concurrent_upgraders_apply_each_step_once(tmp_path, original, expected):
    """Each is the other's "other user of the file" (issue 18, finding 12): with --wait, the second
    usually waits for the first to let go and finds the work done; it may still be refused ("stop
    archon first", exit 3) when it meets the other's lock under its own, before its first write.
    Neither applies a step twice, and a rerun completes whatever a refusal left."""
    path = tmp_path / "archon.db"
    shutil.copyfile(original, path)
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "UPGRADE_BARRIER": str(barrier)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", SLOW_STEP, "--db", str(path), "--busy-timeout", "30", "--json", "upgrade",
             "--force", "--wait"],
            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        )
        for _ in range(2)
    ]
    outputs = [p.communicate(timeout=120) for p in procs]
    import json

    results = []
    for proc, (out, err) in zip(procs, outputs):
        if proc.returncode == 3:
            assert "stop archon first" in out + err, (out, err)
            continue
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    applied = [step for r in results for step in r["applied"]]
    assert len(applied) == len(set(applied))  # each step at most once, between the two of them
    if len(results) == 2:  # neither refused: the one that waited found the work done, or shared it
        assert sorted(applied) == ALL_IDS
    rerun = run_cli("--db", str(path), "upgrade", "--force")
    assert rerun.returncode == 0, rerun.stderr
    assert ledger_names(path) == ALL_IDS
    assert normalized_dump(path) == expected


KILLED_WRITER = """
import os, signal, sqlite3, sys
conn = sqlite3.connect(sys.argv[1], isolation_level=None)
conn.execute("PRAGMA cache_size = 5")  # spill: the main file is written before COMMIT
conn.execute("BEGIN IMMEDIATE")
conn.execute("UPDATE archon_misc_log SET note = note || '-changed'")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_hot_journal_plan_reads_a_copy_and_upgrade_rolls_it_back(tmp_path):
    from console.services.upgrade.plan import plan_upgrade
    from console.services.upgrade.run import run_upgrade
    from tests.upgrade_helpers import fingerprint_dir

    path = db_1820(tmp_path / "archon.db")
    conn = connect(path)
    with conn:
        conn.execute("BEGIN")
        conn.executemany("INSERT INTO archon_misc_log (note) VALUES (?)", [("x" * 200,)] * 3000)
    conn.close()
    subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], check=False)
    assert (tmp_path / "archon.db-journal").stat().st_size > 0
    before = fingerprint_dir(tmp_path)
    plan = plan_upgrade(path)  # read from a private copy, rolled back there
    assert plan.detected_release == "1.8.20"
    assert fingerprint_dir(tmp_path) == before
    result = run_upgrade(path, force=True)
    assert result.applied == ALL_IDS
    check = connect(path)
    assert check.execute("SELECT count(*) FROM archon_misc_log WHERE note LIKE '%-changed'").fetchone()[0] == 0
    check.close()
