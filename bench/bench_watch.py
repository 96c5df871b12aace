"""Issue 13: `approvals watch` latency and idle cost.

Latency: `approvals watch --json` runs on the live file (a second process holds it, as archon
does) while this process commits decisions one at a time, each as archon would (UPDATE and event in
one BEGIN IMMEDIATE), at irregular intervals; the time from each COMMIT returning to the watcher's
line arriving on our end of its pipe. Target: p99 <= 1 s (the default poll is 0.5 s).
Idle cost: the watcher's CPU time (utime + stime from /proc/PID/stat) over a window in which nothing
changes, on the idle and on the live file, as a share of one core. Target: <= 1%.
"""

from __future__ import annotations

import json
import os
import queue
import random
import sqlite3
import subprocess
import threading
import time

from bench import harness as h

TICKS = os.sysconf("SC_CLK_TCK")


def _start(path, env) -> tuple[subprocess.Popen, "queue.Queue[tuple[float, dict]]"]:
    proc = subprocess.Popen([*h.cli(), "approvals", "watch", "--db", str(path), "--json"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=h.ROOT)
    lines: queue.Queue = queue.Queue()

    def pump() -> None:
        for line in proc.stdout:
            lines.put((time.perf_counter(), json.loads(line)))

    threading.Thread(target=pump, daemon=True).start()
    started = proc.stderr.readline()  # "watching approval requests in ..." once its position is taken
    if "watching" not in started:
        raise RuntimeError(f"watch did not start: {started}")
    return proc, lines


def _cpu_seconds(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def _idle_cpu(proc: subprocess.Popen, window: float, state: str) -> None:
    """The watcher's share of one core over `window` seconds in which nothing changes."""
    before, t0 = _cpu_seconds(proc.pid), time.perf_counter()
    time.sleep(window)
    share = (_cpu_seconds(proc.pid) - before) / (time.perf_counter() - t0) * 100
    h.record("watch-idle-cpu", "13", f"watch: CPU while nothing changes ({window:.0f} s)", state=state,
             console="approvals watch", values=[share], unit="%", target="<= 1% of a core", on="console",
             check=lambda m: m <= 1.0)


def main() -> None:
    d = h.data()
    env = h.child_env(d.now)
    changes = 20 if h.quick() else 200
    window = 5.0 if h.quick() else 60.0
    ids = h.pending_ids(d.live, changes, d.now)  # oldest first: the live holder decides the newest
    with h.live(d.live, d.now) as info:
        proc, lines = _start(d.live, env)
        try:
            conn = sqlite3.connect(d.live, isolation_level=None, timeout=30)
            latencies = []
            rng = random.Random(7)
            for request_id in ids:
                time.sleep(rng.uniform(0.05, 0.6))
                h.raw_decide(conn, [request_id], d.now, actor="bench-watch")
                committed = time.perf_counter()
                while True:
                    arrived, change = lines.get(timeout=30)
                    if change.get("request_id") == request_id:
                        latencies.append(arrived - committed)
                        break
            conn.close()
            h.record("watch-latency", "13", f"watch: commit -> line, {changes} decisions", state="live",
                     console="approvals watch", values=latencies, target="p99 <= 1 s", on="console",
                     check=lambda _m: h.percentile(latencies, 99) <= 1.0,
                     extra={"p50_s": h.percentile(latencies, 50), "p99_s": h.percentile(latencies, 99)},
                     note=f"p50 {h.percentile(latencies, 50) * 1000:.0f} ms, p99 {h.percentile(latencies, 99) * 1000:.0f} ms")
            _idle_cpu(proc, window, "live")
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    proc, _ = _start(d.idle, env)
    try:
        _idle_cpu(proc, window, "idle")
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        h.remove_sidecars(d.idle)


if __name__ == "__main__":
    main()
