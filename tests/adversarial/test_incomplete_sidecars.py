"""An incomplete -wal/-shm pair (what a crashed archon leaves) is read without copying the database
(issue 23 item 1).

A -wal without its -shm: SQLite must build a -shm beside the -wal, so the -wal alone is copied into
a private directory and the main file is read where it is, through a read-only descriptor
(console/db/private_wal.py). A -shm without a -wal: every commit is in the main file, read in place
(`immutable=1`). A side file this user cannot read is named in one sentence (exit 3) before
anything is created in the temp directory. Each case runs the real CLI in a child process that
reports its own `/proc/self/io` `wchar` (every byte it wrote, by any system call: private copies
included, however soon they were removed), beside the bytes of the user's files, which must not
change.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests import damage
from tests.untouched import Holder, fingerprint_dir

ROOT = Path(__file__).resolve().parents[2]
PAD = 4 << 20  # the main file holds this much more than the -wal: a copy of it cannot hide
SLACK = 256 << 10  # what a command writes besides a copy: its output, SQLite's fresh -shm

# Runs the CLI's `main` in this process and reports what it wrote. A first run on a healthy copy
# imports every module the command needs, so the run measured (as `nobody` when asked: root's
# interpreter may be unreadable to it) reads and writes nothing but what the command does.
DRIVER = r"""
import contextlib, io, json, os, sys, tempfile
tempfile.tempdir = os.environ["TMPDIR"]  # resolving it would write a probe file there
from console.cli.cli import main
warm, argv = json.loads(sys.argv[1]), json.loads(sys.argv[2])
with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
    main(warm)
import importlib
for name in ("shutil", "fcntl", "struct", "console.db.locked_copy", "console.db.private_wal"):
    try:
        importlib.import_module(name)
    except ImportError:  # a module of another version of the console
        pass
io_fd = os.open("/proc/self/io", os.O_RDONLY)  # a process that drops root may not open it again
def wchar():
    return int(dict(l.split(": ") for l in os.pread(io_fd, 4096, 0).decode().splitlines())["wchar"])
if os.environ.get("AS_NOBODY"):
    os.setgid(65534)
    os.setuid(65534)
out, err = io.StringIO(), io.StringIO()
start = wchar()
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
    code = main(argv)
wrote = wchar() - start
sys.__stdout__.write(json.dumps({"code": code, "out": out.getvalue(), "err": err.getvalue(), "wchar": wrote}))
"""


def _crashed(directory: Path, *, keep: tuple[str, ...]) -> Path:
    """An archon database as a crash leaves it: a 4 MB main file, commits (one request among them)
    only in the -wal, and of the side files only those in `keep`."""
    directory.mkdir(parents=True, exist_ok=True)
    live = damage.healthy(directory.parent / f"{directory.name}-live.db", wal=True)
    conn = damage.connect(live)
    conn.execute("CREATE TABLE pad (b BLOB)")
    conn.execute("INSERT INTO pad VALUES (zeroblob(?))", (PAD,))
    conn.commit()
    conn.close()
    with Holder(live, "hold", rows=30):  # its commits stay in the -wal (no checkpoint)
        conn = damage.connect(live)
        damage.add_request(conn, "req-only-in-the-wal")
        conn.commit()
        conn.close()
        for suffix in ("", "-wal", "-shm"):  # the holder is idle: a byte copy of the files is a commit point
            shutil.copyfile(f"{live}{suffix}", directory / f"copy{suffix}")
    if "-wal" not in keep:  # no -wal: what it held was checkpointed before the crash
        os.rename(directory / "copy-shm", directory / "kept-shm")
        conn = sqlite3.connect(directory / "copy")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.close()  # the last connection: removes its -wal and -shm
        os.rename(directory / "kept-shm", directory / "copy-shm")
    for suffix in ("", "-wal", "-shm"):
        if suffix == "" or suffix in keep:
            os.rename(directory / f"copy{suffix}", directory / f"archon.db{suffix}")
        else:
            Path(directory / f"copy{suffix}").unlink(missing_ok=True)
    for suffix in ("", "-wal", "-shm"):
        Path(f"{live}{suffix}").unlink(missing_ok=True)
    return directory / "archon.db"


def _run(db: Path, tmpdir: Path, *argv: str, as_nobody: bool = False) -> dict:
    """`argv` with "{db}" for the database and "{out}" for a new directory of the run's own."""
    warm = damage.healthy(tmpdir.parent / f"warm-{os.urandom(4).hex()}.db")

    def filled(database: Path) -> list[str]:
        out = tmpdir.parent / f"out-{os.urandom(4).hex()}"
        return [str(database) if a == "{db}" else str(out) if a == "{out}" else a for a in argv]

    env = {**os.environ, "TMPDIR": str(tmpdir), "PYTHONDONTWRITEBYTECODE": "1", "PYTHONPATH": str(ROOT),
           "ARCHON_CONSOLE_NOW": damage.NOW.isoformat(), **({"AS_NOBODY": "1"} if as_nobody else {})}
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps(filled(warm)), json.dumps(filled(db))],
                          capture_output=True, text=True, cwd=str(tmpdir.parent), env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout)


