"""`doctor` quick mode on a 1,000,000-request database, beside the bare `PRAGMA quick_check`.

Target: doctor <= 1.5x quick_check on the same file. The database comes from `console.demo`
(cached in out_dir, about 1.8 GB; the first run takes a minute to write it). Each timing is the
median of three runs, alternated so that page-cache warmth is shared fairly.
"""

from __future__ import annotations

import sqlite3
import statistics
import time
from pathlib import Path

from console.clock import system_clock
from console.db.readonly import ro_uri
from console.services.doctor import run_doctor

REQUESTS = 1_000_000
RUNS = 3


def _database(out_dir: Path) -> Path:
    path = out_dir / f"doctor-{REQUESTS}.db"
    if not path.exists():
        from console.demo import generate

        started = time.perf_counter()
        generate(path, requests=REQUESTS)
        print(f"   wrote {path} in {time.perf_counter() - started:.0f} s", flush=True)
    return path


def _quick_check(path: Path) -> float:
    # immutable=1: the demo file has no -wal, and a plain mode=ro open would create -wal/-shm.
    conn = sqlite3.connect(ro_uri(path, immutable="1"), uri=True)
    started = time.perf_counter()
    result = conn.execute("PRAGMA quick_check").fetchall()
    elapsed = time.perf_counter() - started
    conn.close()
    assert result == [("ok",)], result
    return elapsed


def _doctor(path: Path) -> tuple[float, dict]:
    started = time.perf_counter()
    report = run_doctor(path, now=system_clock())
    return time.perf_counter() - started, report.counts()


def main(out_dir: Path) -> None:
    path = _database(Path(out_dir))
    size = path.stat().st_size
    _quick_check(path)  # warm the page cache
    bare, doc = [], []
    counts = {}
    for _ in range(RUNS):
        bare.append(_quick_check(path))
        elapsed, counts = _doctor(path)
        doc.append(elapsed)
    q, d = statistics.median(bare), statistics.median(doc)
    print(f"   database: {REQUESTS:,} requests, {size / 1e9:.2f} GB")
    print(f"   PRAGMA quick_check: {q:.2f} s (median of {RUNS})")
    print(f"   doctor quick mode:  {d:.2f} s (median of {RUNS}; findings {counts})")
    print(f"   ratio: {d / q:.2f}x (target <= 1.50x) {'OK' if d / q <= 1.5 else 'OVER TARGET'}")


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
