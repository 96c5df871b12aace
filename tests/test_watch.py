"""`archon-console approvals watch` as a real process, while this process commits like archon does."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.approvals_helpers import archon_move, connect, dump, seed
from tests.watch_helpers import WAIT, new_request
from widgets.safe_text import is_clean


@pytest.fixture
def db(make_db):
    return make_db(fill=seed, wal=True, cached=True)


@pytest.mark.slow
def test_decisions_and_new_requests_from_another_process_stream_in_order(db, watches):
    w = watches(db)
    w.ready()
    conn = connect(db)
    archon_move(conn, "apr-1", "approved", actor="bob")
    archon_move(conn, "apr-2", "denied", actor="carol", reason="not today")
    conn.close()
    new_request(db, "apr-new")
    got = w.changes(3)
    assert [(c["change"], c["request_id"]) for c in got] == [("approved", "apr-1"), ("denied", "apr-2"),
                                                             ("new", "apr-new")]
    assert got[0]["actor"] == "bob" and got[0]["from_status"] == "pending" and got[0]["project_name"] == "Payments"
    assert got[1]["reason"] == "not today" and got[2]["kind"] == "git_push" and got[2]["expires_at"]
    assert all(c["event_id"] for c in got)
    settled = dump(db)
    assert w.quiet() == []  # nothing else changed: nothing else is printed
    assert dump(db) == settled  # and the watcher wrote nothing


@pytest.mark.slow
def test_filters_pick_project_kind_and_status(db, watches):
    w = watches(db, "--project", "Web", "--status", "pending,approved")
    w.ready()
    new_request(db, "apr-p1")  # another project
    conn = connect(db)
    archon_move(conn, "apr-4", "denied", actor="carol")  # Web, but a status not asked for
    conn.close()
    new_request(db, "apr-p2", "p2", kind="custom_check", action={"command": ["make"]})
    got = w.changes(1)
    assert [(c["change"], c["request_id"]) for c in got] == [("new", "apr-p2")]
    assert w.quiet() == []


@pytest.mark.slow
def test_cursor_delivers_every_change_exactly_once_across_restarts(db, tmp_path, watches):
    cursor = tmp_path / "watch.cursor"
    first = watches(db, "--cursor", str(cursor))
    first.ready()
    new_request(db, "apr-a")
    new_request(db, "apr-b")
    seen = [c["request_id"] for c in first.changes(2)]
    assert first.stop() == 0  # SIGTERM: a clean stop
    new_request(db, "apr-c")  # while nobody watches
    new_request(db, "apr-d")
    second = watches(db, "--cursor", str(cursor))
    seen += [c["request_id"] for c in second.changes(2)]
    new_request(db, "apr-e")
    seen += [c["request_id"] for c in second.changes(1)]
    assert second.quiet() == []
    assert second.stop(signal.SIGINT) == 0
    assert seen == ["apr-a", "apr-b", "apr-c", "apr-d", "apr-e"]
    saved = json.loads(cursor.read_text())
    assert saved["event_id"] and saved["rowid"] > 0
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".archon-console-cursor")]


@pytest.mark.slow
def test_a_cursor_that_cannot_be_saved_warns_once_and_the_stream_goes_on(db, tmp_path, watches):
    """Issue 17: the first failed save used to end the watch for good. Now it is said once, every
    change is still streamed, and the newest position is saved as soon as it can be."""
    folder = tmp_path / "cursors"
    folder.mkdir()
    cursor = folder / "watch.cursor"
    w = watches(db, "--cursor", str(cursor))
    w.ready()
    shutil.rmtree(folder)  # the directory goes away under the running watch
    for rid in ("apr-x1", "apr-x2", "apr-x3"):
        new_request(db, rid)
    assert [c["request_id"] for c in w.changes(3)] == ["apr-x1", "apr-x2", "apr-x3"]
    assert w.proc.poll() is None
    deadline = time.monotonic() + WAIT  # notes come on stderr, read apart from the changes on stdout
    while not any("cannot save the cursor" in n for n in w.notes()):
        assert time.monotonic() < deadline and w.proc.poll() is None, w.errors
        time.sleep(0.05)
    warnings = [n for n in w.notes() if "cannot save the cursor" in n]
    assert len(warnings) == 1 and "still watching" in warnings[0]
    folder.mkdir()  # back: the next poll saves the newest position
    deadline = time.monotonic() + WAIT
    while not any("is saved again" in n for n in w.notes()):
        assert time.monotonic() < deadline and w.proc.poll() is None, w.errors
        time.sleep(0.05)
    assert w.stop() == 0
    again = watches(db, "--cursor", str(cursor))  # continues after apr-x3: nothing repeated
    new_request(db, "apr-x4")
    assert [c["request_id"] for c in again.changes(1)] == ["apr-x4"]


def test_a_bad_cursor_file_is_one_sentence_and_exit_2(db, tmp_path):
    cursor = tmp_path / "c"
    cursor.write_text("{not json")
    proc = subprocess.run([sys.executable, "-m", "console", "approvals", "watch", "--db", str(db), "--cursor",
                           str(cursor)], capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 2 and "not a cursor" in proc.stderr and "Traceback" not in proc.stderr


@pytest.mark.slow
def test_reminders_once_per_request_entering_the_window(db, watches):
    w = watches(db, "--expiring-within", "45")
    got = w.changes(3)
    # apr-7 is overdue, apr-1 expires in 12 minutes and apr-4 in 40: all inside 45 minutes.
    assert sorted(c["request_id"] for c in got) == ["apr-1", "apr-4", "apr-7"]
    assert {c["change"] for c in got} == {"expiring"}
    assert w.quiet(0.8) == []  # reminded once, not on every poll


@pytest.mark.slow
def test_survives_replacement_and_a_missing_file(db, tmp_path, watches):
    w = watches(db, "--cursor", str(tmp_path / "cur"))
    w.ready()
    new_request(db, "apr-1st")
    assert w.changes(1)[0]["request_id"] == "apr-1st"
    # restore-like replacement: a copy with one more request is renamed over the file
    copy = tmp_path / "restored.db"
    src, dst = sqlite3.connect(db), sqlite3.connect(copy)
    src.backup(dst)
    src.close()
    dst.close()
    new_request(copy, "apr-after-restore")
    os.replace(copy, db)
    for suffix in ("-wal", "-shm"):
        Path(f"{db}{suffix}").unlink(missing_ok=True)
    got = w.changes(1)
    assert got[0]["request_id"] == "apr-after-restore"
    # the file disappears for a while, then comes back
    aside = tmp_path / "aside.db"
    shutil.move(db, aside)
    deadline = time.monotonic() + WAIT  # gone until the watcher has seen it gone, however loaded the machine
    while not any("not usable right now" in n for n in w.notes()):
        assert time.monotonic() < deadline and w.proc.poll() is None, w.errors
        time.sleep(0.05)
    new_request(aside, "apr-while-gone")
    shutil.move(aside, db)
    assert w.changes(1)[0]["request_id"] == "apr-while-gone"
    assert w.quiet(0.2) == []  # the notes (file gone, back) are on stderr, never among the changes
    notes_all = " ".join(w.errors)
    assert w.proc.poll() is None
    assert "Traceback" not in notes_all


def test_text_lines_are_humanised_and_safe(db, watches):
    conn = connect(db)
    conn.execute("UPDATE projects SET name = ? WHERE id = 'p2'", ("\x1b]0;owned\x07[bold]Web[/]\u202e",))
    conn.close()
    w = watches(db, json_lines=False)
    w.ready()
    new_request(db, "apr-text", "p2")
    line = w.lines.get(timeout=WAIT)
    assert "new" in line and "apr-text" in line and "expires in 2 hours" in line
    assert re.match(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d  new ", line), line  # as the README shows it
    assert is_clean(line) and "[bold]Web[/]" in line


HOOK = """
import json, os, sys, time, pathlib
data = json.load(sys.stdin)
log = pathlib.Path(sys.argv[1])
rid = os.environ["ARCHON_REQUEST_ID"]
assert data["id"] == rid
attempt = len([l for l in log.read_text().splitlines() if l.startswith(rid + " ")]) if log.exists() else 0
with log.open("a") as f:
    f.write(f"{rid} {attempt}\\n")
