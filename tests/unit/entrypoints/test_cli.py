"""The ``socialgraph`` command as installed: the console script reaches the CLI's ``main``."""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path

import pytest

from graph_service.api.callers import Caller, CallerTable
from graph_service.entrypoints import cli


@pytest.fixture(autouse=True)
def _session_logging_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` configures logging for a process; here it would point the session's logs at a
    captured stream that is closed after the test."""
    monkeypatch.setattr(cli, "configure_logging", lambda *args, **kwargs: None)


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


def test_token_prints_the_token_once_and_the_entry_that_admits_it(capsys: pytest.CaptureFixture[str]) -> None:
    """``socialgraph token feed --scopes read,write`` prints a token and a [[caller]] table that,
    appended to the callers file, admits that token with those scopes."""
    assert cli.main(["token", "feed", "--scopes", "read,write,read"]) == 0
    out = capsys.readouterr().out
    token = next(word for word in out.split() if word.startswith("sgt_"))
    assert out.count(token) == 1
    table = CallerTable.parse(out[out.index("[[caller]]") :])
    assert table.find(token) == Caller("feed", frozenset({"read", "write"}))


@pytest.mark.parametrize(
    "argv", [["token", "feed", "--scopes", "owner"], ["token", "feed", "--scopes", ""], ["token", 'a"b']]
)
def test_token_refuses_unknown_scopes_and_unquotable_names(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """A scope the server would refuse, or a name that would break the TOML, is a usage error (exit 2)."""
    assert cli.main(argv) == 2
    assert "sgt_" not in capsys.readouterr().out


@pytest.mark.parametrize(
    ("env", "message"),
    [
        ({}, "SG_AUTH_TOKENS_FILE"),
        ({"SG_AUTH_DISABLED": "true"}, "SG_PAGE_TOKEN_SECRET"),
    ],
)
def test_serve_refuses_to_start_insecurely_against_aws(
    env: dict[str, str], message: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """With no SG_DYNAMODB_ENDPOINT (AWS), ``serve`` exits 2 before it connects anywhere, naming the variable."""
    for name in ("SG_DYNAMODB_ENDPOINT", "SG_AUTH_TOKENS_FILE", "SG_PAGE_TOKEN_SECRET", "SG_AUTH_DISABLED"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SG_GRPC_ADDRESS", "127.0.0.1:0")
    assert cli.main(["serve"]) == 2
    assert message in capsys.readouterr().err


def test_serve_refuses_a_bad_callers_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A callers file that does not parse stops the start with exit 2 and the line at fault."""
    callers = tmp_path / "callers.toml"
    callers.write_text('[[caller]]\nname = "feed"\nscopes = ["root"]\ntoken_sha256 = "' + "0" * 64 + '"\n')
    monkeypatch.setenv("SG_DYNAMODB_ENDPOINT", "http://127.0.0.1:1")
    monkeypatch.setenv("SG_AUTH_TOKENS_FILE", str(callers))
    monkeypatch.setenv("SG_GRPC_ADDRESS", "127.0.0.1:0")
    assert cli.main(["serve"]) == 2
    err = capsys.readouterr().err
    assert "line 1" in err
    assert "'root'" in err
