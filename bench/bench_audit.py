"""Issue 13: `audit --format jsonl` over every event against `sqlite3 -json` running the equivalent
UNION query on the same file, idle and live, and audit's peak RSS on the 10k and the 1M database.

Both sides run as child processes writing to /dev/null, alternated A B A B. The baseline is the
union of the three event tables with the same columns and the same time normalisation, ordered
the same way (console/services/audit.py `_SOURCES`), as one `sqlite3 -readonly -json` query.
Target: throughput >= 0.5x the shell's (time ratio <= 2.0); peak RSS within 10% between 10k and 1M.
"""

from __future__ import annotations

import re
import subprocess
import sys
import time

from bench import harness as h


def _audit(path, env, rss: list[float]) -> float:
    started = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "bench.rss_child", "audit", "--db", str(path), "--format", "jsonl"],
                          env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=h.ROOT)
    seconds = time.perf_counter() - started
    found = re.search(rb"VMHWM_KB (\d+)", proc.stderr)
    if proc.returncode != 0 or not found:
        raise RuntimeError(f"audit exited {proc.returncode}: {proc.stderr.decode()[-800:]}")
    rss.append(int(found.group(1)) / 1024)
    return seconds


def _shell(path, sql: str) -> float:
    started = time.perf_counter()
    subprocess.run(["sqlite3", "-readonly", "-json", str(path), sql], stdout=subprocess.DEVNULL, check=True)
    seconds = time.perf_counter() - started
    h.remove_sidecars(path)
    return seconds


def main() -> None:
    d = h.data()
    env = h.child_env(d.now)
    from console.services.audit import union_sql

    sql = union_sql() + ";"
    rounds = max(h.MIN_PAIRS, 7) if not h.quick() else h.pairs()
    rss_big: list[float] = []
    for state, path, info in h.states(d):
        rss: list[float] = []
        console, shell = h.paired(lambda path=path, rss=rss: _audit(path, env, rss),
                                  lambda path=path: _shell(path, sql), rounds)
        rss_big += rss
        h.record("audit-jsonl", "13", "audit --format jsonl, every event", state=state, console="audit",
                 values=console, baseline="sqlite3 -json UNION", base_values=shell, target="<= 2.0x (>= 0.5x throughput)",
                 check=lambda r: r <= 2.0, extra={"peak_rss_mb": rss})
    small, _ = h.source_db(h.small_requests(), d.now)
    small_rss: list[float] = []
    for _ in range(3):
        _audit(small, env, small_rss)
    h.remove_sidecars(small)
    import statistics

    big, little = statistics.median(rss_big), statistics.median(small_rss)
    h.record("audit-rss", "13", f"audit peak RSS, {h.requests():,} vs {h.small_requests():,} requests", state="-",
             console="audit", values=rss_big, unit="MB", baseline=f"same on {h.small_requests():,}",
             base_values=[little] * len(rss_big), target="<= 1.10x", check=lambda r: r <= 1.10,
             note=f"{big:.1f} MB vs {little:.1f} MB")


if __name__ == "__main__":
    main()
