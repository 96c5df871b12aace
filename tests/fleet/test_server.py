"""`archon-console serve --stdio` through pipes, on real SQLite files: the wire, the methods as the
CLI's own commands, and the refusals a session makes on its own (issue 20)."""

from __future__ import annotations

import json

import pytest

from console.fleet import protocol as wire
from tests.approvals_helpers import events, live_request, status_of
from tests.fleet.serve_helpers import server_env


def test_hello_says_what_the_host_serves(servers, db):
    server = servers("--actor", "dave", db=db)
    hello = server.hello()
    assert hello["protocol"] == wire.PROTOCOL_VERSION and hello["server"] == "installed"
    assert hello["actor"] == "dave" and hello["actor_source"] == "command_line"
    assert hello["read_only"] is False and hello["read_only_reason"] is None
    assert hello["archon_release"] == "1.10.0" and hello["shape"]["release"] == "1.10.0"
    assert hello["db"] == str(db) and hello["database"] == {"ok": True}
    assert len(hello["instance_id"]) == 32 and hello["instance_source"] == "projects"
    assert set(hello["capabilities"]) == set(wire.METHODS) | set(wire.SESSION_METHODS)
    assert server.close() == 0


def test_the_instance_id_is_stable_across_restarts_and_moves(servers, db, tmp_path):
    first = servers("--actor", "dave", db=db).hello()["instance_id"]
    moved = tmp_path / "elsewhere.db"
    db.rename(moved)
    assert servers("--actor", "dave", db=moved).hello()["instance_id"] == first


def test_an_empty_database_has_no_instance_id(servers, schema_db):
    hello = servers("--actor", "dave", db=schema_db()).hello()
    assert hello["instance_id"] is None and hello["instance_source"] == "empty"


def test_methods_wait_for_hello(servers, db):
    server = servers("--actor", "dave", db=db)
    answer = server.request("approvals.list")
    assert answer["error"]["code"] == wire.NOT_READY
    server.hello()
    assert server.call("approvals.list")["exit"] == 0


def test_another_protocol_major_is_version_skew(servers, db):
    server = servers("--actor", "dave", db=db)
    answer = server.request("hello", {"protocol": 2})
    assert answer["error"]["code"] == wire.VERSION_SKEW and "version skew" in answer["error"]["message"]
    assert answer["error"]["data"]["kind"] == "version_skew"


def test_hello_may_not_name_another_database_than_the_hosts_db(servers, db, tmp_path):
    server = servers("--actor", "dave", db=db)
    answer = server.request("hello", {"protocol": 1, "db": str(tmp_path / "other.db")})
    assert answer["error"]["code"] == wire.WRONG_DATABASE
    assert server.request("hello", {"protocol": 1, "db": str(db)})["result"]["db"] == str(db)


def test_hello_names_the_database_when_the_host_fixed_none(servers, db):
    server = servers("--actor", "dave")
    assert server.hello(db=str(db))["archon_release"] == "1.10.0"
    assert server.call("approvals.show", id="apr-1")["output"]["id"] == "apr-1"


def test_an_unusable_database_is_said_in_hello(servers, tmp_path):
    server = servers("--actor", "dave", db=tmp_path / "missing.db")
    hello = server.hello()
    assert hello["database"]["ok"] is False and hello["database"]["exit"] == 3
    assert hello["instance_id"] is None
    assert server.call("approvals.list")["exit"] == 3


def test_list_is_the_json_the_cli_prints(servers, db):
    server = servers("--actor", "dave", db=db)
    server.hello()
    result = server.call("approvals.list", status="pending", limit=2)
    assert result["exit"] == 0
    assert [row["id"] for row in result["output"]] == ["apr-7", "apr-1"]


def test_approve_then_repeat_is_already_approved_by_you(servers, db):
    live = live_request(db)
    server = servers("--actor", "dave", db=db)
    server.hello()
    first = server.call("approvals.approve", ids=[live])
    assert first["exit"] == 0 and first["output"][0]["ok"] and not first["output"][0]["noop"]
    assert status_of(db, live) == "approved"
    again = server.call("approvals.approve", ids=[live])
    assert again["exit"] == 0
    (answer,) = again["output"]
    assert answer["noop"] is True and "already approved by you" in answer["message"]
    assert len([e for e in events(db, live) if e["to_status"] == "approved"]) == 1


def test_deny_without_a_reason_is_a_usage_error(servers, db):
    server = servers("--actor", "dave", db=db)
    server.hello()
    result = server.call("approvals.deny", ids=["apr-1"])
    assert result["exit"] == 2
    assert result["output"]["ok"] is False and "--reason" in result["output"]["error"]
    assert status_of(db, "apr-1") == "pending"


