"""The console without a terminal (issue 21, item 4): `archon-console --db X < /dev/null > out` (cron,
nohup, a script) used ~93% of a core and never exited, and `--json inspect DB` did the same.

Every way into a console goes through one door (console/tui/tui.py `_run`, asking `require_terminal`),
so every way in is tried here as a real process with stdin from /dev/null and stdout into a file: one
sentence and exit 2, well inside a bound that only catches a hang. With a terminal (a real pty) the
console still opens. `inspect --keep-snapshot DIR --no-tui` is the scripts' way to a snapshot.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BOUND = 120  # seconds: only a hang gets near it (the refusal comes before anything is opened)
SENTENCE = "archon-console: The console needs a terminal and stdin, stdout and stderr are not one"


def _env(tmp_path: Path) -> dict[str, str]:
    env = {**os.environ, "ARCHON_CONSOLE_CONFIG": "/nonexistent", "ARCHON_CONSOLE_KEYMAP": "/nonexistent",
           "ARCHON_CONSOLE_HOSTS": str(tmp_path / "hosts.toml"), "TERM": "xterm-256color"}
    env.pop("ARCHON_CONSOLE_DEBUG", None)
    (tmp_path / "hosts.toml").write_text('[hosts.eu1]\nssh = "eu1.example"\n')
    return env


def _without_terminal(tmp_path: Path, argv: list[str]) -> tuple[int, str, str]:
    """Run the CLI with stdin from /dev/null, stdout into a file and stderr into another."""
    out_path, err_path = tmp_path / "out", tmp_path / "err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.run([sys.executable, "-m", "console", *argv], stdin=subprocess.DEVNULL, stdout=out,
                              stderr=err, cwd=ROOT, env=_env(tmp_path), timeout=BOUND)
    return proc.returncode, out_path.read_text(), err_path.read_text()


def _doors(db: Path) -> dict[str, list[str]]:
    """Every way into a console from the command line."""
    return {
        "no command": ["--db", str(db)],
        "no command, options only": ["--db", str(db), "--read-only", "--quiet", "--as", "dana"],
        "inspect": ["inspect", str(db)],
        "inspect --keep-snapshot": ["inspect", str(db), "--keep-snapshot", str(db.parent / "kept")],
        "--fleet": ["--fleet"],
        "--host": ["--host", "eu1"],
    }


@pytest.mark.parametrize("door", list(_doors(Path("x"))))
def test_every_way_into_the_console_refuses_without_a_terminal(demo_copy, tmp_path, door):
    db = demo_copy()
    argv = _doors(db)[door]
    before = {p.name for p in tmp_path.iterdir()}
    code, out, err = _without_terminal(tmp_path, argv)
    assert code == 2, err
    assert out == ""
    assert err.startswith(SENTENCE) and err.count("\n") == 1, err
    # Refused before anything was opened or copied: no snapshot kept, nothing new beside the database.
    assert {p.name for p in tmp_path.iterdir()} == before | {"out", "err", "hosts.toml"}


@pytest.mark.parametrize("door", ["no command", "inspect", "--fleet"])
def test_json_with_the_console_is_a_usage_error(demo_copy, tmp_path, door):
    db = demo_copy()
    code, out, err = _without_terminal(tmp_path, ["--json", *_doors(db)[door]])
    assert code == 2 and err == ""
    answer = json.loads(out)
    assert answer["ok"] is False and answer["exit"] == 2
    assert answer["error"].startswith("--json answers commands, and the console itself is not one")


def test_inspect_no_tui_takes_the_snapshot_and_prints_its_path(demo_copy, tmp_path):
    db = demo_copy()
    keep = tmp_path / "kept"
    code, out, err = _without_terminal(tmp_path, ["inspect", str(db), "--keep-snapshot", str(keep), "--no-tui"])
    assert code == 0, err
    snapshot = Path(out.strip())
    assert out.count("\n") == 1 and snapshot.parent == keep and snapshot.is_file()
    assert snapshot.name.startswith("archon.support-")
    code, out, err = _without_terminal(tmp_path, ["--json", "inspect", str(db), "--keep-snapshot",
                                                  str(tmp_path / "again"), "--no-tui"])
    assert code == 0, err
    answer = json.loads(out)
    assert answer["ok"] is True and Path(answer["snapshot"]).is_file()
    assert answer["original"] == str(db.resolve()) and answer["taken_at"].endswith("Z")


def test_no_tui_without_a_directory_to_keep_the_snapshot_in_is_a_usage_error(demo_copy, tmp_path):
    code, out, err = _without_terminal(tmp_path, ["inspect", str(demo_copy()), "--no-tui"])
    assert code == 2 and out == ""
    assert err == ("archon-console: --no-tui needs --keep-snapshot DIR: without it the snapshot would be "
                   "removed as soon as it was taken.\n")


def test_stdout_into_a_file_is_refused_even_with_a_terminal_on_stdin(demo_copy, tmp_path):
    """`archon-console > out` in a terminal: the console would draw on stderr while its output went
    nowhere anyone reads; named precisely."""
    primary, secondary = os.openpty()
    try:
        with open(tmp_path / "out", "wb") as out:
            proc = subprocess.run([sys.executable, "-m", "console", "--db", str(demo_copy())], stdin=secondary,
                                  stdout=out, stderr=secondary, cwd=ROOT, env=_env(tmp_path), timeout=BOUND)
        os.close(secondary)
        secondary = -1
        written = b""
        while select.select([primary], [], [], 0)[0]:
            try:
                chunk = os.read(primary, 65536)
            except OSError:
                break
            if not chunk:
                break
            written += chunk
    finally:
        if secondary >= 0:
            os.close(secondary)
        os.close(primary)
    assert proc.returncode == 2
    assert b"The console needs a terminal and stdout is not one" in written, written


@pytest.mark.parametrize("door", ["no command", "inspect"])
def test_with_a_terminal_the_console_still_opens(demo_copy, tmp_path, door):
    """The check asks the descriptors, not $TERM: on a real pty the console draws its queue and
    quits on `q` with exit 0."""
    primary, secondary = os.openpty()
    env = {**_env(tmp_path), "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen([sys.executable, "-m", "console", *_doors(demo_copy())[door]], stdin=secondary,
                            stdout=secondary, stderr=secondary, cwd=ROOT, env=env, start_new_session=True)
    os.close(secondary)
    seen = b""
    typed = False
    deadline = time.monotonic() + BOUND
    try:
        while time.monotonic() < deadline and proc.poll() is None:
            if select.select([primary], [], [], 0.1)[0]:
                try:
                    seen += os.read(primary, 65536)  # keep the terminal drained
                except OSError:  # the console closed the terminal on its way out
                    break
            if not typed and b"apr-" in seen:
                os.write(primary, b"q")
                typed = True
        try:
            proc.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            pytest.fail(f"the console did not end; it wrote: {seen[-2000:]!r}")
    finally:
        os.close(primary)
    assert typed, seen[-2000:]
    assert proc.returncode == 0, seen[-2000:]
    assert b"needs a terminal" not in seen


def test_no_app_is_run_anywhere_but_the_door():
    """`_run` is the one place an app runs, so its `require_terminal` cannot be gone around: no other
    module of the console calls an app's `run()` or `run_async()` (Textual's two ways to start one)."""
    import ast

    runs = []
    for path in sorted((ROOT / "console").rglob("*.py")) + sorted((ROOT / "widgets").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and node.func.attr in ("run", "run_async") and not node.args
                    and not (isinstance(node.func.value, ast.Name) and node.func.value.id == "asyncio")):
                runs.append(f"{path.relative_to(ROOT)} {ast.unparse(node)}")
    # (the fleet watch's `stream.run()` is its event stream, a coroutine, not an app)
    assert runs == ["console/cli/fleet_watch.py stream.run()", "console/tui/tui.py app.run()"], runs


def _ignore_sighup() -> None:
    """In the console's process before it runs: SIGHUP ignored, as `trap '' HUP` or a parent that
    ignores it leaves it (the disposition is inherited, and the console keeps an ignored signal
    ignored: console/signals.py)."""
    signal.signal(signal.SIGHUP, signal.SIG_IGN)


@pytest.mark.parametrize("door", ["no command", "inspect", "--fleet"])
def test_the_console_ends_when_its_terminal_goes_even_with_sighup_ignored(demo_copy, tmp_path, door):
    """Closing the terminal under a console that ignores SIGHUP left Textual's input thread reading
    end-of-file in a loop: ~45% of a core, for ever (on main this test waits out its bound). Now the
    console's door (console/tui/tui.py `_TerminalWatch`) ends it as SIGHUP would: exit 129."""
    primary, secondary = os.openpty()
    env = {**_env(tmp_path), "COLUMNS": "100", "LINES": "30"}
    proc = subprocess.Popen([sys.executable, "-m", "console", *_doors(demo_copy())[door]], stdin=secondary,
                            stdout=secondary, stderr=secondary, cwd=ROOT, env=env, start_new_session=True,
                            preexec_fn=_ignore_sighup)
    os.close(secondary)
    seen = b""
    painted = b"host" if door == "--fleet" else b"apr-"
    deadline = time.monotonic() + BOUND
    try:
        while painted not in seen:
            assert time.monotonic() < deadline and proc.poll() is None, seen[-2000:]
            if select.select([primary], [], [], 0.1)[0]:
                seen += os.read(primary, 65536)
    finally:
        os.close(primary)  # the terminal goes away
    try:
        proc.wait(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail("the console outlived its terminal")
    assert proc.returncode == 128 + signal.SIGHUP
