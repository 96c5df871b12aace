"""A small tmpfs to fill up: the only honest way to test a full disk.

Mounting needs root (and a kernel that lets this container mount); elsewhere the tests that use
it skip and say why. The mount is always undone, lazily if something still holds a file in it.
"""

from __future__ import annotations

import os
import subprocess
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

import pytest


class SmallDisk:
    def __init__(self, path: Path):
        self.path = path

    def _remount(self, options: str) -> None:
        subprocess.run(["mount", "-o", f"remount,{options}", str(self.path)], check=True, capture_output=True)

    def grow(self, size: str = "64m") -> None:
        """Free space appears (as if the operator cleaned up)."""
        self._remount(f"size={size}")

    def read_only(self) -> None:
        self._remount("ro")

    def entries(self) -> list[str]:
        return sorted(os.listdir(self.path))


@contextmanager
def small_disk(path: Path, size: str = "256k") -> Iterator[SmallDisk]:
    if os.geteuid() != 0:
        pytest.skip("a full disk is simulated with a small tmpfs, and mounting one needs root")
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip() or mounted.returncode}")
    try:
        yield SmallDisk(path)
    finally:
        if subprocess.run(["umount", str(path)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)
