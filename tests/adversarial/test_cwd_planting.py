"""Nothing in the working directory runs as the operator (issue 17, finding 2).

A support engineer runs `archon-console inspect user.db` in the directory the user sent: next to
`user.db` lie `struct.py`, `pickle.py`, `json.py`, `console/__init__.py`... A `python -c` child
puts the working directory first on `sys.path`, so each of those would run at the child's first
import. Every child interpreter now starts isolated (console/isolation.py `child_command`), every
subprocess is found through a PATH without relative entries, and the installed `archon-console`
script puts only its own directory on `sys.path`. Each planted module writes a marker file when it
is imported; after every screen and every command below, there is no marker.
"""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import stat
import subprocess
import sys
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from console.cli.parser import build_parser
from console.cli.reference import subcommands
from tests.approvals_helpers import add_request
from tests.tui.conftest import demo_file
from tests.tui.pilot import type_text, wait_until

BIN = Path(sys.executable).parent
SCRIPT = BIN / "archon-console"
# Standard-library and dependency modules a child or a command imports; the console's own packages.
PLANTED_MODULES = ("struct", "pickle", "json", "sqlite3", "textual", "rich", "humanize", "sqlite_utils",
                   "pyperclip", "subprocess", "signal", "tempfile", "shutil", "socket", "hashlib",
                   "zipfile", "importlib", "argparse", "datetime", "typing", "dataclasses")
PLANTED_PACKAGES = ("console", "widgets", "console/services")
# Programs a command or a library might look up through PATH.
PLANTED_PROGRAMS = ("sh", "xclip", "xsel", "wl-copy", "pbcopy", "notify-hook", "python3", "sqlite3")
WAIT = 30.0


