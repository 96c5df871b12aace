"""Run a command's Python entry point, then report this process's peak RSS (VmHWM) on stderr.

`python -m bench.rss_child doctor ARGS...` runs `archon-console doctor ARGS...`;
`python -m bench.rss_child quick_check PATH` runs a `mode=ro` `PRAGMA quick_check`. VmHWM is read
from /proc/self/status before exit: the child's own peak, counting file-backed pages of mmap.
(`ru_maxrss` of a waited child is no use here: it survives execve, so it can report the parent.)
"""

import sys


def _hwm() -> int:
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))


def main(argv: list[str]) -> int:
    if argv[0] == "quick_check":
        import sqlite3
        from urllib.parse import quote

        conn = sqlite3.connect(f"file:{quote(argv[1])}?mode=ro", uri=True)
        rows = conn.execute("PRAGMA quick_check").fetchall()
        conn.close()
        code = 0 if rows == [("ok",)] else 1
    else:
        from console.cli.cli import main as console_main

        code = console_main(argv)
    sys.__stderr__.write(f"\nVMHWM_KB {_hwm()}\n")
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