if rid == "apr-flaky" and attempt == 0:
    print("temporary failure", file=sys.stderr)
    sys.exit(3)
if rid == "apr-hang":
    time.sleep(60)
"""


@pytest.mark.slow
def test_hooks_fail_hang_and_succeed_without_blocking_the_stream(db, tmp_path, watches):
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    log = tmp_path / "hook.log"
    cmd = f"{sys.executable} {script} {log}"
    w = watches(db, "--exec", cmd, "--exec-timeout", "1", "--exec-retries", "1", "--exec-jobs", "2")
    w.ready()
    for rid in ("apr-hang", "apr-flaky", "apr-ok"):
        new_request(db, rid)
    # the stream is not held up by the hanging hook
    assert [c["request_id"] for c in w.changes(3)] == ["apr-hang", "apr-flaky", "apr-ok"]
    deadline = time.monotonic() + WAIT
    while time.monotonic() < deadline:
        runs = log.read_text().splitlines() if log.exists() else []
        assert w.quiet(0.1) == []  # the hooks' failures are notes, on stderr
        if runs.count("apr-ok 0") == 1 and "apr-flaky 1" in runs and \
                any("apr-hang" in n and "gave up" in n for n in w.errors):
            break
    runs = log.read_text().splitlines()
    assert runs.count("apr-ok 0") == 1 and "apr-flaky 1" in runs and "apr-ok 1" not in runs
    text = " ".join(w.errors)
    assert "hook for apr-flaky failed (exit 3: temporary failure); retry 1 of 1" in text
    assert "hook for apr-hang failed (timed out after 1 s)" in text and "gave up after 2 attempts" in text


def test_a_database_without_approvals_is_refused(schema_db):
    path = schema_db("1.8.20")
    proc = subprocess.run([sys.executable, "-m", "console", "approvals", "watch", "--db", str(path)],
                          capture_output=True, text=True, timeout=WAIT)
    assert proc.returncode == 1 and "no approval tables" in proc.stderr
