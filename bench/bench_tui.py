"""The console against its targets on a 1,000,000-request database.

1. Process start to first painted approvals screen, against a minimal Textual app (Header,
   Footer, 50-row DataTable) started the same way in the same run (target: at most 1.3x).
2. Page-down latency while scrolling 1,000 pages of the all-status queue (target: p99 < 100 ms):
   from the key event posted to the app to the frame that shows the new rows (`FrameClock`), with
   an in-memory DataTable measured the same way, and both through Pilot for comparison.
3. Peak RSS (the child's VmHWM, median of 3) after scrolling 200 pages at 10,000 and at 1,000,000
   requests (target: within 10%).

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
PYCACHE = Path(__file__).resolve().parent / "out" / "pycache"
PILOT_PAGES = 200

# Both children time the first frame that shows their rows, in the same way: `App._display` is
# wrapped, the frame is encoded to terminal sequences as a real terminal would be sent (headless
# mode skips only the write), and the time is taken when the predicate holds for that frame.
FIRST_FRAME = r"""
def time_first_frame(app, shows_rows, started, result):
    original = app._display
    def display(screen, renderable):
        original(screen, renderable)
        if renderable is None or "paint" in result or not shows_rows():
            return
        if hasattr(renderable, "render_segments"):
            renderable.render_segments(app.console)
        result["paint"] = time.time() - started
        app.exit()
    app._display = display
"""

CHILD_CONSOLE = FIRST_FRAME + r"""
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

def first_row_loaded():
    screen = app.screen
    tables = screen.query(LazyTable) if screen.is_attached else []
    return bool(tables) and tables.first().row_at(0) is not None

if mode == "paint":
    time_first_frame(app, first_row_loaded, started, result)
else:  # rss: scroll 200 pages of the all-status queue
    def check():
        if not first_row_loaded():
            app.set_timer(0.005, check)
            return
        screen = app.screen
        async def scroll():
            from dataclasses import replace
            screen.filters = replace(screen.filters, statuses=None)
            table = screen.query_one(LazyTable)
            table.set_source(screen._source())
            for _ in range(200):
                while not table.visible_loaded:
                    await asyncio.sleep(0.005)
                table.action_page_down()
            app.exit()
        import asyncio
        app.run_worker(scroll())
    app.call_later(check)
app.run(headless=True, size=(120, 40))
# Peak RSS of this process image: VmHWM. (ru_maxrss survives execve on Linux, so a child started
# by a bench process that has grown reports the parent's size instead of its own.)
try:
    with open("/proc/self/status") as status:
        result["rss_kb"] = next(int(l.split()[1]) for l in status if l.startswith("VmHWM:"))
