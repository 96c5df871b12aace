"""A stand-in for ssh(1) in tests that need no sshd: a real process, run as `[ssh] command`.

It skips every option up to `--` (the console always puts the alias after it), takes the alias
and maps it to nothing: the remote words are joined and split again as the remote shell would
(ssh sends them as one line), and run here. `archon-console` stands for this checkout's
`python -m console`. No words after the alias (`ssh -O exit`) is a success with nothing to do;
a command that does not exist answers as a remote shell does: exit 127, "command not found".
With `FAKE_SSH_LOG` set, each run appends its arguments to that file.
"""

import os
import shlex
import sys

args = sys.argv[1:]
if os.environ.get("FAKE_SSH_LOG"):  # a test's record of how ssh was run, one JSON argv a line
    import json

    with open(os.environ["FAKE_SSH_LOG"], "a", encoding="utf-8") as log:
        log.write(json.dumps(args) + "\n")
if "--" not in args or len(args) < args.index("--") + 2:
    sys.exit("fake_ssh: usage: fake_ssh [options] -- ALIAS [command ...]")
words = args[args.index("--") + 2:]
if not words:
    sys.exit(0)
command = shlex.split(" ".join(words))
if command[0] == "archon-console":
    command = [sys.executable, "-m", "console", *command[1:]]
try:
    os.execvp(command[0], command)
except OSError:
    sys.stderr.write(f"bash: line 1: {command[0]}: command not found\n")
    sys.exit(127)
