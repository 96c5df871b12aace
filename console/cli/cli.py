"""The command line: `archon-console [global options] COMMAND ...`, or the TUI with no command.

Global options are accepted before or after the subcommand. Each command family lives in
`console/cli/commands/<family>.py`, registered by console/cli/parser.py; the handler gets
a `Context` and returns an exit code. Commands other than the TUI never import textual.
Exit codes: 0 done, 1 refused by a rule, 2 usage error, 3 the database cannot be used; over several
hosts (--host/--group/--fleet, console/cli/fleet.py) also 4: some hosts did not answer.
With `--json` anywhere in argv, every outcome is JSON on stdout, errors too (`_emit_error`).
"""

from __future__ import annotations

import argparse
import gc
import os
import sqlite3
import sys
from console.records import dataclass
from pathlib import Path

from console.clock import Clock, frozen_now, frozen_write_note, system_clock, write_clock
from console.errors import EXIT_UNUSABLE, EXIT_USAGE, ConsoleError
from console.cli.parser import UsageProblem, build_parser, fleet_requested
from console.db.paths import resolve_db_path
from console.signals import Stopped, as_stop, stop_signals_unwind


@dataclass
class Context:
    """What every command needs, resolved once from the global options."""

    db_path: Path
    actor: str
    read_only: bool
    json: bool
    busy_timeout_ms: int
    clock: Clock  # reading and rendering (may be frozen by $ARCHON_CONSOLE_NOW)
    args: argparse.Namespace
    write_clock: Clock = write_clock  # every write (console/clock.py `write_clock`: the real clock)
    write_note: str | None = None  # set by write_now() while $ARCHON_CONSOLE_NOW is set

    def write_now(self):
        """`now` for a write; remembers whether the frozen clock had to be ignored to say so."""
        at = self.write_clock()
        self.write_note = frozen_write_note(at)
        return at

    def open(self, *, read_only: bool | None = None):
        from console.db.connect import open_database

        return open_database(
            self.db_path,
            read_only=self.read_only if read_only is None else read_only,
            busy_timeout_ms=self.busy_timeout_ms,
        )


def default_actor() -> str:
    env = os.environ.get("ARCHON_CONSOLE_ACTOR")
    if env:
        return env
    # getpass.getuser()'s own order, without importing getpass (and termios with it) at every start
    for name in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        user = os.environ.get(name)
        if user:
            return user
    try:
        import pwd

        return pwd.getpwuid(os.getuid())[0]
    except Exception:  # no login name in some containers
        return "unknown"


def _declared(name: str) -> str:
    """`--as=` names nobody: a usage error, never a silent fall back to the default."""
    if not name:
        from console.errors import UsageError

        raise UsageError("--as was given an empty name; pass --as NAME, or leave it out to act under your login.")
    return name


def make_context(args: argparse.Namespace) -> Context:
    frozen_now()  # a `$ARCHON_CONSOLE_NOW` that is not a time is a usage error before anything runs
    return Context(
        db_path=resolve_db_path(args.db),
        actor=default_actor() if args.actor is None else _declared(args.actor),
        read_only=bool(args.read_only),
        json=bool(args.json),
        busy_timeout_ms=int(float(args.busy_timeout) * 1000),
        clock=system_clock,
        args=args,
    )


def _not_utf8(argv: list[str]) -> str | None:
    """The first argument that is not valid UTF-8 (Python keeps such bytes as lone surrogates)."""
    for token in argv:
        try:
            token.encode("utf-8")
        except UnicodeEncodeError:
            return repr(os.fsencode(token))[1:]  # the bytes as typed: '\xff\xfe', not surrogates
    return None


def wants_json(argv: list[str]) -> bool:
    """`--json` anywhere before a `--`: decided from argv, so it holds before parsing succeeds."""
    for token in argv:
        if token == "--":
            return False
        if token == "--json":
            return True
    return False


def _emit_error(reason: str, hint: str | None, code: int, **extra) -> None:
    """A failure under --json, in the one shape console/cli/output.py `error_json` builds."""
    from console.cli.output import emit_error

    emit_error(reason, hint, code, **extra)


def _report(reason: str, hint: str | None, code: int, *, json: bool, note: str | None = None) -> int:
    """Say a failure once: JSON on stdout with --json, else the sentence (and hint) on stderr."""
    if json:
        _emit_error(reason, hint, code, **({"clock_note": note} if note else {}))
        return code
    from console.cli.output import bounded_words

    print(f"archon-console: {bounded_words(reason)}", file=sys.stderr)
    if hint:
        print(bounded_words(hint), file=sys.stderr)
    if note:
        print(note, file=sys.stderr)
    return code


