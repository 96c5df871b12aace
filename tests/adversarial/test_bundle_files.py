"""Bundle files: a full disk, planted symlinks, existing outputs and unwritable directories.

Each ends in one sentence and an exit code (2: choose another path, 3: the file cannot be
written), never a traceback; nothing is left behind to block the next attempt, and no file the
console did not create is followed, replaced or removed.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import zipfile

import pytest

from console.cli.cli import main
from console.errors import UsageError

ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch):
    from tests.tui.conftest import NOW

    monkeypatch.setenv("ARCHON_CONSOLE_NOW", NOW.isoformat())


def mounted(tmp_path, name: str, options: str):
    """A small tmpfs (root only); unmounted by the caller's finaliser."""
    if not ROOT or shutil.which("mount") is None:
        pytest.skip("needs root to mount a small tmpfs (a full or read-only file system on demand)")
    target = tmp_path / name
    target.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", options, "tmpfs", str(target)], capture_output=True)
    if done.returncode != 0:
        pytest.skip(f"mount -t tmpfs failed here: {done.stderr.decode(errors='replace').strip()}")
    return target


@pytest.fixture
def small_disk(tmp_path):
    target = mounted(tmp_path, "full", "size=200k")
    yield target
    subprocess.run(["umount", str(target)], check=False)


@pytest.fixture
def read_only_disk(tmp_path):
    target = mounted(tmp_path, "ro", "size=64k,ro")
    yield target
    subprocess.run(["umount", str(target)], check=False)


def one_sentence(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and len(lines) == 1, err
    return lines[0]


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main(["doctor", *map(str, argv)])
    out, err = capsys.readouterr()
    return code, out, err


def fill(directory, leave: int) -> None:
    """Fill the file system under `directory` until `leave` bytes are free."""
    free = os.statvfs(directory).f_bavail * os.statvfs(directory).f_frsize
    with open(directory / "filler", "wb") as handle:
        handle.write(b"\0" * max(0, free - leave))


@pytest.mark.slow
def test_full_disk_leaves_nothing_and_the_next_attempt_works(small_disk, demo_copy, capsys):
    db = demo_copy()
    fill(small_disk, 8192)  # far less than a demo bundle
    for _ in range(2):  # the first failure must not block the second attempt's path either
        code, _out, err = run(capsys, db, "--bundle", small_disk / "b.zip", "--redact")
        assert code == 3
        assert "disk is full" in one_sentence(err)
        assert sorted(os.listdir(small_disk)) == ["filler"]
    (small_disk / "filler").unlink()
    code, _out, err = run(capsys, db, "--bundle", small_disk / "b.zip", "--redact")
    assert code == 0 and zipfile.ZipFile(small_disk / "b.zip").testzip() is None
    assert sorted(os.listdir(small_disk)) == ["b.zip"]


def test_leftover_partial_from_a_killed_run_does_not_block(tmp_path, demo_copy, capsys):
    db = demo_copy()
    out = tmp_path / "out" / "b.zip"
    out.parent.mkdir()
    leftover = out.with_name("b.zip.partial")
    leftover.write_bytes(b"half a zip")
    code, _out, err = run(capsys, db, "--bundle", out)
    assert code == 0, err
    assert zipfile.ZipFile(out).testzip() is None
    assert leftover.read_bytes() == b"half a zip"  # not ours: left alone


def test_symlink_at_the_partial_name_is_not_followed(tmp_path, demo_copy, capsys):
    db = demo_copy()
    out_dir = tmp_path / "shared"
    out_dir.mkdir()
    victim = tmp_path / "victim.db"
    victim.write_bytes(b"precious")
    os.symlink(victim, out_dir / "b.zip.partial")
    code, _out, err = run(capsys, db, "--bundle", out_dir / "b.zip")
    assert code == 0, err
    assert victim.read_bytes() == b"precious"
    assert os.readlink(out_dir / "b.zip.partial") == str(victim)
    assert not (out_dir / "b.zip").is_symlink() and zipfile.ZipFile(out_dir / "b.zip").testzip() is None


@pytest.mark.parametrize("dangling", [False, True])
def test_symlink_at_the_output_name_is_refused_before_the_report(tmp_path, demo_copy, capsys, dangling):
    db = demo_copy()
    out_dir = tmp_path / "shared"
    out_dir.mkdir()
    victim = tmp_path / "victim.db"
    if not dangling:
        victim.write_bytes(b"precious")
    os.symlink(victim, out_dir / "b.zip")
    code, out, err = run(capsys, db, "--bundle", out_dir / "b.zip")
    assert code == 2 and out == ""
    assert "already exists" in one_sentence(err)
    assert os.readlink(out_dir / "b.zip") == str(victim)
    assert victim.exists() != dangling and (dangling or victim.read_bytes() == b"precious")
    assert sorted(os.listdir(out_dir)) == ["b.zip"]


def test_existing_output_is_refused_before_the_report(tmp_path, demo_copy, capsys):
    db = demo_copy()
    out = tmp_path / "out.zip"
    out.write_bytes(b"keep me")
    code, stdout, err = run(capsys, db, "--bundle", out)
    assert code == 2 and stdout == ""  # not the whole report first, then a refusal
    assert "already exists" in one_sentence(err)
    assert out.read_bytes() == b"keep me"


def test_bundle_beside_the_database_is_refused_before_the_report(tmp_path, demo_copy, capsys):
    db = demo_copy()
    code, stdout, err = run(capsys, db, "--bundle", tmp_path / "b.zip")
    assert code == 2 and stdout == ""
    assert "outside the database's directory" in one_sentence(err)
    assert not (tmp_path / "b.zip").exists()


def test_unwritable_directory_is_one_sentence(tmp_path, demo_copy, capsys, request):
    db = demo_copy()
    if ROOT:  # root writes through permission bits: use a read-only file system instead
        target = request.getfixturevalue("read_only_disk")
    else:
        target = tmp_path / "locked"
        target.mkdir(mode=0o500)
    code, stdout, err = run(capsys, db, "--bundle", target / "sub" / "b.zip")
    assert code == 3 and stdout == ""
    assert "Cannot write the bundle" in one_sentence(err)
    assert os.listdir(target) == []


def test_output_appearing_while_writing_is_not_replaced(tmp_path):
    """Between the check and the final link another process plants a symlink: the link fails, no clobber."""
    from console.services.bundle import _write_zip

    out = tmp_path / "b.zip"
    victim = tmp_path / "victim"
    victim.write_bytes(b"precious")
    os.symlink(victim, out)
    with pytest.raises(UsageError, match="already exists"):
        _write_zip(out, [("README.txt", "x")])
    assert os.readlink(out) == str(victim) and victim.read_bytes() == b"precious"
    assert sorted(os.listdir(tmp_path)) == ["b.zip", "victim"]