@pytest.fixture
def box():
    """A directory tree `nobody` can reach (pytest's tmp_path is root's 0700 when run as root)."""
    base = Path(tempfile.mkdtemp(prefix="archon-sidecars-"))
    os.chmod(base, 0o755)
    tmpdir = base / "tmp"
    tmpdir.mkdir()
    os.chmod(tmpdir, 0o1777)
    yield base, tmpdir
    shutil.rmtree(base, ignore_errors=True)


COMMANDS = {  # each read-only command, and what it prints that only the -wal holds
    "approvals list": (["--db", "{db}", "approvals", "list", "--limit", "50"], "req-only-in-the-wal"),
    "approvals show": (["--db", "{db}", "approvals", "show", "req-only-in-the-wal"], "req-only-in-the-wal"),
    "doctor": (["doctor", "{db}", "--json"], '"opened": "private copy of the -wal'),
    "upgrade --plan": (["--db", "{db}", "upgrade", "--plan"], ""),
    "--read-only envs list": (["--db", "{db}", "--read-only", "envs", "list"], "env-ready"),
    # These opened a read-write connection: on a crashed -wal it checkpointed into the main file.
    "envs list": (["--db", "{db}", "envs", "list"], "env-ready"),
    "envs show": (["--db", "{db}", "envs", "show", "env-ready"], "env-ready"),
    "profiles list": (["--db", "{db}", "profiles", "list", "p1"], ""),
}


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_wal_without_its_shm_copies_only_the_wal(box, command):
    base, tmpdir = box
    db = _crashed(base / "db", keep=("-wal",))
    wal_size = os.path.getsize(f"{db}-wal")
    assert os.path.getsize(db) > PAD > 8 * wal_size
    before = fingerprint_dir(db.parent)
    argv, only_in_the_wal = COMMANDS[command]
    result = _run(db, tmpdir, *argv)
    assert result["code"] in ((0, 1) if command == "doctor" else (0,)), result["err"]
    assert only_in_the_wal in result["out"]  # committed only in the -wal, and read
    assert result["wchar"] <= wal_size + SLACK, (result["wchar"], wal_size)  # was > 4 MB: the whole file
    assert fingerprint_dir(db.parent) == before  # no -shm created, no byte or mtime changed
    assert list(tmpdir.iterdir()) == []


def test_a_shm_without_its_wal_copies_nothing(box):
    base, tmpdir = box
    db = _crashed(base / "db", keep=("-shm",))
    assert sorted(os.listdir(db.parent)) == ["archon.db", "archon.db-shm"]
    before = fingerprint_dir(db.parent)
    tmp_mtime = tmpdir.stat().st_mtime_ns
    result = _run(db, tmpdir, "--db", "{db}", "approvals", "list", "--limit", "50")
    assert result["code"] == 0, result["err"]
    assert "req-only-in-the-wal" in result["out"]  # checkpointed into the main file before the crash
    assert result["wchar"] <= SLACK, result["wchar"]
    assert fingerprint_dir(db.parent) == before
    assert list(tmpdir.iterdir()) == [] and tmpdir.stat().st_mtime_ns == tmp_mtime  # not even a directory


