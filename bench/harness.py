"""What every benchmark module shares: the databases, paired alternation, the live holder, figures.

Method (README, "Benchmarks"): every figure is a ratio of the console against a baseline measured
in the same run, the two alternated A B A B ... over at least `PAIRS` pairs after one untimed
warm-up of each; each side is reported as median and spread (min-max and IQR), and so is the
per-pair ratio. Never a best-of: a shared machine's noise widens the spread instead of being
hidden.

Databases. One cached source database (`ARCHON_BENCH_DIR`, default bench/out/; file
`archon-1m.db` for 1,000,000 requests, else `archon-<N>.db`; `ARCHON_BENCH_DB` names another) is
only ever read by `cp`: it may be shared with other people and is never opened. Each run copies it
into the output directory (`ARCHON_BENCH_OUT`, default bench/out/) twice: `idle.db`, which no
other process holds, and `live.db`, which `live()` hands to a second process that holds it the way
a running archon does. Decisions written by the modules go into these private copies.
`--quick` (or `ARCHON_BENCH_QUICK=1`) swaps in a small generated database and fewer repetitions:
a smoke run whose figures mean nothing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import statistics
import subprocess
import sys
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, Iterator

# The decision archon writes (UPDATE + event) has its home in bench/baseline.py, the one-process
# baseline; the raw loop (bench_writes) and the live holder write the same.
from bench.baseline import DECIDE_SQL, EVENT_SQL, NEXT_SEQUENCE_SQL

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "bench" / "out"
MIN_PAIRS = 7


# ---------------------------------------------------------------- configuration

def quick() -> bool:
    return os.environ.get("ARCHON_BENCH_QUICK", "") not in ("", "0")


def requests() -> int:
    if "ARCHON_BENCH_REQUESTS" in os.environ:
        return int(os.environ["ARCHON_BENCH_REQUESTS"])
    return 6_000 if quick() else 1_000_000


def small_requests() -> int:
    """The smaller database of the TUI's peak-RSS comparison (10k against 1M)."""
    return 500 if quick() else 10_000


def pairs(default: int = 9) -> int:
    """Pairs per figure: never fewer than MIN_PAIRS, except in the quick smoke run."""
    if quick():
        return int(os.environ.get("ARCHON_BENCH_PAIRS", 2))
    return max(MIN_PAIRS, int(os.environ.get("ARCHON_BENCH_PAIRS", default)))


def out_dir() -> Path:
    path = Path(os.environ.get("ARCHON_BENCH_OUT", DEFAULT_OUT))
    path.mkdir(parents=True, exist_ok=True)
    return path


def cache_dir() -> Path:
    return Path(os.environ.get("ARCHON_BENCH_DIR", out_dir()))


def db_name(n: int | None = None) -> str:
    n = requests() if n is None else n
    if n == requests() and os.environ.get("ARCHON_BENCH_DB"):
        return os.environ["ARCHON_BENCH_DB"]
    return "archon-1m.db" if n == 1_000_000 else f"archon-{n}.db"


def cli() -> list[str]:
    """The `archon-console` script as a user installed it (bench/install.py: the wheel in a fresh
    venv, or the editable install when that cannot be made, labelled as such)."""
    from bench import install

    got = install.console()
    return [str(got.script)] if got.script else [str(got.python), "-m", "console"]


def python() -> str:
    """The clean interpreter of the console's environment: every Python baseline runs it `-I`."""
    from bench import install

    return str(install.console().python)


def install_label() -> str:
    from bench import install

    return install.console().label


def child_env(now: str | None = None) -> dict[str, str]:
    env = dict(os.environ, ARCHON_CONSOLE_KEYMAP="/nonexistent")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: bytecode cached
    if now:
        env["ARCHON_CONSOLE_NOW"] = now
    return env


# ---------------------------------------------------------------- databases

@dataclass
class Data:
    """The run's private copies of the source database and what the modules need to know of it."""

    source: Path
    idle: Path
    live: Path
    now: str  # the demo's clock: decisions are made at this instant
    projects: list[str]
    bytes: int
    build_seconds: float | None = None
    pending: int = 0  # requests the service may approve in a fresh copy (`decidable`)


_DATA: Data | None = None


def _generate(path: Path, n: int, now: str | None = None) -> float:
    from console.demo.writer import generate

    print(f"   building {path} ({n:,} requests; cached for later runs)", flush=True)
    started = time.perf_counter()
    generate(path, requests=n, now=now, seed=7, overwrite=True)
    return time.perf_counter() - started


