"""The README's shell recipes are safe with hostile database text (issue 17, finding 11).

They are run as written (with `jq`), on a request whose values are an attacker's: the Slack hook
must not let a project id `<!channel>` ping everyone (Slack's mrkdwn reads `<...>` and `&`), and the
`jq -r` recipe must not hand the terminal a control character.
"""

from __future__ import annotations

import functools
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from widgets.safe_text import is_clean

README = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
HOSTILE = {"id": "apr-<@U024BE7LH>&amp;", "action_kind": "git_push <https://evil.example|click>",
           "project_id": "<!channel>", "expires_at": "<!here> & <!everyone>"}
needs_jq = pytest.mark.skipif(shutil.which("jq") is None, reason="jq is not installed")


def _slack_jq() -> str:
    script = re.search(r"cat > ~/bin/archon-slack <<'SH'\n#!/bin/sh\n(.*?)\|\n\s*curl ", README, re.S)
    assert script, "the Slack recipe is in the README"
    return script.group(1)


@needs_jq
def test_the_slack_hook_escapes_what_mrkdwn_reads():
    out = subprocess.run(["sh", "-c", _slack_jq()], input=json.dumps(HOSTILE), capture_output=True, text=True,
                         check=True, timeout=30).stdout
    text = json.loads(out)["text"]
    assert "<" not in text and ">" not in text
    assert re.sub(r"&(amp|lt|gt);", "", text).count("&") == 0
    assert "&lt;!channel&gt;" in text and "&amp;amp;" in text  # shown, as written


@needs_jq
def test_the_jq_raw_recipe_prints_no_control_character():
    assert "`jq -r` prints database text raw" in README
    recipe = re.search(r"first: `(jq -r '[^`]*')`", README)
    assert recipe, "the README gives a safe jq -r recipe"
    rows = [{"id": "apr-\x1b]2;owned\x07\x00\n\u202eevil\x9b31m\x7f"}, {"id": "apr-plain"}]
    out = subprocess.run(["sh", "-c", recipe.group(1)], input=json.dumps(rows), capture_output=True, text=True,
                         check=True, timeout=30).stdout
    lines = out.splitlines()
    assert lines[1] == "apr-plain" and len(lines) == 2
    assert is_clean(lines[0]) and "\x00" not in lines[0], repr(lines[0])


# --- every command line of the README runs as written (issue 21 item 1) --------------------------
# The README's command lines are taken from its code blocks (fenced, and `$ ` transcript lines):
# a line with a placeholder (`ID`, `[--json]`, `a|b`, `...`) is a synopsis, and every command word and
# option it names must be the parser's; any other line is an example and is run as written by
# `bash -o pipefail`, with `archon-console` this checkout's and `$ARCHON_DB_PATH` a copy of the demo
# database (`make demo`'s), and must exit 0. Backticked `archon-console ...` mentions in the prose
# must name commands and options the parser has. Lines that cannot run here say why:
TUI_LINES = {  # the whole line: each opens the terminal console, which needs a terminal (tests/tui)
    "archon-console", "archon-console --read-only", "archon-console inspect user.db",
}
EXEMPT = {  # a line starting with the key
    "archon-console --fleet": "needs hosts.toml and ssh to the hosts (tests/fleet)",
    "archon-console --group": "needs hosts.toml and ssh to the hosts (tests/fleet)",
    "chmod +x ~/bin/archon-slack": "posts to Slack ($SLACK_WEBHOOK_URL); its jq runs in the tests above",
}
TUI_ALONE = "archon-console"
STREAMS = ("approvals watch",)  # run until stopped: started, seen ready, stopped with SIGTERM (exit 0)
PLACEHOLDER = re.compile(r"\[|\.\.\.|…|\b[A-Z][A-Z0-9_]+\b|\b[A-Z]\b|\w\|\w")
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")


def _command_lines() -> list[str]:
    lines = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", README, re.S | re.M):
        lines += [line for line in block.splitlines()]
    lines += [line for line in README.splitlines() if line.startswith("    $ ")]
    found = []
    for raw in lines:
        line = re.sub(r"\s{2,}#.*$", "", raw.strip().removeprefix("$ ")).strip()
        segments = [s.strip() for s in re.split(r"&&|\s\|\s", line)]
        if any(s == TUI_ALONE or s.startswith(TUI_ALONE + " ") for s in segments):
            found.append(line)
    return list(dict.fromkeys(found))


