"""Harlequin, the terminal SQL IDE, driven through the same pseudo-terminal as the console
(bench/pty_term.py) on the same file: the TUI's peer in bench/bench_tui.py.

Installed with pip into its own cached environment (bench/install.py `harlequin`), started
`harlequin -a sqlite --read-only FILE` with a fresh HOME and XDG directories (no restored editor
buffer, no history). Harlequin opens on an empty editor, so its "first rows" are: fork to its first
complete frame (the editor's "Run Query" button drawn), plus ctrl+j to the complete frame holding
FIRST_ROWS row ids of QUERY, the console's queue as a user of harlequin types it (pending
requests by expiry). The typing between the two is not counted. For paging, F5 focuses the
results viewer, whose page down (like a DataTable's) first moves the cursor to the bottom; one
untimed page down, then each key counts like the console's.
"""

from __future__ import annotations

import re
import shutil
import time
from pathlib import Path

from bench import harness as h
from bench.pty_term import PAGE_DOWN, Terminal

QUERY = (b"SELECT id, project_id, status, action_kind, expires_at FROM approval_requests "
         b"WHERE status = 'pending' ORDER BY expires_at, id")
PASTE_START, PASTE_END = b"\x1b[200~", b"\x1b[201~"  # bracketed paste, as a terminal sends a paste
SELECT_ALL = b"\x01"  # ctrl+a in the editor: a second paste replaces the first instead of doubling it
PASTES = 10
READY = b"Run Query"
ECHO = b"expires_at, id"  # QUERY's end, as the editor draws it
ESCAPES = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
RUN_QUERY = b"\n"  # ctrl+j, harlequin's run-query key (ctrl+enter is not distinguishable on a pty)
FOCUS_RESULTS = b"\x1b[15~"  # F5


def _env(env: dict[str, str]) -> dict[str, str]:
    home = h.out_dir() / "harlequin-home"
    shutil.rmtree(home, ignore_errors=True)
    home.mkdir()
    return dict(env, HOME=str(home), XDG_CONFIG_HOME=str(home / "config"), XDG_CACHE_HOME=str(home / "cache"),
                XDG_STATE_HOME=str(home / "state"), XDG_DATA_HOME=str(home / "data"))


def _echoed(term: Terminal, timeout: float = 3.0) -> bool:
    """Whether the editor drew the end of QUERY (the text without its escape sequences)."""
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        term.settle(quiet=0.2, limit=1)
        if ECHO in ESCAPES.sub(b"", bytes(term.buffer[-20000:])):
            return True
    return False


def start(script: Path, path: Path, env: dict[str, str], cols: int, rows: int,
          first_rows: int) -> tuple[Terminal, float]:
    """Harlequin on `path` with QUERY's first rows shown; returns it and the first-rows time
    (fork to its first frame + ctrl+j to the frame holding `first_rows` row ids)."""
    term = Terminal([str(script), "-a", "sqlite", "--read-only", str(path)], _env(env), cols, rows,
                    cwd=str(h.out_dir()))
    try:
        ready = term.wait_for(READY) - term.started
        term.settle(quiet=0.5, limit=15)  # not counted: the time until the editor takes the query
        for _ in range(PASTES):  # a paste before the editor has focus is lost: select all, paste again
            term.type(SELECT_ALL + PASTE_START + QUERY + PASTE_END)  # typed keys open the completer, which crashes
            if _echoed(term):
                break
        else:
            raise RuntimeError(f"harlequin's editor did not show the query pasted into it {PASTES} times")
        pressed, at = term.press(RUN_QUERY)
        shown, _ = term.wait_new_ids(at, first_rows)
        return term, ready + (shown - pressed)
    except BaseException:
        term.close()
        raise


def first_rows(script: Path, path: Path, env: dict[str, str], cols: int, rows: int, wanted: int) -> float:
    term, seconds = start(script, path, env, cols, rows, wanted)
    term.close()
    return seconds


def ready_to_page(script: Path, path: Path, env: dict[str, str], cols: int, rows: int,
                  wanted: int) -> tuple[Terminal, int]:
    """Harlequin with QUERY's rows, the results viewer focused and one page down done; returns it
    and how many row ids a screen shows."""
    term, _ = start(script, path, env, cols, rows, wanted)
    try:
        term.settle(quiet=0.5, limit=10)
        visible = len(term.seen)
        term.press(FOCUS_RESULTS)
        term.settle(quiet=0.3, limit=5)
        term.press(PAGE_DOWN)
        term.settle(quiet=0.3, limit=5)
        return term, visible
    except BaseException:
        term.close()
        raise
