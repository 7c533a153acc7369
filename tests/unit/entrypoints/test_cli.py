"""The ``socialgraph`` command as installed: the console script reaches the CLI's ``main``."""

from __future__ import annotations

from importlib.metadata import entry_points

import pytest

from graph_service.entrypoints import cli


def test_the_installed_console_script_runs_the_cli() -> None:
    (script,) = entry_points(group="console_scripts", name="socialgraph")
    assert script.load() is cli.main


def test_every_subcommand_is_listed_in_the_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["--help"])
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    for command in cli.COMMANDS:
        assert command in shown
