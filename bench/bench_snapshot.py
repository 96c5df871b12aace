"""Item 4: the verified snapshot against `cp` + `fsync` of the same file, idle and live.

The snapshot is `console.db.snapshot.take_snapshot(source, target)`, the function the upgrade
calls before its first step (console/services/upgrade.py), run in this process; the baseline is
the `cp` command followed by an fsync of its output. Alternated A B A B; each output is deleted
before the next run (not timed). On the live file `cp` copies only the main file while the
snapshot also reads the hot -wal: the baseline is the cheaper job, as it should be.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time

from bench import harness as h


def main() -> None:
    from console.db.snapshot import take_snapshot

    d = h.data()
    work = h.out_dir() / "snapshot-work"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    try:
        for state, path, info in h.states(d):
            def snapshot(path=path) -> float:
                target = work / "snap.sqlite3"
                started = time.perf_counter()
                snap = take_snapshot(path, target)
                seconds = time.perf_counter() - started
                h.remove_db(getattr(snap, "path", target))
                for leftover in work.iterdir():
                    leftover.unlink()
                return seconds

            def cp_fsync(path=path) -> float:
                target = work / "cp.sqlite3"
                started = time.perf_counter()
                subprocess.run(["cp", str(path), str(target)], check=True)
                fd = os.open(target, os.O_RDONLY)
                os.fsync(fd)
                os.close(fd)
                seconds = time.perf_counter() - started
                target.unlink()
                return seconds

            c, b = h.paired(snapshot, cp_fsync, h.pairs(7))
            if state == "idle":
                h.remove_sidecars(path)
            h.record(f"snapshot-{state}", "4", "verified snapshot (`take_snapshot`, as the upgrade runs it)",
                     state=state, console="take_snapshot", values=c, baseline="cp + fsync", base_values=b,
                     target="<= 1.5x", check=lambda r: r <= 1.5, extra={"holder": info} if info else {})
    finally:
        shutil.rmtree(work, ignore_errors=True)
