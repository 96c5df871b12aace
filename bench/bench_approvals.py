"""Approvals: decisions per second through the service layer against the bare SQL, and the wall
time of `approvals list --json --status pending --limit 50` on a 1,000,000-request database.

Targets (issue 3): the service at least 0.7x the raw loop in WAL mode; the listing under 0.25 s
and at most 2x `python -c "import sqlite_utils"` measured beside it.

The raw loop does per decision exactly the writes the service does (UPDATE with `decision_at`,
next sequence, INSERT of the event), each in its own `BEGIN IMMEDIATE`, on the same kind of
connection. The service adds its re-reads and rule checks; the ratio is what those cost.
Both run on fresh copies of one WAL database, alternately, best round kept. Measured twice: with
SQLite's default `synchronous = FULL` (an fsync per commit, as archon runs) and with `NORMAL`
(CPU-bound, the harder comparison). The million-request database is built once with
`console.demo.generate` and cached in out_dir. `ARCHON_BENCH_REQUESTS` changes its size.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

DECISIONS = int(os.environ.get("ARCHON_BENCH_DECISIONS", "1500"))
ROUNDS = 5
LIST_REQUESTS = int(os.environ.get("ARCHON_BENCH_REQUESTS", "1000000"))
NOW = datetime(2026, 5, 1, 12, 0, tzinfo=timezone.utc)


def _stamp(at: datetime) -> str:
    return at.strftime("%Y-%m-%d %H:%M:%S")


def build_decision_db(path: Path, count: int) -> list[str]:
    """An archon 1.10.0 database in WAL mode with `count` pending requests in one project."""
    from console.db.migrations.registry import migrations_through
    from console.db.migrations.runner import apply_all

    if path.exists():
        path.unlink()
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    apply_all(conn, migrations_through("1.10.0"))
    ids = [f"apr-{i:06d}" for i in range(count)]
    created = _stamp(NOW - timedelta(minutes=5))
    conn.execute("BEGIN")
    conn.execute("INSERT INTO projects (id, name, repo_path) VALUES ('p1', 'Bench', '/srv/bench')")
    conn.executemany("INSERT INTO execution_runs (id, project_id) VALUES (?, 'p1')", [(f"run-{i}",) for i in ids])
    conn.executemany(
        "INSERT INTO approval_requests (id, project_id, execution_run_id, action_kind, action_schema_version, "
        "action_json, action_fingerprint, authority_schema_version, authority_json, expires_at, created_at, updated_at) "
        "VALUES (?, 'p1', ?, 'git_push', 1, '{\"branch\": \"main\"}', ?, 1, '{\"requested_by\": \"alice\"}', ?, ?, ?)",
        [(i, f"run-{i}", "0" * 64, _stamp(NOW + timedelta(hours=2)), created, created) for i in ids],
    )
    conn.executemany(
        "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, from_status, "
        "to_status, actor_classification, actor_reference, created_at) "
        "VALUES (?, 'p1', ?, 1, 'requested', NULL, 'pending', 'system', 'archon', ?)",
        [(str(uuid.uuid4()), i, created) for i in ids],
    )
    conn.execute("COMMIT")
    conn.close()
    return ids


def raw_loop(conn: sqlite3.Connection, ids: list[str]) -> None:
    stamp = _stamp(NOW)
    for request_id in ids:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE approval_requests SET status = ?, updated_at = ?, decision_at = ? WHERE id = ? AND status = ?",
            ("approved", stamp, stamp, request_id, "pending"),
        )
        sequence = conn.execute(
            "SELECT COALESCE(MAX(sequence), 0) + 1 FROM approval_request_events "
            "WHERE project_id = ? AND approval_request_id = ?",
            ("p1", request_id),
        ).fetchone()[0]
        conn.execute(
            "INSERT INTO approval_request_events (id, project_id, approval_request_id, sequence, event_type, "
            "from_status, to_status, actor_classification, actor_reference, reason, metadata_schema_version, "
            "metadata_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (str(uuid.uuid4()), "p1", request_id, sequence, "approved", "pending", "approved", "human", "bench",
             None, None, stamp),
        )
        conn.execute("COMMIT")


def service_loop(handle, ids: list[str]) -> None:
    from console.services.approvals import approve

    for request_id in ids:
        approve(handle, request_id, actor="bench", now=NOW)


def decisions_per_second(out_dir: Path, synchronous: str) -> dict[str, float]:
    from console.db.connect import open_database

    template = out_dir / "approvals-decisions-template.db"
    ids = build_decision_db(template, DECISIONS)
    best = {"raw": 0.0, "service": 0.0}
    for _ in range(ROUNDS):
        for kind in ("raw", "service"):
            path = out_dir / f"approvals-decisions-{kind}.db"
            shutil.copy(template, path)
            with open_database(path) as handle:
                handle.conn.execute(f"PRAGMA synchronous = {synchronous}")
                started = time.perf_counter()
                if kind == "raw":
                    raw_loop(handle.conn, ids)
                else:
                    service_loop(handle, ids)
                seconds = time.perf_counter() - started
                done = handle.conn.execute(
                    "SELECT count(*) FROM approval_requests WHERE status = 'approved'"
                ).fetchone()[0]
            assert done == len(ids), f"{kind}: {done} of {len(ids)} approved"
            best[kind] = max(best[kind], len(ids) / seconds)
            path.unlink()
            for suffix in ("-wal", "-shm"):
                Path(str(path) + suffix).unlink(missing_ok=True)
    template.unlink()
    return {"raw_per_s": round(best["raw"]), "service_per_s": round(best["service"]),
            "ratio": round(best["service"] / best["raw"], 3)}


def _best_wall(argv: list[str], env: dict[str, str], runs: int = 5) -> float:
    subprocess.run(argv, env=env, capture_output=True, check=True)  # warm caches and bytecode
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        subprocess.run(argv, env=env, capture_output=True, check=True)
        times.append(time.perf_counter() - started)
    return min(times)


def list_wall_time(out_dir: Path) -> dict[str, float]:
    path = out_dir / f"approvals-{LIST_REQUESTS}.db"
    if not path.exists():
        from console.demo import generate

        print(f"   building {path.name} (once; cached in {out_dir})", flush=True)
        generate(path, requests=LIST_REQUESTS, now=NOW, overwrite=True)
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
    env["ARCHON_CONSOLE_NOW"] = "2026-05-01 12:00:00"
    cli = [sys.executable, "-m", "console", "approvals", "list", "--json", "--status", "pending",
           "--limit", "50", "--db", str(path)]
    baseline = [sys.executable, "-c", "import sqlite_utils"]
    listed = json.loads(subprocess.run(cli, env=env, capture_output=True, check=True, text=True).stdout)
    assert len(listed) == 50 and all(r["status"] == "pending" for r in listed)
    cli_s = _best_wall(cli, env)
    base_s = _best_wall(baseline, env)
    return {"list_s": round(cli_s, 4), "import_sqlite_utils_s": round(base_s, 4), "list_vs_import": round(cli_s / base_s, 2)}


def main(out_dir: Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    results: dict[str, object] = {"decisions": DECISIONS}
    for synchronous in ("FULL", "NORMAL"):
        numbers = decisions_per_second(out_dir, synchronous)
        results[f"wal_synchronous_{synchronous.lower()}"] = numbers
        print(f"   decisions, WAL, synchronous={synchronous}: service {numbers['service_per_s']:,}/s, "
              f"raw SQL {numbers['raw_per_s']:,}/s -> {numbers['ratio']:.2f}x (target >= 0.70x)", flush=True)
    listing = list_wall_time(out_dir)
    results["list"] = listing
    print(f"   approvals list --json --status pending --limit 50 on {LIST_REQUESTS:,} requests: "
          f"{listing['list_s'] * 1000:.0f} ms (target < 250 ms); import sqlite_utils {listing['import_sqlite_utils_s'] * 1000:.0f} ms "
          f"-> {listing['list_vs_import']:.2f}x (target <= 2x)", flush=True)
    (out_dir / "bench_approvals.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
