"""The plain-Python baselines: `python -I bench/baseline.py COMMAND PATH ...`, the standard library's
sqlite3 and nothing else, run by the same clean interpreter the console is installed in.

Each runs the SQL the console's command needs and prints the rows, without the console's start-up,
checks or formatting: what the command would cost as a bare script.

- `show PATH ID`: the request's row, its project's name, its event count and newest 50 events
  (`approvals show ID`);
- `envs PATH`: the first 100 environments by id with their active lease counts, and their
  projects' names (`envs list`);
- `approve PATH ID ACTOR`: archon's decision in one BEGIN IMMEDIATE transaction: the locked read,
  the UPDATE and the event INSERT (`approvals approve ID`);
- `schema PATH`: `user_version` and every schema object's SQL (`upgrade --plan` with nothing pending);
- `quick_check PATH`: a `mode=ro` `PRAGMA quick_check` (`doctor`).

The decision's SQL lives here, its one home: bench/harness.py (the raw loop, the live holder)
imports it.
"""

import sqlite3
import sys
import time
from urllib.parse import quote

DECIDE_SQL = ("UPDATE approval_requests SET status = 'approved', updated_at = ?, decision_at = ? "
              "WHERE id = ? AND status = 'pending'")
NEXT_SEQUENCE_SQL = ("SELECT COALESCE(MAX(sequence), 0) + 1 FROM approval_request_events "
                     "WHERE project_id = ? AND approval_request_id = ?")
EVENT_SQL = ("INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
             "from_status, to_status, actor_classification, actor_reference, reason, metadata_schema_version, "
             "metadata_json, created_at) VALUES (lower(hex(randomblob(16))), ?, ?, ?, 'approved', 'pending', "
             "'approved', 'human', ?, NULL, 1, NULL, ?)")
ACTIVE_LEASES = ("(SELECT count(*) FROM execution_environment_run_bindings b WHERE b.environment_id = e.id "
                 "AND b.relationship = 'execution' AND b.released_at IS NULL)")


def read_only(path: str) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{quote(path)}?mode=ro", uri=True)


def show(path: str, request_id: str) -> int:
    conn = read_only(path)
    row = conn.execute("SELECT project_id, * FROM approval_requests WHERE id = ?", (request_id,)).fetchone()
    if row is None:
        return 1
    project = row[0]
    name = conn.execute("SELECT name, deletion_started_at FROM projects WHERE id = ?", (project,)).fetchone()
    where = "WHERE project_id = ? AND approval_request_id = ?"
    total = conn.execute(f"SELECT count(*) FROM approval_request_events {where}", (project, request_id)).fetchone()
    events = conn.execute(f"SELECT * FROM approval_request_events {where} ORDER BY sequence DESC LIMIT 50",
                          (project, request_id)).fetchall()
    print(row, name, total)
    for event in reversed(events):
        print(event)
    conn.close()
    return 0


def envs(path: str) -> int:
    conn = read_only(path)
    rows = conn.execute(f"SELECT e.*, e.project_id, {ACTIVE_LEASES} AS active_lease_count "
                        "FROM execution_environments e ORDER BY e.id LIMIT 101").fetchall()
    names = dict(conn.execute("SELECT id, name FROM projects"))
    for row in rows[:100]:
        print(row, names.get(row[-2]))
    conn.close()
    return 0


def approve(path: str, request_id: str, actor: str) -> int:
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    conn = sqlite3.connect(path, isolation_level=None, timeout=5)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("BEGIN IMMEDIATE")
    row = conn.execute("SELECT project_id, status FROM approval_requests WHERE id = ?", (request_id,)).fetchone()
    if row is None or row[1] != "pending":
        conn.execute("ROLLBACK")
        return 1
    conn.execute(DECIDE_SQL, (now, now, request_id))
    sequence = conn.execute(NEXT_SEQUENCE_SQL, (row[0], request_id)).fetchone()[0]
    conn.execute(EVENT_SQL, (row[0], request_id, sequence, actor, now))
    conn.execute("COMMIT")
    conn.close()
    print("approved", request_id)
    return 0


def schema(path: str) -> int:
    conn = read_only(path)
    version = conn.execute("PRAGMA user_version").fetchone()[0]
    objects = conn.execute("SELECT type, name, tbl_name, sql FROM sqlite_master").fetchall()
    conn.close()
    print(version, len(objects))
    return 0


def quick_check(path: str) -> int:
    conn = read_only(path)
    rows = conn.execute("PRAGMA quick_check").fetchall()
    conn.close()
    return 0 if rows == [("ok",)] else 1


if __name__ == "__main__":
    command, *args = sys.argv[1:]
    raise SystemExit({"show": show, "envs": envs, "approve": approve, "schema": schema,
                      "quick_check": quick_check}[command](*args))
