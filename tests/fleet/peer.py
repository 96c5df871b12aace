"""A scripted fleet server for the client's tests: the wire of console/fleet/protocol.py and
nothing of the console behind it, so each test says exactly how the host behaves.

    peer.py [--instance ID] [--protocol N] [--mode MODE] [--markers DIR] [--together N]

`--replay FILE` answers hello and then the method with the lines of FILE's "hello" and
"method" lists ("{id}" replaced by the request's id), then exits (after hello already with
"end_after_hello"). `--require FILE` fails as an unreachable host would (exit 255) until FILE exists;
`approvals.watch` sends three `approvals.changed` notifications before its answer. Every method answers `{"exit": 0, "output": {"method": ..., "params": ..., "pid": ...}}` (in its
method's shape: `shaped`). Modes:
`die-on-write` exits without an answer when a write method arrives (after reading it whole),
`hang` answers hello and then nothing, `mute` answers nothing at all, `linger` answers and then outlives its stdin, `hold` answers nothing and leaves a child
holding its stdin, stdout and stderr (its pid in DIR/PID.holder), as a ControlMaster holds a mux
client's, `noisy` writes 1 MB to stderr first, `deaf` stops reading after hello, `deep` answers with JSON nested 200,000 deep,
`skew-error` answers hello with the server's version_skew error, `huge` answers every method
with one line over the response cap, `garbage` answers with a line that is not JSON. With
`--markers DIR` the peer creates DIR/PID while it runs (and DIR/PID.started for good) and, with
`--together N --total T`, waits (at most 10 s) before answering hello until N peers run at once or
all T have started, recording how many ran in DIR/PID.seen.
"""

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from console.fleet.protocol import MAX_RESPONSE_BYTES, METHODS  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--instance", default="instance-1")
parser.add_argument("--protocol", type=int, default=1)
parser.add_argument("--mode", default="normal")
parser.add_argument("--markers")
parser.add_argument("--together", type=int, default=0)
parser.add_argument("--total", type=int, default=0)
parser.add_argument("--require")
parser.add_argument("--replay")
parser.add_argument("serve", nargs="*")  # `serve --stdio` as the client adds them
parser.add_argument("--stdio", action="store_true")
parser.add_argument("--read-only", action="store_true")
opts = parser.parse_args()

if opts.require and not Path(opts.require).exists():
    sys.stderr.write("ssh: connect to host peer port 22: Connection refused\n")
    sys.exit(255)

marker = Path(opts.markers) / str(os.getpid()) if opts.markers else None
if marker:
    marker.touch()
    marker.with_suffix(".started").touch()


def shaped(method, echo):
    """The echo in the shape the method's `--json` has (the client checks it: console/fleet/answers.py)."""
    if method.startswith("approvals.") and method not in ("approvals.list", "approvals.show", "approvals.watch"):
        ids = echo["params"].get("ids") or []
        return [{"ok": True, "id": str(i), "state": "done", "message": "done", **echo} for i in ids]
    extra = {"rows": []} if method.endswith(".list") else {"findings": []} if method == "doctor" else \
        {"pending": []} if method == "upgrade.plan" else {}
    if method in ("envs.claim", "envs.release", "envs.complete", "profiles.activate"):
        extra = {"ok": True}
    return {**echo, **extra}


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def started():
    return len(list(Path(opts.markers).glob("*.started")))


def live():
    return len([p for p in Path(opts.markers).iterdir() if p.name.isdigit()])


if opts.mode == "hold":  # what a ControlMaster does: another process keeps this one's stdio open
    holder = os.fork()
    if holder == 0:
        import signal

        signal.pause()
        os._exit(0)
    if marker:
        marker.with_suffix(".holder").write_text(str(holder))

if opts.mode == "noisy":  # a chatty host: far more on stderr than the client keeps
    for _ in range(256):
        sys.stderr.write("x" * 4095 + "\n")
    sys.stderr.flush()

replay = json.loads(Path(opts.replay).read_text()) if opts.replay else None

try:
    for line in sys.stdin:
        message = json.loads(line)
        method, id_ = message["method"], message.get("id")
        if replay is not None:  # the scripted lines, "{id}" as the request's id; the method's end it
            for scripted in replay["hello" if method == "hello" else "method"]:
                sys.stdout.write(scripted.replace("{id}", json.dumps(id_)) + "\n")
            sys.stdout.flush()
            if method != "hello" or replay.get("end_after_hello"):
                break
            continue
        if opts.mode in ("mute", "hold"):
            continue
        if method == "hello" and opts.mode == "skew-error":
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32005, "message": "version skew: protocol 9",
                                                         "data": {"kind": "version_skew"}}})
            continue
        if method == "hello":
            if marker and opts.together:
                end = time.monotonic() + 30  # the others start within it, however loaded the machine
                while live() < opts.together and started() < opts.total and time.monotonic() < end:
                    time.sleep(0.01)
            if marker:
                marker.with_suffix(".seen").write_text(str(live()))
            send({"jsonrpc": "2.0", "id": id_, "result": {
                "protocol": opts.protocol, "instance_id": opts.instance, "read_only": opts.read_only,
                "params": message["params"], "actor": "tester", "actor_source": "login"}})
            if opts.mode == "deaf":  # reads nothing more: the client's next large write fills the pipe
                import signal

                signal.pause()
            continue
        if opts.mode == "hang":
            continue
        if opts.mode == "die-on-write" and METHODS.get(method) and METHODS[method].writes:
            os._exit(0)
        if opts.mode == "huge":
            sys.stdout.write('{"x": "' + "a" * (MAX_RESPONSE_BYTES + 10) + '"}\n')
            sys.stdout.flush()
            continue
        if opts.mode == "deep":
            sys.stdout.write("[" * 200_000 + "]" * 200_000 + "\n")
            sys.stdout.flush()
            continue
        if opts.mode == "garbage":
            send_line = "\x1b[31mnot json\n"
            sys.stdout.write(send_line)
            sys.stdout.flush()
            continue
        if method == "approvals.watch":
            for n in range(3):
                send({"jsonrpc": "2.0", "method": "approvals.changed", "params": {"n": n}})
        if method == "fail":
            send({"jsonrpc": "2.0", "id": id_, "error": {"code": -32602, "message": "bad\nparams\x1b[2J",
                                                         "data": {"kind": "invalid_params"}}})
            continue
        send({"jsonrpc": "2.0", "id": id_, "result": {"exit": 0, "output": shaped(method, {
            "method": method, "params": message["params"], "pid": os.getpid()})}})
finally:
    if marker:
        marker.unlink(missing_ok=True)
if opts.mode == "linger":  # keeps running after its stdin closed, until it is killed
    import signal

    signal.pause()
