"""Bad input ends in one sentence and exit 2 (usage) or 3 (the file cannot be used): never a
traceback, never a hang (issue 9, finding 8).

The named cases run as real processes, because a hang (open() on a FIFO) and a traceback on
stderr are what an operator sees. The generated cases call `main()` in-process under an alarm,
so a few hundred of them stay fast.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.cli.cli import main


def run_cli(*argv: str | bytes, env: dict | None = None, timeout: float = 60) -> subprocess.CompletedProcess:
    """The console as a user runs it, with a deadline: a hang fails the test instead of the suite."""
    return subprocess.run(
        [sys.executable, "-m", "console", *argv],
        capture_output=True, timeout=timeout, env={**os.environ, **(env or {})},
        cwd=Path(__file__).resolve().parents[2],
    )


def assert_one_sentence(proc: subprocess.CompletedProcess, code: int) -> str:
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == code, (proc.returncode, err)
    assert "Traceback" not in err
    assert err.strip(), "a refusal must say why"
    return err


@pytest.mark.parametrize("command", [["approvals", "list"], ["doctor"], ["upgrade", "--plan"], ["envs", "list"]])
def test_a_fifo_is_refused_not_waited_on(tmp_path, command):
    fifo = tmp_path / "archon.db"
    os.mkfifo(fifo)
    err = assert_one_sentence(run_cli("--db", str(fifo), *command), 3)
    assert "named pipe" in err


def test_a_character_device_is_refused():
    err = assert_one_sentence(run_cli("--db", "/dev/zero", "approvals", "list"), 3)
    assert "character device" in err


@pytest.mark.parametrize("command", [["doctor"], ["approvals", "list"], ["upgrade", "--plan"]])
def test_a_symlink_loop_is_refused(tmp_path, command):
    (tmp_path / "a").symlink_to(tmp_path / "b")
    (tmp_path / "b").symlink_to(tmp_path / "a")
    err = assert_one_sentence(run_cli("--db", str(tmp_path / "a"), *command), 3)
    assert "loop of symbolic links" in err


def test_a_dangling_symlink_is_named_as_such(tmp_path):
    (tmp_path / "archon.db").symlink_to(tmp_path / "gone.db")
    err = assert_one_sentence(run_cli("--db", str(tmp_path / "archon.db"), "approvals", "list"), 3)
    assert "symbolic link to nothing" in err


def test_an_empty_db_option_does_not_fall_back_to_another_database(tmp_path, demo_copy):
    # $ARCHON_DB_PATH names a perfectly good database: an empty --db must still be refused.
    err = assert_one_sentence(run_cli("--db", "", "approvals", "list", env={"ARCHON_DB_PATH": str(demo_copy())}), 2)
    assert "empty path" in err


@pytest.mark.parametrize("argv", [
    [b"approvals", b"show", b"\xff\xfe"],
    [b"approvals", b"list", b"--search", b"\xff"],
    [b"envs", b"show", b"\xc3("],
    [b"profiles", b"list", b"\xff"],
])
def test_arguments_that_are_not_utf8_are_a_usage_error(demo_copy, argv):
    err = assert_one_sentence(run_cli(b"--db", os.fsencode(demo_copy()), *argv), 2)
    assert "not valid UTF-8" in err


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["approvals", "list", "--limit", "99999999999999999999"],
    ["approvals", "list", "--expiring-within", "nan"],
    ["approvals", "list", "--expiring-within", "1e308"],
    ["approvals", "list", "--expiring-within", "-inf"],
    ["approvals", "list", "--busy-timeout", "nan"],
    ["approvals", "list", "--busy-timeout", "inf"],
    ["envs", "list", "--stale-after", "nan"],
    ["envs", "list", "--limit", "-1"],
    ["doctor", "--stale-after", "1e400"],
    ["audit", "--poll", "nan"],
    ["audit", "--since", "1e308"],
    ["audit", "--until", "99999999999999999999d"],
    ["approvals", "watch", "--poll", "inf"],
    ["approvals", "watch", "--exec-timeout", "nan"],
    ["approvals", "watch", "--exec-jobs", "0"],
    ["approvals", "watch", "--expiring-within", "-inf"],
    ["approvals", "watch", "--status", "nonsense"],
])
def test_absurd_numbers_are_a_usage_error(demo_copy, argv):
    assert_one_sentence(run_cli("--db", str(demo_copy()), *argv), 2)


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nan", "inf", "-5", "1e300", "fifteen"])
def test_an_absurd_stale_minutes_variable_is_a_usage_error(demo_copy, value):
    proc = run_cli("--db", str(demo_copy()), "envs", "list", env={"ARCHON_CONSOLE_STALE_MINUTES": value})
    assert "ARCHON_CONSOLE_STALE_MINUTES" in assert_one_sentence(proc, 2)


def test_an_unexpected_error_is_one_sentence_with_exit_3(monkeypatch, capsys, demo_copy):
    """The last line of defence: whatever a command raises, the operator gets one sentence."""
    import console.cli.commands.approvals as approvals

    def broken(ctx):
        raise OSError(28, "No space left on device", "/tmp/x")

    monkeypatch.setattr(approvals, "run_list", broken)
    monkeypatch.delenv("ARCHON_CONSOLE_DEBUG", raising=False)
    code = main(["--db", str(demo_copy()), "approvals", "list"])
    err = capsys.readouterr().err
    assert code == 3
    assert "No space left on device" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1


# --- the whole argument space ----------------------------------------------------------------

COMMANDS = [
    ["approvals", "list"], ["approvals", "show"], ["approvals", "approve"], ["approvals", "deny"],
    ["approvals", "revoke"], ["approvals", "expire"], ["envs", "list"], ["envs", "show"],
    ["envs", "claim"], ["envs", "release"], ["envs", "complete"], ["projects", "list"],
    ["profiles", "list"], ["profiles", "show"], ["profiles", "diff"], ["profiles", "activate"],
    ["doctor"], ["upgrade", "--plan"], ["audit"],
]
OPTIONS = ["--limit", "--expiring-within", "--busy-timeout", "--stale-after", "--search", "--project",
           "--status", "--kind", "--reason", "--op", "--as", "--after", "--as-of", "--check", "--to", "--json",
           "--read-only", "--takeover", "--yes", "--force"]
VALUES = st.one_of(
    st.sampled_from(["nan", "inf", "-inf", "1e308", "-1", "0", "99999999999999999999", "", " ", "apr-00000001",
                     "prj-atlas-api", "pending", "stop", "1.10.0", "2026-13-45", "\x00", "\x1b[2J", "'; DROP TABLE x"]),
    st.text(max_size=12),
    st.integers().map(str),
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.binary(max_size=6).map(lambda b: os.fsdecode(b)),
)


class _Timeout(Exception):
    pass


def _alarm(signum, frame):
    raise _Timeout()


@pytest.mark.slow
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(command=st.sampled_from(COMMANDS), extra=st.lists(st.one_of(st.sampled_from(OPTIONS), VALUES), max_size=5))
def test_any_command_line_ends_with_a_known_exit_code_and_no_traceback(demo_copy, capsys, command, extra):
    argv = ["--db", str(_shared_db(demo_copy)), "--as", "fuzzer", *command, *extra]
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(10)
    try:
        code = main(argv)
    except _Timeout:
        pytest.fail(f"{argv!r} did not finish within 10 s")
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    captured = capsys.readouterr()
    assert code in (0, 1, 2, 3), (argv, code, captured.err)
    assert "Traceback" not in captured.err, (argv, captured.err)


_DB: dict[str, Path] = {}


def _shared_db(demo_copy) -> Path:
    """One database per test run of the property: examples may write to it, which is fine."""
    key = "db"
    if key not in _DB or not _DB[key].exists():
        _DB[key] = demo_copy("current", "fuzz.db")
    return _DB[key]


@pytest.mark.parametrize("value", ["nan", "inf", "2026-13-45"])
def test_a_frozen_clock_that_is_not_a_time_is_one_sentence_and_exit_2(demo_copy, value):
    """Issue 17: `nan`/`inf` were "unexpected ValueError" (exit 3); `2026-13-45` was silently ignored."""
    proc = run_cli("--db", str(demo_copy()), "approvals", "list", env={"ARCHON_CONSOLE_NOW": value})
    err = assert_one_sentence(proc, 2)
    assert "$ARCHON_CONSOLE_NOW is not a time" in err and err.count("\n") == 1 and proc.stdout == b""
