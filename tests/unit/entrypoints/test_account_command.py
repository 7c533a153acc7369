"""``socialgraph account``: its arguments, the address it calls, and what it prints and returns for
each answer of the service (a fake client in place of ``SocialGraphClient``)."""

from __future__ import annotations

import argparse
import io
from collections.abc import Callable
from dataclasses import dataclass, field

import grpc
import pytest
from socialgraph_client import (
    AccountDeletedError,
    AccountState,
    AccountStatus,
    ConnectError,
    DeadlineExceeded,
    PermissionDenied,
    Reason,
    SocialGraphError,
    Unauthenticated,
    Unavailable,
)

from graph_service.entrypoints import account, cli
from graph_service.settings import Settings
from tests.support.logs import capture_every_level

USER = 42


def status(state: AccountState, done: int = 0, total: int = 0) -> AccountStatus:
    return AccountStatus(state, done, total)


@dataclass
class FakeClient:
    """Answers as the service would: ``polls`` are the statuses the wait sees (the last one is where
    it ends); ``refuse`` is raised by the change, ``wait_error`` by the wait after its polls."""

    polls: list[AccountStatus] = field(default_factory=lambda: [status(AccountState.DEACTIVATED, 3, 3)])
    refuse: SocialGraphError | None = None
    wait_error: BaseException | None = None
    calls: list[tuple[object, ...]] = field(default_factory=list)
    closed: bool = False

    def _change(self, name: str, user_id: int) -> None:
        self.calls.append((name, user_id))
        if self.refuse is not None:
            raise self.refuse

    def deactivate_account(self, user_id: int) -> None:
        self._change("deactivate", user_id)

    def reactivate_account(self, user_id: int) -> None:
        self._change("reactivate", user_id)

    def delete_account(self, user_id: int) -> None:
        self._change("delete", user_id)

    def get_account_state(self, user_id: int) -> AccountStatus:
        self.calls.append(("status", user_id))
        if self.refuse is not None:
            raise self.refuse
        return self.polls[-1]

    def wait_for_account(
        self,
        user_id: int,
        *,
        timeout: float | None,
        poll_interval: float,
        progress: Callable[[AccountStatus], object] | None,
    ) -> AccountStatus:
        self.calls.append(("wait", user_id, timeout, poll_interval))
        for polled in self.polls:
            if progress is not None:
                progress(polled)
        if self.wait_error is not None:
            raise self.wait_error
        return self.polls[-1]

    def close(self) -> None:
        self.closed = True


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def parse(*argv: str) -> argparse.Namespace:
    given = ["account", *argv]
    return cli.build_parser(given).parse_args(given)


@dataclass
class Outcome:
    code: int
    out: str
    err: str
    progress: str
    addresses: list[str]


def run_with(
    client: FakeClient,
    *argv: str,
    capsys: pytest.CaptureFixture[str],
    settings: Settings | None = None,
    stream: io.StringIO | None = None,
) -> Outcome:
    addresses: list[str] = []

    def connect(address: str, given: Settings) -> FakeClient:
        addresses.append(address)
        return client

    shown = io.StringIO() if stream is None else stream
    code = account.run(settings or Settings(), parse(*argv), connect=connect, stream=shown)
    captured = capsys.readouterr()
    return Outcome(code, captured.out, captured.err, shown.getvalue(), addresses)


def refused(kind: type[SocialGraphError], code: grpc.StatusCode, message: str, reason: str = "") -> SocialGraphError:
    return kind(code, message, reason=reason)


# Arguments and address


def test_arguments_parse_with_their_defaults() -> None:
    """ACTION and USER_ID are required; no --address, a wait without limit unless told otherwise."""
    args = parse("deactivate", "42")
    assert (args.action, args.user_id, args.address, args.no_wait, args.timeout) == (
        "deactivate",
        42,
        None,
        False,
        None,
    )
    args = parse("delete", "18446744073709551615", "--address", "sg.internal:6000", "--no-wait", "--timeout", "2.5")
    assert (args.action, args.user_id, args.address, args.no_wait, args.timeout) == (
        "delete",
        2**64 - 1,
        "sg.internal:6000",
        True,
        2.5,
    )


