"""Commands over several hosts that name rows by id: show one, and the writes (decide, claim,
release, complete, activate, expire).

Each id is resolved to its host first (console/cli/fleet_ids.py: `HOST:ID`, or a bare id found on
exactly one host), then each host gets ONE call carrying its own ids, never the cache's answer: the
host runs it as the local command does (each approval id its own transaction, preconditions
re-checked inside it, the actor resolved on the host), so a repeat answers "already approved by you".
A call whose connection drops before the answer is not guessed at: its ids are "outcome unknown",
re-read by id once within the run, else the operator is told which `show HOST:ID` settles it.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from console.cli.fleet_ids import Target, by_host, choose_host, choose_qualified, split_target
from console.cli.fleet_views import answered, fleet_exit, fleet_json, host_exit, remote_error
from console.errors import EXIT_OK, EXIT_PARTIAL, EXIT_REFUSED
from console.fleet.answers import DECIDED, item_problem, one_write_items
from console.fleet.decisions import NOT_SENT, actor_of, decided_by, items_by_id, read_back_done
from console.text import json_text, one_line

SHOWS = ("approvals.show", "envs.show", "profiles.show")
LOOKUP = {"approvals": "approvals.show", "envs": "envs.show", "profiles": "profiles.show"}


def id_field(method: str, params: dict[str, Any]) -> str:
    if method.startswith("approvals.") and method != "approvals.show":
        return "ids"
    if method.startswith("profiles."):
        return "project" if params.get("project") is not None else "revision"
    return "id"


def _lookup(method: str, params: dict[str, Any], field: str, value: str) -> tuple[str, dict[str, Any]]:
    """The show call that reads one id back on its host (to resolve a bare id, or re-read a write)."""
    family = method.split(".")[0]
    if family == "profiles":
        looked = {k: params[k] for k in ("project", "revision") if params.get(k) is not None}
        looked[field] = value
        return LOOKUP[family], looked
    return LOOKUP[family], {"id": value}


def run_by_id(runner, method: str, params: dict[str, Any]) -> int:
    if method == "approvals.expire":
        return _write(runner, method, params, {h: [] for h in runner.names}, field=None)
    field = id_field(method, params)
    given = params[field] if field == "ids" else [params[field]]
    targets = [split_target(str(text), runner.fleet.hosts) for text in given]
    qualified = [_qualified(runner, method, params, field, t) for t in targets]
    if method in SHOWS:
        return _show(runner, method, params, field, *qualified[0])
    resolved = [(host or _resolve(runner, method, params, field, t), t) for host, t in qualified]
    return _write(runner, method, params, by_host(resolved), field=field)


def _qualified(runner, method: str, params: dict[str, Any], field: str, target: Target) -> tuple[str | None, Target]:
    """`HOST:ID` checked against what the selected hosts hold (console/cli/fleet_ids.py
    `choose_qualified`): (its host, the target), or (None, target) for a bare id."""
    if target.host is None:
        return None, target
    from console.cli.output import say

    lookup, looked = _lookup(method, params, field, target.given)
    outcomes = runner.call(lookup, looked, cache=False)
    host, target, note = choose_qualified(target, runner.names, {o.host: _found(o) for o in outcomes})
    if note:
        say(note, err=True)
    return host, target


def _found(outcome) -> bool | None:
    return (outcome.exit == 0) if answered(outcome) else None


def _resolve(runner, method: str, params: dict[str, Any], field: str, target: Target) -> str:
    if target.host is not None:
        return target.host
    if len(runner.names) == 1:
        return runner.names[0]  # one host: it answers "not found" itself
    lookup, looked = _lookup(method, params, field, target.id)
    outcomes = runner.call(lookup, looked, cache=False)
    return choose_host(target, {o.host: _found(o) for o in outcomes})


def _show(runner, method: str, params: dict[str, Any], field: str, host: str | None, target: Target) -> int:
    from console.cli.output import say

    one = {**params, field: target.id}
    if host is not None or len(runner.names) == 1:
        host = host or runner.names[0]
        outcome = runner.call(method, one, [runner.host(host)])[0]
    else:
        outcomes = runner.call(method, one)
        host = choose_host(target, {o.host: _found(o) for o in outcomes})
        outcome = next(o for o in outcomes if o.host == host)
    code = host_exit(outcome)
    if outcome.state not in ("ok", "stale") or code not in (EXIT_OK, EXIT_PARTIAL) or not isinstance(outcome.data, dict):
        if runner.json:
            runner.emit(fleet_json([], [outcome]))
        else:
            runner.say_hosts([outcome])
        return code
    data = {"host": outcome.host, **{k: v for k, v in outcome.data.items() if k != "host"}}
    if outcome.state == "stale":
        data["host_stale"] = True
    if runner.json:
        runner.emit(data)
        return code
    say(show_text(data))
    runner.say_hosts([outcome])
    return code


def show_text(data: dict[str, Any]) -> str:
    """A row read on a host, field by field (its own console's layout needs the objects, not JSON)."""
    from console.cli.output import table

    def cell(value: Any) -> str:
        if isinstance(value, (dict, list)):
            return json_text(value, indent=None)
        return "-" if value is None else one_line(value)

    return table([(key, cell(value)) for key, value in data.items()], ["FIELD", "VALUE"], max_width=100)


def _call_one(runner, method, params, field, host, ids):
    sent = dict(params)
    if field is not None:
        sent[field] = ids if field == "ids" else ids[0]
    return runner.call(method, sent, [runner.host(host)], cache=False)[0]


def _shared(runner) -> dict[str, Any]:
    """The selected hosts this run finds answering for one database (console/fleet/client.py
    `flag_shared_instances`): each host's write is one call of its own, which cannot see another
    host's instance, so with several hosts selected their hellos are compared first and no write
    is sent to a host that shares its instance (its outcome says why; nothing was written)."""
    if len(runner.names) < 2:
        return {}
    return {o.host: o for o in runner.call("hello", {}, cache=False) if o.state == "wrong_instance"}


def _write(runner, method: str, params: dict[str, Any], grouped: dict[str, list[str]], *, field: str | None) -> int:
    outcomes = _shared(runner)
    todo = {host: ids for host, ids in grouped.items() if host not in outcomes}
    with ThreadPoolExecutor(max_workers=max(1, min(int(runner.args.parallel), len(todo) or 1))) as pool:
        futures = {host: pool.submit(_call_one, runner, method, params, field, host, ids)
                   for host, ids in todo.items()}
        outcomes.update({host: future.result() for host, future in futures.items()})
    outcomes = {host: outcomes[host] for host in grouped}
    rows: list[tuple[dict[str, Any], int]] = []
    for host, ids in grouped.items():
        rows.extend(_rows(runner, method, params, field, outcomes[host], ids))
    return _report(runner, method, rows, list(outcomes.values()))


def _rows(runner, method, params, field, outcome, ids) -> list[tuple[dict[str, Any], int]]:
    """(row, its exit code) for each id sent to one host: exactly one row per id sent, decided here
    from what was sent (console/fleet/answers.py checked the answer's shape): an id the host did not
    answer for, or answered twice, is outcome unknown and read back; an item for an id that was not
    sent is dropped and said; the host's exit code is never made better by its items."""
    host = outcome.host
    if outcome.state == "read_only":  # hosts.toml: refused here, never sent (console/fleet/local_policy.py)
        return [(_row(host, i, one_line(outcome.sentence or "read-only in hosts.toml", 300)), EXIT_REFUSED)
                for i in (ids or [None])]
    if answered(outcome):
        data = outcome.data
        if field != "ids" and field is not None and isinstance(data, dict) and "ok" in data:
            data = one_write_items(method, ids[0], data)  # matched below like a batch write's items
        if field is None and isinstance(data, list):  # expire: the ids are the host's to name
            return [(_item_row(host, item), _item_code(item, outcome)) for item in data]
        if isinstance(data, list):
            return _matched(runner, method, params, field, outcome, ids, data)
        why = remote_error(outcome) or "the host's answer was not a result"
        return [(_row(host, i, why), max(host_exit(outcome), EXIT_REFUSED)) for i in (ids or [None])]
    sentence = one_line(outcome.sentence or outcome.state, 300)
    if outcome.state == "remote_error":  # the host's console refused the call (read-only, identity)
        return [(_row(host, i, f"refused by the host: {sentence}"), EXIT_REFUSED) for i in ids]
    if outcome.state in NOT_SENT:
        return [(_row(host, i, f"not sent, nothing was written: {outcome.state}: {sentence}"), EXIT_PARTIAL)
                for i in ids]
    return [_reread(runner, method, params, field, outcome, i, sentence) for i in ids]


def _item_row(host: str, item: dict[str, Any]) -> dict[str, Any]:
    return {"host": host, **{k: v for k, v in item.items() if k != "host"}}


def _item_code(item: dict[str, Any], outcome) -> int:
    # an id done is done (the host's exit says another id failed; it counts for the run: `_report`)
    return EXIT_OK if item.get("ok") is True else max(host_exit(outcome), EXIT_REFUSED)


def _matched(runner, method, params, field, outcome, ids, items) -> list[tuple[dict[str, Any], int]]:
    host = outcome.host
    answers = items_by_id(items)  # console/fleet/decisions.py: the one rule, shared with the TUI
    rows = []
    for id_ in ids:
        got = answers.get(id_, [])
        why = item_problem(method, got[0]) if len(got) == 1 else None
        if len(got) == 1 and why is None:
            rows.append((_item_row(host, got[0]), _item_code(got[0], outcome)))
            continue
        said = why or ("did not answer for it" if not got else f"answered for it {len(got)} times")
        rows.append(_reread(runner, method, params, field, outcome, id_, f"{host} {said}"))
    foreign = [i for i in answers if i not in ids]
    if foreign:
        rows.append((_row(host, None, f"{host} answered for {len(foreign)} id(s) that were not sent to it "
                          f"({one_line(', '.join(foreign), 120)}); those answers were ignored"), EXIT_PARTIAL))
    return rows


def _row(host: str, id_: str | None, message: str, *, state: Any = None, unknown: bool = False) -> dict[str, Any]:
    row = {"host": host, "id": id_, "ok": False, "state": state, "message": message}
    if unknown:
        row["outcome_unknown"] = True
    return row


def _reread(runner, method, params, field, outcome, id_, sentence) -> tuple[dict[str, Any], int]:
    """Outcome unknown: read the id back once; what it is now, or where to look. It counts as done
    only when the read-back shows the expected status reached by THIS session's actor (the one the
    host resolved in hello): someone else's decision meanwhile is not ours."""
    host = outcome.host
    lookup, looked = _lookup(method, params, field or "id", id_)
    command = lookup.replace(".", " ")
    back = runner.call(lookup, looked, [runner.host(host)], cache=False)[0]
    if answered(back) and back.exit == 0 and isinstance(back.data, dict):
        now = back.data.get("status") or back.data.get("lifecycle_state")
        expected = DECIDED.get(method)
        message = (f"outcome unknown ({sentence}); read back: {one_line(id_, 120)} is {one_line(now)} now")
        code = EXIT_PARTIAL
        if expected:  # console/fleet/decisions.py: the one read-back rule, shared with the TUI
            by = decided_by(back.data, expected)
            done = read_back_done(method, back.data, actor_of(outcome.hello) or actor_of(back.hello))
            code = EXIT_OK if done else EXIT_REFUSED
            if now == expected and not done:
                message += f", decided by {one_line(by or 'someone unknown', 60)}, not by you"
        return _row(host, id_, message, state=now, unknown=True) | {"ok": code == EXIT_OK}, code
    message = (f"outcome unknown ({sentence}); the host did not answer again: check with "
               f"`{command} {host}:{id_} --host {host}`")
    return _row(host, id_, message, unknown=True), EXIT_PARTIAL


def _report(runner, method, rows: list[tuple[dict[str, Any], int]], outcomes) -> int:
    from console.cli.output import say

    named = {row["host"] for row, _ in rows}  # a host without rows (expire; a host down) counts as itself
    # a host that answered counts with its own exit code too: its items never make it better
    code = fleet_exit([c for _, c in rows] + [host_exit(o) for o in outcomes
                                              if o.host not in named or answered(o)])
    if runner.json:
        value = fleet_json([r for r, _ in rows], outcomes)
        value.update(ok=code == EXIT_OK, exit=code)
        runner.emit(value)
        return code
    for row, row_code in rows:
        where = one_line(row["host"], 30) + (f":{one_line(row.get('id'), 120)}" if row.get("id") else "")
        text = f"{where}: {one_line(row.get('message') or row.get('state') or '', 400)}"
        if row_code == EXIT_OK:
            say(text)
        else:
            say(("" if row.get("outcome_unknown") or row_code == EXIT_PARTIAL else "refused: ") + text, err=True)
    if method == "approvals.expire":
        for outcome in outcomes:
            if answered(outcome) and outcome.exit == 0 and not any(r["host"] == outcome.host for r, _ in rows):
                say(f"{one_line(outcome.host, 30)}: nothing to expire")
    runner.say_hosts([o for o in outcomes if o.host not in named])
    return code


__all__ = ["SHOWS", "id_field", "run_by_id", "show_text"]
