"""A host whose connection drops after a write landed and before its answer came back: the real
`python -m console serve --stdio` behind a relay that passes every request and answer through,
except that after the first `approvals.approve` the server's answer is read and thrown away and
the relay exits 255, as ssh does when the connection is lost.

    drop_relay.py MARKER serve --stdio [...]   (the fleet client appends the serve words)

MARKER is a file: the drop happens only while it does not exist, and the relay creates it, so the
reconnection that follows reaches a host that answers normally.
"""

import os
import subprocess
import sys
from pathlib import Path

marker = Path(sys.argv[1])
server = subprocess.Popen([sys.executable, "-m", "console", *sys.argv[2:]], stdin=subprocess.PIPE,
                          stdout=subprocess.PIPE)
for line in sys.stdin.buffer:
    server.stdin.write(line)
    server.stdin.flush()
    answer = server.stdout.readline()  # serve answers every request with one line (no watch here)
    if b'"approvals.approve"' in line and not marker.exists():
        marker.touch()
        server.stdin.close()
        server.wait(timeout=30)
        os._exit(255)
    sys.stdout.buffer.write(answer)
    sys.stdout.buffer.flush()
server.stdin.close()
server.wait(timeout=30)