except (OSError, StopIteration):
    result["rss_kb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("RESULT", result)
"""

CHILD_MINIMAL = FIRST_FRAME + r"""
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
app = Minimal()
result = {}
time_first_frame(app, lambda: app.screen.is_attached and app.query(DataTable) and app.query_one(DataTable).row_count == 50,
                 started, result)
app.run(headless=True, size=(120, 40))
print("RESULT", result)
"""


def _database(out: Path, requests: int) -> Path:
    path = out / f"bench-tui-{requests}.db"
    if not path.exists():
        from console.demo import generate

        print(f"   generating {requests:,} requests (cached in {path}) ...", flush=True)
        generate(path, requests=requests, seed=7, now=NOW, overwrite=True, wal=False)
    return path


def _child(code: str, *args: str) -> dict:
    # Bytecode as an installed package has it: cached under bench/out/pycache (written by the
    # first, untimed run), even where the environment says PYTHONDONTWRITEBYTECODE; otherwise
    # every start would compile the console's own modules from source (~30 ms) and the minimal
    # app's Textual, installed with its .pyc files, would not pay the same.
    env = dict(os.environ, ARCHON_CONSOLE_NOW=NOW, ARCHON_CONSOLE_KEYMAP="/nonexistent",
               PYTHONPYCACHEPREFIX=str(PYCACHE))
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    started = time.time()
    args = tuple(a if a != "{started}" else repr(started) for a in args)
    proc = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env,
                          cwd=Path(__file__).resolve().parent.parent, timeout=300)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            return eval(line[len("RESULT "):])  # our own child's dict literal
    raise RuntimeError(f"child failed: {proc.stderr[-2000:]}")


class FrameClock:
    """Times key presses to the frame that shows their result, inside the app, without Pilot.

    Keys are posted to the app as the terminal driver posts them (`events.Key`), and the next is
    sent as soon as the previous one's frame is out (key repeat). `App._display` is wrapped: when
    a frame is handed over for output, it is encoded to terminal sequences as a real terminal
    would be sent (headless mode skips only the write), and if `done()` now holds, that frame is
    the one that shows the result. Pilot's `press` instead waits for idle and animations after
    every key, which costs ~90 ms per key on its own.
    """

    def __init__(self, app) -> None:
        self.app = app
        self.pending = None
        self.done = None
        self.action_started = None
        original = app._display

        def display(screen, renderable):
            original(screen, renderable)
            if renderable is None or self.pending is None or self.pending.done():
                return
            if hasattr(renderable, "render_segments"):
                renderable.render_segments(app.console)
            if self.done():
                self.pending.set_result(time.perf_counter())

        app._display = display

    async def press(self, key: str, done) -> tuple[float, float | None]:
        """(key posted -> frame, action started -> frame) in ms."""
        from textual import events

        self.done, self.action_started = done, None
        self.pending = asyncio.get_running_loop().create_future()
        started = time.perf_counter()
        self.app.post_message(events.Key(key, None))
        shown = await asyncio.wait_for(self.pending, 10)
        action = None if self.action_started is None else (shown - self.action_started) * 1000
        return (shown - started) * 1000, action


async def _settle(pilot, predicate) -> None:
    while not predicate():
        await pilot.pause(0.005)


async def _page_latency(db: Path, pages: int, *, pilot_keys: bool = False) -> tuple[list[float], list[float]]:
    """Page Down through the all-status queue on `db`: per key, time to the frame showing the
    new rows (none of them placeholders). `pilot_keys` measures through `pilot.press` instead."""
    from dataclasses import replace

    from console.app import ArchonConsole
    from console.cli import build_parser, make_context
    from widgets.lazy_table import LazyTable

    os.environ["ARCHON_CONSOLE_NOW"] = NOW
    argv = ["--db", str(db)]
    ctx = make_context(build_parser(argv).parse_args(argv))
    app = ArchonConsole(ctx, start="approvals", poll_seconds=3600)
    keys, actions = [], []
    async with app.run_test(size=(120, 40)) as pilot:
        await _settle(pilot, lambda: app.screen.query(LazyTable))
        screen = app.screen
        screen.filters = replace(screen.filters, statuses=None)
        table = screen.query_one(LazyTable)
        table.set_source(screen._source())
        await _settle(pilot, lambda: table.visible_loaded)
        clock = FrameClock(app)
        original = table.action_page_down

        def page_down():
            clock.action_started = time.perf_counter()
            original()

        table.action_page_down = page_down
        for _ in range(pages):
            before = int(table.scroll_offset.y)
            shown = lambda: int(table.scroll_offset.y) > before and table.visible_loaded  # noqa: E731
            if pilot_keys:
                started = time.perf_counter()
                await pilot.press("pagedown")
                await _settle(pilot, shown)
                await pilot.pause()
                keys.append((time.perf_counter() - started) * 1000)
            else:
                key, action = await clock.press("pagedown", shown)
                keys.append(key)
                actions.append(action)
        rows = table.cursor
        if not pilot_keys:  # End: the last page, read backwards from the end of each partition
            end, _ = await clock.press("end", lambda: table.cursor == table.total - 1 and table.visible_loaded)
            print(f"   End on {table.total:,} rows: {end:.1f} ms to the frame showing the last row")
    print(f"   scrolled to row {rows:,} of {table.total:,}")
    return keys, actions


async def _datatable_latency(pages: int, *, pilot_keys: bool = False) -> list[float]:
    """The same measurement on a plain in-memory DataTable, for scale."""
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
        table = app.query_one(DataTable)
        await pilot.pause()
        clock = FrameClock(app)
        for _ in range(pages):
            before = int(table.scroll_offset.y)
            moved = lambda: int(table.scroll_offset.y) > before  # noqa: E731
            if pilot_keys:
                started = time.perf_counter()
                await pilot.press("pagedown")
                await pilot.pause()
                latencies.append((time.perf_counter() - started) * 1000)
            else:
                latencies.append((await clock.press("pagedown", moved))[0])
    return latencies


def _p(values: list[float]) -> tuple[float, float]:
    return statistics.median(values), statistics.quantiles(values, n=100)[98]


def main(out_dir: Path) -> dict:
    out_dir = Path(out_dir)
    big = _database(out_dir, 1_000_000)
    small = _database(out_dir, 10_000)

    _child(CHILD_CONSOLE, str(big), "{started}", "paint")  # warm-up: bytecode cache and page cache
    _child(CHILD_MINIMAL, "{started}")
    console, minimal = [], []
    for _ in range(RUNS):  # alternated, so both see the same machine load
        console.append(_child(CHILD_CONSOLE, str(big), "{started}", "paint")["paint"])
        minimal.append(_child(CHILD_MINIMAL, "{started}")["paint"])
    c, m = statistics.median(console), statistics.median(minimal)
    print(f"   start to first paint: console {c * 1000:.0f} ms (1M requests), minimal app {m * 1000:.0f} ms, "
          f"ratio {c / m:.2f}x (target <= 1.3x)")

    keys, actions = asyncio.run(_page_latency(big, 1000))
    p50, p99 = _p(keys)
    a50, a99 = _p(actions)
    print(f"   page-down over {len(keys)} pages of the all-status queue, key posted to the app -> frame showing "
          f"the new rows: p50 {p50:.1f} ms, p99 {p99:.1f} ms (target p99 < 100 ms); from the table's action: "
          f"p50 {a50:.1f} ms, p99 {a99:.1f} ms")
    d50, d99 = _p(asyncio.run(_datatable_latency(PILOT_PAGES)))
    print(f"   for scale, the same on an in-memory DataTable ({PILOT_PAGES} pages): p50 {d50:.1f} ms, p99 {d99:.1f} ms")
    pilot_keys, _ = asyncio.run(_page_latency(big, PILOT_PAGES, pilot_keys=True))
    pilot_base = asyncio.run(_datatable_latency(PILOT_PAGES, pilot_keys=True))
    (q50, q99), (b50, b99) = _p(pilot_keys), _p(pilot_base)
    print(f"   through Pilot's press (includes Pilot's own waits), {PILOT_PAGES} pages: console p50 {q50:.1f} ms, "
          f"p99 {q99:.1f} ms; DataTable p50 {b50:.1f} ms, p99 {b99:.1f} ms")

    small_runs, big_runs = [], []
    for _ in range(3):  # alternated; the median of each
        small_runs.append(_child(CHILD_CONSOLE, str(small), "{started}", "rss")["rss_kb"])
        big_runs.append(_child(CHILD_CONSOLE, str(big), "{started}", "rss")["rss_kb"])
    rss_small, rss_big = statistics.median(small_runs), statistics.median(big_runs)
    print(f"   peak RSS after 200 pages: {rss_small / 1024:.1f} MB at 10,000, {rss_big / 1024:.1f} MB at 1,000,000 "
          f"({(rss_big / rss_small - 1) * 100:+.1f}%, target within 10%)")
    result = {"start_console_ms": c * 1000, "start_minimal_ms": m * 1000, "start_ratio": c / m,
              "page_p50_ms": p50, "page_p99_ms": p99, "page_action_p50_ms": a50, "page_action_p99_ms": a99,
              "datatable_p50_ms": d50, "datatable_p99_ms": d99, "pilot_page_p50_ms": q50, "pilot_page_p99_ms": q99,
              "pilot_datatable_p50_ms": b50, "pilot_datatable_p99_ms": b99,
              "rss_10k_kb": rss_small, "rss_1m_kb": rss_big}
    (out_dir / "bench_tui.json").write_text(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main(Path(__file__).resolve().parent / "out")
