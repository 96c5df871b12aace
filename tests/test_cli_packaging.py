"""A command family missing from the installation is a packaging error, not a smaller CLI."""

from __future__ import annotations

import pytest

from console.cli import parser as cli


def test_every_command_family_is_installed_and_registers():
    assert set(cli.COMMAND_OWNERS.values()) <= set(cli.COMMAND_MODULES)
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert set(cli.COMMAND_OWNERS) <= set(commands)


def test_a_missing_command_module_fails_loudly(monkeypatch):
    """It used to be skipped as "not built yet": the command then vanished from --help silently."""
    monkeypatch.setattr(cli, "COMMAND_MODULES", (*cli.COMMAND_MODULES, "console.cli.commands.not_installed"))
    with pytest.raises(ModuleNotFoundError, match="console.cli.commands.not_installed"):
        cli.build_parser()
    monkeypatch.setitem(cli.COMMAND_OWNERS, "approvals", "console.cli.commands.not_installed")
    with pytest.raises(ModuleNotFoundError, match="console.cli.commands.not_installed"):
        cli.build_parser(["approvals", "list"])
