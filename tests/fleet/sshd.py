"""Real OpenSSH servers on loopback for the fleet tests (issue 20, item 8).

`SshdLab` starts sshd instances on 127.0.0.2, 127.0.0.3, ... (free ports, loopback only), each with a
throwaway host key, its own authorized_keys and home; the client side is one key pair, a pinned
known_hosts and an ssh_config with one Host alias per instance, read by the system `ssh` with `-F`.

Where sshd comes from: tests/fleet/provision_sshd.sh (`make test` runs it; the fixture runs it too when
nothing is provisioned yet): /usr/sbin/sshd, else Debian's openssh-server unpacked into .cache/openssh/.

Who sshd runs as, and why. The remote console must run as the suite's own account, in the
system's own user namespace: it opens the test databases in pytest's private directories, runs this
checkout's .venv (whose interpreter may live under a 0700 home, as /root/.pyenv does here and in CI),
and the console refuses to approve from a user namespace, where any uid can be claimed (four-eyes,
console/services/identity.py `namespace_problem`). So:

- As a normal user, sshd runs as that user: OpenSSH's unprivileged mode serves only the user who
  started it, with no privilege separation user and no PAM. The lab lives under ~/.cache, inside
  the home, where StrictModes accepts its files.
- As root (here and in CI), sshd runs as root, as OpenSSH is built to: its network-facing pre-auth
  process is privilege-separated (chrooted, as the `sshd` user). Neither that user nor /run/sshd is
  created on the machine: each sshd runs in a private mount namespace (`enter_mount_namespace`) with a
  tmpfs on /run and its own /etc/passwd, the system's plus an `sshd` entry, in which root's home is
  the instance's directory (so StrictModes accepts its authorized_keys there). Logins are keys only,
  `AllowUsers root`, `PermitRootLogin prohibit-password`, each instance's own authorized_keys file
  only (never ~/.ssh), on a loopback address only. A second account was not created instead: a
  `useradd` changes the machine for good, and that account could not run this checkout's console.

The remote PATH starts with this checkout's .venv/bin (`SetEnv`), so `archon-console serve --stdio`
on a "host" is the code under test. Every process of an instance carries `MARKER` in its environment,
and teardown kills each instance's whole process tree (sshd puts each connection in a session of its
own, so a process group would miss them); `leftovers` finds anything that escaped.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROVISION = ROOT / "tests" / "fleet" / "provision_sshd.sh"
UNPACKED = ROOT / ".cache" / "openssh" / "root"
AS_ROOT = os.geteuid() == 0
USER = "root" if AS_ROOT else pwd.getpwuid(os.geteuid()).pw_name
MARKER = "ARCHON_TEST_SSHD"
REMOTE_BIN = Path(sys.executable).parent  # this checkout's .venv/bin: its archon-console
START_DEADLINE = 15.0


class Unavailable(Exception):
    """Why no sshd can run here: the fixture's skip reason."""


@dataclass(frozen=True)
class Sshd:
    path: Path
    env: dict[str, str]


def find_sshd() -> Sshd:
    """The provisioned sshd, provisioning it first when nothing is there yet, proved to run here the
    way the lab runs it (`sshd -t` in a user namespace)."""
    result = subprocess.run([str(PROVISION)], capture_output=True, text=True, timeout=300)
    if result.returncode != 0:
        raise Unavailable("no usable sshd: " + (result.stderr.strip().splitlines() or ["provision_sshd.sh failed"])[-1])
    path = Path(result.stdout.strip().splitlines()[-1])
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}  # sshd builds each session's own
    if path.is_relative_to(UNPACKED):
        libs = sorted(UNPACKED.rglob("libwrap.so.0"))
        if libs:
            env["LD_LIBRARY_PATH"] = str(libs[0].parent)
    with tempfile.TemporaryDirectory(prefix="sshd-probe-") as probe:
        home = Path(probe)
        _account(home)
        _keygen(home / "key")
        (home / "config").write_text(f"HostKey {home / 'key'}\nPidFile none\nUsePAM no\nListenAddress 127.0.0.2:22\n")
        check = subprocess.run([str(path), "-t", "-f", str(home / "config")], capture_output=True, text=True,
                               env=env, timeout=60, preexec_fn=enter_mount_namespace(home) if AS_ROOT else None)
        if check.returncode != 0:
            raise Unavailable(f"{path} -t fails here: {check.stderr.strip()}")
    return Sshd(path, env)