def _mentions() -> list[str]:
    prose = re.sub(r"```.*?```", "", README, flags=re.S)
    return sorted(set(re.findall(r"`(archon-console [^`]*)`", prose)))


@functools.cache
def _parser():
    from console.cli import parser as cli

    return cli.build_parser()


def _parser_problems(line: str) -> list[str]:
    """The command words and options of one line (or synopsis) that the parser does not have."""
    import argparse

    top = _parser()
    commands = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices
    text = line[line.index(TUI_ALONE) + len(TUI_ALONE):]
    words = text.split()
    i = 0
    while i < len(words) and words[i].startswith("-"):  # global options before the command
        action = top._option_string_actions.get(words[i].split("=")[0])
        i += 2 if action is not None and action.nargs != 0 and "=" not in words[i] else 1
    parsers, problems = [top], []
    if i < len(words) and words[i] == "__complete":  # the shell's completion function (console/cli/cli.py)
        return []
    if i < len(words) and not PLACEHOLDER.fullmatch(words[i]) and words[i] not in ("|", "&&"):
        command = commands.get(words[i])
        if command is None:
            return [f"no command {words[i]!r}"]
        parsers.append(command)
        subs = [a for a in command._actions if isinstance(a, argparse._SubParsersAction)]
        if subs and i + 1 < len(words) and re.fullmatch(r"[a-z|]+", words[i + 1]):
            actions = [subs[0].choices.get(w) for w in words[i + 1].split("|")]
            problems += [f"no action {w!r} of {words[i]}" for w, a in zip(words[i + 1].split("|"), actions) if a is None]
            parsers += [a for a in actions if a is not None]
    known = {o for p in parsers for o in p._option_string_actions}
    own = text.split(" | ")[0] if not PLACEHOLDER.search(text) else text  # a pipe's other commands aside
    problems += [f"no option {o}" for o in OPTION.findall(own) if o not in known]
    return problems


@pytest.mark.slow  # builds the whole parser (every command family imported): about a second
def test_every_command_line_and_mention_names_what_the_parser_has():
    lines, mentions = _command_lines(), _mentions()
    assert len(lines) > 50 and len(mentions) > 30  # the extraction sees the README
    problems = [f"{line}: {p}" for line in lines + mentions for p in _parser_problems(line)]
    assert problems == []


@pytest.fixture(scope="module")
def readme_demo(tmp_path_factory) -> Path:
    """The database `make demo` writes (seed 7, the real clock)."""
    path = tmp_path_factory.mktemp("readme") / "archon-demo.db"
    from console.demo.writer import generate

    generate(path, seed=7, overwrite=True)
    return path


def _examples() -> list[str]:
    return [line for line in _command_lines() if line not in TUI_LINES and not PLACEHOLDER.search(line)
            and not any(line.startswith(prefix) for prefix in EXEMPT)]


def test_the_examples_are_the_ones_expected():
    """A new example line joins the run below by itself; this keeps the extraction honest."""
    examples = _examples()
    assert "archon-console doctor" in examples and "archon-console approvals watch --expiring-within 15" in examples
    assert any(line.startswith("archon-console audit --kind environment") for line in examples)
    assert not [line for line in examples if "--fleet" in line or "--group" in line]
    assert TUI_LINES <= set(_command_lines())  # each exemption is still a line of the README


@pytest.mark.slow
@pytest.mark.parametrize("line", _examples())
def test_every_example_runs_as_written(line, readme_demo, tmp_path):
    import os
    import signal
    import sys
    import time

    db = tmp_path / "archon.db"
    shutil.copyfile(readme_demo, db)
    home = tmp_path / "home"
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ARCHON_", "XDG_"))}
    env.update(HOME=str(home), ARCHON_DB_PATH=str(db), PATH=f"{Path(sys.executable).parent}{os.pathsep}{env['PATH']}",
               PYTHONUNBUFFERED="1")
    argv = ["bash", "-o", "pipefail", "-c", line]
    if any(stream in line for stream in STREAMS):
        proc = subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, start_new_session=True)
        err = []
        deadline = time.monotonic() + 60
        try:
            for got in proc.stderr:  # the watch says it has taken its position, then streams
                err.append(got)
                if "watching approval requests" in got or time.monotonic() > deadline:
                    break
            assert any("watching approval requests" in e for e in err), err
            os.killpg(proc.pid, signal.SIGTERM)
            assert proc.wait(timeout=60) == 0
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        return
    done = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, (done.stdout[-2000:], done.stderr[-2000:])
    assert "Traceback" not in done.stderr and done.stdout.strip(), done.stderr
