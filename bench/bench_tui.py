"""The console against its targets on a 1,000,000-request database.

1. Process start to first painted approvals screen, against a minimal Textual app (Header,
   Footer, 50-row DataTable) started the same way in the same run (target: at most 1.3x).
2. Page-down latency while scrolling 1,000 pages of the all-status queue (target: p99 < 100 ms).
3. Peak RSS after scrolling 200 pages at 10,000 and at 1,000,000 requests (target: within 10%).

Run: `.venv/bin/python -m bench tui` (the databases are cached in bench/out/).
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

NOW = "2025-06-01 12:00:00"
RUNS = 5

CHILD_CONSOLE = r"""
import os, sys, time, resource
started = float(sys.argv[2])
mode = sys.argv[3]
from console.cli import make_context, build_parser
from console.app import ArchonConsole
from widgets.lazy_table import LazyTable
argv = ["--db", sys.argv[1]]  # parsed as `archon-console --db PATH` is
ctx = make_context(build_parser(argv).parse_args(argv))
app = ArchonConsole(ctx, start="approvals", poll_seconds=3600)
result = {}
def check():
    screen = app.screen
    tables = screen.query(LazyTable) if screen.is_attached else []
    if tables and tables.first().row_at(0) is not None and not result:
        result["paint"] = time.time() - started
        if mode == "paint":
            app.exit()
            return
        if mode == "rss":
            async def scroll():
                from dataclasses import replace
                screen.filters = replace(screen.filters, statuses=None)
                table = tables.first()
                table.set_source(screen._source())
                for _ in range(200):
                    while not table.visible_loaded:
                        await asyncio.sleep(0.005)
                    table.action_page_down()
                app.exit()
            import asyncio
            app.run_worker(scroll())
            return
    app.set_timer(0.005, check)
app.call_later(check)
app.run(headless=True, size=(120, 40))
result["rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("RESULT", result)
"""

CHILD_MINIMAL = r"""
import sys, time
started = float(sys.argv[1])
from textual.app import App
from textual.widgets import DataTable, Footer, Header
class Minimal(App):
    def compose(self):
        yield Header()
        yield DataTable()
        yield Footer()
    def on_mount(self):
        table = self.query_one(DataTable)
        table.add_columns("id", "status", "project", "kind", "expires")
        table.add_rows([(f"apr-{i}", "pending", "atlas", "git_push", "5m") for i in range(50)])
        self.call_after_refresh(self.done)
    def done(self):
        print("RESULT", {"paint": time.time() - started})
        self.exit()
Minimal().run(headless=True, size=(120, 40))
"""


def _database(out: Path, requests: int) -> Path:
    path = out / f"bench-tui-{requests}.db"
    if not path.exists():
        from console.demo import generate

        print(f"   generating {requests:,} requests (cached in {path}) ...", flush=True)
        generate(path, requests=requests, seed=7, now=NOW, overwrite=True, wal=False)
    return path


def _child(code: str, *args: str) -> dict:
    env = dict(os.environ, ARCHON_CONSOLE_NOW=NOW, ARCHON_CONSOLE_KEYMAP="/nonexistent")
    started = time.time()
    args = tuple(a if a != "{started}" else repr(started) for a in args)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=Path(__file__).resolve().parent.parent, timeout=300)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return eval(line[len("RESULT "):])  # our own child's dict literal
    raise RuntimeError(f"child failed: {proc.stderr[-2000:]}")


async def _page_latency(db: Path, pages: int) -> list[float]:
    from dataclasses import replace

    from console.app import ArchonConsole
    from console.cli import build_parser, make_context
    from widgets.lazy_table import LazyTable

    os.environ["ARCHON_CONSOLE_NOW"] = NOW
    ctx = make_context(build_parser().parse_args(["--db", str(db)]))
    app = ArchonConsole(ctx, start="approvals", poll_seconds=3600)
    latencies = []
    async with app.run_test(size=(120, 40)) as pilot:
        while not app.screen.query(LazyTable):
            await pilot.pause(0.01)
        screen = app.screen
        screen.filters = replace(screen.filters, statuses=None)
        table = screen.query_one(LazyTable)
        table.set_source(screen._source())
        while not table.visible_loaded:
            await pilot.pause(0.005)
        for _ in range(pages):
            started = time.perf_counter()
            await pilot.press("pagedown")
            while not table.visible_loaded:
                await asyncio.sleep(0.001)
            await pilot.pause()  # the repaint
            latencies.append((time.perf_counter() - started) * 1000)
        rows = table.cursor
    print(f"   scrolled to row {rows:,} of {table.total:,}")
    return latencies


async def _datatable_latency(pages: int) -> list[float]:
    """The same Pilot measurement on a plain DataTable: Pilot's own per-key overhead."""
    from textual.app import App
    from textual.widgets import DataTable, Footer, Header

    class Minimal(App):
        def compose(self):
            yield Header()
            yield DataTable()
            yield Footer()

        def on_mount(self):
            table = self.query_one(DataTable)
            table.add_columns("id", "status", "project", "kind", "expires")
            table.add_rows([(f"apr-{i}", "pending", "atlas", "git_push", "5m") for i in range(pages * 40)])
            table.focus()

    app = Minimal()
    latencies = []
    async with app.run_test(size=(120, 40)) as pilot:
        for _ in range(pages):
            started = time.perf_counter()
            await pilot.press("pagedown")
            await pilot.pause()
            latencies.append((time.perf_counter() - started) * 1000)
    return latencies


def main(out_dir: Path) -> dict:
    out_dir = Path(out_dir)
    big = _database(out_dir, 1_000_000)
    small = _database(out_dir, 10_000)

    console = [_child(CHILD_CONSOLE, str(big), "{started}", "paint")["paint"] for _ in range(RUNS)]
    minimal = [_child(CHILD_MINIMAL, "{started}")["paint"] for _ in range(RUNS)]
    c, m = statistics.median(console), statistics.median(minimal)
    print(f"   start to first paint: console {c * 1000:.0f} ms (1M requests), minimal app {m * 1000:.0f} ms, "
          f"ratio {c / m:.2f}x (target <= 1.3x)")

    latencies = asyncio.run(_page_latency(big, 1000))
    q = statistics.quantiles(latencies, n=100)
    p50, p99 = statistics.median(latencies), q[98]
    print(f"   page-down latency over {len(latencies)} pages (all statuses, Pilot key to repaint): "
          f"p50 {p50:.1f} ms, p99 {p99:.1f} ms (target p99 < 100 ms)")
    base = asyncio.run(_datatable_latency(200))
    print(f"   for scale, Pilot key to repaint on an in-memory 50-column-free DataTable: "
          f"p50 {statistics.median(base):.1f} ms, p99 {statistics.quantiles(base, n=100)[98]:.1f} ms")

    rss_small = _child(CHILD_CONSOLE, str(small), "{started}", "rss")["rss_kb"]
    rss_big = _child(CHILD_CONSOLE, str(big), "{started}", "rss")["rss_kb"]
    print(f"   peak RSS after 200 pages: {rss_small / 1024:.1f} MB at 10,000, {rss_big / 1024:.1f} MB at 1,000,000 "
          f"({(rss_big / rss_small - 1) * 100:+.1f}%, target within 10%)")
    result = {"start_console_ms": c * 1000, "start_minimal_ms": m * 1000, "start_ratio": c / m,
              "page_p50_ms": p50, "page_p99_ms": p99, "rss_10k_kb": rss_small, "rss_1m_kb": rss_big}
    (out_dir / "bench_tui.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