def source_db(n: int | None = None, now: str | None = None) -> tuple[Path, float | None]:
    """The cached source database of `n` requests, generated when missing; never opened here."""
    n = requests() if n is None else n
    directory = cache_dir() if n == requests() else out_dir()
    path = directory / db_name(n)
    log = directory / "build.log"
    if path.exists() and log.exists() and "done" not in log.read_text(errors="replace"):
        raise RuntimeError(f"{path} is still being built ({log} does not say done)")
    if path.exists():
        return path, None
    directory.mkdir(parents=True, exist_ok=True)
    return path, _generate(path, n, now)


def copy_db(source: Path, target: Path) -> Path:
    """A private copy of the main file only: the source is idle (its -wal empty or absent)."""
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{target}{suffix}").unlink(missing_ok=True)
    subprocess.run(["cp", "--reflink=auto", str(source), str(target)], check=True)
    os.chmod(target, 0o644)
    return target


def remove_db(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def data() -> Data:
    """Fresh private copies (idle and live) of the source, once per process."""
    global _DATA
    if _DATA is None:
        source, built = source_db()
        out = out_dir()
        print(f"   copying {source} ({source.stat().st_size / 1e9:.2f} GB) to {out}/idle.db and live.db", flush=True)
        idle = copy_db(source, out / "idle.db")
        live = copy_db(source, out / "live.db")
        conn = sqlite3.connect(f"file:{idle}?mode=ro", uri=True)
        try:
            projects = [r[0] for r in conn.execute("SELECT id FROM projects ORDER BY id")]
            newest = max(conn.execute(
                "SELECT max(created_at) FROM approval_requests WHERE project_id = ?", (p,)).fetchone()[0] or ""
                for p in projects)
        finally:
            conn.close()
        remove_sidecars(idle)
        now = (newest[:16] + ":00") if newest else "2026-05-01 12:00:00"
        _DATA = Data(source, idle, live, now, projects, source.stat().st_size, built)
        _DATA.pending = decidable(idle, now)
        remove_sidecars(idle)
    return _DATA


def decidable(path: Path, now: str) -> int:
    """How many requests `pending_ids` could still hand out in `path`."""
    conn = sqlite3.connect(path, timeout=30)
    try:  # per project: a seek in idx_approval_requests_project_status_expiry, as pending_ids reads
        projects = [r[0] for r in conn.execute("SELECT id FROM projects")]
        return conn.execute(
            f"SELECT count(*) FROM approval_requests WHERE project_id IN ({','.join('?' * len(projects))}) "
            "AND status = 'pending' AND expires_at > datetime(?, '+1 hour') "
            "AND json_extract(authority_json, '$.requested_by') LIKE 'agent:%'", (*projects, now)).fetchone()[0]
    finally:
        conn.close()


def refresh() -> None:
    """Fresh copies of the source before a module when the modules before it (their decisions, the
    live holders') used up what the next one may need: a whole run on a small database decides
    more requests than it has pending. Called between modules, never while a holder runs."""
    if _DATA is None:
        return
    d = _DATA
    least = min(2000, int(0.8 * d.pending))
    if min(decidable(d.idle, d.now), decidable(d.live, d.now)) < least:
        print(f"   fresh copies of {d.source} (fewer than {least} pending requests left)", flush=True)
        copy_db(d.source, d.idle)
        copy_db(d.source, d.live)
    remove_sidecars(d.idle)
    remove_sidecars(d.live)


def holder_writes() -> int:
    """The live holder's decisions: 300 (a hot -wal of a few MB), fewer on a small database."""
    if quick():
        return 3
    return min(300, max(3, (_DATA.pending if _DATA else 1200) // 4))


def remove_sidecars(path: Path) -> None:
    """An idle file has no -wal or -shm: what a reader of ours left (closed) goes."""
    for suffix in ("-wal", "-shm"):
        side = Path(f"{path}{suffix}")
        if side.exists() and side.stat().st_size in (0, 32768):
            side.unlink()


def approvable_ids(path: Path, count: int, now: str) -> tuple[Iterator[str], bool]:
    """Requests `approvals approve` may decide as a command (the real clock), and False; in an old
    database whose pending requests have all expired by the real clock, requests pending at `now`
    (the command then writes the expiry and refuses: the same UPDATE and event), and True."""
    try:
        return iter(pending_ids(path, count, now, real_clock=True)), False
    except RuntimeError:
        return iter(pending_ids(path, count, now)), True


def pending_ids(path: Path, count: int, now: str, *, newest_first: bool = False, real_clock: bool = False) -> list[str]:
    """Pending requests the service may approve as `bench` (requester named, not overdue).

    `real_clock`: not overdue by the machine's clock either, for `approvals approve` run as a
    command (it writes with the real clock; $ARCHON_CONSOLE_NOW freezes only what is shown). A
    cached database generated long ago may have none left: delete it to have it built again.
    """
    if real_clock:
        now = max(now, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime()))
    conn = sqlite3.connect(path, timeout=30)
    try:
        projects = [r[0] for r in conn.execute("SELECT id FROM projects")]
        marks = ",".join("?" * len(projects))
        rows = conn.execute(
            f"SELECT id FROM approval_requests WHERE project_id IN ({marks}) AND status = 'pending' "
            "AND expires_at > datetime(?, '+1 hour') AND json_extract(authority_json, '$.requested_by') LIKE 'agent:%' "
            f"ORDER BY id {'DESC' if newest_first else 'ASC'} LIMIT ?", (*projects, now, count)).fetchall()
    finally:
        conn.close()
    if len(rows) < count:
        raise RuntimeError(f"only {len(rows)} pending requests left in {path}; {count} needed")
    return [r[0] for r in rows]


def raw_decide(conn: sqlite3.Connection, ids: list[str], now: str, actor: str = "bench-raw") -> None:
    """Archon's decision, bare: per request one BEGIN IMMEDIATE with the UPDATE and its event."""
    for request_id in ids:
        conn.execute("BEGIN IMMEDIATE")
        changed = conn.execute(DECIDE_SQL, (now, now, request_id)).rowcount
        project = conn.execute("SELECT project_id FROM approval_requests WHERE id = ?", (request_id,)).fetchone()[0]
        sequence = conn.execute(NEXT_SEQUENCE_SQL, (project, request_id)).fetchone()[0]
        conn.execute(EVENT_SQL, (project, request_id, sequence, actor, now))
        conn.execute("COMMIT")
        assert changed == 1, request_id


# ---------------------------------------------------------------- the live file

@contextmanager
def live(path: Path, now: str, writes: int | None = None) -> Iterator[dict]:
    """A second process holds `path` open the way a running archon does for the block's duration.

    bench/holder.py turns `wal_autocheckpoint` off, commits `writes` decisions (one transaction
    each, so the -wal is hot: committed, not checkpointed) and keeps its connection open until the
    block ends. Yields what it reports (the -wal's size).
    """
    writes = writes if writes is not None else holder_writes()
    proc = subprocess.Popen([sys.executable, "-m", "bench.holder", str(path), str(writes), now],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=ROOT)
    try:
        line = proc.stdout.readline().split()
        if not line or line[0] != "ready":
            raise RuntimeError(f"the live holder did not start on {path}")
        info = {"holder_pid": proc.pid, "wal_bytes": int(line[1]), "writes": writes}
        yield info
    finally:
        proc.stdin.close()
        try:
            proc.wait(timeout=120)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def states(d: Data) -> Iterator[tuple[str, Path, dict]]:
    """("idle", idle file, {}) then ("live", live file, holder info) inside `live()`."""
    yield "idle", d.idle, {}
    with live(d.live, d.now) as info:
        yield "live", d.live, info


# ---------------------------------------------------------------- timing

def alternate(runs: dict[str, Callable[[], float]], rounds: int, warmup: bool = True) -> dict[str, list[float]]:
    """Each callable returns its own measured seconds; called in turn, round after round."""
    if warmup:
        for fn in runs.values():
            fn()
    out: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(rounds):
        for name, fn in runs.items():
            out[name].append(fn())
    return out


def paired(a: Callable[[], float], b: Callable[[], float], rounds: int | None = None) -> tuple[list[float], list[float]]:
    """A B A B ... over `rounds` pairs (at least MIN_PAIRS outside quick mode)."""
    got = alternate({"a": a, "b": b}, rounds or pairs())
    return got["a"], got["b"]


def timed_run(argv: list[str], env: dict[str, str] | None = None, ok=(0,)) -> float:
    started = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, cwd=out_dir())
    seconds = time.perf_counter() - started
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv[:6])} ... exited {proc.returncode}: {proc.stderr.decode()[-800:]}")
    return seconds


