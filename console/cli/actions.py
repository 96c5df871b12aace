"""One write for a command: open the database, run one service action, print what it returned.

Every command family whose action writes one row by id (`envs claim|release|complete`,
`profiles activate`) ends here, so the text and the `--json` object of a result or a refusal are
the same for all of them.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing is not imported at run time: the start-up budget (issue 22)
    from typing import Any, Callable

from console.cli.output import emit_error, emit_json, say
from console.errors import Refusal
from console.models.environments import ClaimResult
from console.models.results import ActionResult


def run_action(ctx, target_id: str, action: Callable[[Any], ActionResult | ClaimResult]) -> int:
    """Open, run one service action, print its result; a refusal prints as JSON too under --json."""
    try:
        with ctx.open() as handle:
            result = action(handle)
    except Refusal as exc:
        if not ctx.json:
            raise
        emit_error(exc.reason, exc.hint, exc.exit_code, id=target_id, state=None, message=exc.reason,
                   **({"clock_note": ctx.write_note} if ctx.write_note else {}))
        return exc.exit_code
    if ctx.json:
        emit_json({**result.to_json(), **({"clock_note": ctx.write_note} if ctx.write_note else {})})
    else:
        say(result.message)
        if ctx.write_note:
            say(ctx.write_note, err=True)
    return 0 if result.ok else 1


__all__ = ["run_action"]
