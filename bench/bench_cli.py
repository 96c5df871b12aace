"""Items 1 and 5: read-only commands on a live WAL database, and CLI start-up.

Five commands alternated round by round, as separate processes, on the idle file and on the live
one (a second process holding it open with a hot -wal, bench/holder.py):

- `archon-console approvals list --json` (the first 50 pending requests) on the live file against
  the same command on the idle file, alternated in the same rounds: item 1, a read-only command
  reads the live file in place instead of copying it (a 1.75 GB copy would show as several
  times); for reference also against the same rows selected by the `sqlite3` shell
  (`-readonly -json`) with SQL that is an index seek too (per project through
  idx_approval_requests_project_status_expiry, merged);
- the same listing against `python -I -c 'import sqlite3'`: item 5, start-up within 2x;
- one `archon-console approvals approve ID` against `python -I -c 'import sqlite3'` (item 5) and, for
  reference, against the `sqlite3` shell doing the same UPDATE and event INSERT in one
  BEGIN IMMEDIATE transaction.

Issue 22's list lead, in the same rounds: the listing against the `sqlite3` shell and against
`sqlite-utils query` (installed with the console, a dependency) running the plain SQL a user would
write for the same 50 rows (PLAIN_SQL): the console must stay ahead (<= 1x) on the large file.

The console is the installed one (bench/install.py: a wheel in a fresh venv, bytecode compiled at
install) and `python -I` is that venv's interpreter: no editable-install hook, no user site.
"""

from __future__ import annotations

from pathlib import Path

from bench import harness as h

LIMIT = 50
# The same 50 rows as a user of the shell or of sqlite-utils would ask for them (issue 22's "list lead").
PLAIN_SQL = f"SELECT * FROM approval_requests WHERE status = 'pending' ORDER BY expires_at, id LIMIT {LIMIT}"


def same_sql(projects: list[str]) -> str:
    parts = [f"SELECT * FROM (SELECT * FROM approval_requests WHERE project_id = '{p}' AND status = 'pending' "
             f"ORDER BY expires_at, id LIMIT {LIMIT})" for p in projects]
    return f"SELECT * FROM ({' UNION ALL '.join(parts)}) ORDER BY expires_at, id LIMIT {LIMIT};"


def shell_update(request_id: str, now: str) -> str:
    return (
        ".timeout 5000\nPRAGMA foreign_keys = ON;\nBEGIN IMMEDIATE;\n"
        f"UPDATE approval_requests SET status = 'approved', updated_at = '{now}', decision_at = '{now}' "
        f"WHERE id = '{request_id}' AND status = 'pending';\n"
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, from_status, "
        "to_status, actor_classification, actor_reference, reason, metadata_schema_version, metadata_json, created_at) "
        "SELECT lower(hex(randomblob(16))), r.project_id, r.id, (SELECT COALESCE(MAX(sequence), 0) + 1 FROM "
        "approval_request_events e WHERE e.project_id = r.project_id AND e.approval_request_id = r.id), 'approved', "
        f"'pending', 'approved', 'human', 'bench-shell', NULL, 1, NULL, '{now}' FROM approval_requests r "
        f"WHERE r.id = '{request_id}';\nCOMMIT;\n"
    )


