"""``socialgraph reconcile``'s usage errors: exit 2 with one line, before anything is contacted."""

from __future__ import annotations

import pytest

from graph_service.entrypoints import cli


@pytest.fixture(autouse=True)
def _session_logging_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    """``main`` configures logging for a process; here it would point the session's logs at a
    captured stream that is closed after the test."""
    monkeypatch.setattr(cli, "configure_logging", lambda *args, **kwargs: None)
    # nothing may be contacted: an endpoint that refuses at once would show as exit 3, not 2
    monkeypatch.setenv("SG_DYNAMODB_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("SG_REDIS_URL", "redis://127.0.0.1:9/0")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "give USER_IDs or --all (not both)"),
        (["--fix"], "give USER_IDs or --all (not both)"),
        (["7", "--all"], "give USER_IDs or --all (not both)"),
        (["abc"], "not a user ID: 'abc' (an integer from 1 to 2**64-1)"),
        (["5", "0"], "not a user ID: '0' (an integer from 1 to 2**64-1)"),
        (["-4"], "not a user ID: '-4' (an integer from 1 to 2**64-1)"),
        (["18446744073709551616"], "not a user ID: '18446744073709551616' (an integer from 1 to 2**64-1)"),
        (["--all", "--segments", "0"], "--segments must be between 1 and 1000000"),
        (["--all", "--settle-seconds", "-1"], "--settle-seconds must be between 0 and 3600"),
    ],
)
def test_usage_errors_exit_2_with_one_line(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["reconcile", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.err == f"socialgraph reconcile: {message}\n"
    assert captured.out == ""


def test_the_help_names_the_options_and_the_variables_read(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as ended:
        cli.main(["reconcile", "--help"])
    assert ended.value.code == 0
    shown = capsys.readouterr().out
    for word in ("USER_ID", "--all", "--fix", "--segments", "--settle-seconds", "SG_DYNAMODB_ENDPOINT", "SG_REDIS_URL"):
        assert word in shown
