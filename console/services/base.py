"""What every service shares: the actor, the reason, feature checks and claim ids (the shape of an
action's result, `ActionResult`, is in console/models/results.py: commands and models read it too)."""

from __future__ import annotations

import os
import re

from console.db.connect import ArchonDatabase
from console.errors import MissingArgument, Refusal, UsageError
from console.services.identity import CLAIM_TAG_LENGTH

ACTOR_MAX_BYTES = 200
REASON_MAX_BYTES = 2000

# The first archon release whose schema has each feature.
FEATURE_RELEASE = {"profiles": "1.8.22", "approvals": "1.8.22", "claims": "1.10.0"}


def validate_actor(actor: str) -> str:
    """Every human action passes here (CLI and TUI alike): a name archon could store, that shows as
    what it is (no control, bidi or invisible character, no edge whitespace: `bob\u200b` must not
    pass for bob), and never one of archon's own actors (four_eyes.py, `reserved_name`), so a
    person cannot record a decision under archon's or the console's name."""
    from console.services.four_eyes import declared_name_problem, reserved_name

    problem = declared_name_problem(actor)
    if problem:
        raise UsageError(f"The actor name {actor!r} {problem}; pass --as NAME with a plain name.")
    size = len(actor.encode("utf-8", "surrogatepass"))
    if not 1 <= size <= ACTOR_MAX_BYTES:
        raise Refusal(
            f"The actor name must be 1 to {ACTOR_MAX_BYTES} bytes (it is {size}).",
            "Pass a shorter --as NAME.",
        )
    if reserved_name(actor):
        raise UsageError(f"The actor name {actor!r} is reserved for archon's own actors; act under your own name "
                         "with --as NAME.")
    return actor


def validate_reason(reason: str | None, *, required: bool, what: str = "this action") -> str | None:
    if reason is not None:
        reason = reason.strip()
    if required and not reason:
        raise MissingArgument(f"A reason is required for {what}; nothing was written.", "Pass --reason TEXT.")
    if reason:
        size = len(reason.encode("utf-8"))
        if size > REASON_MAX_BYTES:
            raise Refusal(
                f"The reason is {size} bytes; at most {REASON_MAX_BYTES} are allowed. Nothing was written.",
                "Shorten it; it is never cut silently.",
            )
    return reason or None


class ReleaseRefusal(Refusal):
    """Refused for the database's release alone: true only while the file keeps the release it was
    decided on (`release`). The console drops such a refusal, and closes its dialog, once the
    release has changed (an upgrade): an old "needs 1.8.22" must not pop over the upgrade's success."""

    def __init__(self, reason: str, hint: str | None = None, *, release: str | None = None):
        super().__init__(reason, hint)
        self.release = release

    def __reduce__(self):  # crosses console/isolation.py's process boundary like any refusal
        return (_release_refusal, (self.reason, self.hint, self.release))


def _release_refusal(reason: str, hint: str | None, release: str | None) -> "ReleaseRefusal":
    return ReleaseRefusal(reason, hint, release=release)


def require_feature(handle: ArchonDatabase, feature: str, *, what: str) -> None:
    """Refuse features the database's release lacks, instead of failing on a missing column."""
    if not handle.shape.supports(feature):
        release = handle.shape.release or "unknown"
        needed = FEATURE_RELEASE.get(feature, "1.10.0")
        raise ReleaseRefusal(
            f"{what} needs archon {needed} or later; this database has the {release} shape (upgrade required).",
            "Run `archon-console upgrade --plan` to see what an upgrade would do.",
            release=handle.shape.release,
        )


CLAIM_RANDOM_LENGTH = 12  # hex digits of randomness ending a console claim id
CLAIM_ID_MAX = 128  # characters: archon's operation-claim trigger allows 1 to 128
_CLAIM_HEAD = "console:"
# The exact shape `claim_id_for` writes (D14): the head `console:<actor>@<host>` cut so the whole
# fits CLAIM_ID_MAX (so the `@` and the host may be cut away), then `:<owner tag>-<random>`. Only an
# id of this shape is the console's; `console:archon-worker@7` is not. A head shorter than the cut
# is whole, so it has a non-empty actor before an `@` and a host after it (`console:@0:...` is not
# the console's: no actor it accepts writes it).
CLAIM_HEAD_CUT = CLAIM_ID_MAX - len(_CLAIM_HEAD) - CLAIM_TAG_LENGTH - CLAIM_RANDOM_LENGTH - 2
CONSOLE_CLAIM_ID = re.compile(
    rf"(?=.{{1,{CLAIM_ID_MAX}}}\Z){_CLAIM_HEAD}(?P<head>.{{{CLAIM_HEAD_CUT}}}|.+@.+)"
    rf":[0-9a-f]{{{CLAIM_TAG_LENGTH}}}-[0-9a-f]{{{CLAIM_RANDOM_LENGTH}}}",
    re.DOTALL,
)


def claim_id_stem(actor: str) -> str:
    """What every claim id `actor` creates from this account on this host starts with, up to its
    random part: the readable head `console:<actor>@<host>` (cut to fit archon's 128 characters)
    and the owner tag (console/services/identity.py), `...:<tag>-`."""
    from console.services import identity

    tag = identity.claim_owner_tag(actor)
    head = f"{_CLAIM_HEAD}{actor}@{identity.current().host}"
    return f"{head[: CLAIM_ID_MAX - len(tag) - CLAIM_RANDOM_LENGTH - 2]}:{tag}-"


def claim_id_for(actor: str) -> str:
    """`console:<actor>@<host>:<owner tag>-<random>`, at most 128 characters (docs/decisions.md, D14
    and D21): readers see who holds it; only its creator's account and name reproduce the tag."""
    return claim_id_stem(actor) + os.urandom((CLAIM_RANDOM_LENGTH + 1) // 2).hex()[:CLAIM_RANDOM_LENGTH]


def new_event_id() -> str:
    """A random (version 4) UUID as `str(uuid.uuid4())` writes it, from the same `os.urandom`, without
    importing uuid (and platform with it) on every write: a tenth of `approvals approve`'s start."""
    raw = bytearray(os.urandom(16))
    raw[6] = (raw[6] & 0x0F) | 0x40  # version 4
    raw[8] = (raw[8] & 0x3F) | 0x80  # the RFC 4122 variant
    text = raw.hex()
    return f"{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:]}"
