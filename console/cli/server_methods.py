"""A JSON-RPC method of `archon-console serve` run as the CLI command it names.

`argv_for` turns a method's params into the command line the CLI would have been given, through the
command's own parser: each param is an option destination, written as that action's long option
(`--status=pending`: a value that starts with `-` stays a value), a store-true flag when true, or a
positional after `--` (so no value can become an option). Only the destinations listed in
console/fleet/protocol.py `METHODS` are accepted, and the global options (`--db`, `--as`,
`--read-only`, `--busy-timeout`) never are: the host decides those.

`run` parses that command line with console/cli/parser.py `build_parser` and runs its handler with
the session's Context, capturing what it prints: the result is `{"exit": CODE, "output": JSON}`,
where JSON is exactly what `archon-console ... --json` prints, failures included (console/cli/cli.py
`report_usage` and `report_failure` end both). The capture is bounded as it is written
(`BoundedCapture`): past console/fleet/protocol.py `MAX_OUTPUT_BYTES` it only counts, so a command
that prints a whole database never makes the server hold it, and the answer still carries the
command's exit code with the marker that its output was cut (`protocol.cut_result`).
"""

from __future__ import annotations

import argparse
import io
import math
import sys
from dataclasses import dataclass
from typing import Any

from console.fleet.protocol import MAX_OUTPUT_BYTES, Method, cut_result, read_wire_json

TEXT_KEPT = 64 * 1024  # characters of output that is not JSON, kept for the client to show


class BadParams(ValueError):
    """The params cannot be a command line of this method; `str()` is the sentence for the client."""


@dataclass
class Outcome:
    exit: int
    output: Any
    stopped: BaseException | None = None  # a signal arrived while the command ran
    cut: int | None = None  # the output's size in bytes when it was over the cap (and not kept)

    def to_json(self) -> dict[str, Any]:
        if self.cut is not None:
            return cut_result(self.exit, self.cut)
        return {"exit": self.exit, "output": self.output}


