"""`archon-console doctor [PATH] [--check ID ...] [--full] [--strict] [--json] [--bundle OUT.zip [--redact]]`.

Doctor never writes: it reads the database in place only where SQLite leaves no trace (see
`console/db/readonly.py`), otherwise from a private copy.

Exit codes: 0 no errors; 1 errors (with `--strict`, warnings too); 3 the console cannot use the
database (not SQLite, truncated, schema unreadable, not archon, or an upgrade ledger from a newer
or different console) -- the report is still printed in those cases whenever SQLite could read the
file; a file that is not SQLite at all gets one sentence (and `{"usable": false, ...}` with --json).
`--bundle`: an output path that exists or lies in the database's directory is refused before doctor
runs (exit 2); a bundle that cannot be written (full disk, unwritable directory) leaves nothing
behind and ends in one sentence (exit 3).
"""

from __future__ import annotations

from pathlib import Path

from console.cli.options import stale_after, stale_after_parent, user_path
from console.errors import EXIT_UNUSABLE, DatabaseUnusable, UsageError
from console.cli.output import emit_error, emit_json, say


def cmd_doctor(ctx) -> int:
    from console.services.doctor import CHECKS, run_doctor

    args = ctx.args
    path = Path(args.path).expanduser() if args.path else ctx.db_path
    if args.redact and args.bundle is None:
        raise UsageError("--redact only applies to --bundle OUT.zip.")
    if args.list_checks:
        if ctx.json:
            emit_json(list(CHECKS))
            return 0
        for name in CHECKS:
            print(name)
        return 0
    bundle = None
    if args.bundle is not None:
        from console.services.bundle import check_output

        bundle = check_output(args.bundle, path)  # before the report, not after it
    now = ctx.clock()
    stale = stale_after(args)
    try:
        report = run_doctor(
            path, checks=args.check or None, full=args.full, now=now,
            stale_after=stale,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    except DatabaseUnusable as exc:
        if ctx.json:
            emit_error(exc.reason, exc.hint, EXIT_UNUSABLE, path=str(path), usable=False, exit_code=EXIT_UNUSABLE,
                       reason=exc.reason, findings=[])
            return EXIT_UNUSABLE
        raise
    if not ctx.json:
        print(report.to_text(strict=args.strict))
    written = None
    if bundle is not None:
        from console.services.bundle import write_bundle

        result = write_bundle(report, bundle, source=path, redact=args.redact, now=now, stale_after=stale)
        written = {"path": str(result.path), "redacted": result.redacted}
        note = "redacted" if result.redacted else "NOT redacted: it contains names, paths and payloads"
        say(f"Support bundle written to {result.path} ({note}).", err=ctx.json)
    if ctx.json:  # after the bundle, so the one document names it (or a failed bundle is that document)
        emit_json({**report.to_json(strict=args.strict), **({"bundle": written} if written else {})})
    return report.exit_code(strict=args.strict)


def register(subparsers, parents) -> None:
    p = subparsers.add_parser(
        "doctor", parents=[*parents, stale_after_parent()], help="check a database and explain what is wrong (never writes)",
        description="Runs named checks (integrity, foreign keys, schema and ledger, approvals, "
        "environments, profiles) and prints each finding with an id, a severity, what was found, why it "
        "matters and what to do. Exit 0: no errors; 1: errors (--strict: or warnings); 3: the console "
        "cannot use this database (the report still says why when SQLite can read the file).",
    )
    p.add_argument("path", nargs="?", metavar="PATH", type=user_path("PATH"), help="database to check (default: --db)")
    p.add_argument("--check", action="append", metavar="ID",
                   help="run only this check (file, integrity, foreign_keys, schema, ledger, approvals, "
                   "environments, profiles, constraints) or keep only this finding id; repeatable")
    p.add_argument("--list-checks", action="store_true", help="list the check names and exit")
    p.add_argument("--full", action="store_true", help="PRAGMA integrity_check instead of quick_check")
    p.add_argument("--strict", action="store_true", help="warnings also make the exit code 1")
    p.add_argument("--bundle", metavar="OUT.zip", type=user_path("--bundle"), help="also write a support bundle")
    p.add_argument("--redact", action="store_true",
                   help="replace actors, paths and payload values in the bundle by stable placeholders")
    p.set_defaults(handler=cmd_doctor)


__all__ = ["register"]
