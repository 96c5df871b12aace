"""A stop (Ctrl-C, SIGTERM, SIGHUP) during a fleet command's event loop cancels the command's
coroutine, so every task unwinds as a cancellation (console/signals.py `run_until_stopped`).

Raised by the signal handler at an arbitrary point of the loop, the KeyboardInterrupt became the
exception of whichever task was running: its cancellation handling never ran, and asyncio reported
a task exception never retrieved or a transport never closed, about one CI run in five
(tests/fleet/test_async_failures.py met it at a watch's reconnection). Here the signal arrives
while a task's step runs Python code, every time.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = r'''
import asyncio, json, os, signal, sys
from console.signals import Stopped, run_until_stopped, stop_signals_unwind

events = []

async def busy():
    await asyncio.sleep(0)
    os.kill(os.getpid(), int(sys.argv[1]))  # arrives while this task's step runs Python code
    total = 0
    for i in range(200000):
        total += i
    try:
        await asyncio.sleep(3600)
    except asyncio.CancelledError:
        events.append("busy cancelled")
        raise

async def main():
    task = asyncio.ensure_future(busy())
    try:
        await asyncio.sleep(3600)
    finally:
        task.cancel()
        [outcome] = await asyncio.gather(task, return_exceptions=True)
        events.append("cleaned: " + type(outcome).__name__)

with stop_signals_unwind():
    try:
        run_until_stopped(main())
    except Stopped as exc:
        events.append("stopped: " + exc.name)
    except KeyboardInterrupt:
        events.append("stopped: SIGINT")
    # after the loop the console's own handlers are back: a later stop still unwinds
    try:
        os.kill(os.getpid(), int(sys.argv[1]))
        for _ in range(10000000):
            pass
    except KeyboardInterrupt:
        events.append("later stop unwinds")
print(json.dumps(events))
'''


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
def test_a_stop_in_the_event_loop_cancels_every_task(signum):
    result = subprocess.run([sys.executable, "-c", SCRIPT, str(int(signum))], capture_output=True, text=True,
                            cwd=ROOT, timeout=120,
                            env={"PATH": "/usr/bin:/bin", "PYTHONASYNCIODEBUG": "1", "PYTHONDEVMODE": "1"})
    assert result.returncode == 0, result
    assert json.loads(result.stdout) == ["busy cancelled", "cleaned: CancelledError",
                                         f"stopped: {signal.Signals(signum).name}", "later stop unwinds"]
    assert result.stderr == ""
