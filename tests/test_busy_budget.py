"""`--busy-timeout` is the total time a command waits for the lock (issue 21, item 5).

A second process holds `BEGIN IMMEDIATE` on the file; every command that writes, run with
`--busy-timeout 2`, waits for it (at least about 2 s) and then gives up in plain words: never 4x
longer because it retried, or began one transaction per id, each with its own full busy timeout
(console/db/tx.py `LockBudget`). The elapsed bounds only bound a failure: nothing here sleeps.
`WRITES` and `NEVER_WAITS` together name every command of the parser, so a new command must say
which it is.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from console.cli.cli import main
from console.cli.reference import full_parser, subcommands, walk
from console.db.connect import open_database
from console.demo.writer import generate
from console.errors import Refusal
from console.services.approvals import decide

TIMEOUT = 2.0  # seconds asked with --busy-timeout
SLACK = 3.0  # the command's own work beside the wait (imports too), on a loaded machine (load 7-8 on 2 cores)
BUSY = "The database is busy."
IN_USE = "in use"  # upgrade and restore: refused while any process holds a lock on the file

# command -> (argv after the command, words of the refusal). `{name}` are filled from the database.
WRITES = {
    "approvals approve": (["{pending}", "{pending2}", "{pending3}"], BUSY),  # one wait in all, not one per id
    "approvals deny": (["{pending}", "--reason", "no"], BUSY),
    "approvals revoke": (["{approved}", "--reason", "leak"], BUSY),
    "approvals expire": ([], BUSY),
    "envs claim": (["{free_env}", "--op", "stop"], BUSY),
    "envs release": (["{claimed_env}", "--takeover", "--reason", "stuck"], BUSY),
    "envs complete": (["{claimed_env}"], BUSY),
    "profiles activate": (["{project}", "{revision}", "--reason", "back"], BUSY),
    "upgrade": (["--wait", "--force"], IN_USE),
    "restore": (["{snapshot}", "--yes"], IN_USE),
}
# Commands that never wait for the write lock: they only read (or write a new file of their own).
NEVER_WAITS = {
    "demo", "projects list", "profiles list", "profiles show", "profiles diff", "approvals list",
    "approvals show", "approvals watch", "envs list", "envs show", "doctor", "inspect", "audit", "help",
    "completion", "serve", "query",
}


def leaf_commands() -> set[str]:
    return {command.name for command in walk(full_parser()) if subcommands(command.parser) is None}


def test_every_command_says_whether_it_writes():
    leaves = leaf_commands()
    assert set(WRITES) | NEVER_WAITS == leaves, (
        "classify each new command: WRITES (with an argv that reaches its write) or NEVER_WAITS")
    assert not set(WRITES) & NEVER_WAITS


@pytest.fixture(scope="module")
def current(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("busy") / "archon.db"
    generate(path, seed=7)
    return path


@pytest.fixture(scope="module")
def older(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("busy-old") / "archon.db"
    generate(path, release="1.8.22", seed=7)
    return path


def names(db: Path) -> dict[str, str]:
    conn = sqlite3.connect(db)
    try:
        def one(sql: str, offset: int = 0) -> str:
            rows = conn.execute(sql).fetchall()
            return rows[offset][0]

        pending = ("SELECT id FROM approval_requests WHERE status = 'pending' "
                   "AND expires_at > datetime('now', '+10 minutes') ORDER BY expires_at DESC")
        project, active = conn.execute(
            "SELECT id, active_execution_profile_revision_id FROM projects "
            "WHERE active_execution_profile_revision_id IS NOT NULL ORDER BY id").fetchone()
        return {
            "pending": one(pending), "pending2": one(pending, 1), "pending3": one(pending, 2),
            "approved": one("SELECT id FROM approval_requests WHERE status = 'approved' AND consumed_at IS NULL "
                            "AND expires_at > datetime('now', '+10 minutes') ORDER BY id"),
            "free_env": one("SELECT id FROM execution_environments WHERE operation_claim_id IS NULL "
                            "AND lifecycle_state IN ('ready', 'running') ORDER BY id"),
            "claimed_env": one("SELECT id FROM execution_environments WHERE operation_claim_id IS NOT NULL ORDER BY id"),
            "project": project,
            "revision": one(f"SELECT id FROM execution_profile_revisions WHERE project_id = '{project}' "
                            f"AND id != '{active}' ORDER BY id"),
        }
    finally:
        conn.close()


class LockHolder:
    """Another process holding `BEGIN IMMEDIATE` on `db` until `release`."""

    SCRIPT = ("import sqlite3, sys\n"
              "conn = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
              "conn.execute('BEGIN IMMEDIATE')\n"
              "print('held', flush=True)\n"
              "sys.stdin.read()\n")

    def __init__(self, db: Path) -> None:
        self.process = subprocess.Popen([sys.executable, "-c", self.SCRIPT, str(db)], stdin=subprocess.PIPE,
                                        stdout=subprocess.PIPE, text=True)
        assert self.process.stdout.readline() == "held\n"  # waits for the lock to be held, however long

    def release(self) -> None:
        self.process.stdin.close()
        self.process.wait(60)

    def __enter__(self) -> "LockHolder":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def assert_waited_once(elapsed: float) -> None:
    assert elapsed >= TIMEOUT - 0.25, f"gave up after {elapsed:.2f} s without waiting the {TIMEOUT} s asked"
    assert elapsed < TIMEOUT + SLACK, f"waited {elapsed:.2f} s for --busy-timeout {TIMEOUT:g}"


@pytest.mark.slow
@pytest.mark.parametrize("command", sorted(WRITES))
def test_every_write_waits_the_busy_timeout_in_all(command, current, older, make_db, capsys):
    argv_tail, refusal = WRITES[command]
    db = make_db(template=older if command in ("upgrade", "restore") else current)
    values = names(current)
    if command == "restore":  # a snapshot of this database, taken by an upgrade
        assert main(["--db", str(db), "upgrade", "--force"]) == 0
        values["snapshot"] = str(next(db.parent.glob("archon.db.pre-upgrade-*.sqlite3")))
    capsys.readouterr()
    argv = ["--db", str(db), "--as", "dana", "--busy-timeout", f"{TIMEOUT:g}", *command.split(),
            *(word.format(**values) for word in argv_tail)]
    before = db.read_bytes()
    with LockHolder(db):
        started = time.monotonic()
        code = main(argv)
        elapsed = time.monotonic() - started
    out, err = capsys.readouterr()
    assert code != 0 and refusal in out + err, (code, out, err)
    assert "Traceback" not in out + err
    assert_waited_once(elapsed)
    assert db.read_bytes() == before


@pytest.mark.slow
def test_a_console_decision_waits_the_busy_timeout_once(current, make_db):
    """The console's own decisions call the service without the command line's budget: the retry
    of approval decisions still waits the busy timeout once, not once per attempt."""
    db = make_db(template=current)
    values = names(current)
    handle = open_database(db, busy_timeout_ms=int(TIMEOUT * 1000))
    try:
        with LockHolder(db):
            started = time.monotonic()
            with pytest.raises(Refusal, match=BUSY):
                decide(handle, values["pending"], "approve", actor="dana")
            elapsed = time.monotonic() - started
        assert_waited_once(elapsed)
        # The connection keeps its own busy timeout for what the console does next.
        assert handle.conn.execute("PRAGMA busy_timeout").fetchone()[0] == int(TIMEOUT * 1000)
    finally:
        handle.close()


@pytest.mark.slow
def test_each_request_of_a_server_session_waits_its_own_budget(current, make_db):
    """`serve` is one command for hours: each request it runs is a command of its own, with its own
    --busy-timeout, not what the session's earlier requests left of one."""
    from console.cli.cli import make_context
    from console.cli.server_methods import run
    from console.db.tx import lock_budget

    db = make_db(template=current)
    values = names(current)

    def context(args):
        args.db, args.busy_timeout, args.json = str(db), TIMEOUT, True
        return make_context(args)

    with lock_budget(TIMEOUT), LockHolder(db):  # the session's own, as `serve` runs under the CLI's
        for request in ("pending", "pending2"):
            started = time.monotonic()
            outcome = run(["approvals", "approve", values[request], "--as", "dana"], context)
            elapsed = time.monotonic() - started
            assert outcome.exit == 1 and BUSY in json.dumps(outcome.output), outcome.output
            assert_waited_once(elapsed)
