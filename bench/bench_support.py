"""Issue 23's rows for large and damaged files, each command as installed (bench/install.py) and
measured from outside (bench/child.py `measured`: time, VmHWM, /proc/PID/io):

- the incomplete-sidecar read (item 1): `approvals list --json` and `approvals show ID` on a copy of
  the live file taken while archon held it, main file and `-wal` but no `-shm` (what a crashed
  archon leaves), against the same command on the intact idle file, alternated: <= 1.5x. Before
  every run the crash state is put back (the `-wal` as copied, no `-shm`); the bytes each run
  wrote (`write_bytes`: a copy of the database to $TMPDIR shows there) are in the figure;
- `inspect PATH --keep-snapshot DIR --no-tui` (item 1) against `cp` of the same file, idle and live:
  <= 1.5x;
- the redacted support bundle (`doctor --bundle OUT --redact`, item 3) against the unredacted one,
  idle and live: time <= 3x, and its peak RSS against the unredacted bundle's (flat: <= 1.25x,
  the bench's bound).

Doctor's bytes read (item 4) are in bench_doctor.py and audit's temporary bytes in bench_audit.py,
taken from the runs those modules time anyway. A command this branch cannot run leaves its row
"not measured" with the reason.
"""

from __future__ import annotations

import filecmp
import os
import shutil
import subprocess
import time
from pathlib import Path

from bench import harness as h
from bench.child import Run, measured
from bench.bench_commands import shown_id


SLOW_BUNDLE = 120  # seconds: a redacted bundle slower than this is timed over 3 pairs, not 7


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [repr(exc)])[-1][:200]


class Crash:
    """A private copy of the live file as a crashed archon leaves it: the main file and a -wal with
    committed frames, no -shm. `restore()` puts that state back before every run."""

    def __init__(self, live: Path, info: dict, work: Path) -> None:
        """`live` is held (bench/harness.py `live`), its holder idle: the pair copied is consistent."""
        self.path = work / "crashed.db"
        self.wal = work / "crashed.wal-as-copied"
        h.copy_db(live, self.path)
        shutil.copyfile(f"{live}-wal", self.wal)
        self.info = info
        self.stamp = self._main_stamp()

    def _main_stamp(self) -> tuple[int, int]:
        st = os.stat(self.path)
        return st.st_size, st.st_mtime_ns

    def restore(self) -> str:
        """Back to the crash state; returns a warning when a run changed the main file."""
        warning = ""
        if self._main_stamp() != self.stamp:
            warning = "a read changed the main file"
        Path(f"{self.path}-shm").unlink(missing_ok=True)
        Path(f"{self.path}-journal").unlink(missing_ok=True)
        wal = Path(f"{self.path}-wal")
        if not wal.exists() or not filecmp.cmp(wal, self.wal, shallow=False):
            shutil.copyfile(self.wal, wal)
        return warning


def _sidecar_rows(d: h.Data, env: dict, work: Path, tmp: Path, live: Path, info: dict) -> None:
    crash = Crash(live, info, work)
    request = shown_id(d.idle)
    h.remove_sidecars(d.idle)
    warnings: set[str] = set()
    written: dict[str, list[float]] = {}
    for name, args, what in (
            ("list", ["approvals", "list", "--json", "--limit", "50"], "`approvals list --json`"),
            ("show", ["approvals", "show", request], "`approvals show ID`")):
        fig_id = f"sidecar-{name}"
        written[name] = []

        def torn(args=args, name=name) -> float:
            warning = crash.restore()
            if warning:
                warnings.add(warning)
            run = measured(h.cli() + [*args, "--db", str(crash.path)], dict(env, TMPDIR=str(tmp),
                                                                              SQLITE_TMPDIR=str(tmp)))
            written[name].append(run.io.get("write_bytes", 0) / 1e6)
            return run.seconds

        def intact(args=args) -> float:
            run = measured(h.cli() + [*args, "--db", str(d.idle)], dict(env, TMPDIR=str(tmp),
                                                                          SQLITE_TMPDIR=str(tmp)))
            h.remove_sidecars(d.idle)
            return run.seconds

        try:
            c, b = h.paired(torn, intact, h.pairs(7))
        except RuntimeError as exc:
            h.not_measured(fig_id, "23.1", f"{what} on a file with a -wal and no -shm", state="crashed",
                           why=_first_line(exc), target="<= 1.5x")
            continue
        note = f"wrote {sorted(written[name])[len(written[name]) // 2]:.1f} MB per run (median write_bytes)"
        if warnings:
            note += "; " + "; ".join(sorted(warnings))
        h.record(fig_id, "23.1", f"{what} on a file with a -wal and no -shm vs the intact file", state="crashed",
                 console=f"{name}, -wal without -shm", values=c, baseline=f"{name}, intact idle file", base_values=b,
                 target="<= 1.5x", check=lambda r: r <= 1.5,
                 extra={"note": note, "holder": crash.info, "write_bytes_mb": written[name]})
    h.remove_db(crash.path)
    crash.wal.unlink(missing_ok=True)


