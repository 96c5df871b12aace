"""Issue 13: `audit --format jsonl` over every event against `sqlite3 -json` running the equivalent
UNION query on the same file, idle and live, and audit's peak RSS on the 10k and the 1M database.

Both sides run as child processes writing to /dev/null, alternated A B A B. The baseline is the
union of the three event tables with the same columns and the same time normalisation, ordered
the same way (console/services/audit.py `_SOURCES`), as one `sqlite3 -readonly -json` query.
Target: throughput >= 0.5x the shell's (time ratio <= 2.0); peak RSS within 10% between 10k and 1M.

Issue 23 item 4, from the same runs: the temporary bytes each side spills (SQLite's sorter), as
`write_bytes` of /proc/PID/io (bench/child.py `measured`) with TMPDIR and SQLITE_TMPDIR pointed
at a directory on the disk: audit's must not exceed the shell's. The console is the installed one
(bench/install.py).
"""

from __future__ import annotations

import statistics
import subprocess
from pathlib import Path

from bench import harness as h
from bench.child import Run, measured


def _audit(path, env, runs: list[Run]) -> float:
    runs.append(measured(h.cli() + ["audit", "--db", str(path), "--format", "jsonl"], env,
                           stdout=subprocess.DEVNULL))
    return runs[-1].seconds


def _shell(path, sql: str, env, runs: list[Run]) -> float:
    runs.append(measured(["sqlite3", "-readonly", "-json", str(path), sql], env, stdout=subprocess.DEVNULL))
    h.remove_sidecars(path)
    return runs[-1].seconds


def _temp_env(env: dict[str, str], tmp: Path) -> dict[str, str]:
    """Temporary files (SQLite's sorter spills) go to a directory on the disk, not tmpfs: pages
    dirtied there count in /proc/PID/io `write_bytes` (on tmpfs they would not)."""
    tmp.mkdir(parents=True, exist_ok=True)
    return dict(env, TMPDIR=str(tmp), SQLITE_TMPDIR=str(tmp))


def main() -> None:
    d = h.data()
    env = _temp_env(h.child_env(d.now), h.out_dir() / "audit-tmp")
    from console.services.audit import union_sql

    sql = union_sql() + ";"
    rounds = max(h.MIN_PAIRS, 7) if not h.quick() else h.pairs()
    rss_big: list[float] = []
    for state, path, info in h.states(d):
        runs: list[Run] = []
        shell_runs: list[Run] = []
        console, shell = h.paired(lambda path=path: _audit(path, env, runs),
                                  lambda path=path: _shell(path, sql, env, shell_runs), rounds)
        rss = [r.rss_mb for r in runs[-len(console):]]
        rss_big += rss
        h.record(f"audit-jsonl-{state}", "13", "audit --format jsonl, every event", state=state,
                 console=f"audit ({h.install_label()})", values=console, baseline="sqlite3 -json UNION",
                 base_values=shell, target="<= 2.0x (>= 0.5x throughput)", check=lambda r: r <= 2.0,
                 extra={"peak_rss_mb": rss})
        temp = [r.io.get("write_bytes", 0) / 1e6 for r in runs[-len(console):]]
        shell_temp = [r.io.get("write_bytes", 0) / 1e6 for r in shell_runs[-len(console):]]
        note = f"audit {statistics.median(temp):.1f} MB, shell {statistics.median(shell_temp):.1f} MB"
        h.record(f"audit-temp-{state}", "23.4", "audit temporary bytes (write_bytes, SQLITE_TMPDIR on disk)",
                 state=state, console="audit", values=temp, unit="MB", baseline="sqlite3 -json UNION",
                 base_values=shell_temp if all(shell_temp) else None, target="<= 1x the shell's",
                 met=statistics.median(temp) <= statistics.median(shell_temp), note=note, extra={"note": note})
    source, _ = h.source_db(h.small_requests(), d.now)
    small = h.copy_db(source, h.out_dir() / "audit-small.db")  # the source is only ever copied
    small_runs: list[Run] = []
    for _ in range(3):
        _audit(small, env, small_runs)
    h.remove_db(small)
    small_rss = [r.rss_mb for r in small_runs]
    big, little = statistics.median(rss_big), statistics.median(small_rss)
    h.record("audit-rss", "13", f"audit peak RSS, {h.requests():,} vs {h.small_requests():,} requests", state="-",
             console="audit", values=rss_big, unit="MB", baseline=f"same on {h.small_requests():,}",
             base_values=[little] * len(rss_big), target="<= 1.10x", check=lambda r: r <= 1.10,
             note=f"{big:.1f} MB vs {little:.1f} MB")


if __name__ == "__main__":
    main()
