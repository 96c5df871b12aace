"""TUI fixtures: a seeded demo database with a frozen clock, and an app factory for Pilot."""

from __future__ import annotations

import argparse
from datetime import datetime, timezone
from pathlib import Path

import pytest

from console.clock import fixed_clock

NOW = datetime(2025, 6, 1, 12, 0, 0, tzinfo=timezone.utc)
NOW_TEXT = "2025-06-01 12:00:00"
_CACHE: dict[tuple, Path] = {}


def demo_file(tmp_path_factory, release: str = "current", requests: int = 200) -> Path:
    """Generated once per session and copied per test (generation is the slow part)."""
    key = (release, requests)
    if key not in _CACHE:
        from console.demo.writer import generate

        path = tmp_path_factory.mktemp("demo-master") / f"demo-{release}.db"
        generate(path, release=release, requests=requests, seed=7, now=NOW_TEXT, overwrite=True, wal=False)
        _CACHE[key] = path
    return _CACHE[key]


@pytest.fixture
def demo_db(make_db, tmp_path_factory):
    def factory(release: str = "current", requests: int = 200, name: str = "archon.db") -> Path:
        return make_db(template=demo_file(tmp_path_factory, release, requests), name=name)
    return factory


def make_ctx(path: Path, *, actor: str = "alice", read_only: bool = False):
    from console.cli.cli import Context

    return Context(db_path=path, actor=actor, read_only=read_only, json=False, busy_timeout_ms=2000,
                   clock=fixed_clock(NOW), args=argparse.Namespace(),
                   write_clock=fixed_clock(NOW))  # the demo database is dated at NOW; no env is involved


@pytest.fixture
def make_app(monkeypatch, tmp_path):
    monkeypatch.setenv("ARCHON_CONSOLE_KEYMAP", str(tmp_path / "no-keymap.toml"))
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)

    def factory(path: Path, *, actor: str = "alice", read_only: bool = False, start: str | None = None,
                poll_seconds: float = 0.2):
        from console.tui.app import ArchonConsole
        from tests.tui.pilot import record_notifications

        app = ArchonConsole(make_ctx(path, actor=actor, read_only=read_only), start=start, poll_seconds=poll_seconds)
        record_notifications(app)
        return app
    return factory