def test_four_eyes_holds_on_the_host(servers, db):
    """apr-3 was requested by carol: carol, resolved on the host, may not approve it."""
    server = servers("--actor", "carol", db=db)
    server.hello()
    result = server.call("approvals.approve", ids=["apr-3"])
    assert result["exit"] == 1
    assert "four-eyes" in result["output"][0]["message"] and result["output"][0]["wrote"] == []
    assert status_of(db, "apr-3") == "pending"


def test_a_read_only_session_refuses_writes_and_answers_reads(servers, db):
    live = live_request(db)
    server = servers("--read-only", "--actor", "dave", db=db)
    hello = server.hello()
    assert hello["read_only"] is True and "--read-only" in hello["read_only_reason"]
    answer = server.request("approvals.approve", {"ids": [live]})
    assert answer["error"]["code"] == wire.READ_ONLY
    assert status_of(db, live) == "pending"
    assert server.call("approvals.list")["exit"] == 0


def test_the_policy_can_make_every_session_read_only(servers, db, tmp_path):
    policy = tmp_path / "serve.toml"
    policy.write_text("read_only = true\n")
    server = servers("--actor", "dave", db=db, policy=policy)
    assert server.hello()["read_only"] is True
    assert server.request("approvals.expire")["error"]["code"] == wire.READ_ONLY


@pytest.mark.parametrize("text", ["read_only = 'yes'\n", "shared_acounts = ['archon']\n", "not toml [\n",
                                  "shared_accounts = 'archon'\n"])
def test_an_unusable_policy_refuses_the_session(servers, db, tmp_path, text):
    policy = tmp_path / "serve.toml"
    policy.write_text(text)
    server = servers("--actor", "dave", db=db, policy=policy)
    assert server.close() == 3
    assert server.raw == []
    assert "refused" in "".join(server.errors) and "Traceback" not in "".join(server.errors)


def test_a_policy_that_is_a_directory_refuses_the_session(servers, db, tmp_path):
    server = servers("--actor", "dave", db=db, policy=tmp_path)
    assert server.close() == 3 and server.raw == []


def test_as_is_refused_the_host_decides_who_acts(servers, db):
    server = servers("--as", "mallory", db=db)
    assert server.close() == 2 and server.raw == []


def test_the_event_records_the_actor_its_source_and_the_ssh_connection(servers, db):
    live = live_request(db)
    env = server_env(SSH_CONNECTION="127.0.0.1 50000 127.0.0.1 22", SSH_ORIGINAL_COMMAND="archon-console serve")
    server = servers("--actor", "erin", db=db, env=env)
    hello = server.hello()
    assert hello["actor_source"] == "forced_command" and hello["ssh_connection"] == "127.0.0.1 50000 127.0.0.1 22"
    assert server.call("approvals.approve", ids=[live])["exit"] == 0
    (event,) = [e for e in events(db, live) if e["to_status"] == "approved"]
    meta = json.loads(event["metadata_json"])
    assert event["actor_reference"] == "erin"
    assert meta["actor_source"] == "forced_command" and meta["ssh_connection"] == "127.0.0.1 50000 127.0.0.1 22"


def test_actor_under_ssh_without_a_forced_command_is_refused(servers, db):
    env = server_env(SSH_CONNECTION="127.0.0.1 50000 127.0.0.1 22")
    server = servers("--actor", "erin", db=db, env=env)
    assert server.close() == 2 and server.raw == []
    said = "".join(server.errors)
    assert "forced command" in said and len(said.strip().splitlines()) == 1, said


def test_the_login_acts_when_nothing_else_names_anyone(servers, db):
    from console.services.identity import current

    from console.services.four_eyes import reserved_name

    login = current().login
    hello = servers(db=db).hello()
    assert hello["actor_source"] == "login"
    if login is None or reserved_name(login):  # (a login named `archon` names nobody in particular)
        assert hello["actor"] is None and hello["read_only"] is True
    else:
        assert hello["actor"] == login and hello["read_only"] is False


def test_a_shared_account_reads_but_every_write_is_identity_ambiguous(servers, db, tmp_path):
    from console.services.identity import current

    live = live_request(db)
    policy = tmp_path / "serve.toml"
    policy.write_text(f"shared_accounts = [{json.dumps(current().login)}, 'archon']\n")
    server = servers(db=db, policy=policy)
    hello = server.hello()
    assert hello["actor"] is None and hello["actor_source"] == "shared_account" and hello["read_only"] is True
    assert server.call("approvals.list")["exit"] == 0
    for method, params in (("approvals.approve", {"ids": [live]}), ("approvals.deny", {"ids": [live], "reason": "x"}),
                           ("approvals.expire", {})):
        answer = server.request(method, params)
        assert answer["error"]["code"] == wire.IDENTITY_AMBIGUOUS, answer
        assert answer["error"]["data"]["kind"] == "identity_ambiguous"
    assert status_of(db, live) == "pending"


