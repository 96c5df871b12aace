"""The TUI's start-up check "is anything pending?" (`approval_queue.any_pending`) on the
1,000,000-request database: the per-project seek against the plain `status = 'pending' LIMIT 1`
it replaced (issue 11 item 2; target <= 1 ms warm and cold).

Paired and alternated (old, new, new, old, ...), each run on a fresh read-only connection whose
schema is read before the timing starts; median and spread reported. Warm: the file is in the page
cache. Cold: the page cache is dropped before every run (`/proc/sys/vm/drop_caches`), which needs
root; without it the cold figures are skipped and say so. Uses the database bench_approvals
caches in out_dir (`ARCHON_BENCH_REQUESTS` changes its size).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from bench.bench_approvals import LIST_REQUESTS, NOW

PAIRS = {"warm": 15, "cold": 7}
OLD_SQL = "SELECT 1 FROM approval_requests WHERE status = 'pending' LIMIT 1"


def _drop_caches() -> bool:
    try:
        subprocess.run(["sync"], check=True)
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def _once(path: Path, sql: str, cold: bool) -> float:
    import sqlite3

    if cold:
        _drop_caches()
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
        started = time.perf_counter()
        conn.execute(sql).fetchone()
        return time.perf_counter() - started
    finally:
        conn.close()


def measure(path: Path, cold: bool) -> dict[str, dict[str, float]]:
    from console.services.approval_queue import ANY_PENDING_SQL

    runs: dict[str, list[float]] = {"old": [], "new": []}
    for i in range(PAIRS["cold" if cold else "warm"]):
        order = (("old", OLD_SQL), ("new", ANY_PENDING_SQL))
        for name, sql in order if i % 2 == 0 else reversed(order):
            runs[name].append(_once(path, sql, cold) * 1000)
    return {name: {"median_ms": round(statistics.median(v), 3), "min_ms": round(min(v), 3),
                   "max_ms": round(max(v), 3), "pairs": len(v)} for name, v in runs.items()}


def main(out_dir: Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"approvals-{LIST_REQUESTS}.db"
    if not path.exists():
        from console.demo import generate

        print(f"   building {path.name} (once; cached in {out_dir})", flush=True)
        generate(path, requests=LIST_REQUESTS, now=NOW, overwrite=True)
    results: dict[str, object] = {"requests": LIST_REQUESTS}
    can_drop = os.access("/proc/sys/vm/drop_caches", os.W_OK)
    for mode in ("warm", "cold"):
        if mode == "cold" and not can_drop:
            print("   cold: skipped (dropping the page cache needs root)", flush=True)
            continue
        numbers = measure(path, cold=mode == "cold")
        results[mode] = numbers
        old, new = numbers["old"], numbers["new"]
        print(f"   pending check at start, {mode}, {LIST_REQUESTS:,} requests: per-project seek "
              f"{new['median_ms']:.3f} ms ({new['min_ms']:.3f}-{new['max_ms']:.3f}; target <= 1 ms), "
              f"plain LIMIT 1 {old['median_ms']:.3f} ms ({old['min_ms']:.3f}-{old['max_ms']:.3f}) "
              f"over {new['pairs']} pairs", flush=True)
    (out_dir / "bench_pending.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