def _account(home: Path) -> None:
    """As root: the passwd and group files an instance's mount namespace shows, the system's with
    root's home moved to `home` and a privilege separation user `sshd` added when there is none."""
    if not AS_ROOT:
        return
    users = [line.split(":") for line in Path("/etc/passwd").read_text().splitlines() if line.count(":") == 6]
    taken = {int(u[2]) for u in users if u[2].isdigit()}
    lines = [":".join([*u[:5], str(home), u[6]]) if u[2] == "0" else ":".join(u) for u in users]
    if not any(u[0] == "sshd" for u in users):
        uid = next(n for n in range(64000, 65000) if n not in taken)
        lines.append(f"sshd:x:{uid}:65534:privilege separation:/run/sshd:/usr/sbin/nologin")
    (home / "passwd").write_text("\n".join(lines) + "\n")
    shutil.copyfile("/etc/group", home / "group")


_libc = ctypes.CDLL(None, use_errno=True)
_CLONE_NEWNS = 0x00020000
_PR_SET_PDEATHSIG = 1
_MS_BIND, _MS_REC, _MS_PRIVATE = 4096, 16384, 1 << 18


def _failed(what: str) -> OSError:
    errno = ctypes.get_errno()
    return OSError(errno, f"{what}: {os.strerror(errno)}")


def enter_mount_namespace(home: Path):
    """A preexec function (root only): a mount namespace of the process's own, with a tmpfs on /run
    holding /run/sshd (sshd's privilege separation directory) and `home`'s passwd and group files
    on /etc/passwd and /etc/group. The user namespace stays the system's."""
    def enter() -> None:
        try:
            if _libc.unshare(_CLONE_NEWNS) != 0:
                raise _failed("unshare(CLONE_NEWNS)")
            if _libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None) != 0:
                raise _failed("mount --make-rprivate /")
            if _libc.mount(b"tmpfs", b"/run", b"tmpfs", 0, b"mode=0755") != 0:
                raise _failed("mount tmpfs on /run")
            os.mkdir("/run/sshd", 0o755)
            for name in ("passwd", "group"):
                if _libc.mount(str(home / name).encode(), f"/etc/{name}".encode(), None, _MS_BIND, None) != 0:
                    raise _failed(f"bind-mount /etc/{name}")
        except OSError as error:  # said on the child's stderr (sshd's log), where the caller looks
            os.write(2, f"cannot enter a mount namespace: {error}\n".encode())
            os._exit(127)
    return enter


def _child_setup(home: Path):
    """The preexec function of an instance's sshd: it dies with the thread that started it (a suite
    killed outright leaves no listener behind; start hosts from the test's own thread), and as root
    it enters its namespace."""
    namespace = enter_mount_namespace(home) if AS_ROOT else None

    def setup() -> None:
        _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if namespace is not None:
            namespace()
    return setup


def _keygen(path: Path, *extra: str) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", path.name, "-f", str(path), *extra],
                   check=True, capture_output=True, timeout=30)


def fingerprint(public_key: Path) -> str:
    """`SHA256:...` as ssh prints it."""
    out = subprocess.run(["ssh-keygen", "-l", "-E", "sha256", "-f", str(public_key)], check=True,
                         capture_output=True, text=True, timeout=30).stdout
    return out.split()[1]


