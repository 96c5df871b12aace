"""Every bad local input is one sentence: a TOML file nested past the parser's stack
(console/small_files.py `read_toml`) and a `~user` that names nobody (console/db/paths.py
`expand_home`, which every path a user or a client gives goes through) end in one sentence and
exit 2 or 3, or a JSON-RPC `invalid_params`, never "unexpected RecursionError/RuntimeError"."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.db.paths import expand_home
from console.errors import UsageError
from console.small_files import SettingsUnusable, read_toml

from .serve_helpers import server_env

NOBODY = "~nobody-of-archon-console-tests"


@settings(max_examples=40, deadline=None)
@given(depth=st.integers(1, 20_000), opener=st.sampled_from(["[", "{a = "]))
def test_a_toml_file_nested_at_any_depth_is_read_or_one_refusal(tmp_path_factory, depth, opener):
    closer = "]" if opener == "[" else "}"
    path = tmp_path_factory.mktemp("toml") / "x.toml"
    path.write_text("a = " + opener * depth + closer * depth + "\n")
    try:
        read_toml(path, "the test file")
    except SettingsUnusable as exc:
        assert "\n" not in str(exc)


@settings(max_examples=60, deadline=None)
@given(name=st.text(st.characters(whitelist_categories=("Ll", "Nd")), min_size=1, max_size=20).map(
    lambda s: "nobody-of-archon-" + s), tail=st.text(max_size=20))
def test_a_home_of_nobody_is_a_usage_sentence(name, tail):
    with pytest.raises(UsageError) as raised:
        expand_home(f"~{name}/{tail}", "The path")
    assert "\n" not in str(raised.value)


def _cli(*args, env=None, stdin=b""):
    return subprocess.run([sys.executable, "-m", "console", *args], input=stdin, capture_output=True, timeout=60,
                          env={**server_env(), **(env or {})})


@pytest.fixture
def deep(tmp_path):
    path = tmp_path / "deep.toml"
    path.write_text("a = " + "[" * 5000 + "]" * 5000 + "\n")
    return path


def _one_sentence(result, code):
    err = result.stderr.decode()
    assert result.returncode == code, err
    assert "unexpected" not in err and "Traceback" not in err
    assert err.startswith("archon-console: ") and len(err.strip().splitlines()) <= 2, err  # the sentence, its hint


def test_a_deep_hosts_file_is_one_sentence(deep, private_env):
    _one_sentence(_cli("approvals", "list", "--fleet", env={"ARCHON_CONSOLE_HOSTS": str(deep)}), 2)


def test_a_deep_serve_policy_is_one_sentence(deep):
    result = _cli("serve", "--stdio", "--policy", str(deep))
    assert result.returncode == 3 and result.stdout == b"", result
    assert "unexpected" not in result.stderr.decode() and "RecursionError" not in result.stderr.decode()


def test_a_hosts_path_of_nobody_is_one_sentence(private_env):
    _one_sentence(_cli("approvals", "list", "--fleet", env={"ARCHON_CONSOLE_HOSTS": f"{NOBODY}/x"}), 2)


def test_a_cursor_path_of_nobody_is_one_sentence(write_hosts, tmp_path):
    from .conftest import peer

    write_hosts({"eu1": {"ssh": "eu1", "remote": peer()}})
    _one_sentence(_cli("approvals", "watch", "--fleet", "--cursor", f"{NOBODY}/c.json",
                       env={"ARCHON_CONSOLE_HOSTS": str(tmp_path / "hosts.toml")}), 2)


def test_a_db_path_of_nobody_is_one_sentence(tmp_path):
    _one_sentence(_cli("--db", f"{NOBODY}/a.db", "approvals", "list"), 2)


@pytest.mark.parametrize("fixed", [True, False])
def test_hello_with_a_db_of_nobody_is_invalid_params(tmp_path, fixed):
    hello = {"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {"protocol": 1, "db": f"{NOBODY}/x.db"}}
    (tmp_path / "none.toml").write_text("")  # no rules (a named policy must exist)
    args = ["serve", "--stdio", "--policy", str(tmp_path / "none.toml")] + (["--db", str(tmp_path / "x.db")]
                                                                             if fixed else [])
    result = _cli(*args, stdin=(json.dumps(hello) + "\n").encode())
    [line] = result.stdout.decode().splitlines()
    assert json.loads(line)["error"]["code"] == -32602, line
