"""`upgrade` refuses while another process has the database open, as `restore` does (issue 18, finding 12).

On main the CLI upgrade went ahead while a second process held the file and never said to stop
archon: a running archon keeps executing its own release's code against the changed schema. Other
users are found by their locks (console/db/exclusive_lock.py `holders`), never by path names; the
console's own connections never count. `--plan` still works and says the run would be refused;
`--wait` waits (bounded by --busy-timeout) for the holder to let go.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from console.errors import EXIT_OK, EXIT_UNUSABLE
from tests.adversarial.holder import Holder  # the same archon stand-in
from tests.upgrade_helpers import REPO, db_1820, dump, fingerprint_dir, ledger_names, run_cli

pytestmark = pytest.mark.slow


CASES = [(False, "read-transaction"), (True, "idle"), (True, "read-transaction")]
IDS = ["rollback-journal-reader", "wal-idle", "wal-reader"]


def _upgrade(path: Path, *extra: str, timeout: str = "0.2"):
    return run_cli("--db", str(path), "--busy-timeout", timeout, "upgrade", "--force", *extra)


@pytest.mark.parametrize("wal, how", CASES, ids=IDS)
def test_refused_while_another_process_holds_the_file_then_proceeds(tmp_path, wal, how):
    path = db_1820(tmp_path / "archon.db", wal=wal)
    holder = Holder(path, how)
    try:
        before, before_dump = fingerprint_dir(tmp_path), dump(path)
        proc = _upgrade(path)
        assert proc.returncode == EXIT_UNUSABLE, proc.stderr
        assert "stop archon first" in proc.stderr
        assert f"pid {holder.proc.pid}" in proc.stderr  # names what holds it
        assert "Traceback" not in proc.stderr
        assert fingerprint_dir(tmp_path) == before  # no snapshot, no ledger, nothing
        assert dump(path) == before_dump

        plan = run_cli("--db", str(path), "upgrade", "--plan")  # read-only: still works
        assert plan.returncode == EXIT_OK, plan.stderr
        assert "would be refused: stop archon first" in plan.stdout
        assert f"pid {holder.proc.pid}" in plan.stdout
        as_json = run_cli("--db", str(path), "--json", "upgrade", "--plan")
        assert json.loads(as_json.stdout)["in_use_by"][0].startswith(f"pid {holder.proc.pid}")
        assert dump(path) == before_dump
    finally:
        holder.stop()
    proc = _upgrade(path)  # the holder has gone
    assert proc.returncode == EXIT_OK, proc.stderr
    assert ledger_names(path)


WAITING_UPGRADE = [sys.executable, "-m", "console"]


def test_wait_proceeds_once_the_holder_lets_go(tmp_path):
    path = db_1820(tmp_path / "archon.db", wal=True)
    holder = Holder(path, "idle")
    upgrade = subprocess.Popen(
        [*WAITING_UPGRADE, "--db", str(path), "--busy-timeout", "120", "upgrade", "--force", "--wait"],
        cwd=REPO, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    try:
        # The condition: the upgrade says it is waiting for the holder, by pid.
        line = upgrade.stderr.readline()
        assert line.startswith("Waiting:") and f"pid {holder.proc.pid}" in line, line
        assert upgrade.poll() is None
        holder.stop()
        out, err = upgrade.communicate(timeout=120)
    finally:
        holder.stop()
        if upgrade.poll() is None:
            upgrade.kill()
            upgrade.wait()
    assert upgrade.returncode == EXIT_OK, err
    assert "Applied" in out
    assert ledger_names(path)


def test_wait_is_bounded_by_the_busy_timeout(tmp_path):
    path = db_1820(tmp_path / "archon.db", wal=True)
    holder = Holder(path, "idle")
    try:
        before = dump(path)
        proc = _upgrade(path, "--wait", timeout="0.3")
        assert proc.returncode == EXIT_UNUSABLE, proc.stderr
        assert "after waiting 0.3 s" in proc.stderr and "stop archon first" in proc.stderr
        assert dump(path) == before
    finally:
        holder.stop()


def test_the_consoles_own_connection_does_not_count(tmp_path):
    """In-process: a connection this process holds (as the TUI does) is not another user."""
    from console.db.connect import connect_raw
    from console.services.upgrade.run import run_upgrade

    path = db_1820(tmp_path / "archon.db", wal=True)
    own = connect_raw(path)
    try:
        own.execute("SELECT count(*) FROM projects").fetchone()
        result = run_upgrade(path, force=True)
        assert result.status == "upgraded"
    finally:
        own.close()


@pytest.mark.parametrize("wal, how", CASES, ids=IDS)
def test_a_holder_that_appears_mid_run_stops_it_at_the_next_step(tmp_path, wal, how):
    """Archon started between two steps (atk18 upgrade finding 2): the check ran only once, before
    the snapshot, and the run then applied all its steps beside the live archon. Every step asks
    again under its own lock, before its first write; the run stops there, and the steps it already
    committed stay applied and recorded."""
    from console.errors import DatabaseUnusable
    from console.services.upgrade.run import run_upgrade

    path = db_1820(tmp_path / "archon.db", wal=wal)
    holders: list[Holder] = []

    def progress(event) -> None:
        if event.kind == "migration" and not holders:  # step 1 committed: archon starts now
            holders.append(Holder(path, how))

    try:
        with pytest.raises(DatabaseUnusable) as refused:
            run_upgrade(path, force=True, snapshot_dir=tmp_path, progress=progress)
        assert len(holders) == 1
        applied = ledger_names(path)
        assert len(applied) == 1, applied  # step 1 only: nothing after the holder appeared
        text = f"{refused.value.reason} {refused.value.hint}"
        assert "stop archon first" in text
        assert f"pid {holders[0].proc.pid}" in text
        assert "Earlier steps stay applied" in text and applied[0].split("-")[0] in text
        assert "run the upgrade again once archon is stopped" in text
        assert "Nothing was written" not in text
        assert "restore" in refused.value.hint and "--db" in refused.value.hint  # this run's snapshot
    finally:
        for holder in holders:
            holder.stop()
    result = run_upgrade(path, force=True, snapshot_dir=tmp_path)  # archon stopped: it continues
    assert result.status == "upgraded" and ledger_names(path)[0] == applied[0]


@pytest.mark.parametrize("wal, how", CASES, ids=IDS)
def test_a_holder_that_appears_during_the_last_step_is_reported(tmp_path, wal, how):
    """Every step asks for holders before its first write, so one that appears while the last step
    runs was found by none and the run said "upgraded" with archon beside it (upgrade2 finding 7).
    After the last step commits the run asks once more: nothing is left to stop, so the result
    (text and JSON) carries a warning naming the holder."""
    from console.services.upgrade.run import run_upgrade

    path = db_1820(tmp_path / "archon.db", wal=wal)
    holders: list[Holder] = []

    def progress(event) -> None:
        if event.kind == "migration" and event.done == event.total and not holders:  # the last step
            holders.append(Holder(path, how))

    try:
        result = run_upgrade(path, force=True, snapshot_dir=tmp_path, progress=progress)
        assert len(holders) == 1
        assert result.status == "upgraded"
        assert len(result.warnings) == 1, result.warnings
        assert "another process opened the file during the upgrade" in result.message
        assert f"pid {holders[0].proc.pid}" in result.message
        assert result.to_json()["warnings"] == result.warnings
    finally:
        for holder in holders:
            holder.stop()
    assert run_upgrade(path, force=True, snapshot_dir=tmp_path).warnings == []  # nothing left to do


def test_an_upgrade_nobody_disturbs_has_no_warning(tmp_path):
    from console.services.upgrade.run import run_upgrade

    result = run_upgrade(db_1820(tmp_path / "archon.db"), force=True, snapshot_dir=tmp_path)
    assert result.status == "upgraded" and result.warnings == []
