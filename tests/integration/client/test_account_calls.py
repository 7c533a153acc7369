"""Both clients' account lifecycle methods and ``wait_for_account``, against an in-process gRPC server."""

from __future__ import annotations

import math
import threading
from collections import deque
from collections.abc import AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2
from google.protobuf.message import Message
from google.rpc import error_details_pb2, status_pb2
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph_client import (
    DOMAIN,
    AccountDeletedError,
    AccountState,
    AccountStatus,
    AsyncSocialGraphClient,
    DeadlineExceeded,
    Reason,
    SocialGraphClient,
    account_wait,
    aio,
    sync,
)

S = AccountState


def answer(state: AccountState, done: int = 0, total: int = 0) -> pb.GetAccountStateResponse:
    return pb.GetAccountStateResponse(
        state=pb.AccountState.Value(f"ACCOUNT_STATE_{state.name}"), edges_done=done, edges_total=total
    )


class Accounts(pb_grpc.SocialGraphServiceServicer):
    """Answers ``GetAccountState`` from a script (repeating its last answer once the script runs out),
    records every call with its metadata, and refuses a reactivation as a deleted account's."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """A new test's servicer (the server is shared by the module's tests)."""
        self.script: deque[pb.GetAccountStateResponse] = deque([answer(S.ACTIVE)])
        self.calls: list[tuple[str, Message, dict[str, str]]] = []
        self.hang = False
        """``GetAccountState`` answers nothing until the test ends (a server that does not answer)."""
        self.released = threading.Event()

    def _record(self, name: str, request: Message, context: grpc.ServicerContext) -> None:
        self.calls.append((name, request, {key: value for key, value in context.invocation_metadata()}))

    def DeactivateAccount(self, request: Any, context: Any) -> pb.DeactivateAccountResponse:
        self._record("DeactivateAccount", request, context)
        return pb.DeactivateAccountResponse()

    def ReactivateAccount(self, request: Any, context: Any) -> pb.ReactivateAccountResponse:
        self._record("ReactivateAccount", request, context)
        detail = any_pb2.Any()
        detail.Pack(error_details_pb2.ErrorInfo(reason="ACCOUNT_DELETED", domain=DOMAIN, metadata={"user_id": "7"}))
        status = status_pb2.Status(code=grpc.StatusCode.FAILED_PRECONDITION.value[0], message="deleted")
        status.details.append(detail)
        context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.abort(grpc.StatusCode.FAILED_PRECONDITION, "deleted")

    def DeleteAccount(self, request: Any, context: Any) -> pb.DeleteAccountResponse:
        self._record("DeleteAccount", request, context)
        return pb.DeleteAccountResponse()

    def GetAccountState(self, request: Any, context: Any) -> pb.GetAccountStateResponse:
        self._record("GetAccountState", request, context)
        if self.hang:
            self.released.wait()
        return self.script.popleft() if len(self.script) > 1 else self.script[0]

    def polls(self) -> int:
        return sum(1 for name, _, _ in self.calls if name == "GetAccountState")


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Accounts, str]]:
    """The servicer and its address: a blocking gRPC server on a free port, which both clients call."""
    servicer = Accounts()
    grpc_server = grpc.server(ThreadPoolExecutor(max_workers=4))
    pb_grpc.add_SocialGraphServiceServicer_to_server(servicer, grpc_server)
    port = grpc_server.add_insecure_port("127.0.0.1:0")
    grpc_server.start()
    try:
        yield servicer, f"127.0.0.1:{port}"
    finally:
        servicer.released.set()
        grpc_server.stop(None).wait()


@pytest.fixture
def accounts(server: tuple[Accounts, str]) -> Iterator[tuple[Accounts, str]]:
    """The shared server, its servicer reset for this test; a poll left hanging is let go after it."""
    servicer, _ = server
    servicer.reset()
    try:
        yield server
    finally:
        servicer.released.set()


@pytest.fixture(scope="module")
def shared_graph(server: tuple[Accounts, str]) -> Iterator[SocialGraphClient]:
    """One blocking client for the module (closing a blocking channel takes about 0.2 s)."""
    with SocialGraphClient.connect(server[1]) as client:
        yield client


@pytest.fixture
def graph(accounts: tuple[Accounts, str], shared_graph: SocialGraphClient) -> SocialGraphClient:
    return shared_graph


@pytest.fixture
async def async_graph(accounts: tuple[Accounts, str]) -> AsyncIterator[AsyncSocialGraphClient]:
    async with await AsyncSocialGraphClient.connect(accounts[1]) as client:
        yield client


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Each pause the clients take between polls, recorded instead of slept (the tests never wait)."""
    taken: list[float] = []

    async def no_wait(seconds: float) -> None:
        taken.append(seconds)

    monkeypatch.setattr(sync, "sleep", taken.append)
    monkeypatch.setattr(aio, "sleep", no_wait)
    return taken


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wait's clock moves 10 s at each reading, so its deadline passes after a known number of polls."""
    readings = iter(range(0, 10_000, 10))
    monkeypatch.setattr(account_wait, "time", SimpleNamespace(monotonic=lambda: float(next(readings))))


