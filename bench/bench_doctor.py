"""`doctor` quick mode on a 1,000,000-request database, beside the bare `PRAGMA quick_check`.

Target: doctor <= 1.5x quick_check on the same file. The database comes from `console.demo`
(cached in out_dir, about 1.8 GB; the first run takes a minute to write it). Each timing is the
median of three runs, alternated so that page-cache warmth is shared fairly.

Doctor runs its scans on worker threads, so its wall time depends on free cores: the CPU time of
both (all threads, `time.process_time`) and the machine's load are printed beside the wall times.
"""

from __future__ import annotations

import os
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


def _quick_check(path: Path) -> tuple[float, float]:
    # immutable=1: the demo file has no -wal, and a plain mode=ro open would create -wal/-shm.
    conn = sqlite3.connect(ro_uri(path, immutable="1"), uri=True)
    started, cpu = time.perf_counter(), time.process_time()
    result = conn.execute("PRAGMA quick_check").fetchall()
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    conn.close()
    assert result == [("ok",)], result
    return elapsed, cpu


def _doctor(path: Path) -> tuple[float, float, dict]:
    started, cpu = time.perf_counter(), time.process_time()
    report = run_doctor(path, now=system_clock())
    return time.perf_counter() - started, time.process_time() - cpu, report.counts()


def main(out_dir: Path) -> None:
    path = _database(Path(out_dir))
    size = path.stat().st_size
    _quick_check(path)  # warm the page cache
    bare, doc, bare_cpu, doc_cpu = [], [], [], []
    counts = {}
    load = os.getloadavg()[0]
    for _ in range(RUNS):
        elapsed, cpu = _quick_check(path)
        bare.append(elapsed)
        bare_cpu.append(cpu)
        elapsed, cpu, counts = _doctor(path)
        doc.append(elapsed)
        doc_cpu.append(cpu)
    q, d = statistics.median(bare), statistics.median(doc)
    qc, dc = statistics.median(bare_cpu), statistics.median(doc_cpu)
    print(f"   database: {REQUESTS:,} requests, {size / 1e9:.2f} GB; load average {load:.2f} -> "
          f"{os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"   PRAGMA quick_check: {q:.2f} s wall, {qc:.2f} s CPU (median of {RUNS})")
    print(f"   doctor quick mode:  {d:.2f} s wall, {dc:.2f} s CPU (median of {RUNS}; findings {counts})")
    print(f"   ratio: {d / q:.2f}x (target <= 1.50x) {'OK' if d / q <= 1.5 else 'OVER TARGET'}")


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