def _free_port(address: str) -> int:
    with socket.socket() as probe:
        probe.bind((address, 0))
        return probe.getsockname()[1]


def _children() -> dict[int, list[int]]:
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat.rsplit(")", 1)[1].split()[1])
            tree.setdefault(ppid, []).append(int(entry))
    return tree


def descendants(pid: int) -> set[int]:
    tree, found, todo = _children(), set(), [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """Running or stopped, not a zombie waiting for its parent."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def leftovers(marker: str, base: Path) -> list[int]:
    """Live processes of a lab: `MARKER=marker` in their environment (sshd's and every session's),
    or the lab's directory on their command line (its ssh clients and ControlPersist masters)."""
    needle, path = f"{MARKER}={marker}".encode(), str(base).encode()
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit() and int(entry) != os.getpid():
            try:
                environ = Path(f"/proc/{entry}/environ").read_bytes()
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if (needle in environ.split(b"\0") or path in cmdline) and alive(int(entry)):
                found.append(int(entry))
    return found


def _signal_all(pids, sig) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def until(condition, deadline: float, what: str):
    """Waits for `condition()` to be truthy, at most `deadline` seconds; polls, never a fixed sleep."""
    end = time.monotonic() + deadline
    pause = 0.002
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise TimeoutError(f"not within {deadline} s: {what}")
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


@dataclass
class SshdHost:
    """One sshd instance: alias `name` in the lab's ssh_config, home `home` (its account's files)."""

    lab: SshdLab
    name: str
    address: str
    home: Path
    port: int = 0
    process: subprocess.Popen | None = None
    seen: set[int] = field(default_factory=set)

    @property
    def host_key(self) -> Path:
        return self.home / "ssh_host_ed25519_key"

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.host_key.with_suffix(".pub"))

    @property
    def log(self) -> str:
        return (self.home / "sshd.log").read_text(errors="replace")

    def known_hosts_line(self) -> str:
        return f"[{self.address}]:{self.port} {' '.join(self.host_key.with_suffix('.pub').read_text().split()[:2])}"

    def authorize(self, public_key: Path, options: str = "") -> None:
        """Adds a key to this host's authorized_keys, with `options` (`restrict,command="..."`)."""
        line = public_key.read_text().strip()
        with open(self.home / "authorized_keys", "a") as handle:
            handle.write(f"{options} {line}\n" if options else f"{line}\n")

    def _config(self) -> str:
        return "\n".join([
            f"ListenAddress {self.address}:{self.port}",
            f"HostKey {self.host_key}",
            f"AuthorizedKeysFile {self.home / 'authorized_keys'}",
            f"TrustedUserCAKeys {self.lab.ca.with_suffix('.pub')}",
            "PidFile none", "UsePAM no", "StrictModes yes", f"AllowUsers {USER}", "PermitRootLogin prohibit-password",
            "PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
            "HostbasedAuthentication no", "PermitUserEnvironment no", "ExposeAuthInfo yes",
            "X11Forwarding no", "AllowTcpForwarding no", "AllowAgentForwarding no", "PermitTunnel no",
            "PrintMotd no", "PrintLastLog no", "UseDNS no", "LogLevel VERBOSE", "MaxStartups 64",
            f"SetEnv PATH={REMOTE_BIN}:/usr/local/bin:/usr/bin:/bin {MARKER}={self.lab.marker}",
        ]) + "\n"

    def start(self) -> None:
        """Starts sshd (on a new free port unless it has one) and waits until it listens."""
        for _attempt in range(5):
            self.port = self.port or _free_port(self.address)
            (self.home / "sshd_config").write_text(self._config())
            log = open(self.home / "sshd.log", "w")
            env = dict(self.lab.sshd.env, **{MARKER: self.lab.marker})
            self.process = subprocess.Popen(
                [str(self.lab.sshd.path), "-D", "-e", "-f", str(self.home / "sshd_config")],
                stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, cwd=self.home, start_new_session=True,
                preexec_fn=_child_setup(self.home))
            log.close()
            listening = f"Server listening on {self.address} port {self.port}."
            until(lambda: listening in self.log or self.process.poll() is not None, START_DEADLINE,
                   f"sshd {self.name} listening on {self.address}:{self.port}")
            if self.process.poll() is None:
                self.seen.add(self.process.pid)
                return
            self.process.wait()
            if "Address already in use" not in self.log:
                raise RuntimeError(f"sshd {self.name} exited {self.process.returncode}:\n{self.log}")
            self.port = 0  # someone else took the port between the probe and sshd's bind
        raise RuntimeError(f"sshd {self.name}: no free port on {self.address} in 5 attempts")

    def tree(self) -> set[int]:
        """sshd and every process under it (connections, sessions, remote commands)."""
        if self.process is None or self.process.poll() is not None:
            return set()
        pids = {self.process.pid} | descendants(self.process.pid)
        self.seen |= pids
        return pids

    def pause(self) -> set[int]:
        """SIGSTOP to the whole instance, as a host that froze: returns the stopped pids."""
        return self._freeze()

    def _freeze(self) -> set[int]:
        stopped: set[int] = set()
        for _round in range(50):  # a fork between listing and stopping shows up in the next round
            new = self.tree() - stopped
            if not new:
                return stopped
            _signal_all(new, signal.SIGSTOP)
            stopped |= new
        raise RuntimeError(f"sshd {self.name} kept forking while being stopped")

    def resume(self) -> None:
        _signal_all(self.tree(), signal.SIGCONT)

    def stop(self) -> None:
        """Kills the instance and everything under it; waits until none of them runs."""
        if self.process is None:
            return
        if self.process.poll() is None:
            _signal_all(self._freeze(), signal.SIGKILL)
        self.process.wait(timeout=30)
        self.process = None
        until(lambda: not any(alive(pid) for pid in self.seen), 30, f"every process of sshd {self.name} gone")

    def restart(self) -> None:
        """Stops and starts it again on the same address and port."""
        self.stop()
        self.start()

    def replace_host_key(self) -> None:
        """A new host key (the pinned known_hosts line no longer matches), then a restart."""
        for path in (self.host_key, self.host_key.with_suffix(".pub")):
            path.unlink()
        _keygen(self.host_key)
        self.restart()