# AccountStatus


PROTO_STATES = [value for value in pb.AccountState.values() if value != pb.ACCOUNT_STATE_UNSPECIFIED]


@pytest.mark.parametrize("value", PROTO_STATES, ids=[pb.AccountState.Name(value) for value in PROTO_STATES])
def test_each_proto_state_is_read_as_the_member_of_its_name(value: int) -> None:
    status = AccountStatus.of(pb.GetAccountStateResponse(state=value, edges_done=3, edges_total=4))
    assert status == AccountStatus(AccountState[pb.AccountState.Name(value).removeprefix("ACCOUNT_STATE_")], 3, 4)


def test_every_member_stands_for_a_proto_state() -> None:
    """The six members and the six states the server sends are the same set, both ways."""
    read = {AccountStatus.of(pb.GetAccountStateResponse(state=value)).state for value in PROTO_STATES}
    assert read == set(AccountState)
    assert len(PROTO_STATES) == len(AccountState) == 6


@pytest.mark.parametrize("value", [pb.ACCOUNT_STATE_UNSPECIFIED, 99], ids=["unspecified", "unknown"])
def test_a_state_the_client_does_not_know_is_refused_not_guessed(value: int) -> None:
    with pytest.raises(ValueError, match=f"unknown account state {value}"):
        AccountStatus.of(pb.GetAccountStateResponse(state=value))


@pytest.mark.parametrize("state", list(AccountState))
def test_a_job_runs_in_the_ing_states_only(state: AccountState) -> None:
    assert AccountStatus(state, 0, 0).job_running is state.name.endswith("ING")


def test_fraction_is_done_over_total_and_complete_when_there_is_nothing_to_move() -> None:
    assert AccountStatus(S.DEACTIVATING, 25, 100).fraction == 0.25
    assert AccountStatus(S.DEACTIVATED, 100, 100).fraction == 1.0
    assert AccountStatus(S.DEACTIVATING, 0, 0).fraction == 1.0


def test_an_account_status_is_frozen() -> None:
    status = AccountStatus(S.ACTIVE, 0, 0)
    with pytest.raises(AttributeError):
        status.edges_done = 1


# The RPCs


def test_the_lifecycle_writes_send_the_user_and_return_none(
    accounts: tuple[Accounts, str], graph: SocialGraphClient
) -> None:
    servicer, _ = accounts
    assert graph.deactivate_account(7) is None
    assert graph.delete_account(8, metadata={"x-tenant": "ops"}) is None
    assert [(name, request) for name, request, _ in servicer.calls] == [
        ("DeactivateAccount", pb.DeactivateAccountRequest(user_id=7)),
        ("DeleteAccount", pb.DeleteAccountRequest(user_id=8)),
    ]
    assert servicer.calls[1][2]["x-tenant"] == "ops"


async def test_the_async_client_sends_the_same_requests(
    accounts: tuple[Accounts, str], async_graph: AsyncSocialGraphClient
) -> None:
    servicer, _ = accounts
    servicer.script = deque([answer(S.DELETING, 5, 9)])
    assert await async_graph.deactivate_account(7) is None
    assert await async_graph.delete_account(7) is None
    assert await async_graph.get_account_state(7) == AccountStatus(S.DELETING, 5, 9)
    assert [(name, request) for name, request, _ in servicer.calls] == [
        ("DeactivateAccount", pb.DeactivateAccountRequest(user_id=7)),
        ("DeleteAccount", pb.DeleteAccountRequest(user_id=7)),
        ("GetAccountState", pb.GetAccountStateRequest(user_id=7)),
    ]


