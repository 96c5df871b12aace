"""Second attack round on `restore` (issue 18, findings 1 and 11): a database reached through another
hard link, requests archon withdrew coming back decidable, and a "To undo" line split by the directory's
name. Each test failed on the code before its fix. Real files, real CLI processes.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from console.errors import EXIT_OK, EXIT_UNUSABLE
from tests.restore_helpers import LATER, _armed, _as_archon, _event, _restore
from tests.upgrade_helpers import connect, db_1822, run_cli

pytestmark = pytest.mark.slow


def _tables(path: Path) -> list[str]:
    conn = connect(path)
    try:
        return sorted(r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'"))
    finally:
        conn.close()


def test_a_database_with_another_hard_link_is_refused(tmp_path):
    """Archon opens the file by another name: replacing this name only would leave archon on the old
    file. Refused (exit 3) before anything is written, in --plan too, unless --other-links."""
    path, snapshot = _armed(tmp_path)
    (tmp_path / "archon-home").mkdir()
    archons = tmp_path / "archon-home" / "archon.db"
    os.link(path, archons)
    upgraded = _tables(path)
    for extra in (("--yes",), ("--plan",)):
        refused = _restore(path, snapshot, *extra)
        assert refused.returncode == EXIT_UNUSABLE, refused.stdout + refused.stderr
        said = " ".join((refused.stdout + refused.stderr).split())
        assert "other hard link" in said and "--other-links" in said
        assert os.stat(path).st_ino == os.stat(archons).st_ino and _tables(path) == upgraded
    assert not [p for p in tmp_path.iterdir() if ".replaced-" in p.name]
    done = _restore(path, snapshot, "--yes", "--other-links")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert _tables(archons) == upgraded and _tables(path) != upgraded  # what the operator accepted


def test_the_undo_line_is_one_runnable_line_whatever_the_directory_is_called(tmp_path):
    directory = tmp_path / "evil\ndir 'x'"
    directory.mkdir()
    path = db_1822(directory / "archon.db")
    done = run_cli("--db", str(path), "upgrade", "--force")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    lines = [line for line in (done.stdout + done.stderr).splitlines() if line.startswith("To undo: ")]
    assert len(lines) == 1
    command = lines[0].removeprefix("To undo: ")
    assert "\n" not in command and command.isprintable()
    words = subprocess.run(["bash", "-c", f'eval "set -- $1"; printf "%s\\0" "$@"', "_", command],
                           capture_output=True, check=True).stdout.split(b"\0")[:-1]
    assert words[:3] == [b"archon-console", b"--db", os.fsencode(os.path.realpath(path))]
    assert words[3] == b"restore" and Path(os.fsdecode(words[4])).parent == Path(os.path.realpath(directory))


def test_requests_archon_withdrew_since_come_back_only_with_the_flag(tmp_path):
    """Pending in the snapshot, invalidated (or approved then invalidated) since: the restore makes
    them decidable, then executable, again: refused as re-armed, naming them. An environment archon
    stopped since comes back in its earlier state: named in the report and the refusal."""
    path, snapshot = _armed(tmp_path)

    def withdraw(conn):
        conn.execute("UPDATE approval_requests SET status = 'invalidated', updated_at = ? WHERE id = 'apr-1'", (LATER,))
        _event(conn, "apr-1", "pending", "invalidated", "system")
        conn.execute("UPDATE approval_requests SET status = 'approved', decision_at = ?, updated_at = ? "
                     "WHERE id = 'apr-2'", (LATER, LATER))
        _event(conn, "apr-2", "pending", "approved", "human")
        conn.execute("UPDATE approval_requests SET status = 'invalidated', updated_at = ? WHERE id = 'apr-2'", (LATER,))
        _event(conn, "apr-2", "approved", "invalidated", "system")
        conn.execute("UPDATE execution_environments SET lifecycle_state = 'stopped', stopped_at = ? "
                     "WHERE id = 'proj-1-env'", (LATER,))

    _as_archon(path, withdraw)
    planned = _restore(path, snapshot, "--plan", "--json")
    assert planned.returncode == EXIT_UNUSABLE, planned.stdout + planned.stderr
    answer = json.loads(planned.stdout)
    assert answer["loss"]["rearmed"] == {"count": 2, "first": ["apr-1", "apr-2"]}
    assert answer["loss"]["revived"] == {"count": 1, "first": ["proj-1-env"]}
    assert "apr-1, apr-2" in answer["refused"] and "proj-1-env" in answer["refused"]
    refused = _restore(path, snapshot, "--yes")
    assert refused.returncode == EXIT_UNUSABLE and "--rearm-consumed" in refused.stderr
    done = _restore(path, snapshot, "--yes", "--rearm-consumed")
    assert done.returncode == EXIT_OK, done.stdout + done.stderr
    assert "proj-1-env" in done.stdout


def test_other_hard_links_are_refused_before_the_operator_is_asked(tmp_path):
    """The refusal comes before the typed confirmation, not after the operator typed the name
    (attack round 3, finding 7)."""
    from console.errors import DatabaseUnusable
    from console.services.upgrade.restore import restore_snapshot

    path, snapshot = _armed(tmp_path)
    os.link(path, tmp_path / "second-name.db")
    asked = []
    try:
        restore_snapshot(path, snapshot, rearm_consumed=True, confirm=lambda name, loss: asked.append(name) or True)
    except DatabaseUnusable as exc:
        assert "--other-links" in " ".join(filter(None, (exc.reason, exc.hint)))
    else:
        raise AssertionError("a database with another hard link was restored")
    assert asked == []
