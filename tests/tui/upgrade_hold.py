"""An upgrade held part-way in the console, by a condition the test controls (no sleeps): the
upgrade screen's progress callback waits on an event at the first migration tick, so the worker,
and with it everything the run holds, stays until the test lets it go."""

from __future__ import annotations

import threading

from console.tui.screens import upgrade as upgrade_screen


def held_run(monkeypatch) -> tuple[threading.Event, threading.Event]:
    """(reached, release): `reached` is set when the run has passed its first migration tick,
    which then waits for `release`."""
    reached, release = threading.Event(), threading.Event()
    real = upgrade_screen.call_isolated

    def call_isolated(function, *args, progress=None, **kwargs):
        if function.endswith(":run_upgrade") and progress is not None:
            forward = progress

            def progress(event):
                forward(event)
                if event.kind == "migration" and not reached.is_set():
                    reached.set()
                    assert release.wait(120), "the test never released the upgrade"
        return real(function, *args, progress=progress, **kwargs)

    monkeypatch.setattr(upgrade_screen, "call_isolated", call_isolated)
    return reached, release
