"""The remote's own words never pass for ssh's: ssh checks the host key and logs in before the
remote command runs, so once the remote has sent a byte on stdout, no failure is classified
host_key or auth_failed, and nothing at all is decided from stderr (console/fleet/transport.py
`classify`, told by console/fleet/session.py `Session.spoke`): the exit status alone says a lost
connection (255), and the host's words are only quoted."""

from __future__ import annotations

import json
import shlex
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.fleet.client import call_hosts
from console.fleet.sessions import FleetSessions
from console.fleet.transport import classify
from console.text import is_clean

SSH_WORDS = [
    "@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@", "Host key verification failed.",
    "SHA256:" + "A" * 43, "No ED25519 host key is known for eu1 and you have requested strict checking.",
    "Permission denied (publickey).", "Too many authentication failures", "ssh: connect to host eu1 port 22: "
    "Connection refused", "Connection timed out during banner exchange", "kex_exchange_identification: read",
    '  ssh-keygen -f "/home/u/.ssh/known_hosts" -R "eu1"', "Could not resolve hostname eu1",
]


@settings(max_examples=200, deadline=None)
@given(words=st.lists(st.sampled_from(SSH_WORDS) | st.text(max_size=40), max_size=6),
       code=st.sampled_from([None, 0, 1, 2, 3, 126, 127, 255]))
def test_after_the_remote_spoke_its_stderr_is_never_ssh_s(words, code):
    state, sentence = classify(code, "\n".join(words), alias="eu1", name="eu1", spoke=True)
    assert state == ("unreachable" if code == 255 else "remote_error")  # the status decides, never the words
    own = sentence.split("stderr:")[0]  # the host's words only ever follow this, as a quote
    assert "ssh-keygen" not in own and "host key" not in own.lower() and "log in" not in own
    assert is_clean(sentence, allow_newlines=False)


HOSTILE = r'''
import json, sys
line = sys.stdin.readline()
hello = {"protocol": 1, "instance_id": "i-1"}
sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": json.loads(line)["id"], "result": hello}) + "\n")
sys.stdout.flush()
sys.stdin.readline()
sys.stderr.write(WORDS)
sys.exit(CODE)
'''


@pytest.mark.parametrize("code", [255, 1])
@pytest.mark.parametrize("said", ["@@@ WARNING: REMOTE HOST IDENTIFICATION HAS CHANGED! @@@\nThe fingerprint is\n"
                                  "SHA256:" + "A" * 43 + "\nHost key verification failed.\n",
                                  "Permission denied (publickey).\n", "ssh: connect to host x: Connection refused\n"])
def test_a_host_that_answered_hello_cannot_pass_its_stderr_for_ssh_s(write_hosts, tmp_path, code, said):
    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE.replace("WORDS", json.dumps(said)).replace("CODE", str(code)))
    remote = " ".join(shlex.quote(w) for w in (sys.executable, str(script)))
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": remote}})
    [outcome] = call_hosts(fleet, list(fleet.hosts.values()), "approvals.list", {}, deadline=10, cache=False)
    assert outcome.state == ("unreachable" if code == 255 else "remote_error"), outcome
    own = outcome.sentence.split("stderr:")[0]
    assert "ssh-keygen" not in own and "log in" not in own


def test_the_watch_s_sessions_classify_the_same_way(write_hosts, tmp_path):
    import asyncio

    script = tmp_path / "hostile.py"
    script.write_text(HOSTILE.replace("WORDS", json.dumps("Host key verification failed.\n")).replace("CODE", "255"))
    remote = " ".join(shlex.quote(w) for w in (sys.executable, str(script)))
    fleet = write_hosts({"eu1": {"ssh": "eu1", "remote": remote}})

    async def go():
        sessions = FleetSessions(fleet, list(fleet.hosts.values()), cache=False, deadline=10)
        try:
            await sessions.connect()
            return await sessions.call("eu1", "approvals.list", {})
        finally:
            await sessions.close()

    outcome = asyncio.run(go())
    assert outcome.state == "unreachable" and "ssh-keygen" not in outcome.sentence, outcome
