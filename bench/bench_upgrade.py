"""Snapshot time against `cp` + fsync of the same file (target: at most 1.3x), and whole-upgrade
time, on a database with 1,000,000 approval requests.

Databases are generated once with `console.demo` and cached in out_dir (`upgrade-<release>-<N>.db`);
each timed run works on a fresh copy (the copy is not timed). `ARCHON_BENCH_REQUESTS` changes N.
The 1.8.20 shape has no approval tables at all, so the whole upgrade is timed twice: from a 1.8.20
demo database (every step, the sweep and the check-attempt rebuilds) and from a 1.8.22 one holding
the N requests (what a real upgrade of a busy archon costs).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

REQUESTS = int(os.environ.get("ARCHON_BENCH_REQUESTS", "1000000"))
NOW = "2026-05-01T12:00:00Z"
AT = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
ROUNDS = 3


def _cached(out_dir: Path, release: str, requests: int) -> Path:
    from console.demo import generate

    path = out_dir / f"upgrade-{release}-{requests}.db"
    if not path.exists():
        started = time.perf_counter()
        generate(path, release=release, requests=requests, now=NOW, seed=7)
        print(f"   generated {path.name} in {time.perf_counter() - started:.1f} s", flush=True)
    return path


def _drop(paths) -> None:
    for path in paths:
        for suffix in ("", "-wal", "-shm", "-journal"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)


def _cp_fsync(source: Path, target: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["cp", str(source), str(target)], check=True)
    fd = os.open(target, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - started


def _snapshot(source: Path, work: Path) -> tuple[float, dict[str, float]]:
    from console.db.snapshot import take_snapshot

    timings: dict[str, float] = {}
    started = time.perf_counter()
    snap = take_snapshot(source, work / "snap.sqlite3", timings=timings)
    seconds = time.perf_counter() - started
    _drop([snap.path])
    return seconds, timings


def _upgrade(cached: Path, work: Path) -> tuple[float, int, float]:
    from console.services.upgrade import run_upgrade

    db = work / "archon.db"
    _drop([db])
    shutil.copyfile(cached, db)
    started = time.perf_counter()
    result = run_upgrade(db, force=True, now=AT)
    seconds = time.perf_counter() - started
    snap_seconds = 0.0
    if result.snapshot_path:
        _drop([result.snapshot_path])
    _drop([db])
    return seconds, len(result.applied), snap_seconds


def main(out_dir: Path) -> None:
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / "upgrade-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    results: dict = {"requests": REQUESTS}
    try:
        current = _cached(out_dir, "current", REQUESTS)
        size = current.stat().st_size
        cp_times, snap_times, phases = [], [], []
        for _ in range(ROUNDS):
            cp_times.append(_cp_fsync(current, work / "cp.sqlite3"))
            _drop([work / "cp.sqlite3"])
            seconds, timings = _snapshot(current, work)
            snap_times.append(seconds)
            phases.append(timings)
        cp_best, snap_best = min(cp_times), min(snap_times)
        best_phases = phases[snap_times.index(snap_best)]
        ratio = snap_best / cp_best
        copy_best = min(p.get("backup", 0.0) + p.get("fsync", 0.0) for p in phases)
        print(f"   database: {size / 1e9:.2f} GB, {REQUESTS:,} approval requests (current shape, WAL)")
        print(f"   cp + fsync:                   {cp_best:6.2f} s (best of {ROUNDS})")
        print(f"   backup-API copy + fsync:      {copy_best:6.2f} s = {copy_best / cp_best:.2f}x cp+fsync (target <= 1.3x)")
        print(f"   verified snapshot, in total:  {snap_best:6.2f} s = {ratio:.2f}x cp+fsync "
              "(copy + integrity_check + row counts + SHA-256)")
        for name, value in best_phases.items():
            print(f"     {name:<34} {value:6.2f} s")
        results.update(bytes=size, cp_fsync_s=cp_best, snapshot_s=snap_best, ratio=ratio,
                       copy_s=copy_best, copy_ratio=copy_best / cp_best,
                       snapshot_phases=best_phases, cp_runs=cp_times, snapshot_runs=snap_times)

        for release, requests in (("1.8.20", REQUESTS), ("1.8.22", REQUESTS)):
            cached = _cached(out_dir, release, requests)
            seconds, steps, _ = _upgrade(cached, work)
            print(f"   whole upgrade {release} -> current ({cached.stat().st_size / 1e9:.2f} GB, "
                  f"{steps} steps, snapshot included): {seconds:6.2f} s")
            results[f"upgrade_from_{release}_s"] = seconds
            results[f"upgrade_from_{release}_bytes"] = cached.stat().st_size
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (out_dir / "bench_upgrade.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
