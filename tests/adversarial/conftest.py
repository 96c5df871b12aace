"""Fixtures for the adversarial suite: a demo database per test, copied from one generated per session."""

from __future__ import annotations

import shutil

import pytest

from tests.tui.conftest import demo_file, make_app  # noqa: F401 (a fixture)


@pytest.fixture
def demo_copy(tmp_path, tmp_path_factory):
    def factory(release: str = "current", name: str = "archon.db"):
        target = tmp_path / name
        shutil.copyfile(demo_file(tmp_path_factory, release, 200), target)
        return target

    return factory
