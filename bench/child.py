"""A child process measured from outside, for the modules that time commands (bench_doctor,
bench_support, bench_audit): wall time, peak RSS and the kernel's I/O counters of that process alone.

Peak RSS comes from /usr/bin/time (`%M`, its wait4 of the command): a small C parent forks it, so
the figure is the command's own. (`ru_maxrss` of a child this Python process starts is no use: the
fork or vfork leaves our high-water mark in it.) The I/O counters are /proc/PID/io of /usr/bin/time
read while it is a zombie (waitid WNOWAIT): a parent's counters take in its reaped child's, so
they hold everything the command and its threads read and wrote.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.harness import out_dir


@dataclass
class Run:
    """One child process measured from outside: wall seconds, its peak RSS (VmHWM, from
    /usr/bin/time's wait4; None without it) and its /proc/PID/io counters, read while it is a
    zombie (waitid WNOWAIT): everything it and its threads read and wrote, nothing of ours."""

    seconds: float
    returncode: int
    rss_mb: float | None
    io: dict[str, int]
    stdout: bytes = b""
    stderr: bytes = b""


def measured(argv: list[str], env: dict[str, str] | None = None, ok=(0,), stdout=None) -> Run:
    """Run `argv` to its end and measure it; stdout is kept unless a file is given. The output goes
    to files, not pipes: the child must be waited for with WNOWAIT, never reaped before it is read."""
    wrap = Path("/usr/bin/time")
    with tempfile.TemporaryFile(dir=out_dir()) as out, tempfile.TemporaryFile(dir=out_dir()) as err, \
            tempfile.NamedTemporaryFile(prefix="bench-rss-", dir=out_dir()) as rss_file:
        full = [str(wrap), "-o", rss_file.name, "-f", "%M", *argv] if wrap.exists() else list(argv)
        started = time.perf_counter()
        proc = subprocess.Popen(full, env=env, stdout=stdout if stdout is not None else out, stderr=err,
                                cwd=out_dir())
        os.waitid(os.P_PID, proc.pid, os.WEXITED | os.WNOWAIT)
        seconds = time.perf_counter() - started
        try:
            with open(f"/proc/{proc.pid}/io") as counters:
                io = {k: int(v) for k, v in (line.split(":") for line in counters if ":" in line)}
        except OSError:
            io = {}
        code = proc.wait()
        out.seek(0)
        err.seek(0)
        output, errors = out.read(), err.read()
        text = Path(rss_file.name).read_text().split()
    rss = int(text[-1]) / 1024 if wrap.exists() and text and text[-1].isdigit() else None
    if code not in ok:
        raise RuntimeError(f"{' '.join(argv[:6])} ... exited {code}: {errors.decode(errors='replace')[-800:]}")
    return Run(seconds, code, rss, io, output, errors)