def _version(as_json: bool) -> int:
    """`--version`: the package version; the registry is imported only for --json."""
    from console import __version__

    if not as_json:
        print(f"archon-console {__version__}")
        return 0
    from console.db.detect import LEDGER_META_TABLE, LEDGER_TABLE, MIGRATION_SET
    from console.db.migrations.registry import CURRENT_RELEASE, MIGRATIONS, RELEASES
    from console.cli.output import emit_json

    emit_json({
        "version": __version__,
        "releases": list(RELEASES),
        "current_release": CURRENT_RELEASE,
        "ledger": {"tables": [LEDGER_TABLE, LEDGER_META_TABLE], "migration_set": MIGRATION_SET,
                   "steps": len(MIGRATIONS), "last_step": MIGRATIONS[-1].id},
    })
    return 0


def _unexpected(exc: BaseException, *, json: bool = False) -> int:
    """Last line of defence: one sentence and exit 3, never a traceback on the operator's terminal.

    `ARCHON_CONSOLE_DEBUG=1` re-raises, for the developer who wants the traceback.
    """
    if os.environ.get("ARCHON_CONSOLE_DEBUG"):
        raise exc
    from console.text import one_line

    if isinstance(exc, OSError) and exc.strerror:
        where = f" ({one_line(exc.filename)})" if exc.filename else ""
        reason = f"the system refused a file operation{where}: {exc.strerror}"
    elif isinstance(exc, sqlite3.Error):
        reason = f"SQLite refused: {one_line(exc)}"
    else:
        reason = f"unexpected {type(exc).__name__}: {one_line(exc, 200)}"
    if json:
        return _report(f"{reason}. Nothing further was done.",
                       "Rerun with ARCHON_CONSOLE_DEBUG=1 to see where it happened.", EXIT_UNUSABLE, json=True)
    print(f"archon-console: {reason}. Nothing further was done; "
          "rerun with ARCHON_CONSOLE_DEBUG=1 to see where it happened.", file=sys.stderr)
    return EXIT_UNUSABLE


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # the process's own entry point (the script, `python -m console`), not a caller
        argv = sys.argv[1:]
        _collector_paused_for_start()
        try:
            return _entry(argv)
        finally:
            # The process ends here: what it allocated is freed with it, so the interpreter's last
            # full collection (a walk over every object the start-up created) is skipped.
            gc.freeze()
    return _entry(argv)


# The cyclic garbage collector runs every 700 allocations; a command's imports allocate tens of
# thousands of objects that live as long as the process (modules, functions, classes), and every
# collection during the start walked them again (about a tenth of `approvals show`'s instructions).
# At the process's entry it is paused until the command is parsed, then those objects are frozen
# (never walked again) and collection resumes for whatever the command itself allocates.
_COLLECTOR_PAUSED = False


def _collector_paused_for_start() -> None:
    global _COLLECTOR_PAUSED
    if gc.isenabled():
        gc.disable()
        _COLLECTOR_PAUSED = True


def _collector_resumed() -> None:
    global _COLLECTOR_PAUSED
    if _COLLECTOR_PAUSED:
        _COLLECTOR_PAUSED = False
        gc.freeze()
        gc.enable()


def _entry(argv: list[str]) -> int:
    _search_path_without_working_directory()
    if argv[:1] == ["__complete"]:  # the shell's completion function, never a person
        from console.cli.completion import complete_main

        return complete_main(argv[1:])
    as_json = wants_json(argv)
    bad = _not_utf8(argv)
    if bad is not None:
        return _report(f"the argument {bad} is not valid UTF-8; ids, names and paths must be.", None,
                       EXIT_USAGE, json=as_json)
    from console.cli.output import SafeStream

    # Every byte the CLI prints passes the one sanitiser, whichever command printed it.
    saved = sys.stdout, sys.stderr
    sys.stdout, sys.stderr = SafeStream(sys.stdout), SafeStream(sys.stderr)
    try:
        with stop_signals_unwind():  # SIGTERM/SIGHUP unwind like Ctrl-C: private copies are removed
            _remove_leftovers()
            return _main(argv)
    except Stopped as exc:  # arrived outside _main's own handler (parsing, or its last lines)
        return exc.exit_code
    finally:
        sys.stdout, sys.stderr = saved


def _search_path_without_working_directory() -> None:
    """Drop `$PATH` entries that name the working directory (empty, `.`, any relative path,
    `/proc/self/cwd` and anything else under `/proc` or `/dev/fd`: console/isolation.py `fixed_place`).

    Every program this process starts by name (a hook's commands, the clipboard's `xclip`) is found
    through PATH; a relative entry would find one planted beside the user's database instead
    (issue 17; console/isolation.py does the same for the child interpreter's `sys.path`).
    """
    from console.isolation import fixed_place  # (lazily: the start-up import budget)

    entries = os.environ.get("PATH", "").split(os.pathsep)
    kept = [entry for entry in entries if fixed_place(entry)]
    if "PATH" in os.environ and kept != entries:
        # (an empty PATH would again mean the working directory, to a shell and to execvp)
        os.environ["PATH"] = os.pathsep.join(kept) or os.defpath


