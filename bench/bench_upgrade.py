"""Snapshot time against `cp` + fsync of the same file (target: at most 1.3x), and whole-upgrade
time, on a database with 1,000,000 approval requests.

Databases are generated once with `console.demo` and cached in out_dir (`upgrade-<release>-<N>.db`);
each timed run works on a fresh copy (the copy is not timed). `ARCHON_BENCH_REQUESTS` changes N.

The snapshot is reported in its two phases: the copy (backup API into a temporary file) and the
verification (fsync, integrity check split over connections, row counts, SHA-256, all at once),
beside the same snapshot verified the plain way (one whole-file integrity_check), and beside
what bounds it: the plain integrity_check, its largest per-table piece, quick_check and SHA-256
timed alone on the finished copy. The machine is shared, so every round also says how much CPU
other processes took while it ran.

The 1.8.20 shape has no approval tables at all, so the whole upgrade is timed twice: from a 1.8.20
demo database (every step, the sweep and the check-attempt rebuilds) and from a 1.8.22 one holding
the N requests (what a real upgrade of a busy archon costs).
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import statistics
import subprocess
import time
from datetime import datetime, timezone
from pathlib import Path

REQUESTS = int(os.environ.get("ARCHON_BENCH_REQUESTS", "1000000"))
NOW = "2026-05-01T12:00:00Z"
AT = datetime(2026, 5, 1, 12, 0, 0, tzinfo=timezone.utc)
ROUNDS = 3
TARGET = 1.3
VERIFY = "verify (fsync, check, counts, hash at once)"
COPY = "copy (backup API)"


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


class _Load:
    """CPU seconds that *other* processes used while a block ran (machine busy time minus ours)."""

    def __enter__(self) -> "_Load":
        self._busy, self._ours, self._at = self._machine_busy(), self._own(), time.perf_counter()
        return self

    def __exit__(self, *exc) -> None:
        wall = time.perf_counter() - self._at
        others = (self._machine_busy() - self._busy) - (self._own() - self._ours)
        self.others_cpus = max(0.0, others) / wall if wall else 0.0

    @staticmethod
    def _own() -> float:
        t = os.times()
        return t.user + t.system + t.children_user + t.children_system

    @staticmethod
    def _machine_busy() -> float:
        with open("/proc/stat") as handle:
            fields = [int(v) for v in handle.readline().split()[1:]]
        idle = fields[3] + (fields[4] if len(fields) > 4 else 0)  # idle + iowait
        return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def _loadavg() -> str:
    try:
        return "/".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


def _cp_fsync(source: Path, target: Path) -> float:
    started = time.perf_counter()
    subprocess.run(["cp", str(source), str(target)], check=True)
    fd = os.open(target, os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)
    return time.perf_counter() - started


def _snapshot(source: Path, work: Path, check_workers: int | None, keep: bool = False):
    from console.db.snapshot import take_snapshot

    timings: dict[str, float] = {}
    started = time.perf_counter()
    snap = take_snapshot(source, work / "snap.sqlite3", timings=timings, check_workers=check_workers)
    seconds = time.perf_counter() - started
    if not keep:
        _drop([snap.path])
    return seconds, timings, snap.path


def _alone(copy: Path) -> dict[str, float]:
    """The pieces of the verification, each alone on one connection: what bounds the phase."""
    from console.db.snapshot import check_pieces, sha256_file, table_counts

    def timed(sql: str) -> float:
        conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True, isolation_level=None)
        try:
            started = time.perf_counter()
            rows = conn.execute(sql).fetchall()
            assert rows == [("ok",)], rows
            return time.perf_counter() - started
        finally:
            conn.close()

    conn = sqlite3.connect(f"file:{copy}?mode=ro", uri=True, isolation_level=None)
    pieces = check_pieces(conn, table_counts(conn))
    conn.close()
    out = {"PRAGMA integrity_check (whole file, one connection)": timed("PRAGMA integrity_check")}
    piece_times = {piece: timed(piece) for piece in pieces}
    out["sum of the split pieces (the CPU work of the split check)"] = sum(piece_times.values())
    for piece, seconds in sorted(piece_times.items(), key=lambda kv: -kv[1])[:4]:
        out[piece] = seconds
    started = time.perf_counter()
    sha256_file(copy)
    out["SHA-256 of the copy"] = time.perf_counter() - started
    return out


def _upgrade(cached: Path, work: Path) -> tuple[float, int]:
    from console.services.upgrade import run_upgrade

    db = work / "archon.db"
    _drop([db])
    shutil.copyfile(cached, db)
    started = time.perf_counter()
    result = run_upgrade(db, force=True, now=AT)
    seconds = time.perf_counter() - started
    if result.snapshot_path:
        _drop([result.snapshot_path])
    _drop([db])
    return seconds, len(result.applied)


def main(out_dir: Path) -> None:
    from console.db.snapshot import MAX_CHECK_WORKERS, usable_cpus

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    work = out_dir / "upgrade-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    cpus = usable_cpus()
    workers = min(MAX_CHECK_WORKERS, cpus)
    results: dict = {"requests": REQUESTS, "cpus": cpus, "check_workers": workers, "rounds": []}
    try:
        current = _cached(out_dir, "current", REQUESTS)
        size = current.stat().st_size
        print(f"   database: {size / 1e9:.2f} GB, {REQUESTS:,} approval requests (current shape, WAL)")
        print(f"   machine: {cpus} CPUs, load average {_loadavg()} before the rounds; "
              f"integrity check split over {workers} connections", flush=True)
        print("   round  cp+fsync |   copy  verify   total  ratio | plain check: total  ratio | others' CPUs")
        rounds = []
        for n in range(1, ROUNDS + 1):
            with _Load() as load:
                cp = _cp_fsync(current, work / "cp.sqlite3")
                _drop([work / "cp.sqlite3"])
                total, phases, _ = _snapshot(current, work, None)
                plain, plain_phases, _ = _snapshot(current, work, 1)
            one = {"cp_fsync_s": cp, "snapshot_s": total, "copy_s": phases[COPY], "verify_s": phases[VERIFY],
                   "phases": phases, "plain_check_snapshot_s": plain, "plain_check_phases": plain_phases,
                   "others_cpus": load.others_cpus, "loadavg_after": _loadavg()}
            rounds.append(one)
            print(f"   {n:>5}  {cp:7.2f}s | {one['copy_s']:5.2f}s {one['verify_s']:6.2f}s {total:6.2f}s "
                  f"{total / cp:5.2f}x |        {plain:6.2f}s {plain / cp:5.2f}x | {load.others_cpus:.2f} of {cpus}",
                  flush=True)
        results["rounds"] = rounds
        cp_best = min(r["cp_fsync_s"] for r in rounds)
        best = min(rounds, key=lambda r: r["snapshot_s"])
        copy_best = min(r["copy_s"] for r in rounds)
        verify_best = min(r["verify_s"] for r in rounds)
        plain_best = min(r["plain_check_snapshot_s"] for r in rounds)
        ratio = best["snapshot_s"] / cp_best
        median_ratio = statistics.median(r["snapshot_s"] / r["cp_fsync_s"] for r in rounds)
        print(f"   best of {ROUNDS}: cp + fsync {cp_best:.2f} s")
        print(f"     copy phase (backup API, no journal/syncs on the temp file): {copy_best:5.2f} s "
              f"= {copy_best / cp_best:.2f}x cp+fsync")
        print(f"     verification phase (fsync, split integrity check, counts, SHA-256 at once): "
              f"{verify_best:5.2f} s = {verify_best / cp_best:.2f}x")
        print(f"     verified snapshot, in total: {best['snapshot_s']:5.2f} s = {ratio:.2f}x cp+fsync "
              f"(median of rounds {median_ratio:.2f}x; target <= {TARGET}x: "
              f"{'met' if ratio <= TARGET else 'NOT met'})")
        print(f"     same snapshot with the plain one-connection integrity_check: {plain_best:5.2f} s "
              f"= {plain_best / cp_best:.2f}x")
        for name, value in best["phases"].items():
            print(f"       {name:<50} {value:6.2f} s")
        _, _, kept = _snapshot(current, work, None, keep=True)
        alone = _alone(kept)
        _drop([kept])
        print("   what bounds the verification (each alone, one connection, on the finished copy):")
        for name, value in alone.items():
            print(f"     {name:<62} {value:6.2f} s")
        results.update(bytes=size, cp_fsync_s=cp_best, snapshot_s=best["snapshot_s"], ratio=ratio,
                       median_ratio=median_ratio, copy_s=copy_best, copy_ratio=copy_best / cp_best,
                       verify_s=verify_best, plain_check_snapshot_s=plain_best, alone=alone)

        for release, requests in (("1.8.20", REQUESTS), ("1.8.22", REQUESTS)):
            cached = _cached(out_dir, release, requests)
            seconds, steps = _upgrade(cached, work)
            print(f"   whole upgrade {release} -> current ({cached.stat().st_size / 1e9:.2f} GB, "
                  f"{steps} steps, snapshot included): {seconds:6.2f} s")
            results[f"upgrade_from_{release}_s"] = seconds
            results[f"upgrade_from_{release}_bytes"] = cached.stat().st_size
        results["loadavg_after"] = _loadavg()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    (out_dir / "bench_upgrade.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