@pytest.mark.parametrize("keep,hidden", [(("-wal",), "-wal"), (("-wal", "-shm"), "-wal"),
                                         (("-wal", "-shm"), "-shm")],
                         ids=["wal-alone-unreadable", "wal-unreadable", "shm-unreadable"])
def test_an_unreadable_side_file_is_named_before_anything_is_copied(box, keep, hidden):
    """Run as `nobody` when the tests run as root (root reads a 0000 file); the main file stays
    readable, the side file is 0000."""
    base, tmpdir = box
    db = _crashed(base / "db", keep=keep)
    for name in os.listdir(db.parent):
        os.chmod(db.parent / name, 0o644)
    os.chmod(f"{db}{hidden}", 0)
    before = fingerprint_dir(db.parent)
    tmp_mtime = tmpdir.stat().st_mtime_ns
    result = _run(db, tmpdir, "--db", "{db}", "approvals", "list", as_nobody=os.geteuid() == 0)
    err = result["err"]
    assert result["code"] == 3, err
    assert f"{db}{hidden} cannot be read" in err and "nothing was copied" in err, err
    assert "free" not in err.lower() and "Traceback" not in err, err  # not blamed on the disk
    assert 1 <= err.count("\n") <= 2, err  # one sentence (and its hint)
    assert result["wchar"] <= SLACK, result["wchar"]
    assert list(tmpdir.iterdir()) == [] and tmpdir.stat().st_mtime_ns == tmp_mtime  # nothing copied
    assert fingerprint_dir(db.parent) == before


@pytest.mark.parametrize("keep", [("-wal",), ("-wal", "-shm")], ids=["crashed", "running"])
def test_inspect_writes_the_database_once(box, keep):
    """`inspect` wrote the file 3 times (a private copy, a backup of it, the kept file); now the
    backup API reads the main file where it is (beside a private copy of the -wal, the -shm held
    against checkpoints) and writes straight into the kept file: within 1.5x a `cp`."""
    base, tmpdir = box
    db = _crashed(base / "db", keep=keep)
    size = os.path.getsize(db) + os.path.getsize(f"{db}-wal")
    before = fingerprint_dir(db.parent)
    result = _run(db, tmpdir, "inspect", "{db}", "--keep-snapshot", "{out}", "--no-tui")
    assert result["code"] == 0, result["err"]
    snapshot = Path(result["out"].strip())
    conn = sqlite3.connect(f"file:{snapshot}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT count(*) FROM approval_requests WHERE id = 'req-only-in-the-wal'").fetchone() == (1,)
        assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "delete"
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        conn.close()
    assert sorted(os.listdir(snapshot.parent)) == [snapshot.name]
    assert result["wchar"] <= 1.5 * size, (result["wchar"], size)  # was 3x
    assert fingerprint_dir(db.parent) == before  # the running archon's -shm included
    assert list(tmpdir.iterdir()) == []