class SshdLab:
    """sshd instances and the client files that reach them; `close()` (the fixture calls it) kills all."""

    def __init__(self, sshd: Sshd):
        self.sshd = sshd
        self.marker = uuid.uuid4().hex
        # Short, private and outside the test's tmp_path: ControlPath sockets must fit 108 bytes. A
        # normal user's sshd checks (StrictModes) every directory above authorized_keys up to the home.
        parent = None if AS_ROOT else Path.home() / ".cache" / "archon-console-tests"
        if parent is not None:
            parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.base = Path(tempfile.mkdtemp(prefix="sshd-", dir=parent))
        self.client = self.base / "client"
        self.client.mkdir(mode=0o700)
        self.key = self.client / "id_ed25519"
        _keygen(self.key)
        self.ca = self.base / "ca"
        _keygen(self.ca)
        self.known_hosts = self.client / "known_hosts"
        self.known_hosts.touch(mode=0o600)
        self.config = self.client / "ssh_config"
        self.hosts: dict[str, SshdHost] = {}
        self.aliases: dict[str, str] = {}  # alias -> its Host block
        self.endpoints: dict[str, tuple[str, int]] = {}  # alias -> (address, port)
        self._listeners: list[socket.socket] = []
        self._next = 2

    def _address(self) -> str:
        if self._next > 254:
            raise RuntimeError("no loopback address left (127.0.0.2 to 127.0.0.254)")
        self._next += 1
        return f"127.0.0.{self._next - 1}"

    def add_host(self, name: str | None = None, *, pin: bool = True) -> SshdHost:
        """A running sshd with the lab's client key authorized; its key pinned in known_hosts unless
        `pin=False` (an unknown host)."""
        name = name or f"host{len(self.hosts) + 1}"
        home = self.base / name
        home.mkdir(mode=0o700)
        _account(home)
        (home / "authorized_keys").touch(mode=0o600)
        _keygen(home / "ssh_host_ed25519_key")
        host = SshdHost(self, name, self._address(), home)
        self.hosts[name] = host
        host.authorize(self.key.with_suffix(".pub"))
        host.start()
        if pin:
            with open(self.known_hosts, "a") as handle:
                handle.write(host.known_hosts_line() + "\n")
        self.alias(name, host.address, host.port)
        return host

    def add_hosts(self, count: int) -> list[SshdHost]:
        return [self.add_host() for _ in range(count)]

    def alias(self, name: str, address: str, port: int, *, identity: Path | None = None,
              certificate: Path | None = None) -> str:
        """A Host block in the lab's ssh_config (another identity for the same host, a dead address)."""
        lines = [f"Host {name}", f"  HostName {address}", f"  Port {port}", f"  User {USER}",
                 f"  IdentityFile {identity or self.key}", "  IdentitiesOnly yes", "  IdentityAgent none",
                 f"  UserKnownHostsFile {self.known_hosts}", "  GlobalKnownHostsFile /dev/null",
                 "  StrictHostKeyChecking yes", "  UpdateHostKeys no", "  CheckHostIP no", "  BatchMode yes",
                 "  PasswordAuthentication no", "  KbdInteractiveAuthentication no", "  ConnectTimeout 10"]
        if certificate:
            lines.append(f"  CertificateFile {certificate}")
        self.aliases[name] = "\n".join(lines) + "\n"
        self.endpoints[name] = (address, port)
        self.config.write_text("\n".join(self.aliases.values()))
        self.config.chmod(0o600)
        return name

    def client_key(self, name: str) -> Path:
        """Another client key pair (private key path; `.pub` beside it)."""
        key = self.client / name
        _keygen(key)
        return key

    def certificate(self, key: Path, key_id: str, principals: str = USER) -> Path:
        """Signs `key.pub` with the lab's CA (which every host trusts): the `-cert.pub` path."""
        subprocess.run(["ssh-keygen", "-q", "-s", str(self.ca), "-I", key_id, "-n", principals, "-V", "-5m:+1h",
                        str(key.with_suffix(".pub"))], check=True, capture_output=True, timeout=30)
        return key.parent / f"{key.name}-cert.pub"

    def refused(self, name: str = "refused") -> str:
        """An alias whose port has no listener (connect gets RST)."""
        address = self._address()
        return self.alias(name, address, _free_port(address))

    def black_hole(self, name: str = "blackhole") -> str:
        """An alias whose port accepts connections (the kernel's backlog) and never says a word."""
        listener = socket.socket()
        listener.bind((self._address(), 0))
        listener.listen(64)
        self._listeners.append(listener)
        return self.alias(name, *listener.getsockname())

    def ssh_command(self, alias: str, *command: str, options: tuple[str, ...] = ()) -> list[str]:
        return ["ssh", "-F", str(self.config), *options, "--", alias, *command]

    def ssh(self, alias: str, *command: str, options: tuple[str, ...] = (), timeout: float = 60,
            input: str | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(self.ssh_command(alias, *command, options=options), capture_output=True,
                              text=True, timeout=timeout, input=input, stdin=None if input is not None else subprocess.DEVNULL)

    def close(self) -> None:
        try:
            for host in self.hosts.values():
                host.stop()
        finally:
            _signal_all(leftovers(self.marker, self.base), signal.SIGKILL)
            for listener in self._listeners:
                listener.close()
            shutil.rmtree(self.base, ignore_errors=True)
