"""The README's shell recipes are safe with hostile database text (issue 17, finding 11).

They are run as written (with `jq`), on a request whose values are an attacker's: the Slack hook
must not let a project id `<!channel>` ping everyone (Slack's mrkdwn reads `<...>` and `&`), and the
`jq -r` recipe must not hand the terminal a control character.
"""

from __future__ import annotations

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
