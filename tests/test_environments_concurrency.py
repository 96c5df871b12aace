"""Four real processes race to claim the same environments: each is claimed exactly once."""

from __future__ import annotations

import multiprocessing
import random
import sqlite3

import pytest

from console.errors import Refusal
from console.services.environment_claims import claim
from console.services.environment_rules import claim_holder
from tests.environments_support import T0, add_env, add_project, handle, raw

pytestmark = pytest.mark.slow

N_ENVS = 60
WORKERS = 4


def _worker(path, actor, seed, queue):
    ids = [f"env-{i:03d}" for i in range(N_ENVS)]
    random.Random(seed).shuffle(ids)
    won, refused, other = 0, 0, []
    with handle(path) as h:
        for env_id in ids:
            try:
                claim(h, env_id, "stop", actor, now=T0)
                won += 1
            except Refusal as exc:
                if "is claimed for stop by" in exc.reason:
                    refused += 1
                else:
                    other.append(exc.reason)
    queue.put((actor, won, refused, other))


def test_concurrent_claims_are_exclusive(tmp_path):
    from tests.conftest import make_schema

    path = make_schema(tmp_path / "race.db", "1.10.0", wal=True)
    conn = raw(path)
    add_project(conn)
    for i in range(N_ENVS):
        add_env(conn, f"env-{i:03d}", "ready")
    conn.close()
    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(path, f"actor{n}", n, queue)) for n in range(WORKERS)]
    for p in procs:
        p.start()
    results = [queue.get(timeout=60) for _ in procs]
    for p in procs:
        p.join(timeout=60)
        assert p.exitcode == 0
    assert all(not other for *_, other in results), results  # no "database is busy" reached anyone
    assert sum(won for _, won, _, _ in results) == N_ENVS
    assert all(won + refused == N_ENVS for _, won, refused, _ in results)
    check = sqlite3.connect(path)
    rows = check.execute(
        "SELECT e.id, e.operation_claim_id, count(v.id), min(v.sequence), max(v.sequence), min(v.actor_reference) "
        "FROM execution_environments e LEFT JOIN execution_environment_events v ON v.environment_id = e.id "
        "GROUP BY e.id"
    ).fetchall()
    check.close()
    for env_id, claim_id, n_events, lo, hi, actor in rows:
        assert claim_id is not None and n_events == 1 and lo == hi == 1
        assert claim_holder(claim_id) == actor