def test_get_account_state_returns_the_status(accounts: tuple[Accounts, str], graph: SocialGraphClient) -> None:
    accounts[0].script = deque([answer(S.DEACTIVATING, 40, 100)])
    status = graph.get_account_state(7)
    assert status == AccountStatus(S.DEACTIVATING, 40, 100)
    assert (status.job_running, status.fraction) == (True, 0.4)


def test_reactivating_a_deleted_account_raises_account_deleted_error(
    accounts: tuple[Accounts, str], graph: SocialGraphClient
) -> None:
    with pytest.raises(AccountDeletedError) as refused:
        graph.reactivate_account(7)
    assert (refused.value.reason, refused.value.metadata) == (Reason.ACCOUNT_DELETED, {"user_id": "7"})
    assert accounts[0].calls[0][:2] == ("ReactivateAccount", pb.ReactivateAccountRequest(user_id=7))


async def test_the_async_client_raises_the_same_error(async_graph: AsyncSocialGraphClient) -> None:
    with pytest.raises(AccountDeletedError):
        await async_graph.reactivate_account(7)


# wait_for_account

JOBS = [
    (S.DEACTIVATING, S.DEACTIVATED),
    (S.REACTIVATING, S.ACTIVE),
    (S.DELETING, S.DELETED),
]


def job(running: AccountState, end: AccountState) -> list[pb.GetAccountStateResponse]:
    """A job that finds more edges while it moves them, then ends."""
    return [answer(running, 0, 50), answer(running, 40, 100), answer(running, 90, 120), answer(end, 120, 120)]


def expected(running: AccountState, end: AccountState) -> list[AccountStatus]:
    return [
        AccountStatus(running, 0, 50),
        AccountStatus(running, 40, 100),
        AccountStatus(running, 90, 120),
        AccountStatus(end, 120, 120),
    ]


@pytest.mark.parametrize(("running", "end"), JOBS, ids=[running.value for running, _ in JOBS])
def test_wait_polls_until_the_job_ends_and_reports_each_status(
    accounts: tuple[Accounts, str],
    graph: SocialGraphClient,
    pauses: list[float],
    running: AccountState,
    end: AccountState,
) -> None:
    servicer, _ = accounts
    servicer.script = deque(job(running, end))
    seen: list[AccountStatus] = []
    final = graph.wait_for_account(7, poll_interval=0.25, progress=seen.append, metadata={"x-tenant": "ops"})
    assert final == AccountStatus(end, 120, 120)
    assert not final.job_running
    assert seen == expected(running, end)  # the last status too
    assert pauses == [0.25, 0.25, 0.25]  # between polls, none after the last
    assert [(request, metadata["x-tenant"]) for _, request, metadata in servicer.calls] == [
        (pb.GetAccountStateRequest(user_id=7), "ops")
    ] * 4


@pytest.mark.parametrize(("running", "end"), JOBS, ids=[running.value for running, _ in JOBS])
async def test_the_async_wait_polls_the_same_way(
    accounts: tuple[Accounts, str],
    async_graph: AsyncSocialGraphClient,
    pauses: list[float],
    running: AccountState,
    end: AccountState,
) -> None:
    accounts[0].script = deque(job(running, end))
    seen: list[AccountStatus] = []
    final = await async_graph.wait_for_account(7, poll_interval=0.25, progress=seen.append)
    assert final == AccountStatus(end, 120, 120)
    assert seen == expected(running, end)
    assert pauses == [0.25, 0.25, 0.25]


@pytest.mark.parametrize("state", [S.ACTIVE, S.DEACTIVATED, S.DELETED])
def test_wait_returns_after_one_poll_when_no_job_runs(
    accounts: tuple[Accounts, str], graph: SocialGraphClient, pauses: list[float], state: AccountState
) -> None:
    accounts[0].script = deque([answer(state)])
    assert graph.wait_for_account(7) == AccountStatus(state, 0, 0)
    assert (accounts[0].polls(), pauses) == (1, [])


