"""`python -m bench [--quick] [--table] [MODULE ...]`: run the benchmark modules, write
bench/out/results.json (or $ARCHON_BENCH_OUT/results.json), print the README table.

MODULE is cli, commands, pending, doctor, snapshot, writes, support, tui, watch, audit or fleet (default:
all, in that order).
A run of some modules replaces their figures in results.json and keeps the others'.
`--table` only renders the table of an existing results.json; `--readme FILE` also writes it
between the `<!-- bench-table -->` markers of FILE.
"""

from __future__ import annotations

import importlib
import json
import os
import platform
import sqlite3
import sys
import time
from datetime import datetime, timezone

MODULES = ("cli", "commands", "pending", "doctor", "snapshot", "writes", "support", "tui", "watch", "audit", "fleet")


def main(argv: list[str]) -> int:
    if "--quick" in argv:
        os.environ["ARCHON_BENCH_QUICK"] = "1"
    from bench import harness as h
    from bench import install
    from bench.table import render, write_readme

    results = h.out_dir() / "results.json"
    readme = argv[argv.index("--readme") + 1] if "--readme" in argv else None
    if "--table" in argv:
        if not results.exists():
            print(f"no {results} yet: run `make bench` first", file=sys.stderr)
            return 1
        table = render(json.loads(results.read_text()))
        print(table)
        if readme:
            write_readme(readme, table)
        return 0
    names = [a for a in argv if not a.startswith("--") and a != readme] or list(MODULES)
    unknown = [n for n in names if n not in MODULES]
    if unknown:
        print(f"unknown module(s) {unknown}; choose from {', '.join(MODULES)}", file=sys.stderr)
        return 2
    if set(names) == set(MODULES):  # a whole run: no figure of an older run stays in the file
        results.unlink(missing_ok=True)
    started = time.perf_counter()
    failures: list[str] = []
    d = h.data()

    def meta() -> dict:
        return {
            "finished": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            "quick": h.quick(), "requests": h.requests(), "source": str(d.source), "bytes": d.bytes,
            "build_seconds": d.build_seconds, "now": d.now, "cpus": os.cpu_count(), "loadavg": os.getloadavg(),
            "python": platform.python_version(), "sqlite": sqlite3.sqlite_version,
            "seconds": round(time.perf_counter() - started, 1), "modules": names, "failed": failures,
            "install": install.described(),
        }

    for name in names:
        print(f"== {name}", flush=True)
        at = time.perf_counter()
        try:
            h.refresh()
            importlib.import_module(f"bench.bench_{name}").main()
        except Exception as exc:  # keep going; report at the end
            failures.append(name)
            print(f"   FAILED: {exc!r}", flush=True)
        print(f"   ({time.perf_counter() - at:.1f} s)", flush=True)
        h.write_results(results, meta())  # after every module: a later crash loses nothing
    done = meta()
    table = render(json.loads(results.read_text()))
    print(table)
    if readme:
        write_readme(readme, table)
    print(f"results: {results} ({done['seconds']:.0f} s in all)")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