@pytest.mark.parametrize(
    "argv",
    [
        ["frob", "1"],
        ["status"],
        ["status", "0"],
        ["status", "-1"],
        ["status", "x"],
        ["status", str(2**64)],
        ["status", "1", "--address", "nope"],
        ["status", "1", "--address", ":50051"],
        ["status", "1", "--address", "host:0"],
        ["status", "1", "--address", "host:70000"],
        ["deactivate", "1", "--timeout", "0"],
        ["deactivate", "1", "--timeout", "-3"],
        ["deactivate", "1", "--timeout", "nan"],
        ["deactivate", "1", "--timeout", "inf"],
        ["deactivate", "1", "--timeout", "soon"],
    ],
)
def test_bad_arguments_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """An unknown action, a user ID outside 1..2**64-1, an address that is not HOST:PORT or a timeout
    that is not a positive number: exit 2 with the usage."""
    with pytest.raises(SystemExit) as ended:
        parse(*argv)
    assert ended.value.code == 2
    assert "usage: socialgraph account" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("listen", "call"),
    [
        ("[::]:50051", "127.0.0.1:50051"),
        ("0.0.0.0:6000", "127.0.0.1:6000"),
        ("127.0.0.1:7000", "127.0.0.1:7000"),
        ("[::1]:50051", "[::1]:50051"),
        ("sg.internal:50051", "sg.internal:50051"),
    ],
)
def test_default_address_is_where_the_service_listens(listen: str, call: str) -> None:
    """A wildcard listen host is this machine; any other host is called as it is."""
    assert account.default_address(listen) == call


