"""Item 3: `doctor` (quick mode) against a read-only `PRAGMA quick_check`, idle and live, and
doctor's peak RSS.

Both run as child processes (bench/rss_child.py: the same Python start-up on both sides) on the
same file, alternated A B A B; each child reports its own VmHWM. On the live file the baseline
opens `mode=ro` like any reader; on the idle one `mode=ro` creates an empty -wal and -shm, which
are removed after every run so that the file stays idle for both sides.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

from bench import harness as h


def _run(argv: list[str], env: dict[str, str], rss: list[float], ok=(0, 1)) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.rss_child", *argv], env=env, capture_output=True,
                          cwd=h.ROOT)
    seconds = time.perf_counter() - started
    found = re.search(rb"VMHWM_KB (\d+)", proc.stderr)
    if proc.returncode not in ok or not found:
        raise RuntimeError(f"{argv[0]} exited {proc.returncode}: {proc.stderr.decode()[-800:]}")
    rss.append(int(found.group(1)) / 1024)
    return seconds


def main() -> None:
    d = h.data()
    env = h.child_env(d.now)
    for state, path, info in h.states(d):
        doctor_rss: list[float] = []
        base_rss: list[float] = []

        def doctor(path=path, state=state) -> float:
            seconds = _run(["doctor", str(path)], env, doctor_rss)
            if state == "idle":
                h.remove_sidecars(path)
            return seconds

        def quick_check(path=path, state=state) -> float:
            seconds = _run(["quick_check", str(path)], env, base_rss, ok=(0,))
            if state == "idle":
                h.remove_sidecars(path)
            return seconds

        c, b = h.paired(doctor, quick_check, h.pairs(7))
        extra = {"holder": info} if info else {}
        h.record(f"doctor-{state}", "3", "`doctor` (quick)", state=state, console="doctor", values=c,
                 baseline="`mode=ro` PRAGMA quick_check", base_values=b, target="<= 1.5x",
                 check=lambda r: r <= 1.5, extra=extra)
        n = len(c)
        h.record(f"doctor-rss-{state}", "3", "peak RSS (VmHWM) of `doctor`", state=state, console="doctor",
                 values=doctor_rss[-n:], unit="MB", baseline="quick_check child", base_values=base_rss[-n:],
                 target="no multi-GB RSS (<= 512 MB, bench's bound)", on="console", check=lambda v: v <= 512,
                 extra=extra)
