"""The console's own files cannot hang it or fill its memory (issue 17, finding 9f).

A FIFO, `/dev/zero` (or a symlink to it) or a file of several megabytes as the saved views, the
keymap, the notification settings or a watch cursor once blocked the console for ever or read until
memory ran out. All four are read through console/small_files.py `read_small_text`: a regular file
under 1 MB, opened without following a symlink or waiting on a FIFO. Each reader runs in its own
process under `ulimit -v` 1 GB and a timeout (tests/adversarial/bounded.py).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import damage
from tests.adversarial.bounded import ROOT, _limit_memory, console, ended_cleanly

READERS = {
    "views": "from console.services.views import load; print(load(PATH)[1])",
    "keymap": "from console.tui.keymap import load_keymap; print(load_keymap(PATH)[1])",
    "notify": "from console.tui.attention import load_notify_config; print(load_notify_config(PATH)[1])",
}


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _zero_link(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


def _large(path: Path) -> Path:
    with open(path, "w") as handle:
        handle.write("# padding\n" * 300_000)  # 3 MB of valid TOML comments
    return path


HOSTILE = {"fifo": (_fifo, "is a FIFO"), "dev-zero-link": (_zero_link, "is a symbolic link"),
           "3-MB": (_large, "3,000,000 bytes, more than the 1,048,576")}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
@pytest.mark.parametrize("reader", sorted(READERS))
def test_a_settings_file_that_is_not_small_and_regular_is_ignored(tmp_path, reader, kind):
    make, said = HOSTILE[kind]
    path = make(tmp_path / "settings.toml")
    code = READERS[reader].replace("PATH", f"__import__('pathlib').Path({str(path)!r})")
    try:
        result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                                preexec_fn=_limit_memory, timeout=30, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading a {kind} as the {reader} file never ended")
    assert result.returncode == 0, result.stderr[-1000:]
    assert said in result.stdout and "not read" in result.stdout, result.stdout


def test_dev_zero_itself_is_refused(tmp_path):
    result = subprocess.run([sys.executable, "-c", READERS["views"].replace("PATH", "__import__('pathlib').Path('/dev/zero')")],
                            capture_output=True, text=True, cwd=ROOT, preexec_fn=_limit_memory, timeout=30)
    assert "/dev/zero is a device, not a regular file" in result.stdout, result.stdout + result.stderr


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_a_watch_cursor_that_is_not_small_and_regular_is_a_usage_error(tmp_path, kind):
    make, said = HOSTILE[kind]
    db = damage.healthy(tmp_path / "archon.db")
    cursor = make(tmp_path / "cursor.json")
    result = console("--db", str(db), "approvals", "watch", "--cursor", str(cursor), timeout=30)
    assert result.returncode == 2, result.stderr
    assert said in result.stderr
    ended_cleanly(result)


def test_an_ordinary_settings_file_is_still_read(tmp_path):
    path = tmp_path / "keymap.toml"
    path.write_text('[keys]\napprove = "ctrl+a"\n')
    from console.tui.keymap import load_keymap

    assert load_keymap(path) == ({"approve": "ctrl+a"}, None)