def test_a_forced_actor_on_a_shared_account_may_write(servers, db, tmp_path):
    from console.services.identity import current

    live = live_request(db)
    policy = tmp_path / "serve.toml"
    policy.write_text(f"shared_accounts = [{json.dumps(current().login)}]\n")
    env = server_env(SSH_CONNECTION="127.0.0.1 50000 127.0.0.1 22", SSH_ORIGINAL_COMMAND="anything the client asked")
    server = servers("--actor", "frank", db=db, policy=policy, env=env)
    assert server.hello()["actor"] == "frank"
    assert server.call("approvals.approve", ids=[live])["output"][0]["ok"]


def test_a_reserved_forced_actor_is_refused(servers, db):
    server = servers("--actor", "archon", db=db)
    assert server.close() == 2 and server.raw == []


def test_every_param_of_every_method_is_an_option_of_its_command_and_never_a_global_one():
    """METHODS (console/fleet/protocol.py) names destinations; each must be its command's own action,
    so a param can never reach `--db`, `--as`, `--read-only` or `--busy-timeout`."""
    from console.cli.server_methods import command_actions

    for name, method in {**wire.METHODS, "approvals.watch": wire.WATCH}.items():
        actions = command_actions(method)
        assert {a.dest for a in actions} == set(method.params), name
        for action in actions:
            assert not set(action.option_strings) & {"--db", "--as", "--read-only", "--busy-timeout", "--json"}, name


def test_a_refused_session_writes_nothing_on_stdout_even_with_json(servers, db, tmp_path):
    policy = tmp_path / "serve.toml"
    policy.write_text("read_only = 'maybe'\n")
    server = servers("--json", "--actor", "dave", db=db, policy=policy)
    assert server.close() == 3 and server.raw == []
    said = "".join(server.errors).strip().splitlines()
    assert len(said) == 1 and "read_only must be true or false" in said[0]


def test_policy_under_ssh_without_a_forced_command_is_refused(servers, db, tmp_path):
    """A client that chose the command line cannot pick the policy that says which accounts are shared."""
    policy = tmp_path / "empty.toml"
    policy.write_text("")
    env = server_env(SSH_CONNECTION="127.0.0.1 50000 127.0.0.1 22")
    server = servers(db=db, env=env, policy=policy)
    assert server.close() == 2 and server.raw == []
    assert "--policy is believed only from a forced command" in "".join(server.errors)
    forced = servers(db=db, policy=policy, env=server_env(SSH_CONNECTION="127.0.0.1 50000 127.0.0.1 22",
                                                          SSH_ORIGINAL_COMMAND="x"))
    assert forced.hello()["actor_source"] == "login"


@pytest.mark.parametrize("method, params, argv", [
    ("approvals.deny", {"ids": ["apr-1"]}, ["approvals", "deny", "apr-1"]),
    ("approvals.approve", {"ids": ["apr-3"]}, ["approvals", "approve", "apr-3"]),
    ("approvals.show", {"id": "no-such"}, ["approvals", "show", "no-such"]),
    ("approvals.list", {"status": "nonsense"}, ["approvals", "list", "--status", "nonsense"]),
    ("approvals.list", {"limit": 0}, ["approvals", "list", "--limit", "0"]),
    ("envs.show", {"id": "env-x"}, ["envs", "show", "env-x"]),
])
def test_a_methods_output_is_what_the_cli_prints_with_json(servers, db, method, params, argv):
    """The same refusal, usage error or answer, whichever door: the CLI's --json, or the server."""
    import subprocess
    import sys

    env = server_env()
    env.pop("ARCHON_CONSOLE_NOW", None)
    cli = subprocess.run([sys.executable, "-m", "console", "--db", str(db), "--as", "carol", *argv, "--json"],
                         capture_output=True, text=True, timeout=60, env=env)
    server = servers("--actor", "carol", db=db, env=env)
    server.hello()
    result = server.call(method, **params)
    assert result == {"exit": cli.returncode, "output": json.loads(cli.stdout)}


@pytest.mark.parametrize("db_param", ["", " ", "a\u0000b", "\ud800", 7, ["x"], "x" * 5000])
def test_hello_refuses_a_db_that_is_no_path(servers, db_param):
    server = servers("--actor", "dave")
    line = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "hello", "params": {"protocol": 1, "db": db_param}})
    server.send_raw(line.encode() + b"\n")
    answer = server.read()
    assert answer["error"]["code"] == wire.INVALID_PARAMS, answer
    assert server.request("approvals.list")["error"]["code"] == wire.NOT_READY