def _inspect_rows(env: dict, work: Path, tmp: Path, state: str, path: Path, info: dict) -> None:
    keep, copies = work / "inspect", work / "cp"
    written: list[float] = []

    def inspect(path=path) -> float:
        keep.mkdir(exist_ok=True)
        run = measured(h.cli() + ["inspect", str(path), "--keep-snapshot", str(keep), "--no-tui"],
                         dict(env, TMPDIR=str(tmp)))
        written.append(run.io.get("write_bytes", 0) / 1e6)
        shutil.rmtree(keep)
        return run.seconds

    def cp(path=path) -> float:
        copies.mkdir(exist_ok=True)
        started = time.perf_counter()
        subprocess.run(["cp", str(path), str(copies / "copy.db")], check=True)
        seconds = time.perf_counter() - started
        shutil.rmtree(copies)
        return seconds

    try:
        c, b = h.paired(inspect, cp, h.pairs(7))
    except RuntimeError as exc:
        h.not_measured(f"inspect-{state}", "23.1", "`inspect --keep-snapshot DIR --no-tui`", state=state,
                       why=_first_line(exc), target="<= 1.5x")
        return
    finally:
        if state == "idle":
            h.remove_sidecars(path)
    h.record(f"inspect-{state}", "23.1", "`inspect --keep-snapshot DIR --no-tui` vs cp", state=state,
             console=f"inspect ({h.install_label()})", values=c, baseline="cp of the main file", base_values=b,
             target="<= 1.5x", check=lambda r: r <= 1.5,
             extra={"holder": info, "write_bytes_mb": written} if info else {"write_bytes_mb": written})


def _bundle_rows(env: dict, work: Path, state: str, path: Path, info: dict) -> None:
    out = work / "bundle"
    runs: dict[str, list[Run]] = {"redacted": [], "plain": []}

    def bundle(kind: str, path=path, state=state) -> float:
        out.mkdir(exist_ok=True)
        argv = h.cli() + ["doctor", str(path), "--bundle", str(out / "bundle.zip")]
        runs[kind].append(measured(argv + (["--redact"] if kind == "redacted" else []), env, ok=(0, 1)))
        shutil.rmtree(out)
        if state == "idle":
            h.remove_sidecars(path)
        return runs[kind][-1].seconds

    try:
        bundle("redacted")  # the warm-ups, which also say how long a pair takes
        bundle("plain")
        pairs = h.pairs(7)
        if runs["redacted"][-1].seconds > SLOW_BUNDLE:  # 7 pairs of a 4-minute bundle is an hour
            pairs = min(pairs, 3)
        got = h.alternate({"redacted": lambda: bundle("redacted"), "plain": lambda: bundle("plain")}, pairs,
                          warmup=False)
        c, b = got["redacted"], got["plain"]
    except RuntimeError as exc:
        for fig in (f"bundle-{state}", f"bundle-rss-{state}"):
            h.not_measured(fig, "23.3", "redacted support bundle", state=state, why=_first_line(exc),
                           target="<= 3x")
        return
    n = len(c)
    extra = {"holder": info} if info else {}
    if n < h.MIN_PAIRS and not h.quick():
        extra["note"] = f"{n} pairs only: the warm-up's redacted bundle took over {SLOW_BUNDLE} s"
    h.record(f"bundle-{state}", "23.3", "redacted support bundle vs the unredacted one", state=state,
             console="doctor --bundle --redact", values=c, baseline="doctor --bundle", base_values=b,
             target="<= 3x", check=lambda r: r <= 3.0, extra=extra)
    rss, base = [r.rss_mb for r in runs["redacted"][-n:]], [r.rss_mb for r in runs["plain"][-n:]]
    if None in rss or None in base:
        h.not_measured(f"bundle-rss-{state}", "23.3", "peak RSS of the redacted bundle", state=state,
                       why="/usr/bin/time is missing", target="flat")
        return
    h.record(f"bundle-rss-{state}", "23.3", "peak RSS (VmHWM) of the redacted bundle vs the unredacted one",
             state=state, console="doctor --bundle --redact", values=rss, unit="MB",
             baseline="doctor --bundle", base_values=base, target="flat (<= 1.25x, bench's bound)",
             check=lambda r: r <= 1.25, extra=extra)


def main() -> None:
    d = h.data()
    env = h.child_env(d.now)
    work = h.out_dir() / "support-work"
    shutil.rmtree(work, ignore_errors=True)
    tmp = work / "tmp"
    tmp.mkdir(parents=True)
    try:
        for state, path, info in h.states(d):  # one holder for every live figure
            if state == "live":
                _sidecar_rows(d, env, work, tmp, path, info)
            _inspect_rows(env, work, tmp, state, path, info)
            _bundle_rows(env, work, state, path, info)
    finally:
        shutil.rmtree(work, ignore_errors=True)
