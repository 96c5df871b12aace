"""How the console reaches a host: the operator's own OpenSSH, and what its failures mean.

The system `ssh` runs `archon-console serve --stdio` on the host, so `~/.ssh/config` applies in
full (ProxyJump, agents, certificates, proxy commands). The console adds only what makes a
non-interactive session safe and bounded: `-T` (no terminal), `BatchMode=yes` (never a prompt),
`ConnectTimeout` and `ServerAlive*` (a dead link is noticed), and connection sharing under a
private directory (console/fleet/private.py), since a control socket is a logged-in session. It
never weakens host key checking: a changed or unknown key is the `host_key` state with the
fingerprint and the remedy. The alias always follows `--`, and every remote word is quoted on its
own (ssh joins them into one line for the remote shell). The database path and every parameter
travel inside the JSON-RPC session, never on the command line.

`classify` turns ssh's exit status and stderr into one state and one sentence. Everything in that
stderr after the connection starts (a banner, the remote shell's words) comes from the host and
is hostile: the sentence quotes only what matches a strict pattern (a `SHA256:` fingerprint) or a
last line cut short and cleaned by console/text.py `one_line`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shlex
import subprocess
import time
from pathlib import Path
from typing import Iterable

from console.fleet.hosts import Fleet, Host
from console.fleet.private import PrivateDirUnusable, cache_home, private_dir
from console.text import is_clean, one_line

CONNECT_TIMEOUT = 10  # seconds for TCP and the banner; the console's own deadline bounds the rest
SERVER_ALIVE_INTERVAL = 15
SERVER_ALIVE_COUNT_MAX = 3
CONTROL_PERSIST = 120  # a warm connection for the next command; `close_masters` ends it on quit
# sun_path holds 107 bytes and a NUL; after the directory come '/', the 8-hex entry tag, '-', the
# 40-hex %C and the 17-byte suffix of ssh's temporary socket.
MAX_SOCKET_DIR = 107 - (1 + 8 + 1 + 40 + 17)
# archon-console is installed from a clone (README, "Install"); it is not on PyPI, so advice naming
# an index package would send a host's admin to whatever a stranger published under that name.
INSTALL_COMMAND = "pipx install . in a clone of archon-console (README: Install)"
UPGRADE_COMMAND = "pipx install --force . in an updated clone of archon-console (README: Install)"

STATES = ("ok", "stale", "unreachable", "timeout", "auth_failed", "host_key", "no_server", "version_skew",
          "wrong_instance", "remote_error", "outcome_unknown")


def control_dir() -> Path:
    """The private directory of ssh's control sockets: under `$XDG_RUNTIME_DIR` (a per-login
    tmpfs), else the cache directory."""
    runtime = os.environ.get("XDG_RUNTIME_DIR")
    if runtime and os.path.isabs(runtime):
        return private_dir(Path(runtime) / "archon-console-ssh")
    return private_dir(cache_home() / "archon-console" / "ssh")


def entry_tag(fleet: Fleet, host: Host) -> str:
    """What makes a shared connection one hosts.toml entry's own. ssh's %C hashes only the local
    host, HostName, Port and User (and ProxyJump): two entries for one account that log in with
    different keys (an alias whose IdentityFile reaches a forced command, and the plain login) would
    share one master, and the second would act with the first's identity."""
    what = json.dumps([host.name, host.ssh, list(fleet.ssh_command)], separators=(",", ":"))
    return hashlib.sha256(what.encode("utf-8", "surrogatepass")).hexdigest()[:8]


def _control_options(directory: Path | None, tag: str) -> list[str]:
    """Connection sharing, or none where the directory cannot hold a socket path (too long for
    `sun_path`, or characters ssh's option parser would split or expand)."""
    text = str(directory) if directory is not None else ""
    if not text or len(text) > MAX_SOCKET_DIR or re.search(r'[\s"\'%\\]', text):
        return ["-o", "ControlMaster=no", "-o", "ControlPath=none"]
    return ["-o", "ControlMaster=auto", "-o", f"ControlPath={text}/{tag}-%C", "-o", f"ControlPersist={CONTROL_PERSIST}"]


