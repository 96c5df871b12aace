"""Run every benchmark module, or those named: `python -m bench [approvals upgrade ...]`."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time
from pathlib import Path

import bench

OUT = Path(__file__).resolve().parent / "out"


def main(argv: list[str]) -> int:
    OUT.mkdir(exist_ok=True)
    names = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))
    wanted = [f"bench_{a}" if not a.startswith("bench_") else a for a in argv]
    if wanted:
        names = [n for n in names if n in wanted]
    failures = 0
    for name in names:
        print(f"== {name}", flush=True)
        started = time.perf_counter()
        try:
            importlib.import_module(f"bench.{name}").main(OUT)
        except Exception as exc:  # keep going; report at the end
            failures += 1
            print(f"   FAILED: {exc!r}", flush=True)
        print(f"   ({time.perf_counter() - started:.1f} s)", flush=True)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