def plant(directory: Path) -> Path:
    """Fill `directory` with modules, packages and programs that leave a marker when they run."""
    markers = directory / "markers"
    markers.mkdir()

    def body(name: str) -> str:  # builtins only: it must leave its marker whatever else is broken
        return f"open({str(markers / name.replace('/', '.'))!r}, 'w').close()\n"

    for name in PLANTED_MODULES:
        (directory / f"{name}.py").write_text(body(name))
    for name in PLANTED_PACKAGES:
        (directory / name).mkdir(parents=True, exist_ok=True)
        (directory / name / "__init__.py").write_text(body(name))
    for name in PLANTED_PROGRAMS:
        program = directory / name
        program.write_text(f"#!/bin/sh\n: > {str(markers / ('prog-' + name))!r}\n")
        program.chmod(program.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return markers


def markers_of(markers: Path) -> list[str]:
    return sorted(p.name for p in markers.iterdir())


@pytest.fixture
def planted(tmp_path):
    """A directory as a user sent it: hostile files next to `user.db` (the demo, archon 1.8.22)."""
    directory = tmp_path / "from-the-user"
    directory.mkdir()
    markers = plant(directory)
    return directory, markers


def test_the_isolated_child_starts_without_the_working_directory(tmp_path, monkeypatch):
    """The mechanism itself, directly: a child started from a planted directory imports nothing there."""
    from console.isolation import call_isolated

    markers = plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert call_isolated("os.path:basename", "/a/b.db") == "b.db"
    assert markers_of(markers) == []


def test_a_relative_sys_path_entry_is_not_passed_to_the_child(monkeypatch):
    from console.isolation import child_command

    monkeypatch.setattr(sys, "path", ["", ".", "rel/dir", *sys.path])
    argv = child_command()
    assert argv[:3] == [sys.executable, "-I", "-c"]
    assert "'rel/dir'" not in argv[3] and "''" not in argv[3] and "'.'" not in argv[3]


def test_the_child_imports_the_console_the_parent_runs(tmp_path):
    """`-I` ignores `PYTHONPATH` and the user's site-packages; the child is given the parent's
    `sys.path`, so a console installed there (here: a copy on `PYTHONPATH`, ahead of the editable
    installation) is the one the child runs too."""
    site = tmp_path / "site"
    shutil.copytree(Path(__file__).resolve().parents[2] / "console", site / "console",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (site / "console" / "where.py").write_text("import console\n\n\ndef here():\n    return console.__file__\n")
    code = "from console.isolation import call_isolated; print(call_isolated('console.where:here'))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=60,
                          env=dict(os.environ, PYTHONPATH=str(site)))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == str(site / "console" / "__init__.py")


# ---------------------------------------------------------------- the TUI's children
SPAWNED: list = []  # the argv of every process this test process started, while recording
_HOOKED: list = []


def _record_spawns() -> None:
    """An audit hook (it cannot be removed, so it is added once): every `subprocess.Popen`'s argv."""
    if _HOOKED:
        return

    def hook(event, args):
        if event == "subprocess.Popen":
            SPAWNED.append(tuple(args[1]) if isinstance(args[1], (list, tuple)) else (args[1],))
    sys.addaudithook(hook)
    _HOOKED.append(hook)


@pytest.mark.slow
def test_only_known_places_start_processes():
    """Every way of starting a process in the console's own code, by file and function: the
    isolated child (console/isolation.py) and the operator's hook through /bin/sh (console/cli/hooks.py).
    A new one must be added here, after making it safe from the working directory."""
    import ast

    root = Path(__file__).resolve().parents[2]
    spawners = {"Popen", "run", "call", "check_call", "check_output", "getoutput", "getstatusoutput", "system",
                "popen", "execv", "execve", "execvp", "execvpe", "execl", "execle", "execlp", "execlpe", "spawnv",
                "spawnve", "spawnvp", "spawnvpe", "spawnl", "spawnle", "posix_spawn", "posix_spawnp", "fork",
                "forkpty", "Process", "Pool", "startfile"}
    found = set()
    for top in ("console", "widgets"):
        for path in sorted((root / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for function in [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]:
                for node in ast.walk(function):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                            and isinstance(node.func.value, ast.Name) \
                            and node.func.value.id in ("subprocess", "os", "multiprocessing", "pty") \
                            and node.func.attr in spawners:
                        found.add((str(path.relative_to(root)), function.name, node.func.attr))
                    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                            and isinstance(node.func.value, ast.Name) and node.func.value.id == "asyncio" \
                            and node.func.attr.startswith("create_subprocess"):
                        found.add((str(path.relative_to(root)), function.name, node.func.attr))
            for node in ast.walk(tree):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                    assert not {"multiprocessing", "pty", "concurrent.futures.process"} & set(names), path
    # The fleet's ssh (console/fleet/session.py, `ssh -O exit` in transport.py) is found through a
    # PATH the entry point has already cleared of the working directory (console/cli/cli.py).
    assert found == {("console/isolation.py", "call_isolated", "Popen"), ("console/cli/hooks.py", "_run", "Popen"),
                     ("console/fleet/session.py", "start", "create_subprocess_exec"),
                     ("console/fleet/transport.py", "close_masters", "Popen")}

@pytest.mark.slow
async def test_doctor_and_upgrade_in_the_console_run_nothing_from_the_working_directory(
        planted, tmp_path_factory, make_app, monkeypatch):
    from console.tui.screens.typed import TypedConfirmModal
    from console.tui.screens.doctor import DoctorScreen
    from console.tui.screens.upgrade import UpgradeScreen

    directory, markers = planted
    db = directory / "user.db"
    shutil.copyfile(demo_file(tmp_path_factory, "1.8.22", 20), db)
    monkeypatch.chdir(directory)
    app = make_app(db)
    SPAWNED.clear()
    _record_spawns()
    async with app.run_test(size=(120, 40)) as pilot:
        screen = DoctorScreen()
        app.push_screen(screen)  # `:doctor`
        await wait_until(pilot, lambda: screen.report is not None or markers_of(markers), timeout=WAIT,
                         what="doctor report")
        assert markers_of(markers) == []
        await pilot.press("escape")
        upgrade = UpgradeScreen()
        app.push_screen(upgrade)  # `:upgrade`: the plan
        await wait_until(pilot, lambda: upgrade.plan is not None or markers_of(markers), timeout=WAIT,
                         what="upgrade plan")
        assert markers_of(markers) == [] and upgrade.plan.force_required
        await pilot.press("U")  # and the run
        await wait_until(pilot, lambda: isinstance(app.screen, TypedConfirmModal), what="typed confirmation")
        await type_text(pilot, "user.db")
        await pilot.press("enter")
        await wait_until(pilot, lambda: app.screen is upgrade and not upgrade.running and upgrade.plan is not None
                         and upgrade.plan.up_to_date, timeout=60, what="upgrade finished")
    assert markers_of(markers) == []
    # Each child was an isolated interpreter: doctor, the plan, the run and the plan after it.
    children = [args for args in list(SPAWNED) if args and str(args[0]) == sys.executable]
    assert len(children) >= 4 and all(list(args[1:3]) == ["-I", "-c"] for args in children), children
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT count(*) FROM _sqlite_migrations").fetchone()[0] == 29
    conn.close()


# ---------------------------------------------------------------- every command, as installed
def _commands(snapshot: str) -> list[list[str]]:
    """One run of every leaf command (the test below checks the list is complete)."""
    return [
        ["demo", "new-demo.db", "--requests", "10", "--environments", "4"],
        ["upgrade", "--plan"],
        ["upgrade", "--force"],
        ["restore", snapshot, "--yes"],
        ["projects", "list"],
        ["profiles", "list", "prj-atlas-api"],
        ["profiles", "show", "prj-atlas-api", "r1"],
        ["profiles", "diff", "prj-atlas-api", "r1", "r2"],
        ["profiles", "activate", "prj-atlas-api", "r1", "--reason", "test"],
        ["approvals", "list", "--json"],
        ["approvals", "show", "apr-00000001"],
        ["approvals", "approve", "apr-00000001"],
        ["approvals", "deny", "apr-00000002", "--reason", "no"],
        ["approvals", "revoke", "apr-00000001", "--reason", "no"],
        ["approvals", "expire"],
        ["envs", "list"],
        ["envs", "show", "env-0003"],
        ["envs", "claim", "env-0003", "--op", "stop"],
        ["envs", "release", "env-0003"],
        ["envs", "complete", "env-0003"],
        ["doctor", "--bundle", "../bundle.zip", "--redact"],
        ["audit", "--format", "jsonl"],
        ["query", "SELECT count(*) FROM tickets", "--csv"],
        ["help", "approvals"],
        ["completion", "bash"],
        ["serve", "--stdio", "--policy", "no-policy.toml"],  # stdin is /dev/null: end of input at once
        ["__complete", "bash", "archon-console approvals show apr-0000000", "=:"],
        ["--version"],
    ]


def test_the_command_list_names_every_command():
    def leaves(parser, path):
        sub = subcommands(parser)
        if sub is None:
            yield " ".join(path)
            return
        for name, child in sub.choices.items():
            yield from leaves(child, [*path, name])

    listed = {" ".join(a for a in argv[:2] if not a.startswith("-") and a.islower() and "." not in a)
              for argv in _commands("x")}
    listed |= {argv[0] for argv in _commands("x")}
    # inspect and the TUI itself: the console's parent process is this script (sys.path[0] is its
    # directory, never the working directory) and its children are driven through Pilot above.
    missing = sorted(set(leaves(build_parser(), [])) - listed - {"inspect", "approvals watch"})
    assert missing == []


def _run(directory: Path, env: dict, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(SCRIPT), *argv], cwd=directory, env=env, capture_output=True, text=True,
                          timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.slow
def test_every_command_runs_nothing_from_the_working_directory(planted, tmp_path_factory):
    directory, markers = planted
    db = directory / "user.db"
    shutil.copyfile(demo_file(tmp_path_factory, "1.8.22", 200), db)
    # A PATH that names the working directory (an empty entry, `.`) finds no planted program either.
    env = dict(os.environ, ARCHON_DB_PATH="user.db", ARCHON_CONSOLE_ACTOR="mallory",
               PATH=f":.:{os.environ.get('PATH', '')}", PYTHONPATH="", DISPLAY=":0")
    env.pop("ARCHON_CONSOLE_NOW", None)
    (directory / "no-policy.toml").write_text("")  # serve's --policy names it: a named policy must exist
    ran = []
    for argv in _commands("SNAPSHOT"):
        if argv[0] == "restore":
            snapshots = sorted(p.name for p in directory.iterdir() if p.name.startswith("user.db.")
                               and p.name.endswith(".sqlite3"))
            assert snapshots, sorted(p.name for p in directory.iterdir())
            argv = ["restore", snapshots[-1], "--yes"]
        proc = _run(directory, env, *argv)
        assert "Traceback" not in proc.stderr, (argv, proc.stderr)
        ran.append((argv, proc.returncode))
        assert markers_of(markers) == [], (argv, proc.stdout[-500:], proc.stderr[-500:])
    assert [r for r in ran if r[1] not in (0, 1)] == []


@pytest.mark.slow
def test_a_watch_with_a_hook_runs_nothing_from_the_working_directory(planted, tmp_path_factory):
    """`approvals watch --exec notify-hook`: the hook's program is looked up in PATH, and PATH's
    entries that name the working directory are not searched (the planted `notify-hook` stays put)."""
    from tests.watch_helpers import Watch

    directory, markers = planted
    db = directory / "user.db"
    shutil.copyfile(demo_file(tmp_path_factory, "current", 20), db)
    env = dict(os.environ, PATH=f":.:{os.environ.get('PATH', '')}", PYTHONUNBUFFERED="1")
    watch = Watch(Path("user.db"), "--exec", "notify-hook", "--exec-retries", "0", program=(str(SCRIPT),),
                  cwd=directory, env=env)
    try:
        watch.ready()
        conn = sqlite3.connect(db, isolation_level=None)
        conn.execute("BEGIN IMMEDIATE")
        add_request(conn, "apr-planted", "prj-atlas-api", expires_at=datetime.now(timezone.utc) + timedelta(hours=2))
        conn.execute("COMMIT")
        conn.close()
        deadline = time.monotonic() + WAIT
        while not any("hook for apr-planted" in n and "gave up" in n for n in watch.notes()) \
                and not markers_of(markers):  # (the planted program, when found, succeeds)
            assert time.monotonic() < deadline and watch.proc.poll() is None, watch.errors
            time.sleep(0.05)
    finally:
        watch.stop()
    assert markers_of(markers) == []


@pytest.mark.parametrize("path, expected", [
    ("/usr/bin::/bin", "/usr/bin:/bin"), (".:/usr/bin", "/usr/bin"), ("/usr/bin:bin:./x:", "/usr/bin"),
    ("", os.defpath), (":", os.defpath), (".", os.defpath), ("/usr/local/bin:/usr/bin", "/usr/local/bin:/usr/bin"),
    # names that depend on the process reading them (issue 17, second attack round, finding B)
    ("/proc/self/cwd:/usr/bin", "/usr/bin"), ("//proc/self/cwd:/usr/bin", "/usr/bin"),
    ("/usr/../proc/self/cwd:/usr/bin", "/usr/bin"), ("/proc/thread-self/cwd:/usr/bin", "/usr/bin"),
    ("/proc/1/cwd:/usr/bin", "/usr/bin"), ("/dev/fd/3:/dev/stdin:/usr/bin", "/usr/bin"), ("/proc/self/cwd", os.defpath),
])
def test_path_loses_every_entry_that_names_the_working_directory(monkeypatch, capsys, path, expected):
    from console.cli.cli import main

    monkeypatch.setenv("PATH", path)
    assert main(["completion", "bash"]) == 0
    assert os.environ["PATH"] == expected


def test_proc_self_cwd_finds_no_planted_program(tmp_path, monkeypatch, capsys):
    """`/proc/self/cwd` is the working directory under an absolute name: a program planted there is
    not found through PATH (console/isolation.py `fixed_place`)."""
    from console.cli.cli import main

    planted = tmp_path / "xclip"
    planted.write_text("#!/bin/sh\ntouch marker\n")
    planted.chmod(0o755)
    links = tmp_path / "links"
    links.mkdir()
    (links / "bin").symlink_to("/proc/self/cwd")  # realpath would follow it to the working directory
    (links / "up").symlink_to("/proc/self/cwd/sub")
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PATH", f"/proc/self/cwd:/proc/{os.getpid()}/cwd:{links}/bin:{links}/up/..:"
                               f"{os.environ.get('PATH', '')}")
    assert main(["completion", "bash"]) == 0
    assert not (shutil.which("xclip") or "").startswith(("/proc", str(tmp_path)))


def test_a_process_relative_sys_path_entry_is_not_passed_to_the_child(monkeypatch, tmp_path):
    from console.isolation import call_isolated, child_command

    markers = plant(tmp_path)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", ["/proc/self/cwd", f"/proc/{os.getpid()}/cwd", "/dev/fd/0", *sys.path])
    argv = child_command()
    assert "/proc/" not in argv[3] and "/dev/fd" not in argv[3]
    assert call_isolated("os.path:basename", "/a/b.db") == "b.db"
    assert markers_of(markers) == []
