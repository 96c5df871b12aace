"""A refusal shown in the console names the key that does what the command line's option does
(issue 21, item 10): "use --takeover" where `t` takes over. One mechanism (console/errors.py
`Remedy`): the refusal carries its way out; the CLI says the option, a screen the key bound to the
action. Walked over every refusal the environment and approval writes give on the demo database,
and driven through the screens where a write meets a change the screen had not seen yet."""

from __future__ import annotations

import re
import shutil
from datetime import timedelta

import pytest

from console.db.connect import open_database
from console.errors import ConsoleError, Refusal, Remedy
from console.services import approvals as decisions
from console.services import environment_claims
from console.tui.screens.approvals import ApprovalsScreen
from console.tui.screens.confirm import ConfirmModal
from console.tui.screens.environments import EnvironmentsScreen
from console.tui.screens.error import ErrorModal
from console.tui.screens.reason import ReasonModal
from tests.tui.conftest import NOW, demo_file
from tests.tui.pilot import ready, select, send_keys, type_text, wait_until

# What each screen's keys do that the command line does with an option or a command.
CLI_WAYS = {
    EnvironmentsScreen: ("--takeover", "archon-console envs release"),
    ApprovalsScreen: ("archon-console approvals revoke", "archon-console approvals deny"),
}


def screen_keys(screen_cls) -> dict[str, str]:
    """action -> key, from the screen's bindings (what `ConsoleScreen.key_for` reads on a live screen)."""
    keys: dict[str, str] = {}
    for klass in reversed(screen_cls.__mro__):
        for binding in vars(klass).get("BINDINGS", ()):
            keys[binding.action] = binding.key_display or binding.key
    return keys


def remedies(error: ConsoleError) -> list[Remedy]:
    return [p for p in (*error.reason_parts, *(error.hint_parts or ())) if isinstance(p, Remedy)]


def environment_refusals(path) -> list[Refusal]:
    """Every refusal the environment writes give, for every environment of the demo, for its holder
    and for someone else, fresh and (an hour on) stale."""
    found: list[Refusal] = []
    with open_database(path) as h:
        envs = [r[0] for r in h.conn.execute("SELECT id FROM execution_environments ORDER BY id")]
        holders = {r[0] for r in h.conn.execute("SELECT operation_claim_id FROM execution_environments "
                                                "WHERE operation_claim_id IS NOT NULL")}
        alice = "alice"  # the demo's console claim (env-0012) is alice's
        for now in (NOW, NOW + timedelta(hours=1)):
            for env in envs:
                attempts = [lambda op=op: environment_claims.claim(h, env, op, "mallory", now=now)
                            for op in ("stop", "retire", "reset", "cleanup_retry")]
                attempts += [
                    lambda: environment_claims.claim(h, env, "retire", "mallory", now=now, takeover=True, reason="r"),
                    lambda: environment_claims.claim(h, env, None, "mallory", now=now, takeover=True, reason="r"),
                    lambda: environment_claims.release(h, env, "mallory", now=now),
                    lambda: environment_claims.release(h, env, "mallory", now=now, takeover=True, reason="r"),
                    lambda: environment_claims.complete(h, env, "mallory", now=now),
                    lambda: environment_claims.complete(h, env, alice, now=now),
                ]
                for attempt in attempts:  # one that succeeds moves the walk on to the next state
                    try:
                        attempt()
                    except Refusal as exc:
                        found.append(exc)
    assert holders
    return found


def approval_refusals(path) -> list[Refusal]:
    found: list[Refusal] = []
    with open_database(path) as h:
        rows = h.conn.execute("SELECT id FROM approval_requests ORDER BY id").fetchall()
        for (rid,) in rows:
            for verb in ("approve", "deny", "revoke"):
                [result] = decisions.decide_many(h, [rid], verb, actor="mallory", reason="r",
                                                 now=NOW - timedelta(days=400))
                if result.refusal is not None:
                    found.append(result.refusal)
    return found


