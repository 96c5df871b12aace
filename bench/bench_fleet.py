"""Issue 20, item 9: fleet mode over real OpenSSH on 8 loopback hosts.

The hosts are the test suite's own sshd lab (tests/fleet/sshd.py: sshd on 127.0.0.2 to .9, pinned
host keys, the system `ssh` with the lab's config), each with its own demo database (another seed
each, so every host has its own instance id). Every command is the installed `archon-console` as a
user runs it, through hosts.toml and ssh's shared connections (warm: each side's untimed warm-up
opens the masters, which stay for ControlPersist). Figures, each alternated pair by pair:

- merged `--fleet approvals list --json` over 8 hosts vs the same list of one host
  (`--host host1`): target <= 1.5x;
- one decision `--host host1 approvals approve host1:ID` over a warm ControlMaster vs the same
  decision by a local CLI (`--db` on a copy of that host's file): target <= 2x;
- the merged list's peak RSS (VmHWM of the client) at 8 hosts vs 1 host, and at `--limit 2000` vs
  `--limit 50` over 8 hosts: memory in the number of rows shown.

The TUI's first paint with one host black-holed is measured by tests/tui (its rows arrive per host),
not here.
"""

from __future__ import annotations

import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench import harness as h
from bench.child import measured

HOSTS = 8
LIMIT = 50


def _cpu_run(argv: list[str], env: dict[str, str], cpu: list[float]) -> float:
    """Wall seconds of one command; appends the CPU seconds of it and its children (its ssh
    clients: the hosts' sshd and servers are sshd's children, not ours) to `cpu`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    seconds = h.timed_run(argv, env)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return seconds


def _rss_run(argv: list[str], env: dict[str, str]) -> float:
    """Peak RSS in MB of the console process (bench/child.py: VmHWM through /usr/bin/time)."""
    run = measured(h.cli() + argv, env, ok=(0, 4))
    if run.rss_mb is None:
        raise RuntimeError("no peak RSS: /usr/bin/time is missing")
    return run.rss_mb


def main() -> None:
    sys.path.insert(0, str(h.ROOT))
    from tests.fleet.sshd import SshdLab, Unavailable, find_sshd

    try:
        sshd = find_sshd()
    except Unavailable as exc:
        h.record("fleet-skipped", "9", "fleet figures", state="-", console=str(exc), values=[0.0],
                 note=f"no sshd: {exc}")
        return
    work = Path(tempfile.mkdtemp(prefix="abf-", dir="/tmp"))  # short: ssh's control sockets
    lab = SshdLab(sshd)
    try:
        _run(lab, work)
    finally:
        lab.close()
        shutil.rmtree(work, ignore_errors=True)


def _run(lab, work: Path) -> None:
    requests = h.small_requests()
    hosts = lab.add_hosts(HOSTS)
    dbs: dict[str, Path] = {}
    env = h.child_env()
    for n, host in enumerate(hosts, start=1):
        db = work / f"{host.name}.db"
        subprocess.run([*h.cli(), "demo", str(db), "--requests", str(requests), "--seed", str(n)], env=env,
                       check=True, capture_output=True, timeout=600)
        dbs[host.name] = db
    (work / "run").mkdir(mode=0o700)
    hosts_toml = work / "hosts.toml"
    lines = [f'[ssh]\ncommand = ["ssh", "-F", "{lab.config}"]\n']
    for host in hosts:
        lines.append(f'[hosts.{host.name}]\nssh = "{host.name}"\ndb = "{dbs[host.name]}"\n')
    hosts_toml.write_text("\n".join(lines))
    hosts_toml.chmod(0o600)
    env.update(ARCHON_CONSOLE_HOSTS=str(hosts_toml), XDG_RUNTIME_DIR=str(work / "run"),
               XDG_CACHE_HOME=str(work / "cache"))
    first = hosts[0].name
    local = work / "local.db"
    shutil.copyfile(dbs[first], local)
    rounds = h.pairs()
    now = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    remote_ids = iter(h.pending_ids(dbs[first], rounds + 2, now, real_clock=True))
    local_ids = iter(h.pending_ids(local, 2 * rounds + 4, now, real_clock=True, newest_first=True))
    cli = h.cli()

    def run(argv: list[str]) -> float:
        return h.timed_run(argv, env)

    cpu: dict[str, list[float]] = {"merged": [], "one": []}
    got = h.alternate({
        "merged": lambda: _cpu_run([*cli, "--fleet", "approvals", "list", "--json", "--limit", str(LIMIT)], env,
                                   cpu["merged"]),
        "one": lambda: _cpu_run([*cli, "--host", first, "approvals", "list", "--json", "--limit", str(LIMIT)], env,
                                cpu["one"]),
        "remote_approve": lambda: run([*cli, "--host", first, "approvals", "approve", f"{first}:{next(remote_ids)}",
                                       "--json"]),
        "local_approve": lambda: run([*cli, "--db", str(local), "--as", "bench-cli", "approvals", "approve",
                                      next(local_ids), "--json"]),
    }, rounds)
    extra = {"hosts": HOSTS, "requests_per_host": requests, "transport": "system ssh, ControlMaster warm"}
    h.record("fleet-list-merged", "9", f"merged `--fleet approvals list` over {HOSTS} hosts vs one host's",
             state="idle", console=f"--fleet ({HOSTS} hosts)", values=got["merged"], baseline="--host host1",
             base_values=got["one"], target="<= 1.5x", check=lambda r: r <= 1.5, extra=extra)
    h.record("fleet-list-client-cpu", "9", f"the console's own CPU (with its ssh clients) for the merged list over "
             f"{HOSTS} hosts vs one host's", state="idle", console=f"--fleet ({HOSTS} hosts)",
             values=cpu["merged"][-rounds:], baseline="--host host1", base_values=cpu["one"][-rounds:],
             target="<= 1.5x", check=lambda r: r <= 1.5, extra=extra,
             note="the wall figure above also pays the 8 hosts' sshd sessions and servers, which share this machine's "
                  "cores; on 8 real hosts each runs on its own")
    h.record("fleet-decision", "9", "one decision over a warm ControlMaster vs the same decision by a local CLI",
             state="idle", console="--host host1 approvals approve", values=got["remote_approve"],
             baseline="local approvals approve", base_values=got["local_approve"], target="<= 2x",
             check=lambda r: r <= 2.0, extra=extra)
    rss = h.alternate({
        "eight": lambda: _rss_run(["--fleet", "approvals", "list", "--json", "--limit", str(LIMIT)], env),
        "one": lambda: _rss_run(["--host", first, "approvals", "list", "--json", "--limit", str(LIMIT)], env),
        "many_rows": lambda: _rss_run(["--fleet", "approvals", "list", "--json", "--limit", "2000"], env),
    }, max(3, rounds // 2))
    h.record("fleet-rss-hosts", "9", f"peak RSS of the merged list, {HOSTS} hosts vs 1", state="idle",
             console=f"{HOSTS} hosts", values=rss["eight"], unit="MB", baseline="1 host", base_values=rss["one"],
             target="flat: <= 1.25x", check=lambda r: r <= 1.25, extra=extra)
    h.record("fleet-rss-rows", "9", f"peak RSS of the merged list over {HOSTS} hosts, --limit 2000 vs 50",
             state="idle", console="--limit 2000", values=rss["many_rows"], unit="MB", baseline="--limit 50",
             base_values=rss["eight"], target="reference (each host's page is held while merging)", extra=extra)


if __name__ == "__main__":
    os.environ.setdefault("ARCHON_BENCH_QUICK", "1")
    main()
