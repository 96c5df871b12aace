"""Attack round on issue 18, finding 7: a claim id is the console's only in the exact shape the
console writes.

On main, `console_made` accepted any id that starts `console:` and has an `@`, so a stale claim
`console:archon-worker@7` (reset) was released with `--takeover --reason stale` and no
`--confirm-holder`, reopening lease admission, and was described as "archon-worker's" claim;
`console:@` went the same way. Now `CONSOLE_CLAIM_ID` (defined beside `claim_id_for`, D14) is the
only test: every id the generator produces matches it, generated near-misses do not, and a claim of
any other shape is named as stored and needs its holder confirmed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from console.clock import db_time
from console.errors import ConsoleError
from console.services import identity
from console.services.base import CONSOLE_CLAIM_ID, claim_id_for, validate_actor
from console.services.environment_rules import claim_holder, console_made
from tests.environments_support import add_env, add_project, dump, env_row, raw, set_claim

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def _plain(actor: str) -> bool:
    try:
        validate_actor(actor)
    except ConsoleError:
        return False
    return True


ACTORS = st.text(min_size=1, max_size=120).filter(_plain)
HOSTS = st.text(st.characters(whitelist_categories=("Ll", "Lu", "Nd"), whitelist_characters=".-_"),
                min_size=1, max_size=70)


def _generated(actor: str, host: str) -> str:
    real = identity.current()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(identity, "current", lambda: identity.OsIdentity(real.login, real.uid, host))
        return claim_id_for(actor)


@settings(max_examples=300, deadline=None)
@given(actor=ACTORS, host=HOSTS)
def test_every_id_the_generator_writes_is_the_consoles(actor, host):
    claim_id = _generated(actor, host)
    assert len(claim_id) <= 128 and CONSOLE_CLAIM_ID.fullmatch(claim_id)
    assert console_made(claim_id)
    holder = claim_holder(claim_id)
    assert holder == claim_id or actor.startswith(holder)  # the readable head, cut to fit 128


def _near_misses(claim_id: str) -> list[str]:
    head, tag_random = claim_id[:-29], claim_id[-29:]  # ":" + 16 + "-" + 12
    tag, random = tag_random[1:17], tag_random[18:]
    return [
        claim_id[:-1],                                   # random part one digit short
        claim_id + "0",                                  # one digit long
        f"{head}:{tag}:{random}",                        # wrong separator
        f"{head}-{tag}-{random}",
        f"{head}:{'g' + tag[1:]}-{random}",              # not hex
        f"{head}:{tag}-{random[:-1]}F",                  # upper-case hex
        f"{head}:{tag[:-1]}-{random}",                   # tag one digit short
        head,                                            # the readable head alone: console:<actor>@<host>
        "Console:" + claim_id[len("console:"):],
        "console" + claim_id[len("console:"):],
        "console:" + "x" * 91 + tag_random,              # 129 characters
        f"console:{tag_random}",                         # no head at all
        claim_id + "\n",
    ]


@settings(max_examples=200, deadline=None)
@given(actor=ACTORS, host=HOSTS, which=st.integers(min_value=0, max_value=12))
@example(actor=":", host="0", which=9)  # `console:@0:...`: no actor, which no console claim has
def test_generated_near_misses_are_not_the_consoles(actor, host, which):
    claim_id = _generated(actor, host)
    miss = _near_misses(claim_id)[which]
    assert not console_made(miss), miss
    assert claim_holder(miss) == miss  # named as stored, never a name parsed out of it


@pytest.mark.parametrize("lookalike", ["console:archon-worker@7", "console:@", "console:a@b:c",
                                       "console:bob@host:0123456789abcdef",
                                       # the whole shape, with an actor the console never writes
                                       "console:archon-worker@7:0123456789abcdef-0123456789ab",
                                       "console:bob\n@host:0123456789abcdef-0123456789ab",
                                       "console: bob\u200b@host:0123456789abcdef-0123456789ab",
                                       "console:system@host:0123456789abcdef-0123456789ab"])
def test_lookalikes_are_not_console_claims(lookalike):
    assert not console_made(lookalike) and claim_holder(lookalike) == lookalike


def _console(db: Path, *argv: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if k not in ("ARCHON_CONSOLE_STALE_MINUTES", "ARCHON_CONSOLE_NOW", "ARCHON_DB_PATH", "ARCHON_CONSOLE_ACTOR")}
    return subprocess.run([sys.executable, "-m", "console", *argv, "--db", str(db), "--as", "mallory"],
                          capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def test_a_console_lookalike_claim_needs_its_holder_named(schema_db):
    """The attacker's scenario: archon-side ids with the console's prefix are taken over only with
    the holder named, and described by the id as stored."""
    db = schema_db("1.10.0")
    stale = db_time(datetime.now(timezone.utc) - timedelta(hours=3))
    conn = raw(db)
    add_project(conn)
    add_env(conn, "env-r", "stopped")
    set_claim(conn, "env-r", "console:archon-worker@7", "reset", stale)
    add_env(conn, "env-t", "ready")
    conn.execute("UPDATE execution_environments SET retirement_requested_at = ? WHERE id = 'env-t'", (stale,))
    set_claim(conn, "env-t", "console:@", "retire", stale)
    conn.close()
    before = dump(db)
    done = _console(db, "envs", "release", "env-r", "--takeover", "--reason", "stale")
    assert done.returncode == 1 and dump(db) == before
    assert "claimed for reset by console:archon-worker@7" in done.stderr
    assert "archon-worker's" not in done.stderr and "--confirm-holder console:archon-worker@7" in done.stderr
    done = _console(db, "envs", "claim", "env-t", "--takeover", "--reason", "stale")
    assert done.returncode == 1 and dump(db) == before and "--confirm-holder console:@" in done.stderr
    done = _console(db, "envs", "release", "env-r", "--takeover", "--reason", "stale",
                    "--confirm-holder", "console:archon-worker@7", "--json")
    assert done.returncode == 0, done.stderr
    assert env_row(db, "env-r")["operation_claim_id"] is None
    assert "You confirmed the holder console:archon-worker@7" in json.loads(done.stdout)["message"]
