"""`doctor` (quick mode, as installed: bench/install.py) against a read-only `PRAGMA quick_check`
(bench/baseline.py, the same environment's interpreter, `-I`), idle and live: its time (issue 22,
<= 1.5x), its peak RSS, and the bytes it reads against the file's size (issue 23 item 4, <= 2x).

Both run as child processes measured from outside (bench/child.py `measured`: VmHWM through
/usr/bin/time, the /proc/PID/io counters read while the child is a zombie), on the same file,
alternated A B A B. Bytes read is `rchar`: every byte the process asked the kernel for, page cache
or disk (`read_bytes`, the disk's share, is in the figure's extra). On the live file the baseline
opens `mode=ro` like any reader; on the idle one `mode=ro` creates an empty -wal and -shm, which
are removed after every run so that the file stays idle for both sides.
"""

from __future__ import annotations

import os

from bench import harness as h
from bench.child import Run, measured

BASELINE = str(h.ROOT / "bench" / "baseline.py")


def main() -> None:
    d = h.data()
    env = h.child_env(d.now)
    for state, path, info in h.states(d):
        doctor_runs: list[Run] = []
        base_runs: list[Run] = []

        def doctor(path=path, state=state) -> float:
            doctor_runs.append(measured(h.cli() + ["doctor", str(path)], env, ok=(0, 1)))
            if state == "idle":
                h.remove_sidecars(path)
            return doctor_runs[-1].seconds

        def quick_check(path=path, state=state) -> float:
            base_runs.append(measured([h.python(), "-I", BASELINE, "quick_check", str(path)], env))
            if state == "idle":
                h.remove_sidecars(path)
            return base_runs[-1].seconds

        c, b = h.paired(doctor, quick_check, h.pairs(7))
        n = len(c)
        extra = {"holder": info} if info else {}
        label = f"doctor ({h.install_label()})"
        h.record(f"doctor-{state}", "22", "`doctor` (quick)", state=state, console=label, values=c,
                 baseline="`mode=ro` PRAGMA quick_check (python -I)", base_values=b, target="<= 1.5x",
                 check=lambda r: r <= 1.5, extra=extra)
        rss, base_rss = [r.rss_mb for r in doctor_runs[-n:]], [r.rss_mb for r in base_runs[-n:]]
        if None in rss or None in base_rss:
            h.not_measured(f"doctor-rss-{state}", "22", "peak RSS (VmHWM) of `doctor`", state=state,
                           why="/usr/bin/time is missing", target="<= 512 MB (bench's bound)")
        else:
            h.record(f"doctor-rss-{state}", "22", "peak RSS (VmHWM) of `doctor`", state=state, console=label,
                     values=rss, unit="MB", baseline="quick_check child", base_values=base_rss,
                     target="no multi-GB RSS (<= 512 MB, bench's bound)", on="console", check=lambda v: v <= 512,
                     extra=extra)
        size = os.path.getsize(path) + (os.path.getsize(f"{path}-wal") if os.path.exists(f"{path}-wal") else 0)
        read = [r.io.get("rchar", 0) / 1e6 for r in doctor_runs[-n:]]
        if not all(read):
            h.not_measured(f"doctor-read-{state}", "23.4", "bytes `doctor` reads vs the file's size", state=state,
                           why="/proc/PID/io is not readable here", target="<= 2x")
            continue
        h.record(f"doctor-read-{state}", "23.4", "bytes `doctor` reads (rchar) vs the file's size", state=state,
                 console=label, values=read, unit="MB", baseline="file + -wal size", base_values=[size / 1e6] * n,
                 target="<= 2x", check=lambda r: r <= 2.0,
                 extra=dict(extra, read_bytes_mb=[r.io.get("read_bytes", 0) / 1e6 for r in doctor_runs[-n:]],
                            quick_check_rchar_mb=[r.io.get("rchar", 0) / 1e6 for r in base_runs[-n:]]))
