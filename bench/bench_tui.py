"""Item 7: the TUI timed from outside, through a pseudo-terminal (bench/pty_term.py).

- First paint: from fork to the first output holding FIRST_ROWS row ids, `archon-console --db`
  on the 1M database (it opens on the pending queue) against bench/minimal_app.py (Header,
  Footer, a 50-row DataTable), alternated A B A B, idle and live. Target <= 1.3x.
- Page down: both programs run side by side on their own terminals; keys alternate between them
  (console, minimal app with enough rows, console, ...). A key's latency runs from writing
  PAGE_DOWN to the pty to the arrival of the complete frame (bench/pty_term.py) by which a whole
  screenful of row ids never seen before has been drawn, less two (the rows a screen holds are
  counted once, after the first screen has fully loaded; placeholders carry no id, so a screen
  drawn with placeholders first counts when its last row is filled in). Then the terminal is read
  until it has been quiet for 30 ms before the next key. p50 and p99 over PAGES keys.
  Target p99 < 100 ms.
- Peak RSS: VmHWM from /proc/PID/status of the running console after the same number of page
  moves at 10k and at 1M requests, alternated, three times each. Target: within 10 %.
"""

from __future__ import annotations

import os
import sqlite3
import time

from bench import harlequin as hq
from bench import harness as h
from bench.pty_term import PAGE_DOWN, Terminal

COLS, ROWS = 100, 30
FIRST_ROWS = 5


def _console(path, env) -> Terminal:
    return Terminal(h.cli() + ["--db", str(path)], env, COLS, ROWS, cwd=str(h.ROOT))


def _minimal(rows: int, env) -> Terminal:
    return Terminal([h.python(), str(h.ROOT / "bench" / "minimal_app.py"), str(rows)], env, COLS, ROWS,
                    cwd=str(h.ROOT))


def _first_paint(start) -> float:
    term = start()
    try:
        at, _ = term.wait_new_ids(0, FIRST_ROWS)
        return at - term.started
    finally:
        term.close()


def _ready(term: Terminal) -> int:
    """Wait for the first frame and let it finish; returns how many row ids it shows.

    Then one untimed page down: a DataTable's first one may only move the cursor to the bottom
    of the screen, every later one shows a new screenful."""
    term.wait_new_ids(0, FIRST_ROWS)
    term.settle(quiet=0.5, limit=10)  # every row of the first screen loaded and drawn
    visible = len(term.seen)
    term.press(PAGE_DOWN)
    time.sleep(0.3)
    term.settle()
    return visible


def _page(term: Terminal, wanted: int) -> float:
    started, at = term.press(PAGE_DOWN)
    shown, _ = term.wait_new_ids(at, wanted, timeout=30)
    term.settle(quiet=0.03)
    return (shown - started) * 1000


def _pending(path, state: str = "idle") -> int:
    conn = sqlite3.connect(f"file:{path}?{'immutable=1' if state == 'idle' else 'mode=ro'}", uri=True)
    try:
        projects = [r[0] for r in conn.execute("SELECT id FROM projects")]
        return sum(conn.execute("SELECT count(*) FROM approval_requests WHERE project_id = ? AND status = 'pending'",
                                (p,)).fetchone()[0] for p in projects)
    finally:
        conn.close()


def _rss_after(path, env, pages: int) -> float:
    term = _console(path, env)
    try:
        visible = _ready(term)
        for _ in range(pages):
            _page(term, max(1, visible - 2))
        return term.vm_hwm_kb() / 1024
    finally:
        term.close()


def _harlequin() -> tuple[object | None, str]:
    """Harlequin's script, or None and why it is not measured."""
    wanted = os.environ.get("ARCHON_BENCH_HARLEQUIN")
    if wanted == "0":
        return None, "ARCHON_BENCH_HARLEQUIN=0"
    if h.quick() and wanted != "1":
        return None, "skipped in quick mode (ARCHON_BENCH_HARLEQUIN=1 installs and runs it)"
    from bench import install

    got = install.harlequin()
    return (got.script, "") if got.script else (None, got.note)


HQ_ROWS = {
    "first": ("tui-harlequin-first-{}", "TUI first rows: the console vs harlequin", "ratio <= 1 (the lead holds)"),
    "page": ("tui-harlequin-page-{}", "page down: the console vs harlequin", "ratio <= 1 (the lead holds)"),
    "rss": ("tui-harlequin-rss-{}", "VmHWM after paging: the console vs harlequin", "ratio <= 1 (the lead holds)"),
}


def _no_harlequin(state: str, why: str) -> None:
    for fig, what, target in HQ_ROWS.values():
        h.not_measured(fig.format(state), "22", what, state=state, why=why, target=target)


