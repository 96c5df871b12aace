"""`archon-console demo PATH`: write a realistic archon database for trying the console out.

It needs no `--db`: PATH is the file to create. An existing file is refused unless
`--overwrite` is given.
"""

from __future__ import annotations

import sys

from console.cli.options import user_path, whole_number
from console.errors import Refusal
from console.cli.output import emit_json, say, table, write_trusted


def _progress_printer():
    """A one-line progress display on a terminal; silence when stderr is a pipe or a file."""
    if not sys.stderr.isatty():
        return None, lambda: None
    state = {"shown": False}

    def show(stage: str, done: int, total: int) -> None:
        percent = 100 * done // total if total else 100
        write_trusted(sys.stderr, f"\r  {stage}: {done:,} / {total:,} ({percent}%)\x1b[K")
        sys.stderr.flush()
        state["shown"] = True

    def finish() -> None:
        if state["shown"]:
            write_trusted(sys.stderr, "\r\x1b[K")
            sys.stderr.flush()

    return show, finish


def cmd_demo(ctx) -> int:
    from console.demo.writer import generate

    args = ctx.args
    if ctx.read_only:
        raise Refusal("demo writes a new database file, and --read-only forbids writing.")
    show, finish = _progress_printer()
    try:
        summary = generate(
            args.path,
            release=args.release,
            requests=args.requests,
            projects=args.projects,
            environments=args.environments,
            seed=args.seed,
            now=args.now if args.now else ctx.clock(),
            overwrite=args.overwrite,
            progress=show,
        )
    finally:
        finish()
    if ctx.json:
        emit_json(summary.as_dict())
        return 0
    say(f"Wrote {summary.path}: archon {summary.release} shape, seed {summary.seed}, "
        f"clock {summary.now.strftime('%Y-%m-%d %H:%M:%S')} UTC, in {summary.seconds:.1f} s.")
    if summary.release == "1.8.20" and args.requests:
        say(f"--requests {args.requests:,}: {summary.requests_meaning}")
    rows = [(name, f"{n:,}") for name, n in summary.counts.items() if n]
    print(table(rows, ["TABLE", "ROWS"]))
    return 0


_count = whole_number(maximum=10**8)


def register(subparsers, parents) -> None:
    p = subparsers.add_parser(
        "demo", parents=parents, help="write a realistic demo archon database",
        description="Writes PATH as archon would have left it: projects with profile revisions and "
        "audit events, approval requests in every status with their event history, environments in "
        "every lifecycle state with leases and claims. The schema comes from the console's migration "
        "steps, without the console's ledger. Deterministic for a given --seed and --now. "
        "--requests N: from 1.8.22 on, N approval requests (each with its run and 2-3 events); "
        "archon 1.8.20 has no approval tables, so there N sizes the run history instead (about N "
        "execution runs: N/2 check attempts in N/8 batches, about half with a diagnostic parser; "
        "N/16 settled build sequences with N/4 tickets; N/8 environment leases with 2 events each "
        "over N/400 environments; N/1000 more projects without a profile, each with a build "
        "sequence in flight), so that an upgrade from 1.8.20 has a large database to carry.",
    )
    p.add_argument("path", metavar="PATH", type=user_path("PATH"), help="the database file to create")
    p.add_argument("--release", default="current", choices=("1.8.20", "1.8.22", "current"),
                   help="archon release shape to write (default: current)")
    p.add_argument("--requests", type=_count, default=200, metavar="N",
                   help="approval requests from 1.8.22 on; at 1.8.20 the size of the run history "
                   "instead, about N execution runs (default 200; see above)")
    p.add_argument("--projects", type=_count, default=6, metavar="N",
                   help="projects (default 6; at 1.8.20 --requests adds N/1000 more)")
    p.add_argument("--environments", type=_count, default=24, metavar="N",
                   help="execution environments (default 24)")
    p.add_argument("--seed", type=whole_number("seed", maximum=2**63 - 1), default=7, metavar="N", help="random seed (default 7)")
    p.add_argument("--now", metavar="ISO", default=None,
                   help="the clock the data is relative to (default: $ARCHON_CONSOLE_NOW, else now)")
    p.add_argument("--overwrite", action="store_true", help="replace PATH if it exists")
    p.set_defaults(handler=cmd_demo)


__all__ = ["register"]
