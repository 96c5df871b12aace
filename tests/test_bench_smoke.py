"""`make bench` cannot rot: the harness runs end to end in quick mode on a tiny database.

The in-process modules run for real (one pair each, a live holder included) and write
results.json; the modules that time child processes and the pty are imported, and the table is
rendered. The figures of a quick run mean nothing; only that every piece still fits together.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent


def test_bench_quick_run_writes_results_and_table(tmp_path):
    env = dict(os.environ, ARCHON_BENCH_DIR=str(tmp_path / "cache"), ARCHON_BENCH_OUT=str(tmp_path / "out"),
               ARCHON_BENCH_REQUESTS="1500", ARCHON_BENCH_PAIRS="1")
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "pending", "snapshot", "writes"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    ids = {f["id"] for f in results["figures"]}
    for state in ("idle", "live"):
        assert {f"pending-check-{state}", f"snapshot-{state}", f"writes-normal-{state}", f"writes-full-{state}"} <= ids
    live = next(f for f in results["figures"] if f["id"] == "writes-full-live")
    assert live["extra"]["holder"]["wal_bytes"] > 0  # the holder's -wal was hot
    assert all(f["ratio_stats"] for f in results["figures"])
    assert "| item | figure |" in proc.stdout and "QUICK" in proc.stdout
    for name in ("cli", "doctor", "tui"):
        importlib.import_module(f"bench.bench_{name}")