def ssh_argv(fleet: Fleet, host: Host, *, connect_timeout: int = CONNECT_TIMEOUT,
             sockets: Path | None = None) -> list[str]:
    """The command that runs the host's server: the alias after `--`, each remote word quoted,
    `--read-only` when hosts.toml marks the host read-only."""
    remote = [shlex.quote(word) for word in host.remote_words] + ["serve", "--stdio"]
    if host.read_only:
        remote.append("--read-only")
    return [*fleet.ssh_command, "-T", "-o", "BatchMode=yes", "-o", f"ConnectTimeout={int(connect_timeout)}",
            "-o", f"ServerAliveInterval={SERVER_ALIVE_INTERVAL}", "-o", f"ServerAliveCountMax={SERVER_ALIVE_COUNT_MAX}",
            *_control_options(sockets, entry_tag(fleet, host)), "--", host.ssh, *remote]


def exit_argv(fleet: Fleet, host: Host, sockets: Path) -> list[str]:
    """`ssh -O exit` for the host's shared connection."""
    return [*fleet.ssh_command, "-o", "BatchMode=yes", *_control_options(sockets, entry_tag(fleet, host))[2:4], "-O",
            "exit", "--", host.ssh]


def close_masters(fleet: Fleet, hosts: Iterable[Host], *, timeout: float = 5.0) -> None:
    """End the shared connections of `hosts` (on quit), all at once and within `timeout` seconds;
    an ssh still running then is killed. Nothing is reported: a host without one is the usual case."""
    try:
        sockets = control_dir()
    except PrivateDirUnusable:  # no private directory, so no shared connection was ever made
        return
    if _control_options(sockets, "")[1] == "ControlMaster=no" or not any(sockets.iterdir()):
        return
    started = []
    for host in hosts:
        try:
            started.append(subprocess.Popen(exit_argv(fleet, host, sockets), stdin=subprocess.DEVNULL,
                                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        except OSError:
            break
    end = time.monotonic() + timeout
    for process in started:
        try:
            process.wait(max(0.0, end - time.monotonic()))
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


# ------------------------------------------------------------------ what a failure means
_FINGERPRINT = re.compile(r"SHA256:[A-Za-z0-9+/]{43}")
_HOST_KEY = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key verification failed|"
                       r"No \S+ host key is known for|Host key for \S+ has changed")
_CHANGED = re.compile(r"REMOTE HOST IDENTIFICATION HAS CHANGED|Host key for \S+ has changed")
# ssh's own remedy for a changed key names the known_hosts file and the entry it pinned ([HostName]:Port
# for an alias with a port), which `ssh-keygen -R ALIAS` would miss.
_REMOVE = re.compile(r'^  ssh-keygen -f "([^"\n]{1,1024})" -R "([^"\s]{1,300})"\r?$', re.M)
_TIMEOUT = re.compile(r"Connection timed out|timed out during banner exchange|Operation timed out|"
                      r"Timeout, server \S+ not responding")  # the last: ServerAlive gave up on a host mid-session
_UNREACHABLE = re.compile(r"Connection refused|No route to host|Name or service not known|"
                          r"Could not resolve hostname|Network is unreachable|Temporary failure in name resolution|"
                          r"Connection closed by|Connection reset by|kex_exchange_identification")
_AUTH = re.compile(r"Permission denied|Too many authentication failures")
_TOO_OLD = re.compile(r"invalid choice: '?serve'?|unrecognized arguments: .*--stdio")


def last_line(stderr: str, width: int = 200) -> str:
    """The last non-blank line of `stderr`, cleaned and cut: how a failure nobody recognised is named."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    return one_line(lines[-1].strip(), width) if lines else ""


def _ssh_failure(stderr: str, who: str, alias: str) -> tuple[str, str] | None:
    if _HOST_KEY.search(stderr):
        found = _FINGERPRINT.search(stderr)
        offers = f" (it now offers {found.group()})" if found else ""
        if _CHANGED.search(stderr):
            named = _REMOVE.search(stderr)
            if named and not all(is_clean(word, allow_newlines=False) for word in named.groups()):
                named = None  # a command shown with a pictured character would not remove what it names
            remedy = (f"ssh-keygen -f {shlex.quote(named.group(1))} -R {shlex.quote(named.group(2))}" if named
                      else f"ssh-keygen -R {alias}")
            sentence = (f"The host key of {who} has changed{offers}: someone may be intercepting the connection; "
                        f"verify the new key out of band, then run {remedy}.")
        else:
            sentence = (f"The host key of {who} is not known{offers}: verify it out of band and add it to "
                        f"known_hosts (ssh {alias} once, by hand).")
        return "host_key", one_line(sentence)
    if _AUTH.search(stderr):
        return "auth_failed", one_line(f"ssh could not log in to {who} (permission denied): check its key, agent or "
                                       "certificate in ~/.ssh/config; the console never asks for a password.")
    if _TIMEOUT.search(stderr):
        if "banner exchange" in stderr:
            return "timeout", one_line(f"{who} accepted the connection but never spoke SSH (timed out during the "
                                       "banner exchange): check the address and port, or what listens there.")
        return "timeout", one_line(f"{who} did not answer in time ({last_line(stderr, 120)}).")
    if _UNREACHABLE.search(stderr):
        return "unreachable", one_line(f"{who} cannot be reached: {last_line(stderr, 160).rstrip('.')}.")
    return None


def classify(returncode: int | None, stderr: str, *, alias: str = "HOST", name: str | None = None,
             remote: str = "archon-console", spoke: bool = False) -> tuple[str, str]:
    """The state and the one-line sentence for an ssh that ended without a server answering.
    `alias` is what ssh was given (the remedy names it), `name` the host's name in hosts.toml.
    ssh exits 255 for its own failures; any other status is the remote command's, whose stderr
    (hostile, and free to say "Permission denied") never decides an ssh state. `spoke`: the remote
    had sent a byte on stdout. ssh checks the host key and logs in before the remote command runs,
    so after that the stderr never decides anything: it is partly the host's, and only ever quoted
    as a last line. The only ssh failure left then is a lost connection, which the status alone
    says (255: `unreachable`, so a read falls back on the cache and a watch reconnects; a remote
    exiting 255 by itself gains nothing but its own stale rows); never host_key or auth_failed."""
    who = name or alias
    if spoke:
        said = last_line(stderr, 160).rstrip(".")
        quoted = f"; the last line on its stderr: {said}." if said else "."
        if returncode == 255:
            return "unreachable", one_line(f"The connection to {who} ended mid-session (ssh exit 255){quoted}")
        status = "" if returncode is None else f" (exit {returncode})"
        return "remote_error", one_line(f"The server on {who} ended the session{status}{quoted}")
    if returncode in (255, None):  # ssh's own failure (or still running): its words say which
        found = _ssh_failure(stderr, who, alias)
        if found is not None:
            return found
        if returncode == 255:
            said = last_line(stderr, 160).rstrip(".") or "ssh failed"
            return "unreachable", one_line(f"{who} cannot be reached: {said}.")
    elif returncode in (126, 127):  # the remote shell's: not found, or found and not runnable
        why = "was not found" if returncode == 127 else "cannot be run there"
        return "no_server", one_line(f"{who} has no archon-console to run (the remote command {remote!r} {why}): "
                                     f"install it there with {INSTALL_COMMAND}, or set remote for {who} in "
                                     "hosts.toml.")
    elif _TOO_OLD.search(stderr):
        return "version_skew", one_line(f"The archon-console on {who} is older than fleet mode (it has no serve "
                                        f"command): upgrade it there with {UPGRADE_COMMAND}.")
    said = last_line(stderr, 160)
    return "remote_error", one_line(f"The server on {who} ended without answering (exit {returncode})"
                                    + (f": {said}." if said else "."))


__all__ = ["CONNECT_TIMEOUT", "INSTALL_COMMAND", "STATES", "UPGRADE_COMMAND", "classify", "close_masters", "control_dir", "entry_tag",
           "exit_argv", "last_line", "ssh_argv"]