def vm_hwm_kb(pid: int | str = "self") -> int:
    with open(f"/proc/{pid}/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


@dataclass
class Stats:
    median: float
    min: float
    max: float
    q1: float
    q3: float
    n: int

    @classmethod
    def of(cls, values: list[float]) -> "Stats":
        ordered = sorted(values)
        if len(ordered) >= 2:
            q1, _, q3 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q1 = q3 = ordered[0]
        return cls(statistics.median(ordered), ordered[0], ordered[-1], q1, q3, len(ordered))


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = min(len(ordered) - 1, max(0, round(p / 100 * (len(ordered) - 1))))
    return ordered[k]


# ---------------------------------------------------------------- figures

@dataclass
class Figure:
    id: str
    item: str  # the issue item it measures
    what: str
    state: str  # idle, live, or "-"
    console: str
    baseline: str
    unit: str
    console_stats: dict | None
    baseline_stats: dict | None
    ratio_stats: dict | None
    target: str
    met: bool | None
    note: str = ""
    extra: dict = field(default_factory=dict)


FIGURES: list[Figure] = []


def _fmt(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"
    if unit == "ms":
        return f"{value:.2f} ms"
    if unit == "/s":
        return f"{value:,.0f}/s"
    if unit == "MB":
        return f"{value:.1f} MB"
    return f"{value:.3g} {unit}"


def spread(s: dict, unit: str) -> str:
    return f"{_fmt(s['median'], unit)} ({_fmt(s['min'], unit)}-{_fmt(s['max'], unit)})"


def ratio_text(s: dict) -> str:
    return f"{s['median']:.2f}x ({s['min']:.2f}-{s['max']:.2f}, IQR {s['q1']:.2f}-{s['q3']:.2f})"


def record(id: str, item: str, what: str, *, state: str, console: str, values: list[float], unit: str = "s",
           baseline: str = "", base_values: list[float] | None = None, target: str = "",
           check: Callable[[float], bool] | None = None, on: str = "ratio", note: str = "",
           extra: dict | None = None, met: bool | None = None) -> Figure:
    """One figure: console values against baseline values taken pair by pair in the same run.

    `check` decides met/missed on the median of `on` ("ratio" or "console").
    """
    cstats = Stats.of(values)
    bstats = rstats = None
    if base_values is not None:
        bstats = Stats.of(base_values)
        rstats = Stats.of([c / b for c, b in zip(values, base_values) if b])
    basis = rstats if on == "ratio" and rstats is not None else cstats
    if check is not None:
        met = bool(check(basis.median))
    fig = Figure(id, item, what, state, console, baseline, unit, asdict(cstats),
                 asdict(bstats) if bstats else None, asdict(rstats) if rstats else None, target, met, note,
                 extra or {})
    FIGURES.append(fig)
    verdict = "" if met is None else ("met" if met else "MISSED")
    line = f"   [{id}] {what} ({state}): {console} {spread(fig.console_stats, unit)}"
    if bstats:
        line += f" | {baseline} {spread(fig.baseline_stats, unit)} | ratio {ratio_text(fig.ratio_stats)}"
    if target:
        line += f" | target {target}: {verdict}"
    print(line, flush=True)
    return fig


def not_measured(id: str, item: str, what: str, *, state: str, why: str, target: str = "",
                 console: str = "", baseline: str = "") -> Figure:
    """A row the run could not measure (the feature is missing, a peer cannot be installed, quick
    mode): it stays in the table with the reason instead of failing the module."""
    fig = Figure(id, item, what, state, console, baseline, "s", None, None, None, target, None,
                 f"not measured: {why}")
    FIGURES.append(fig)
    print(f"   [{id}] {what} ({state}): not measured: {why}", flush=True)
    return fig


def write_results(path: Path, meta: dict) -> None:
    """results.json: this run's figures, merged over the file's figures of modules not run now."""
    old: dict = {}
    if path.exists():
        try:
            old = json.loads(path.read_text())
        except ValueError:
            old = {}
    ran = {f.id for f in FIGURES}
    kept = [f for f in old.get("figures", []) if f["id"] not in ran and old.get("meta", {}).get("quick") == meta.get("quick")]
    figures = kept + [asdict(f) for f in FIGURES]
    path.write_text(json.dumps({"meta": meta, "figures": figures}, indent=2))
