"""`make bench` cannot rot: the harness runs end to end in quick mode on a tiny database.

The in-process modules run for real (one pair each, a live holder included), and so do the modules
that time commands as child processes (the list and start-up rows, issue 22's per-command rows,
doctor, issue 23's support rows, audit), on the editable install (`ARCHON_BENCH_INSTALL=editable`: no package index needed);
results.json is written and the table rendered. The pty modules are imported. The figures of a
quick run mean nothing; only that every piece still fits together.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# Every row of issues 22 and 23 the child-process modules make, idle and live.
NEW_ROWS = (
    [f"cmd-{name}-{state}" for name in ("show", "envs", "approve", "plan") for state in ("idle", "live")]
    + [f"{row}-{state}" for row in ("doctor", "doctor-read", "inspect", "bundle", "bundle-rss", "audit-temp")
       for state in ("idle", "live")]
    + [f"{row}-{state}" for row in ("list-vs-shell", "list-vs-sqlite-utils") for state in ("idle", "live")]
    + ["sidecar-list", "sidecar-show"]
)


def test_bench_quick_run_writes_results_and_table(tmp_path):
    env = dict(os.environ, ARCHON_BENCH_DIR=str(tmp_path / "cache"), ARCHON_BENCH_OUT=str(tmp_path / "out"),
               ARCHON_BENCH_REQUESTS="1500", ARCHON_BENCH_PAIRS="1", ARCHON_BENCH_INSTALL="editable")
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "pending", "snapshot", "writes", "cli",
                           "commands", "doctor", "support", "audit"], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    figures = {f["id"]: f for f in results["figures"]}
    for state in ("idle", "live"):
        in_process = {f"pending-check-{state}", f"snapshot-{state}", f"writes-normal-{state}", f"writes-full-{state}"}
        assert in_process <= set(figures)
    assert live_wal(figures["writes-full-live"]) > 0  # the holder's -wal was hot
    for row in NEW_ROWS:  # each measured against its baseline, or saying why not
        fig = figures[row]
        assert fig["console_stats"] or fig["note"].startswith("not measured: "), fig
    assert all(f["ratio_stats"] for f in figures.values() if f["console_stats"] and f["baseline_stats"])
    assert figures["doctor-read-idle"]["console_stats"]["median"] > 0  # /proc/PID/io of the child was read
    assert results["meta"]["install"].startswith("editable install")
    assert "| item | figure |" in proc.stdout and "QUICK" in proc.stdout and "Console as installed" in proc.stdout
    importlib.import_module("bench.bench_tui")


def live_wal(figure: dict) -> int:
    return figure["extra"]["holder"]["wal_bytes"]


def test_harlequin_is_not_installed_in_quick_mode_and_its_rows_say_why(monkeypatch):
    """The TUI's peer costs a pip install: a quick run skips it with a reason, unless asked."""
    from bench import bench_tui, harness

    monkeypatch.setenv("ARCHON_BENCH_QUICK", "1")
    monkeypatch.delenv("ARCHON_BENCH_HARLEQUIN", raising=False)
    script, why = bench_tui._harlequin()
    assert script is None and "quick mode" in why
    before = len(harness.FIGURES)
    bench_tui._no_harlequin("idle", why)
    rows = harness.FIGURES[before:]
    del harness.FIGURES[before:]
    assert {r.id for r in rows} == {"tui-harlequin-first-idle", "tui-harlequin-page-idle", "tui-harlequin-rss-idle"}
    assert all(r.note == f"not measured: {why}" and r.console_stats is None for r in rows)


def test_the_same_sources_build_the_same_wheel_so_the_installed_venv_is_reused(tmp_path, monkeypatch):
    """The installed console's venv is cached by the wheel's hash: that only works if building
    twice from unchanged sources gives the same bytes (bench/install.py fixes SOURCE_DATE_EPOCH)."""
    from bench import install

    monkeypatch.setenv("ARCHON_BENCH_OUT", str(tmp_path))
    first = hashlib.sha256(install.build_wheel().read_bytes()).hexdigest()
    second = hashlib.sha256(install.build_wheel().read_bytes()).hexdigest()
    assert first == second


def test_without_a_package_index_the_bench_falls_back_to_the_editable_install_and_says_so(tmp_path, monkeypatch):
    """Offline, the wheel builds but its dependencies cannot be installed: the run goes on with the
    checkout's editable install, labelled as such (results.json's meta and the table name it)."""
    from bench import install

    monkeypatch.setenv("ARCHON_BENCH_OUT", str(tmp_path))
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(tmp_path / "no-wheels-here"))
    monkeypatch.delenv("ARCHON_BENCH_INSTALL", raising=False)
    monkeypatch.setattr(install, "_CONSOLE", None)
    got = install.console()
    assert got.kind == "editable" and got.python == Path(sys.executable)
    assert install.described().startswith("editable install (fallback): the wheel's dependencies could not be installed")
    assert not list((tmp_path / "install").glob("venv-*"))  # no half-made environment is left to be reused
