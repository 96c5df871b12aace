"""How long `demo --requests 1000000` takes (target: under two minutes), and what it writes.

Leaves the database at bench/out/demo-<N>.db (seed 7, clock 2026-05-01 12:00 UTC) for a look
afterwards. `ARCHON_BENCH_REQUESTS` changes N.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

REQUESTS = int(os.environ.get("ARCHON_BENCH_REQUESTS", "1000000"))
NOW = "2026-05-01T12:00:00Z"


def main(out_dir: Path) -> None:
    from console.demo import generate

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"demo-{REQUESTS}.db"
    cpu_before = _cpu()
    started = time.perf_counter()
    summary = generate(path, requests=REQUESTS, now=NOW, overwrite=True)
    seconds = time.perf_counter() - started
    cpu = _cpu() - cpu_before
    size = path.stat().st_size
    rows = sum(summary.counts.values())
    results = {"requests": REQUESTS, "seconds": round(seconds, 2), "cpu_seconds": round(cpu, 2),
               "bytes": size, "rows": rows, "counts": summary.counts}
    print(f"   demo: {REQUESTS:,} approval requests -> {rows:,} rows, {size / 1e9:.2f} GB "
          f"in {seconds:.1f} s wall, {cpu:.1f} s CPU ({rows / seconds:,.0f} rows/s; "
          f"target < 120 s wall)", flush=True)
    print(f"   load average during the run: {os.getloadavg()[0]:.1f} (other work slows the wall time)",
          flush=True)
    (out_dir / "bench_demo.json").write_text(json.dumps(results, indent=2))


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