def main() -> None:
    d = h.data()
    rounds = h.pairs()
    env = h.child_env(d.now)
    select = same_sql(d.projects)
    utils = Path(h.python()).with_name("sqlite-utils")
    for state, path, info in h.states(d):
        ids, expired = h.approvable_ids(path, 2 * (rounds + 1), d.now)

        def run(argv: list[str], path=path, state=state) -> float:
            seconds = h.timed_run(argv, env, ok=(0, 1) if expired else (0,))
            if state == "idle":  # a `mode=ro` shell leaves an empty -wal and -shm: the file stays idle
                h.remove_sidecars(path)
            return seconds

        runs = {
            "list": lambda: run(h.cli() + ["approvals", "list", "--json", "--limit", str(LIMIT), "--db", str(path)]),
            "shell_select": lambda: run(["sqlite3", "-readonly", "-json", str(path), select]),
            "shell_plain": lambda: run(["sqlite3", "-readonly", "-json", str(path), PLAIN_SQL]),
            "import_sqlite3": lambda: run([h.python(), "-I", "-c", "import sqlite3"]),
            "approve": lambda: run(h.cli() + ["approvals", "approve", next(ids), "--as", "bench-cli",
                                              "--db", str(path)]),
            "shell_update": lambda: run(["sqlite3", str(path), shell_update(next(ids), d.now)]),
        }
        if utils.exists():  # the console's own dependency, so in its environment
            runs["sqlite_utils"] = lambda: run([str(utils), "query", str(path), PLAIN_SQL])
        if state == "live":  # the same listing on the idle file, in the same rounds: item 1's pair
            runs["list_idle"] = lambda: run(h.cli() + ["approvals", "list", "--json", "--limit", str(LIMIT),
                                                       "--db", str(d.idle)], state="idle", path=d.idle)
        got = h.alternate(runs, rounds)
        extra = {"holder": info} if info else {}
        if expired:
            extra["note"] = ("the database's pending requests have all expired by the real clock: each "
                             "`approvals approve` wrote the expiry and refused (exit 1), one UPDATE and event as well")
        if state == "live":
            h.record("read-list-live-vs-idle", "1", "`approvals list --json` on the live file vs the idle one",
                     state="live", console="approvals list, live", values=got["list"],
                     baseline="approvals list, idle", base_values=got["list_idle"],
                     target="<= 1.2x (read in place: no whole-file copy)", check=lambda r: r <= 1.2, extra=extra)
        h.record(f"read-list-{state}", "1", "`approvals list --json` (50 pending) vs the C shell", state=state,
                 console="approvals list", values=got["list"], baseline="sqlite3 shell, same rows by seek",
                 base_values=got["shell_select"], target="reference (Python's start alone is several times the shell)",
                 extra=extra)
        h.record(f"list-vs-shell-{state}", "22", "`approvals list --json` vs the `sqlite3` shell's plain query",
                 state=state, console="approvals list", values=got["list"],
                 baseline="sqlite3 -readonly -json, same 50 rows, plain SQL", base_values=got["shell_plain"],
                 target="the lead holds: <= 1x at 1M (Python's start dominates small files)",
                 check=lambda r: r <= 1.0, extra=extra)
        if "sqlite_utils" in got:
            h.record(f"list-vs-sqlite-utils-{state}", "22", "`approvals list --json` vs `sqlite-utils query`",
                     state=state, console="approvals list", values=got["list"],
                     baseline="sqlite-utils query, same 50 rows, plain SQL", base_values=got["sqlite_utils"],
                     target="the lead holds: <= 1x", check=lambda r: r <= 1.0, extra=extra)
        else:
            h.not_measured(f"list-vs-sqlite-utils-{state}", "22", "`approvals list --json` vs `sqlite-utils query`",
                           state=state, why=f"no {utils}", target="the lead holds: <= 1x")
        h.record(f"start-list-{state}", "5", "CLI start-up: `approvals list`", state=state, console="approvals list",
                 values=got["list"], baseline="python -I -c 'import sqlite3' (clean)",
                 base_values=got["import_sqlite3"],
                 target="<= 2x", check=lambda r: r <= 2.0, extra=extra)
        h.record(f"start-approve-{state}", "5", "CLI start-up: one `approvals approve`", state=state,
                 console="approvals approve", values=got["approve"], baseline="python -I -c 'import sqlite3' (clean)",
                 base_values=got["import_sqlite3"], target="<= 2x", check=lambda r: r <= 2.0, extra=extra)
        h.record(f"approve-vs-shell-{state}", "5", "one `approvals approve` vs the `sqlite3` shell's UPDATE + event",
                 state=state, console="approvals approve", values=got["approve"],
                 baseline="sqlite3 shell, same writes", base_values=got["shell_update"],
                 target="reference only", extra=extra)
