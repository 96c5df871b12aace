"""Every async failure is retrieved: whatever way a host's ssh fails at once (refused, exits at
once with any status, says anything, sends a partial or broken line), the CLI's stderr holds only
its one-sentence lines, never asyncio's "Future/Task exception was never retrieved", also across
the watch's reconnections (console/fleet/session.py `Session.request` retrieves every pending
future; console/fleet/client.py `FleetSessions` retrieves every background note)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from .serve_helpers import server_env

FAKE = r'''
import json, sys
with open(sys.argv[1]) as f:
    mode = json.load(f)
with open(sys.argv[1] + ".count", "a") as f:
    f.write("x\n")
sys.stdout.write(mode["stdout"]); sys.stdout.flush()
sys.stderr.write(mode["stderr"]); sys.stderr.flush()
sys.exit(mode["code"])
'''
MODES = st.fixed_dictionaries({
    "code": st.sampled_from([0, 1, 2, 3, 126, 127, 255]),
    "stderr": st.sampled_from(["", "ssh: connect to host a port 22: Connection refused\n",
                               "Permission denied (publickey).\n", "kex_exchange_identification: read: reset\n",
                               "bash: archon-console: command not found\n", "Host key verification failed.\n"]),
    "stdout": st.sampled_from(["", "not json\n", '{"jsonrpc": "2.0", "id": 1, "result": {"protocol": 1}}\n',
                               '{"jsonrpc": "2.0", "id": null, "error": {"code": -32700, "message": "x"}}\n',
                               '{"jsonrpc": "2.0", "id": 1']),
})
ALLOWED = re.compile(r"^(archon-console: )?h\d: |^archon-console: watching ")
NOISE = re.compile(r"never retrieved|Traceback|Exception|Warning|asyncio|Executing <", re.I)


def _setup(base: Path, modes: list[dict]) -> dict[str, str]:
    base.mkdir(parents=True, exist_ok=True)
    (base / "run").mkdir(mode=0o700, exist_ok=True)
    fake = base / "fake.py"
    fake.write_text(FAKE)
    lines = []
    for i, mode in enumerate(modes, 1):
        (base / f"m{i}.json").write_text(json.dumps(mode))
        command = json.dumps([sys.executable, str(fake), str(base / f"m{i}.json")])
        lines.append(f'[hosts.h{i}]\nssh = "a{i}"\n')
        (base / f"h{i}.toml").write_text(f"[ssh]\ncommand = {command}\n[hosts.h{i}]\nssh = \"a{i}\"\n")
    # one file per host can carry one ssh command each; the fleet is their union through `--host`
    env = {**server_env(), "XDG_RUNTIME_DIR": str(base / "run"), "XDG_CACHE_HOME": str(base / "cache"),
           "PYTHONASYNCIODEBUG": "1", "PYTHONWARNINGS": "default", "PYTHONDEVMODE": "1"}
    return env


# asyncio's debug mode (on here, so that nothing unretrieved goes unseen) also reports any step that
# took over 0.1 s: on a loaded machine a fork or a file read does. That is the machine's timing, not
# an async failure; a user never runs with PYTHONASYNCIODEBUG.
SLOW_STEP = re.compile(r"^Executing <.*> took \d+(\.\d+)? seconds$")


def _check(stderr: str) -> None:
    for line in stderr.splitlines():
        if line.strip() and not SLOW_STEP.match(line):
            own = line.split("said:")[0]  # what follows is the host's, quoted
            assert ALLOWED.match(line) and not NOISE.search(own), stderr


@pytest.mark.slow
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(mode=MODES)
def test_a_host_that_fails_at_once_leaves_only_its_sentence(tmp_path_factory, mode):
    base = tmp_path_factory.mktemp("af")
    env = _setup(base, [mode])
    env["ARCHON_CONSOLE_HOSTS"] = str(base / "h1.toml")
    for argv in (["approvals", "list", "--fleet"], ["approvals", "expire", "--fleet"], ["doctor", "--fleet"]):
        result = subprocess.run([sys.executable, "-m", "console", *argv], capture_output=True, text=True,
                                timeout=120, env=env)
        assert result.returncode in (0, 1, 3, 4), result
        _check(result.stderr)


@pytest.mark.slow
@pytest.mark.parametrize("mode", [
    {"code": 255, "stderr": "ssh: connect to host a port 22: Connection refused\n", "stdout": ""},
    {"code": 0, "stderr": "", "stdout": ""},
    {"code": 1, "stderr": "", "stdout": '{"jsonrpc": "2.0", "id": 1, "result": {"protocol": 1, "instance_id": "i"}}\n'},
])
def test_the_watch_s_reconnections_leave_only_their_sentences(tmp_path, mode):
    env = _setup(tmp_path, [mode])
    env["ARCHON_CONSOLE_HOSTS"] = str(tmp_path / "h1.toml")
    proc = subprocess.Popen([sys.executable, "-m", "console", "approvals", "watch", "--fleet"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env)
    count = tmp_path / "m1.json.count"
    try:
        end = time.monotonic() + 60
        while not (count.exists() and len(count.read_text().splitlines()) >= 3):  # two reconnections
            assert proc.poll() is None and time.monotonic() < end, "the watch did not reconnect"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    _check(stderr)