def main() -> None:
    d = h.data()
    env = h.child_env(d.now)
    pages = int(os.environ.get("ARCHON_BENCH_PAGES", 20 if h.quick() else 1000))
    visible = 0
    hq_script, hq_why = _harlequin()
    for state, path, info in h.states(d):
        extra = {"holder": info} if info else {}
        c, b = h.paired(lambda path=path: _first_paint(lambda: _console(path, env)),
                        lambda: _first_paint(lambda: _minimal(50, env)), h.pairs(9))
        h.record(f"tui-first-paint-{state}", "7", f"TUI start to first frame showing rows ({COLS}x{ROWS} pty)",
                 state=state, console="archon-console", values=c, baseline="minimal Textual app (50 rows)",
                 base_values=b, target="<= 1.3x", check=lambda r: r <= 1.3, extra=extra)
        if hq_script is not None:
            try:
                c, b = h.paired(lambda path=path: _first_paint(lambda: _console(path, env)),
                                lambda path=path: hq.first_rows(hq_script, path, env, COLS, ROWS, FIRST_ROWS),
                                h.pairs(7))
                fig, what, target = HQ_ROWS["first"]
                h.record(fig.format(state), "22", what, state=state, console="archon-console", values=c,
                         baseline="harlequin (first frame + ctrl+j to rows)", base_values=b, target=target,
                         check=lambda r: r <= 1.0, extra=extra)
            except (RuntimeError, TimeoutError, OSError) as exc:
                hq_script, hq_why = None, f"harlequin did not show rows: {exc}"[:200]
        if hq_script is None:
            _no_harlequin(state, hq_why)

        console, minimal, peer = _console(path, env), None, None
        try:
            visible = _ready(console)
            pages = min(pages, _pending(path, state) // max(visible, 1) - 3)
            minimal = _minimal((pages + 6) * 40, env)
            shown = _ready(minimal)
            peer_shown, peer_why = 0, ""
            if hq_script is not None:
                try:
                    peer, peer_shown = hq.ready_to_page(hq_script, path, env, COLS, ROWS, FIRST_ROWS)
                except (RuntimeError, TimeoutError, OSError) as exc:
                    peer_why = f"harlequin could not be paged: {exc}"[:200]
            keys, base, peer_keys = [], [], []
            for _ in range(pages):
                keys.append(_page(console, max(1, visible - 2)))
                base.append(_page(minimal, max(1, shown - 2)))
                if peer is not None:
                    peer_keys.append(_page(peer, max(1, peer_shown - 2)))
            rss = console.vm_hwm_kb() / 1024
            peer_rss = peer.vm_hwm_kb() / 1024 if peer is not None else None
        finally:
            console.close()
            if minimal is not None:
                minimal.close()
            if peer is not None:
                peer.close()
        if peer_why:
            for key in ("page", "rss"):
                fig, what, target = HQ_ROWS[key]
                h.not_measured(fig.format(state), "22", what, state=state, why=peer_why, target=target)
        if peer_keys:
            fig, what, target = HQ_ROWS["page"]
            h.record(fig.format(state), "22", what, state=state, console="archon-console", values=keys, unit="ms",
                     baseline="harlequin results viewer", base_values=peer_keys, target=target,
                     met=h.percentile(keys, 50) <= h.percentile(peer_keys, 50),
                     extra=dict(extra, p50_ms=h.percentile(keys, 50), p99_ms=h.percentile(keys, 99),
                                baseline_p50_ms=h.percentile(peer_keys, 50),
                                baseline_p99_ms=h.percentile(peer_keys, 99)))
            fig, what, target = HQ_ROWS["rss"]
            h.record(fig.format(state), "22", what, state=state, console="archon-console", values=[rss], unit="MB",
                     baseline="harlequin", base_values=[peer_rss], target=target, check=lambda r: r <= 1.0,
                     extra=extra)
        p99, b99 = h.percentile(keys, 99), h.percentile(base, 99)
        h.record(f"tui-page-{state}", "7", f"page down, key to frame showing the new rows, {pages} keys",
                 state=state, console="archon-console", values=keys, unit="ms",
                 baseline="minimal Textual app (DataTable)", base_values=base,
                 target="p99 < 100 ms", met=p99 < 100,
                 extra=dict(extra, p50_ms=h.percentile(keys, 50), p99_ms=p99, baseline_p50_ms=h.percentile(base, 50),
                            baseline_p99_ms=b99, visible_rows=visible, rss_after_paging_mb=rss))
        print(f"      p50 {h.percentile(keys, 50):.1f} ms, p99 {p99:.1f} ms (minimal app p50 "
              f"{h.percentile(base, 50):.1f} ms, p99 {b99:.1f} ms); console VmHWM after paging {rss:.1f} MB",
              flush=True)

    small, _ = h.source_db(h.small_requests(), now=d.now)
    small_copy = h.copy_db(small, h.out_dir() / "tui-small.db")
    rss_pages = max(1, min(200, pages, _pending(small_copy) // max(visible, 1) - 3))
    runs = h.alternate({"small": lambda: _rss_after(small_copy, env, rss_pages),
                        "big": lambda: _rss_after(d.idle, env, rss_pages)}, 1 if h.quick() else 3, warmup=False)
    h.remove_sidecars(d.idle)
    h.record("tui-rss", "7", f"TUI peak RSS (VmHWM) after {rss_pages} page moves", state="idle",
             console=f"{h.requests():,} requests", values=runs["big"], unit="MB",
             baseline=f"{h.small_requests():,} requests", base_values=runs["small"], target="<= 1.10x",
             check=lambda r: r <= 1.10)
