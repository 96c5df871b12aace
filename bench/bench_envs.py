"""Operation claims through the service layer against the same raw SQL, and `envs list` on 100k rows.

Run with `.venv/bin/python -m bench envs`. Numbers only; nothing here asserts.
"""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from pathlib import Path

from console.clock import db_time
from console.db.connect import open_database
from console.services import environments as envs
from tests.conftest import make_schema
from tests.test_environments_support import FP, T0

N_CLAIMS = 2000
N_LIST = 100_000


def _seed(path: Path, n: int, claimed_every: int = 0) -> None:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("INSERT INTO projects (id, name, repo_path) VALUES ('p1', 'P1', '/r')")
    conn.execute("BEGIN")
    conn.executemany(
        "INSERT INTO execution_environments (id, project_id, provider_kind, provider_version, target_kind, target_key, "
        "target_workspace_path, environment_revision, workspace_mode, environment_validation_fingerprint, "
        "template_identity, lifecycle_state, operation_claim_id, operation_kind, operation_claimed_at) "
        "VALUES (?, 'p1', 'host', '1', 'repo_root', ?, ?, 1, 'direct', ?, 'tpl', 'ready', ?, ?, ?)",
        (
            (f"env-{i:06d}", f"k{i}", f"/ws/{i}", FP,
             *((f"archon-worker:{i}", "stop", "2026-11-01 08:00:00") if claimed_every and i % claimed_every == 0
               else (None, None, None)))
            for i in range(n)
        ),
    )
    conn.execute("COMMIT")
    conn.close()


def _raw_claims(path: Path, ids: list[str]) -> float:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("PRAGMA busy_timeout = 5000")
    now = db_time(T0)
    started = time.perf_counter()
    for env_id in ids:
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "UPDATE execution_environments SET operation_claim_id = ?, operation_kind = 'stop', operation_claimed_at = ? "
            "WHERE id = ? AND operation_claim_id IS NULL AND lifecycle_state IN ('ready', 'running')",
            (f"console:raw@h:{uuid.uuid4().hex[:12]}", now, env_id),
        )
        seq = conn.execute("SELECT COALESCE(MAX(sequence), 0) + 1 FROM execution_environment_events "
                           "WHERE environment_id = ?", (env_id,)).fetchone()[0]
        conn.execute(
            "INSERT INTO execution_environment_events (id, project_id, environment_id, sequence, event_type, "
            "from_state, to_state, actor_classification, actor_reference, metadata_json, created_at) "
            "VALUES (?, 'p1', ?, ?, 'operation_claimed', 'ready', 'ready', 'human', 'raw', '{}', ?)",
            (str(uuid.uuid4()), env_id, seq, now),
        )
        conn.execute("COMMIT")
    elapsed = time.perf_counter() - started
    conn.close()
    return elapsed


def _service_claims(path: Path, ids: list[str]) -> float:
    with open_database(path) as handle:
        started = time.perf_counter()
        for env_id in ids:
            envs.claim(handle, env_id, "stop", "bench", now=T0)
        return time.perf_counter() - started


def main(out_dir: Path) -> None:
    work = Path(out_dir) / "envs"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)

    base = make_schema(work / "claims.db", "1.10.0", wal=True)
    _seed(base, N_CLAIMS)
    shutil.copy(base, work / "claims-raw.db")
    ids = [f"env-{i:06d}" for i in range(N_CLAIMS)]
    raw_s = _raw_claims(work / "claims-raw.db", ids)
    svc_s = _service_claims(base, ids)
    print(f"   claims, WAL: raw SQL {N_CLAIMS / raw_s:,.0f}/s, service {N_CLAIMS / svc_s:,.0f}/s "
          f"(ratio {raw_s / svc_s:.2f}x of raw)")

    big = make_schema(work / "list.db", "1.10.0", wal=True)
    _seed(big, N_LIST, claimed_every=97)
    with open_database(big) as handle:
        for label, kwargs in (("first page", {}), ("claimed", {"claimed": True}), ("stale", {"stale": True}),
                              ("state+project", {"state": "ready", "project": "p1"})):
            started = time.perf_counter()
            envs.list_environments(handle, now=T0, limit=50, **kwargs)
            print(f"   list_environments {label} (50 of {N_LIST:,}): {(time.perf_counter() - started) * 1000:.1f} ms")
    cmd = [sys.executable, "-m", "console", "--db", str(big), "envs", "list", "--json", "--stale", "--limit", "50"]
    started = time.perf_counter()
    subprocess.run(cmd, check=True, capture_output=True)
    cli_s = time.perf_counter() - started
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", "import sqlite_utils"], check=True)
    base_s = time.perf_counter() - started
    print(f"   `envs list --json --stale --limit 50` on {N_LIST:,}: {cli_s:.3f} s "
          f"(python -c 'import sqlite_utils': {base_s:.3f} s, ratio {cli_s / base_s:.2f})")
