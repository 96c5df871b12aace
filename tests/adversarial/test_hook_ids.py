"""A hostile request id can never stop `approvals watch --exec` from running hooks (issue 17, finding 10).

A NUL in an id made `Popen` raise `ValueError: embedded null byte` for `$ARCHON_REQUEST_ID`; the worker
caught only `OSError`, died, and every later hook was silently never run while the stream went on.
Now each job's failure stays that job's (console/cli/hooks.py), and an id an environment cannot carry as
the text it is reaches its hook only on stdin.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from datetime import timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.cli.hooks import ENV_ID_MAX, HookPolicy, HookRunner, env_safe, hook_environment
from tests.approvals_helpers import NOW, add_request, connect, seed
from tests.watch_helpers import WAIT, new_request
from widgets.safe_text import is_clean


@pytest.fixture
def db(make_db):
    """The approval tests' rows in a WAL file, as tests/test_watch.py streams them."""
    return make_db(fill=seed, wal=True, cached=True)

HOSTILE_IDS = [
    "apr-\x00nul",
    "apr-\x00",
    "apr-\x1b]2;HIJACKED\x07",
    "apr-line\nbreak",
    "apr-\x9b31m-c1",
    "apr-\u202eevil",
]
HOOK = """
import json, os, sys
request = json.loads(sys.stdin.read())
with open(sys.argv[1], "a") as log:
    log.write(json.dumps([os.environ.get("ARCHON_REQUEST_ID"), request["id"]]) + "\\n")
"""


@pytest.mark.slow
def test_hostile_ids_never_stop_the_hooks_and_reach_them_on_stdin(db, tmp_path, watches):
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    log = tmp_path / "hook.log"
    # one worker: a job that killed it would leave every later request without its hook
    w = watches(db, "--exec", f"{sys.executable} {script} {log}", "--exec-jobs", "1", "--exec-retries", "0")
    w.ready()
    ids = [*HOSTILE_IDS, "apr-after-1", "apr-after-2"]
    conn = connect(db)
    conn.execute("BEGIN IMMEDIATE")
    for rid in ids:
        add_request(conn, rid, "p1", expires_at=NOW + timedelta(hours=2), created_at=NOW)
    conn.execute("COMMIT")
    conn.close()
    deadline = time.monotonic() + WAIT
    runs: list[list] = []
    while len(runs) < len(ids):
        assert time.monotonic() < deadline and w.proc.poll() is None, (runs, w.notes())
        time.sleep(0.05)
        runs = [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []
    by_id = {stdin_id: env_id for env_id, stdin_id in runs}
    assert sorted(by_id) == sorted(ids)
    assert {rid: by_id[rid] for rid in HOSTILE_IDS} == dict.fromkeys(HOSTILE_IDS)  # unset, not garbled
    assert by_id["apr-after-1"] == "apr-after-1" and by_id["apr-after-2"] == "apr-after-2"
    assert not [n for n in w.notes() if "hook" in n]  # none failed
    # a later hook still runs
    new_request(db, "apr-later")
    deadline = time.monotonic() + WAIT
    while "apr-later" not in log.read_text():
        assert time.monotonic() < deadline and w.proc.poll() is None, w.notes()
        time.sleep(0.05)


def test_a_job_that_raises_is_one_failure_and_the_worker_goes_on():
    """Whatever one run raises (here `Popen` itself: a command with a NUL) is that job's failure, in
    one sentence, and the same single worker runs every later job."""
    reports: list[str] = []
    done = threading.Event()

    def report(text: str) -> None:
        reports.append(text)
        if sum("gave up" in r for r in reports) == 3:
            done.set()

    runner = HookRunner(HookPolicy("true\x00", jobs=1, retries=0), report)
    try:
        for n in range(3):
            runner.submit(f"apr-{n}", {"id": f"apr-{n}"})
        assert done.wait(WAIT), reports
    finally:
        runner.stop(grace=0)
    assert runner.gave_up == 3 and runner.started == 3
    assert all(r.startswith("hook for apr-") and "could not run it: ValueError" in r and "\n" not in r
               for r in reports), reports


def test_hook_failures_print_through_the_sanitiser(db, tmp_path, watches):
    """The failure sentence names the id: on stderr (text mode) it passes the one sanitiser."""
    w = watches(db, "--exec", "exit 3", "--exec-retries", "0", json_lines=False)
    w.ready()
    new_request(db, "apr-\x1b]2;HIJACKED\x07\x00")
    deadline = time.monotonic() + WAIT
    while not any("gave up" in e for e in w.errors):
        assert time.monotonic() < deadline and w.proc.poll() is None, w.errors
        time.sleep(0.05)
    assert all(is_clean(e) for e in w.errors), w.errors


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.text(min_size=0, max_size=400))
def test_every_id_either_goes_into_the_environment_as_itself_or_not_at_all(request_id):
    env = hook_environment(request_id)
    if env_safe(request_id):
        assert env["ARCHON_REQUEST_ID"] == request_id
        env["ARCHON_REQUEST_ID"].encode("utf-8")  # an environment can hold it
        assert "\x00" not in request_id and request_id.isprintable()
    else:
        assert "ARCHON_REQUEST_ID" not in env


def test_an_inherited_request_id_never_stands_in(monkeypatch):
    monkeypatch.setenv("ARCHON_REQUEST_ID", "apr-from-the-parent")
    assert "ARCHON_REQUEST_ID" not in hook_environment("apr-\x00")



def test_a_report_that_cannot_be_written_does_not_end_the_worker_either():
    calls: list[str] = []
    done = threading.Event()

    def report(text: str) -> None:
        calls.append(text)
        if len(calls) == 3:
            done.set()
        raise BrokenPipeError("stderr is gone")

    runner = HookRunner(HookPolicy("exit 1", jobs=1, retries=0), report)
    try:
        for n in range(3):
            runner.submit(f"apr-{n}", {"id": f"apr-{n}"})
        assert done.wait(WAIT), calls
    finally:
        runner.stop(grace=0)
    assert runner.gave_up == 3


def test_a_hook_reads_strict_json_whatever_the_row_holds():
    """A stored expires_at of 9e999 reached the hook as the bare token `Infinity`, which JSON.parse
    refuses (second attack round): the hook's stdin is strict JSON."""
    import math

    from console.cli.hooks import hook_input

    line = hook_input({"id": "apr-1", "expires_at": math.inf, "n": [math.nan, -math.inf], "b": b"\xff"})
    bare: list[str] = []
    parsed = json.loads(line, parse_constant=bare.append)
    assert not bare, f"bare {bare} in the hook's input"
    assert parsed["expires_at"] == "Infinity" and parsed["n"] == ["NaN", "-Infinity"]