def test_the_command_calls_sg_grpc_address_unless_given_one(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --address the client connects to SG_GRPC_ADDRESS (wildcard host replaced); --address wins."""
    settings = Settings(grpc_address="0.0.0.0:6000")
    assert run_with(FakeClient(), "status", "42", capsys=capsys, settings=settings).addresses == ["127.0.0.1:6000"]
    given = run_with(FakeClient(), "status", "42", "--address", "sg.internal:7000", capsys=capsys, settings=settings)
    assert given.addresses == ["sg.internal:7000"]


def test_a_listen_port_of_0_needs_an_address(capsys: pytest.CaptureFixture[str]) -> None:
    """SG_GRPC_ADDRESS with port 0 says nothing about where the service is: exit 2, nothing called."""
    done = run_with(FakeClient(), "status", "42", capsys=capsys, settings=Settings(grpc_address="127.0.0.1:0"))
    assert (done.code, done.addresses) == (2, [])
    assert "give --address HOST:PORT" in done.err


# Changes and the wait


@pytest.mark.parametrize(
    ("action", "final", "line"),
    [
        ("deactivate", status(AccountState.DEACTIVATED, 1234, 1234), "account 42: DEACTIVATED (1,234 edges moved)"),
        ("reactivate", status(AccountState.ACTIVE, 1, 1), "account 42: ACTIVE (1 edge moved)"),
        ("delete", status(AccountState.DELETED, 0, 0), "account 42: DELETED (0 edges moved)"),
    ],
)
def test_a_change_waits_for_its_job_and_prints_where_it_ended(
    action: str, final: AccountStatus, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """The change, then the wait (no limit, polling), then one line on stdout; exit 0; client closed."""
    client = FakeClient(polls=[status(AccountState.DEACTIVATING, 0, 0), final])
    done = run_with(client, action, "42", capsys=capsys)
    assert (done.code, done.out, done.err) == (0, line + "\n", "")
    assert client.calls == [(action, USER), ("wait", USER, None, account.POLL_SECONDS)]
    assert client.closed


def test_timeout_is_passed_to_the_wait(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient()
    assert run_with(client, "deactivate", "42", "--timeout", "30", capsys=capsys).code == 0
    assert client.calls[-1] == ("wait", USER, 30.0, account.POLL_SECONDS)


def test_no_wait_returns_after_the_call(capsys: pytest.CaptureFixture[str]) -> None:
    """--no-wait makes the change and returns (no poll, so no read scope needed)."""
    client = FakeClient()
    done = run_with(client, "deactivate", "42", "--no-wait", capsys=capsys)
    assert done.code == 0
    assert client.calls == [("deactivate", USER)]
    assert done.out == "account 42: deactivate accepted; `socialgraph account status 42` shows its job\n"


def test_a_change_overtaken_by_a_later_one_is_exit_1(capsys: pytest.CaptureFixture[str]) -> None:
    """A deactivation whose job ends ACTIVE (someone reactivated meanwhile): the line, and exit 1 saying so."""
    done = run_with(FakeClient(polls=[status(AccountState.ACTIVE, 5, 5)]), "deactivate", "42", capsys=capsys)
    assert done.code == 1
    assert done.out == "account 42: ACTIVE (5 edges moved)\n"
    assert "ended ACTIVE, not DEACTIVATED" in done.err


def test_the_wait_timing_out_is_exit_1_saying_where_the_job_was(capsys: pytest.CaptureFixture[str]) -> None:
    expired = DeadlineExceeded(grpc.StatusCode.DEADLINE_EXCEEDED, "wait_for_account(42) gave up after 5 s")
    client = FakeClient(polls=[status(AccountState.DEACTIVATING, 10, 100)], wait_error=expired)
    done = run_with(client, "deactivate", "42", "--timeout", "5", capsys=capsys)
    assert (done.code, done.out) == (1, "")
    assert "account 42: still waiting after 5 s, at DEACTIVATING (10 of 100 edges moved)" in done.err
    assert "the job goes on in the service" in done.err
    assert done.err.count("\n") == 1
    assert client.closed


def test_a_poll_unanswered_in_time_without_timeout_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    """Without --timeout a DeadlineExceeded is one poll's read deadline: the service did not answer."""
    slow = DeadlineExceeded(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded")
    done = run_with(FakeClient(wait_error=slow), "deactivate", "42", capsys=capsys)
    assert done.code == 3
    assert "is unreachable: Deadline Exceeded (the deactivate was accepted" in done.err


def test_ctrl_c_in_the_wait_leaves_the_job_running(capsys: pytest.CaptureFixture[str]) -> None:
    client = FakeClient(polls=[status(AccountState.DELETING, 7, 9)], wait_error=KeyboardInterrupt())
    done = run_with(client, "delete", "42", capsys=capsys)
    assert done.code == 130
    assert "account 42: interrupted, at DELETING (7 of 9 edges moved); the job goes on in the service" in done.err
    assert client.closed


# Status


@pytest.mark.parametrize(
    ("current", "line"),
    [
        (status(AccountState.ACTIVE), "account 42: ACTIVE"),
        (status(AccountState.DEACTIVATING, 1234, 5000), "account 42: DEACTIVATING (1,234 of 5,000 edges moved)"),
        (status(AccountState.DEACTIVATED, 3, 3), "account 42: DEACTIVATED (3 edges moved)"),
        (status(AccountState.DELETED), "account 42: DELETED (0 edges moved)"),
    ],
)
def test_status_prints_the_state_and_during_a_job_its_progress(
    current: AccountStatus, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    client = FakeClient(polls=[current])
    done = run_with(client, "status", "42", capsys=capsys)
    assert (done.code, done.out, done.err) == (0, line + "\n", "")
    assert client.calls == [("status", USER)]


# Refusals


def test_no_token_is_a_configuration_error_naming_sg_caller_token(capsys: pytest.CaptureFixture[str]) -> None:
    error = refused(Unauthenticated, grpc.StatusCode.UNAUTHENTICATED, "no bearer token", Reason.UNAUTHENTICATED)
    done = run_with(FakeClient(refuse=error), "deactivate", "42", capsys=capsys)
    assert done.code == 2
    assert "no token was sent; set SG_CALLER_TOKEN to the token of a caller with the admin scope" in done.err
    assert done.err.count("\n") == 1


def test_an_unknown_token_is_a_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    error = refused(Unauthenticated, grpc.StatusCode.UNAUTHENTICATED, "unknown token", Reason.UNAUTHENTICATED)
    settings = Settings(caller_token="sgt_stale")
    done = run_with(FakeClient(refuse=error), "reactivate", "42", capsys=capsys, settings=settings)
    assert done.code == 2
    assert "SG_CALLER_TOKEN is not a token the service knows" in done.err
    assert "sgt_stale" not in done.err


def test_a_missing_scope_is_a_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    message = "caller 'feed' lacks the 'admin' scope that DeactivateAccount needs"
    error = refused(PermissionDenied, grpc.StatusCode.PERMISSION_DENIED, message, Reason.MISSING_SCOPE)
    done = run_with(FakeClient(refuse=error), "deactivate", "42", capsys=capsys, settings=Settings(caller_token="t"))
    assert done.code == 2
    assert message in done.err
    assert "set SG_CALLER_TOKEN to the token of a caller with the admin scope" in done.err


def test_a_missing_read_scope_while_waiting_says_the_change_was_made(capsys: pytest.CaptureFixture[str]) -> None:
    """An admin-only caller makes the change, then cannot poll: exit 2, and the line says the job runs on."""
    message = "caller 'ops' lacks the 'read' scope that GetAccountState needs"
    error = refused(PermissionDenied, grpc.StatusCode.PERMISSION_DENIED, message, Reason.MISSING_SCOPE)
    done = run_with(FakeClient(polls=[], wait_error=error), "deactivate", "42", capsys=capsys)
    assert done.code == 2
    assert message in done.err
    assert "(the deactivate was accepted; its job goes on in the service)" in done.err


@pytest.mark.parametrize("action", ["reactivate", "deactivate"])
def test_a_deleted_account_is_exit_1(action: str, capsys: pytest.CaptureFixture[str]) -> None:
    error = refused(
        AccountDeletedError, grpc.StatusCode.FAILED_PRECONDITION, "account 42 is deleted", Reason.ACCOUNT_DELETED
    )
    client = FakeClient(refuse=error)
    done = run_with(client, action, "42", capsys=capsys)
    assert done.code == 1
    assert f"account 42 is deleted, for good: it cannot be {action}d (ACCOUNT_DELETED)" in done.err
    assert [call[0] for call in client.calls] == [action]


def test_an_unreachable_service_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    def connect(address: str, settings: Settings) -> FakeClient:
        raise ConnectError(grpc.StatusCode.UNAVAILABLE, f"no server ready at {address} within 5.0 s")

    code = account.run(Settings(), parse("status", "42"), connect=connect, stream=io.StringIO())
    err = capsys.readouterr().err
    assert code == 3
    assert "the service at 127.0.0.1:50051 is unreachable: no server ready at 127.0.0.1:50051" in err
    assert "(TLS: set SG_CALLER_CA_FILE)" in err


def test_the_service_going_away_during_the_wait_is_exit_3(capsys: pytest.CaptureFixture[str]) -> None:
    gone = Unavailable(grpc.StatusCode.UNAVAILABLE, "connection refused")
    done = run_with(FakeClient(wait_error=gone), "delete", "42", capsys=capsys)
    assert done.code == 3
    assert "unreachable: connection refused (the delete was accepted; its job goes on in the service)" in done.err


def test_an_unreadable_ca_file_is_a_configuration_error(capsys: pytest.CaptureFixture[str]) -> None:
    """The real connect reads SG_CALLER_CA_FILE before it opens a channel: exit 2, no network needed."""
    code = account.run(Settings(caller_ca_file="/nonexistent/ca.pem"), parse("status", "42"), stream=io.StringIO())
    assert code == 2
    assert "cannot read SG_CALLER_CA_FILE" in capsys.readouterr().err


# Progress


def test_progress_off_a_terminal_is_a_log_line_at_the_first_status_and_every_few_seconds() -> None:
    with capture_every_level() as logs, account.JobView(USER, stream=io.StringIO(), every_seconds=3600) as view:
        view(status(AccountState.DEACTIVATING, 0, 10))
        view(status(AccountState.DEACTIVATING, 5, 10))
    assert [(e["event"], e["state"], e["edges_done"], e["edges_total"]) for e in logs] == [
        ("account_progress", "DEACTIVATING", 0, 10)
    ]
    with capture_every_level() as logs, account.JobView(USER, stream=io.StringIO(), every_seconds=0) as view:
        view(status(AccountState.DEACTIVATING, 0, 10))
        view(status(AccountState.DEACTIVATED, 10, 10))
    assert [(e["state"], e["edges_done"], e["user_id"]) for e in logs] == [
        ("DEACTIVATING", 0, 42),
        ("DEACTIVATED", 10, 42),
    ]
    assert {"edges_per_second", "elapsed_seconds"} <= set(logs[-1])
    assert view.last == status(AccountState.DEACTIVATED, 10, 10)


def test_progress_on_a_terminal_is_a_bar_with_the_state_and_edges(capsys: pytest.CaptureFixture[str]) -> None:
    terminal = Terminal()
    client = FakeClient(
        polls=[status(AccountState.DEACTIVATING, 500, 1000), status(AccountState.DEACTIVATED, 1000, 1000)]
    )
    with capture_every_level() as logs:
        done = run_with(client, "deactivate", "42", capsys=capsys, stream=terminal)
    assert done.code == 0
    assert "account 42 DEACTIVATED" in done.progress
    assert "1,000 of 1,000 edges" in done.progress
    assert logs == []  # the bar, not log lines


# Settings


def test_the_caller_token_never_shows_in_the_settings_repr() -> None:
    assert "sgt_secret" not in repr(Settings(caller_token="sgt_secret"))
    settings = Settings.from_env({"SG_CALLER_TOKEN": "sgt_secret", "SG_CALLER_CA_FILE": "ca.pem"})
    assert (settings.caller_token, settings.caller_ca_file) == ("sgt_secret", "ca.pem")