def test_sqlite_reads_the_users_main_file_through_a_descriptor_that_cannot_write(tmp_path, monkeypatch):
    """In-process: the connection's main-file descriptor is the user's file opened O_RDONLY, the
    reader's SHARED lock is on the user's file (so a last archon connection cannot checkpoint and
    delete the -wal under it), and the private directory is gone while the connection reads."""
    from console.db import file_guard
    from console.db.connect import open_database

    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    db = _crashed(tmp_path / "db", keep=("-wal",))
    before = fingerprint_dir(db.parent)
    with open_database(db, read_only=True) as handle:
        assert handle.opened.startswith("private copy of the -wal, the main file read in place")
        count = handle.conn.execute("SELECT count(*) FROM approval_requests").fetchone()[0]
        assert count == 4 and handle.conn.execute("SELECT count(*) FROM support_probe").fetchone()[0] == 30
        original = os.stat(db)
        mine = []
        for name in os.listdir("/proc/self/fd"):
            try:
                st = os.stat(f"/proc/self/fd/{name}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (original.st_dev, original.st_ino):
                flags = int(Path(f"/proc/self/fdinfo/{name}").read_text().split("flags:")[1].split()[0], 8)
                mine.append(flags & os.O_ACCMODE)
        assert mine and set(mine) == {os.O_RDONLY}
        locks = [line.split() for line in Path("/proc/locks").read_text().splitlines()]
        inode = f":{original.st_ino}"
        assert any(f[4] == str(os.getpid()) and f[5].endswith(inode) and f[3] == "READ" for f in locks)
        assert list((tmp_path / "tmp").iterdir()) == []  # the -wal copy lives only through SQLite's descriptors
        # This process holds locks on the user's file: nothing else here may open (and close) it.
        assert file_guard.connected_file(db) == str(db.resolve())
    assert fingerprint_dir(db.parent) == before
    assert stat.S_ISREG(os.stat(db).st_mode)


# A database named through a symbolic link is read with the side files SQLite uses: those beside the
# link's target (SQLite names its -wal and -shm after the path with every link resolved). The readers
# looked beside the link instead (console/db/paths.py `sidecars`): a crashed archon's -wal beside the
# target was not seen (the main file was read `immutable=1`, its commits silently missing), and a
# -wal planted beside the link was read as the database's.

ONLY = "req-only-in-the-wal"


def _linked(base: Path) -> tuple[Path, Path]:
    """A crashed archon's database (its commits partly in a -wal, no -shm) and a link to it elsewhere."""
    db = _crashed(base / "db", keep=("-wal",))
    links = base / "links"
    links.mkdir()
    os.chmod(links, 0o755)
    link = links / "archon.db"
    link.symlink_to(db)
    return db, link


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_wal_beside_the_links_target_is_read(box, command):
    base, tmpdir = box
    db, link = _linked(base)
    before, beside_link = fingerprint_dir(db.parent), sorted(os.listdir(link.parent))
    argv, only_in_the_wal = COMMANDS[command]
    result = _run(link, tmpdir, *argv)
    assert result["code"] in ((0, 1) if command == "doctor" else (0,)), result["err"]
    assert only_in_the_wal in result["out"], result["out"][-2000:]  # was: read immutable, commits missing
    assert fingerprint_dir(db.parent) == before
    assert sorted(os.listdir(link.parent)) == beside_link
    assert list(tmpdir.iterdir()) == []


def test_inspect_keeps_the_commits_of_the_targets_wal(box):
    base, tmpdir = box
    db, link = _linked(base)
    before = fingerprint_dir(db.parent)
    result = _run(link, tmpdir, "inspect", "{db}", "--keep-snapshot", "{out}", "--no-tui")
    assert result["code"] == 0, result["err"]
    conn = sqlite3.connect(f"file:{result['out'].strip()}?mode=ro", uri=True)
    try:
        assert conn.execute("SELECT count(*) FROM approval_requests WHERE id = ?", (ONLY,)).fetchone() == (1,)
    finally:
        conn.close()
    assert fingerprint_dir(db.parent) == before
    assert list(tmpdir.iterdir()) == []


@pytest.mark.parametrize("command", ["approvals list", "approvals show"])
def test_a_wal_planted_beside_the_link_is_not_the_databases(box, command):
    """The target has no -wal (SQLite reads its main file alone: no such request); a -wal that holds
    the request lies beside the link, where SQLite never looks."""
    base, tmpdir = box
    crashed = _crashed(base / "crashed", keep=("-wal",))
    target = base / "db"
    target.mkdir()
    shutil.copyfile(crashed, target / "archon.db")  # the commit point before the -wal's commits
    links = base / "links"
    links.mkdir()
    link = links / "archon.db"
    link.symlink_to(target / "archon.db")
    shutil.copyfile(f"{crashed}-wal", f"{link}-wal")
    truth = sqlite3.connect(f"file:{target / 'archon.db'}?immutable=1", uri=True)
    assert truth.execute("SELECT count(*) FROM approval_requests WHERE id = ?", (ONLY,)).fetchone() == (0,)
    truth.close()
    before, planted = fingerprint_dir(target), fingerprint_dir(links)
    result = _run(link, tmpdir, *COMMANDS[command][0])
    assert ONLY not in result["out"], result["out"]  # was: the planted -wal's commits shown as the database's
    assert fingerprint_dir(target) == before and fingerprint_dir(links) == planted
    assert list(tmpdir.iterdir()) == []