@pytest.mark.parametrize("screen_cls, walk", [(EnvironmentsScreen, environment_refusals),
                                               (ApprovalsScreen, approval_refusals)])
def test_every_refusal_names_the_screens_key_where_it_has_one(tmp_path, tmp_path_factory, screen_cls, walk):
    path = tmp_path / "walk.db"
    shutil.copyfile(demo_file(tmp_path_factory), path)
    refusals = walk(path)
    keys = screen_keys(screen_cls)
    with_remedy = [r for r in refusals if remedies(r)]
    assert with_remedy, "the walk met no refusal with a way out"
    for refusal in refusals:
        for remedy in remedies(refusal):
            assert remedy.action in keys, f"{remedy} names an action {screen_cls.__name__} has no key for"
        cli = " ".join(filter(None, (refusal.reason, refusal.hint)))
        shown = " ".join(filter(None, refusal.render(keys.get)))
        for way in CLI_WAYS[screen_cls]:
            assert way not in shown, shown
        for remedy in remedies(refusal):  # the command line still names the option
            assert remedy.option in cli
            assert f"key {keys[remedy.action]}" in shown


@pytest.mark.slow
async def test_a_claim_that_lost_a_race_names_the_takeover_key(demo_db, make_app):
    """Claimed by someone else between the screen's last read and the key: the refusal says `key t`."""
    path = demo_db()
    app = make_app(path, start="envs", poll_seconds=3600)  # the screen does not see the other claim
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, EnvironmentsScreen)
        await select(pilot, app, "env-0011")
        with open_database(path) as h:
            environment_claims.claim(h, "env-0011", "stop", "bob", now=NOW - timedelta(hours=1))
        await send_keys(pilot, "s")
        await wait_until(pilot, lambda: isinstance(app.screen, ConfirmModal), what="the claim dialog")
        await send_keys(pilot, "y")
        await wait_until(pilot, lambda: isinstance(app.screen, ErrorModal), what="the refusal")
        text = str(app.screen.query_one("#dialog-summary").render())
    assert "key t to take it over" in text and "--takeover" not in text, text


@pytest.mark.slow
async def test_a_deny_that_met_an_approval_names_the_revoke_key(demo_db, make_app):
    path = demo_db()
    app = make_app(path, poll_seconds=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")
        with open_database(path) as h:
            assert decisions.decide(h, "apr-00000192", "approve", actor="bob", now=NOW).ok
        await send_keys(pilot, "d")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal), what="the deny dialog")
        await type_text(pilot, "wrong branch")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, ErrorModal), what="the refusal")
        text = str(app.screen.query_one("#dialog-summary").render())
    assert re.search(r"To withdraw the approval: key r\b", text) and "archon-console" not in text, text


@pytest.mark.slow
async def test_a_bulk_deny_names_the_revoke_key_for_the_one_approved_meanwhile(demo_db, make_app):
    from console.tui.screens.bulk_results import BulkResultsModal

    path = demo_db()
    app = make_app(path, poll_seconds=3600)
    async with app.run_test(size=(120, 40)) as pilot:
        await ready(pilot, app, ApprovalsScreen)
        await select(pilot, app, "apr-00000192")
        await send_keys(pilot, "space", "space")
        with open_database(path) as h:
            assert decisions.decide(h, "apr-00000192", "approve", actor="bob", now=NOW).ok
        await send_keys(pilot, "d")
        await wait_until(pilot, lambda: isinstance(app.screen, ReasonModal), what="the deny dialog")
        await type_text(pilot, "wrong branch")
        await send_keys(pilot, "enter")
        await wait_until(pilot, lambda: isinstance(app.screen, BulkResultsModal), what="the results")
        shown = {r.id: app.screen._message(r) for r in app.screen.results if not r.ok}
    assert "To withdraw the approval: key r" in shown["apr-00000192"]  # 194 is alice's own: four-eyes
    assert not any("archon-console" in text for text in shown.values()), shown
