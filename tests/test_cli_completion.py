"""Shell completion (issue 10, item 16): bash and zsh scripts from `completion`, candidates from the
parser and the database, and nothing of it imported by any other command."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.cli.cli import main
from console.cli.completion import candidates

BIN = str(Path(sys.executable).parent)


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    from console.demo.writer import generate

    path = tmp_path_factory.mktemp("completion") / "demo.db"
    generate(path, requests=30, environments=6, now="2026-11-01 09:30:00")
    return path


def test_commands_actions_and_options_come_from_the_parser():
    assert candidates(["ap"]) == ["approvals"]
    assert set(candidates(["approvals", ""])) == {"list", "show", "approve", "deny", "revoke", "expire", "watch"}
    assert "--expiring-within" in candidates(["approvals", "list", "--exp"])
    assert candidates(["envs", "claim", "x", "--op", ""]) == ["stop", "retire", "reset", "cleanup_retry"]
    assert candidates(["completion", ""]) == ["bash", "zsh"]


def test_ids_and_names_come_from_the_database(demo):
    db = str(demo)
    assert "prj-atlas-api" in candidates(["--db", db, "profiles", "list", ""])
    assert "atlas-api" in candidates(["--db", db, "approvals", "list", "--project", "atl"])
    assert candidates(["envs", "show", "env-000", "--db", db]) == []  # --db after the word is not seen yet
    assert "env-0001" in candidates(["--db", db, "envs", "show", "env-000"])
    assert all(c.startswith("apr-") for c in candidates(["--db", db, "approvals", "approve", "apr-"]))
    assert "prj-atlas-api:execution-profile:3" in candidates(["--db", db, "profiles", "show", "prj-atlas-api:"])


def test_hostile_names_are_never_offered_to_the_shell(demo):
    offered = candidates(["--db", str(demo), "profiles", "list", ""])
    assert "prj-markup-trap" in offered and not any("[" in c or " " in c for c in offered)


def test_a_missing_database_completes_nothing_and_says_nothing(tmp_path, capsys):
    assert candidates(["--db", str(tmp_path / "none.db"), "approvals", "show", ""]) == []
    assert not (tmp_path / "none.db").exists()


def _bash_complete(line: str, db: Path) -> list[str]:
    script = subprocess.run([f"{BIN}/archon-console", "completion", "bash"], capture_output=True, text=True,
                            check=True).stdout
    probe = script + (
        f'COMP_LINE={line!r}; COMP_POINT=${{#COMP_LINE}}; _archon_console_complete; '
        'printf "%s\\n" "${COMPREPLY[@]}"'
    )
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "ARCHON_DB_PATH": str(db)}
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, env=env, check=True)
    return [w for w in done.stdout.splitlines() if w]


@pytest.mark.slow
def test_the_bash_script_completes_through_the_real_command(demo):
    assert _bash_complete("archon-console envs cl", demo) == ["claim"]
    # bash splits words at ':', so only the part after the last ':' is replaced
    assert "execution-profile:3" in _bash_complete("archon-console profiles show prj-atlas-api:", demo)


@pytest.mark.skipif(shutil.which("zsh") is None, reason="zsh is not installed")
def test_the_zsh_script_completes_through_the_real_command(demo):
    script = subprocess.run([f"{BIN}/archon-console", "completion", "zsh"], capture_output=True, text=True,
                            check=True).stdout
    # compadd and _files stubbed: what the function hands to zsh is printed instead
    probe = script + (
        '\ncompadd() { shift; print -l -- "$@"; }; _files() { print FILES; }\n'
        "words=(archon-console envs cl); CURRENT=3; _archon_console_complete\n"
        "words=(archon-console profiles show prj-atlas-api:); CURRENT=4; _archon_console_complete\n"
        'words=(archon-console --db ""); CURRENT=3; _archon_console_complete\n'
    )
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}", "ARCHON_DB_PATH": str(demo)}
    done = subprocess.run(["zsh", "-f", "-c", probe], capture_output=True, text=True, env=env,
                          stdin=subprocess.DEVNULL, check=True)
    lines = done.stdout.splitlines()
    assert lines[0] == "claim" and "prj-atlas-api:execution-profile:3" in lines and lines[-1] == "FILES"


def test_the_scripts_are_printed_for_eval(capsys):
    assert main(["completion", "bash"]) == 0
    assert "complete -o default -F _archon_console_complete archon-console" in capsys.readouterr().out
    assert main(["completion", "zsh"]) == 0
    assert "compdef _archon_console_complete archon-console" in capsys.readouterr().out


def test_nothing_of_completion_or_the_reference_is_imported_on_the_common_path(demo):
    probe = (
        "import sys; from console.cli.cli import main; "
        f"main(['approvals', 'list', '--db', {str(demo)!r}, '--limit', '1']); "
        "print(sorted(m for m in sys.modules if m in ('console.cli.completion', 'console.cli.reference', "
        "'console.cli.commands.completion', 'console.cli.commands.reference', 'console.cli.commands.envs', "
        "'console.db.migrations.registry')), file=sys.stderr)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stderr.strip().splitlines()[-1] == "[]"


def test_database_values_that_look_like_options_are_never_offered(demo, tmp_path):
    """Issue 17: an id starting with `-` was offered; the completed command line then carried an
    option the database chose (`--db=...`, `--as=...`, `-h`)."""
    from tests.approvals_helpers import add_project, add_request

    db = tmp_path / "dashes.db"
    shutil.copyfile(demo, db)
    conn = __import__("sqlite3").connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    for pid in ("--db=/tmp/evil.db", "-rf", "-"):
        add_project(conn, pid)
    add_request(conn, "--as=archon", "prj-atlas-api")
    add_request(conn, "-h", "prj-atlas-api")
    conn.execute("COMMIT")
    conn.close()
    for words in (["profiles", "list", ""], ["approvals", "list", "--project", ""], ["approvals", "approve", ""],
                  ["approvals", "show", ""], ["approvals", "list", "--project", "-"],
                  ["envs", "list", "--project", "--"]):
        offered = candidates(["--db", str(db), *words])
        assert not [c for c in offered if c.startswith("-")], (words, offered)
    assert "prj-atlas-api" in candidates(["--db", str(db), "profiles", "list", ""])
    assert "--json" in candidates(["--db", str(db), "approvals", "show", "--j"])  # options still complete


@pytest.fixture(scope="module")
def decided_first(demo, tmp_path_factory):
    """The demo's requests behind 250 denied ones whose ids sort first (`apr-0-…` < `apr-00…`): more
    than completion's LIMIT of decided ids before any pending one, as on a busy file."""
    import sqlite3

    from tests.approvals_helpers import add_request

    db = tmp_path_factory.mktemp("decided") / "decided-first.db"
    shutil.copyfile(demo, db)
    conn = sqlite3.connect(db, isolation_level=None)
    conn.execute("BEGIN IMMEDIATE")
    for n in range(250):
        add_request(conn, f"apr-0-{n:03d}", "prj-atlas-api")
    conn.execute("UPDATE approval_requests SET status = 'denied', decision_at = created_at WHERE id LIKE 'apr-0-%'")
    conn.execute("COMMIT")
    statuses = dict(conn.execute("SELECT id, status FROM approval_requests").fetchall())
    conn.close()
    return db, statuses


def test_a_decision_completes_only_the_requests_it_can_act_on(decided_first):
    """Issue 21, item 11: the first 200 ids of any status were offered, so with more decided ids
    sorted first no pending id was offered to approve or deny."""
    db, statuses = decided_first
    pending = sorted(i for i, s in statuses.items() if s == "pending")
    approved = sorted(i for i, s in statuses.items() if s == "approved")
    assert pending and approved and sum(1 for i in statuses if i < pending[0]) > 200
    for verb in ("approve", "deny"):
        assert candidates(["--db", str(db), "approvals", verb, ""]) == pending
        assert candidates(["--db", str(db), "approvals", verb, pending[0], ""]) == pending  # each further id too
    assert candidates(["--db", str(db), "approvals", "revoke", ""]) == approved
    prefix = pending[-1][:-1]
    assert candidates(["--db", str(db), "approvals", "approve", prefix]) == [i for i in pending if i.startswith(prefix)]
    assert candidates(["--db", str(db), "approvals", "approve", "apr-0-"]) == []  # all denied
    shown = candidates(["--db", str(db), "approvals", "show", ""])
    assert len(shown) == 200 and shown[0] == "apr-0-000"  # show takes any status