def test_wait_without_progress_just_returns_the_final_status(
    accounts: tuple[Accounts, str], graph: SocialGraphClient, pauses: list[float]
) -> None:
    accounts[0].script = deque(job(S.DELETING, S.DELETED))
    assert graph.wait_for_account(7, poll_interval=0) == AccountStatus(S.DELETED, 120, 120)
    assert pauses == [0, 0, 0]


@pytest.mark.usefixtures("clock")
def test_wait_gives_up_at_its_timeout_naming_the_last_state(
    accounts: tuple[Accounts, str], graph: SocialGraphClient, pauses: list[float]
) -> None:
    """Clock readings: 0 at the start (deadline 35), 10 before the first poll, 20 at the first pause,
    30 before the second poll, 40 at the second pause: past the deadline."""
    accounts[0].script = deque([answer(S.DEACTIVATING, 3, 10)])  # a job that never ends
    seen: list[AccountStatus] = []
    with pytest.raises(DeadlineExceeded) as gave_up:
        graph.wait_for_account(7, timeout=35, poll_interval=2.0, progress=seen.append)
    assert seen == [AccountStatus(S.DEACTIVATING, 3, 10)] * 2
    assert pauses == [2.0]  # the second pause found the deadline passed
    assert gave_up.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
    assert str(gave_up.value) == (
        "DEADLINE_EXCEEDED: wait_for_account(7) gave up after 35 s: still DEACTIVATING (3 of 10 edges done)"
    )


@pytest.mark.usefixtures("clock")
async def test_the_async_wait_gives_up_the_same_way(
    accounts: tuple[Accounts, str], async_graph: AsyncSocialGraphClient, pauses: list[float]
) -> None:
    accounts[0].script = deque([answer(S.DELETING, 3, 10)])
    seen: list[AccountStatus] = []
    with pytest.raises(DeadlineExceeded, match=r"gave up after 35 s: still DELETING \(3 of 10 edges done\)"):
        await async_graph.wait_for_account(7, timeout=35, poll_interval=2.0, progress=seen.append)
    assert (len(seen), pauses) == (2, [2.0])


def test_a_pause_never_runs_past_the_deadline(
    clock: None, accounts: tuple[Accounts, str], graph: SocialGraphClient, pauses: list[float]
) -> None:
    """Readings: 0 (deadline 55), 10 (poll), 20 (pause: 35 s left, capped to them), 30 (poll), 40 (pause:
    15 s left), 50 (poll: 5 s left, and the job has ended)."""
    accounts[0].script = deque([answer(S.REACTIVATING), answer(S.REACTIVATING), answer(S.ACTIVE)])
    assert graph.wait_for_account(7, timeout=55, poll_interval=60.0).state is S.ACTIVE
    assert pauses == [35.0, 15.0]


def test_a_poll_the_server_does_not_answer_ends_at_the_waits_deadline(
    accounts: tuple[Accounts, str], graph: SocialGraphClient
) -> None:
    """Each poll's deadline is what is left of the wait, so a hung server cannot hold it longer."""
    accounts[0].hang = True
    with pytest.raises(DeadlineExceeded, match=r"gave up after 0\.2 s: no answer to GetAccountState") as gave_up:
        graph.wait_for_account(7, timeout=0.2)
    assert isinstance(gave_up.value.__cause__, DeadlineExceeded)  # the poll's own, kept as the cause


async def test_an_async_poll_the_server_does_not_answer_ends_the_same_way(
    accounts: tuple[Accounts, str], async_graph: AsyncSocialGraphClient
) -> None:
    accounts[0].hang = True
    with pytest.raises(DeadlineExceeded, match="no answer to GetAccountState"):
        await async_graph.wait_for_account(7, timeout=0.2)


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"timeout": 0}, "timeout"),
        ({"timeout": -1.0}, "timeout"),
        ({"timeout": math.nan}, "timeout"),
        ({"poll_interval": -0.5}, "poll_interval"),
        ({"poll_interval": math.inf}, "poll_interval"),
    ],
)
def test_a_wait_with_a_bad_timeout_or_interval_is_refused_before_any_poll(
    accounts: tuple[Accounts, str], graph: SocialGraphClient, arguments: dict[str, float], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        graph.wait_for_account(7, **arguments)
    assert accounts[0].calls == []