class BoundedCapture(io.TextIOBase):
    """A command's stdout that keeps at most `cap` UTF-8 bytes and only counts the rest."""

    def __init__(self, cap: int | None = None):
        super().__init__()
        self.cap = MAX_OUTPUT_BYTES if cap is None else cap
        self.size = 0
        self._parts: list[str] = []

    def writable(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.size += len(text.encode("utf-8", "surrogatepass"))
        if self.size <= self.cap:
            self._parts.append(text)
        elif self._parts:
            self._parts.clear()  # over the cap: what was kept is no answer any more
        return len(text)

    @property
    def overflowed(self) -> bool:
        return self.size > self.cap

    def getvalue(self) -> str:
        return "".join(self._parts)


def _global_options() -> frozenset[str]:
    from console.cli.parser import global_options

    names = {"-h", "--help"}
    for action in global_options(suppress=True)._actions:
        names.update(action.option_strings)
    return frozenset(names)


def _leaf(words: tuple[str, ...]) -> argparse.ArgumentParser:
    from console.cli.parser import build_parser

    parser = build_parser(list(words))
    for word in words:
        sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
        parser = sub.choices[word]
    return parser


def command_actions(method: Method) -> list[argparse.Action]:
    """The actions of the method's command a client may set, in the parser's order (global options
    left out: `audit --actor` is the command's, `--as` the host's)."""
    globals_ = _global_options()
    return [a for a in _leaf(method.argv)._actions if a.dest in method.params and not set(a.option_strings) & globals_]


def _scalar(name: str, value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        raise BadParams(f"{name} must be a string or a number, not {type(value).__name__}")
    if isinstance(value, float) and not math.isfinite(value):
        raise BadParams(f"{name} must be a finite number")
    text = value if isinstance(value, str) else str(value)
    if "\0" in text:
        raise BadParams(f"{name} holds a NUL character, which no command line can")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise BadParams(f"{name} is not valid UTF-8 (a lone surrogate)") from None
    return text


def _many(action: argparse.Action) -> bool:
    """Whether argparse gives this destination a list (so a client sends one): `nargs` of '+', '*'
    or any int, `nargs=1` included (`approvals revoke ID`), and append actions."""
    return action.nargs in ("+", "*") or isinstance(action.nargs, int) or isinstance(action, argparse._AppendAction)


def _optional_positional(action: argparse.Action) -> bool:
    return action.nargs in ("?", "*")


def allowed(method: Method, extra: frozenset[str] = frozenset()) -> str:
    names = sorted(method.params | extra)
    return ", ".join(names) if names else "none"


def argv_for(method: Method, params: dict[str, Any], *, extra: frozenset[str] = frozenset()) -> list[str]:
    """The command line for `params` (see the module docstring); BadParams for what cannot be one.
    `extra` names params the caller handles itself (they are accepted and left out)."""
    unknown = sorted(set(params) - method.params - extra)
    if unknown:
        raise BadParams(f"unknown parameter {unknown[0][:80]!r}; this method accepts: {allowed(method, extra)}")
    options: list[str] = []
    positionals: list[str] = []
    skipped: str | None = None
    actions = command_actions(method)
    missing = sorted(set(params) - {a.dest for a in actions} - extra)
    if missing:  # listed in METHODS, but this console's command has no such option
        raise BadParams(f"this host's console has no option for {missing[0]!r}")
    for action in actions:
        name = action.dest
        value = params.get(name)
        if not action.option_strings:  # a positional, in the parser's order
            if value is None:
                # an absent optional one is simply left out (argparse fills the required ones first:
                # `profiles activate -- p1:3` is revision p1:3); a required one absent is refused below
                if not _optional_positional(action):
                    skipped = skipped or name
                continue
            if skipped is not None:
                raise BadParams(f"{name} was given without {skipped}, which comes before it")
            values = value if isinstance(value, list) and _many(action) else [value]
            if isinstance(action.nargs, int) and len(values) != action.nargs:
                raise BadParams(f"{name} takes exactly {action.nargs} value(s), not {len(values)}")
            positionals.extend(_scalar(name, v) for v in values)
            continue
        if value is None:
            continue
        flag = next((o for o in action.option_strings if o.startswith("--")), action.option_strings[0])
        if action.nargs == 0:  # store_true and the like
            if not isinstance(value, bool):
                raise BadParams(f"{name} is a flag: true or false")
            if value:
                options.append(flag)
            continue
        values = value if isinstance(value, list) and _many(action) else [value]
        if isinstance(action, argparse._AppendAction) or action.nargs is None or action.nargs == "?":
            options.extend(f"{flag}={_scalar(name, v)}" for v in values)
        else:
            texts = [_scalar(name, v) for v in values]
            if any(t.startswith("-") for t in texts):
                raise BadParams(f"{name}: a value may not start with '-'")
            options.extend([flag, *texts])
    return [*method.argv, *options, *method.fixed, "--json", *(["--", *positionals] if positionals else [])]


def parse_output(text: str) -> Any:
    """What the command printed under --json: one JSON value, or one per line (a stream)."""
    try:
        return read_wire_json(text)
    except ValueError:
        pass
    lines = [line for line in text.splitlines() if line.strip()]
    try:
        return [read_wire_json(line) for line in lines]
    except ValueError:
        from console.cli.output import error_json
        from console.errors import EXIT_UNUSABLE

        return error_json("the command printed text that is not JSON", None, EXIT_UNUSABLE, text=text[:TEXT_KEPT])


def failure(exc: BaseException) -> Outcome:
    """How the CLI under --json ends on `exc` (console/cli/cli.py `report_failure`), as an Outcome:
    for what the server does outside a command (hello's look at the database, a watch's start)."""
    import contextlib

    from console.cli.cli import report_failure

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        code = report_failure(exc, json=True)
    return Outcome(code, parse_output(printed.getvalue()))


def run(argv: list[str], make_context) -> Outcome:
    """Parse and run `argv` as the CLI would under --json; `make_context(args)` builds the session's
    Context. Nothing it prints reaches the real stdout: `sys.stdout` is a capture meanwhile."""
    from console.cli.cli import report_failure, report_usage
    from console.cli.output import SafeStream
    from console.cli.parser import UsageProblem, build_parser
    from console.db.tx import lock_budget

    capture = BoundedCapture()
    saved = sys.stdout
    sys.stdout = SafeStream(capture)  # type: ignore[assignment]
    stopped: BaseException | None = None
    try:
        try:
            args = build_parser(argv).parse_args(argv)
        except UsageProblem as exc:
            code = report_usage(exc, json=True)
        except SystemExit as exc:  # no option of a method prints help, but never leave the loop for it
            code = int(exc.code or 0) if isinstance(exc.code, int) else 2
        else:
            ctx = None
            try:
                ctx = make_context(args)
                with lock_budget(ctx.busy_timeout_ms / 1000, fresh=True):  # each request waits its own
                    code = int(args.handler(ctx) or 0)
            except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - the CLI's own endings
                if isinstance(exc, KeyboardInterrupt):
                    stopped = exc
                code = report_failure(exc, json=True, note=ctx.write_note if ctx is not None else None)
    finally:
        sys.stdout = saved
    if capture.overflowed:
        return Outcome(code, None, stopped, cut=capture.size)
    return Outcome(code, parse_output(capture.getvalue()), stopped)


__all__ = ["BadParams", "BoundedCapture", "Outcome", "allowed", "argv_for", "command_actions", "failure", "parse_output", "run"]
