"""Issue 22's per-command rows: each command as a user runs it (the installed console,
bench/install.py) against a plain Python script doing the same SQL (bench/baseline.py, run by the
same environment's interpreter with `-I`), idle and live.

- `approvals show ID` against `baseline.py show` (the row, its project, its events): <= 2x;
- `envs list` against `baseline.py envs` (the first 100 environments and their lease counts): <= 2x;
- one `approvals approve ID` against `baseline.py approve` (one BEGIN IMMEDIATE with the locked
  read, the UPDATE and the event INSERT; each side decides requests of its own): <= 2x;
- `upgrade --plan` with nothing pending against `baseline.py schema` (user_version and every
  schema object's SQL): <= 3x.

All eight programs alternate round after round (after one untimed warm-up of each), so that every
pair meets the same machine. A command that cannot run on this branch (it exits with an error)
leaves its row "not measured" with the reason instead of failing the module.
"""

from __future__ import annotations

import sqlite3

from bench import harness as h

BASELINE = str(h.ROOT / "bench" / "baseline.py")
TARGETS = {"show": 2.0, "envs": 2.0, "approve": 2.0, "plan": 3.0}
WHAT = {
    "show": ("`approvals show ID`", "python + sqlite3, same queries (baseline.py show)"),
    "envs": ("`envs list` (first 100)", "python + sqlite3, same query (baseline.py envs)"),
    "approve": ("`approvals approve ID` (one process)", "python raw transaction (baseline.py approve)"),
    "plan": ("`upgrade --plan` (nothing pending)", "python reading the schema (baseline.py schema)"),
}


def shown_id(path) -> str:
    """A request in the middle of the file (by id), with its events: what `show` is asked for."""
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        total = conn.execute("SELECT count(*) FROM approval_requests").fetchone()[0]
        return conn.execute("SELECT id FROM approval_requests ORDER BY id LIMIT 1 OFFSET ?",
                            (total // 2,)).fetchone()[0]
    finally:
        conn.close()


def main() -> None:
    d = h.data()
    rounds = h.pairs()
    env = h.child_env(d.now)
    cli, python = h.cli(), [h.python(), "-I", BASELINE]
    for state, path, info in h.states(d):
        request = shown_id(path)
        ids, expired = h.approvable_ids(path, 2 * (rounds + 1), d.now)
        if state == "idle":
            h.remove_sidecars(path)

        def run(argv: list[str], ok=(0,), path=path, state=state) -> float:
            seconds = h.timed_run(argv, env, ok=ok)
            if state == "idle":  # a `mode=ro` reader leaves an empty -wal and -shm: the file stays idle
                h.remove_sidecars(path)
            return seconds

        db = ["--db", str(path)]
        decided = (0, 1) if expired else (0,)
        runs = {
            "show": lambda: run(cli + ["approvals", "show", request, *db]),
            "show_base": lambda: run(python + ["show", str(path), request]),
            "envs": lambda: run(cli + ["envs", "list", *db]),
            "envs_base": lambda: run(python + ["envs", str(path)]),
            "approve": lambda: run(cli + ["approvals", "approve", next(ids), "--as", "bench-cmd", *db], ok=decided),
            "approve_base": lambda: run(python + ["approve", str(path), next(ids), "bench-raw"], ok=decided),
            "plan": lambda: run(cli + ["upgrade", "--plan", *db]),
            "plan_base": lambda: run(python + ["schema", str(path)]),
        }
        broken: dict[str, str] = {}
        for name in [n for n in runs if not n.endswith("_base")]:
            try:  # the warm-up: a command this branch cannot run is reported, not timed
                runs[name]()
                runs[f"{name}_base"]()
            except (RuntimeError, StopIteration) as exc:
                broken[name] = str(exc).splitlines()[0][:200] if str(exc) else repr(exc)
                del runs[name], runs[f"{name}_base"]
        got = h.alternate(runs, rounds, warmup=False) if runs else {}
        extra = {"holder": info} if info else {}
        if expired:
            extra["note"] = "every pending request had expired by the real clock: approve wrote the expiry"
        for name, (what, baseline) in WHAT.items():
            target = f"<= {TARGETS[name]:g}x"
            if name in broken:
                h.not_measured(f"cmd-{name}-{state}", "22", what, state=state, target=target, why=broken[name])
                continue
            h.record(f"cmd-{name}-{state}", "22", what, state=state, console=f"archon-console ({h.install_label()})",
                     values=got[name], baseline=baseline, base_values=got[f"{name}_base"], target=target,
                     check=lambda r, t=TARGETS[name]: r <= t, extra=extra)