def _remove_leftovers() -> None:
    """Private copies of the user's data that killed runs (kill -9) left in the temp directory.

    Every start pays for this, so it is one `scandir` of the temp directory with a name-prefix
    filter (console/db/files.py `leftovers_possible`); only when a name of ours is there is the
    full check (owner, process alive, file type) run.
    """
    try:
        from console.db.files import leftovers_possible, remove_stale

        if leftovers_possible():
            remove_stale()
    except Exception:  # noqa: BLE001 - housekeeping never stops a command
        pass


def _parse(parser: argparse.ArgumentParser, argv: list[str], as_json: bool) -> argparse.Namespace:
    """parse_args; under --json, `--help`'s text is answered as `{"ok": true, "help": TEXT}`."""
    if not as_json:
        return parser.parse_args(argv)
    import contextlib
    import io

    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            return parser.parse_args(argv)
    except SystemExit:
        from console.cli.output import emit_json

        emit_json({"ok": True, "help": printed.getvalue()})
        raise


def _main(argv: list[str]) -> int:
    as_json = wants_json(argv)
    ctx: Context | None = None
    try:
        parser = build_parser(argv)
        try:
            args = _parse(parser, argv, as_json)
        except SystemExit as exc:  # --help printed its text
            return int(exc.code or 0)
        except UsageProblem as exc:
            return report_usage(exc, json=as_json)
        _collector_resumed()
        if args.version:
            return _version(bool(args.json))
        fleet = fleet_requested(args)
        if fleet and getattr(args, "handler", None) is not None:  # runs on the hosts
            from console.cli.fleet import run_fleet

            return run_fleet(args, parser)
        ctx = make_context(args)
        handler = getattr(args, "handler", None)
        if handler is None and fleet:
            from console.cli.fleet import refuse_local_options
            from console.tui.tui import run_fleet_tui  # the only paths that import textual

            refuse_local_options(args)
            return run_fleet_tui(ctx)
        if handler is None:
            from console.tui.tui import run_tui

            return run_tui(ctx)
        from console.db.tx import lock_budget

        with lock_budget(ctx.busy_timeout_ms / 1000):  # what every wait for the lock draws on, in all
            return int(handler(ctx) or 0)
    except (Exception, KeyboardInterrupt) as exc:
        return report_failure(exc, json=as_json, note=ctx.write_note if ctx is not None else None)


def report_usage(exc: UsageProblem, *, json: bool) -> int:
    """argparse's complaint, as the CLI says it: the usage error object under --json, else the usage
    line and the sentence on stderr (`archon-console serve` answers a method's usage error the same)."""
    if json:
        _emit_error(exc.message, "See `archon-console help` for the commands and their options.",
                    EXIT_USAGE, usage=" ".join(exc.usage.split()))
    else:
        from console.cli.output import bounded_words

        sys.stderr.write(exc.usage)
        print(f"archon-console: error: {bounded_words(exc.message)}", file=sys.stderr)
    return EXIT_USAGE


def report_failure(exc: BaseException, *, json: bool, note: str | None = None) -> int:
    """How a command that raised ends: one sentence (or its JSON object) and the exit code, for every
    kind of failure; the CLI's entry point and `archon-console serve` (console/cli/server.py) both
    end a command here, so a failure reads the same locally and through a fleet host."""
    if isinstance(exc, ConsoleError):
        return _report(exc.reason, exc.hint, exc.exit_code, json=json, note=note)
    if isinstance(exc, Stopped):
        return _report(f"stopped by {exc.name}; nothing further was written and temporary copies were removed.",
                       None, exc.exit_code, json=json)
    if isinstance(exc, KeyboardInterrupt):
        return _report("interrupted; nothing further was written.", None, 130, json=json)
    if isinstance(exc, BrokenPipeError):
        return 0
    stop = as_stop(exc)  # a signal that interrupted a statement (console/signals.py)
    if isinstance(stop, Stopped):
        return _report(f"stopped by {stop.name}; nothing further was written and temporary copies were removed.",
                       None, stop.exit_code, json=json)
    if stop is not None:
        return _report("interrupted; nothing further was written.", None, 130, json=json)
    from console.db.limits import explain

    limit = explain(exc)  # a value or a statement over the limits (console/db/limits.py)
    if limit is not None:
        return _report(limit.reason, limit.hint, limit.exit_code, json=json)
    return _unexpected(exc, json=json)

__all__ = ["Context", "main", "report_failure", "report_usage"]
