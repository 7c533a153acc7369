"""The Python client against a real server: both clients alike over every RPC, retries through a
restart, deadlines, metadata, each error class, paging by token, and the wheel at its lowest and newest versions
(and with protobuf 6), warnings as errors."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import sys
from dataclasses import replace
from datetime import timedelta
from importlib.metadata import version
from pathlib import Path
from typing import Any

import grpc
import pytest
from packaging.requirements import Requirement
from socialgraph_client import (
    AsyncSocialGraphClient,
    ConnectError,
    DeadlineExceeded,
    Deadlines,
    FailedPrecondition,
    FollowState,
    InvalidArgument,
    NotFound,
    Page,
    Reason,
    ResourceExhausted,
    RetryPolicy,
    SocialGraphClient,
    SocialGraphError,
    Unavailable,
)
from socialgraph_devstack.processes import free_port

from graph_service.domain.tweet_ids import created_at_us
from graph_service.entrypoints.fanout import build_fanout
from graph_service.entrypoints.server import ServerRuntime
from graph_service.events.kinds import TweetPosted
from graph_service.settings import Settings
from tests.support.client_package import build_client, wheel_metadata
from tests.support.logs import capture_every_level
from tests.support.polling import eventually
from tests.support.runtimes import running_server
from tests.support.timeline_calls import post, tweet_store


def target(server: ServerRuntime) -> str:
    return f"127.0.0.1:{server.port}"


# Both clients, one scenario: every RPC and every iterator, a refusal, on users of the client's own.


def scenario(u: int) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """Steps ``(method, args, kwargs)`` over users ``u+1 .. u+5``."""
    a, b, c, d, e = (u + i for i in range(1, 6))
    return [
        ("set_privacy", (a, True), {}),
        ("follow", (b, a), {}),
        ("follow", (c, a), {}),
        ("list_follow_requests", (a,), {"page_size": 1}),
        ("iter_follow_requests", (a,), {"page_size": 1}),
        ("accept_follow_request", (a, b), {}),
        ("reject_follow_request", (a, c), {}),
        ("accept_follow_request", (a, c), {}),  # NotFound: rejected
        ("follow", (a, b), {}),
        ("follow", (b, d), {}),
        ("follow", (d, e), {}),
        ("is_following", (a, b), {}),
        ("list_followers", (b,), {}),
        ("iter_followers", (a,), {"page_size": 1}),
        ("list_following", (b,), {"page_size": 1}),
        ("iter_following", (b,), {}),
        ("get_counts", (b,), {}),
        ("batch_get_counts", ([a, b],), {}),
        ("get_relationships", (a, [b, c]), {}),
        ("list_mutual_follows", (a,), {}),
        ("iter_mutual_follows", (a,), {}),
        ("list_known_followers", (a, a), {}),
        ("iter_known_followers", (a, a), {}),
        ("suggest_follows", (a,), {"limit": 5}),
        ("get_home_timeline", (a,), {}),
        ("iter_home_timeline", (a,), {}),
        ("block", (a, b), {}),
        ("follow", (b, a), {}),  # FailedPrecondition: blocked
        ("get_relationships", (a, [b]), {}),
        ("unblock", (a, b), {}),
        ("follow", (a, b), {}),
        ("remove_follower", (b, a), {}),
        ("unfollow", (b, d), {}),
        ("is_following", (a, b), {}),
        ("follow", (a, a), {}),  # InvalidArgument: self-follow
        ("mute", (a, b), {"duration": timedelta(hours=1), "notifications": True}),
        ("mute", (a, c), {}),
        ("get_relationships", (a, [b, c, d]), {}),
        ("list_mutes", (a,), {"page_size": 1}),
        ("iter_mutes", (a,), {"page_size": 1}),
        ("unmute", (a, c), {}),
        ("mute", (a, d), {"duration": timedelta(seconds=-5)}),  # InvalidArgument: negative duration
        ("list_mutes", (a,), {}),
    ]


def relative(value: Any, u: int) -> Any:
    """A result with user IDs made relative to ``u`` and times dropped, to compare two runs."""
    if isinstance(value, SocialGraphError):
        return (type(value).__name__, value.reason)
    if isinstance(value, Page):
        return ("page", relative(value.items, u), bool(value.next_page_token))
    if isinstance(value, list | tuple):
        return [relative(item, u) for item in value]
    if isinstance(value, FollowState | bool) or value is None:
        return value
    if isinstance(value, int):
        return value - u
    fields = getattr(value, "__dataclass_fields__", None)
    assert fields is not None, value
    return {
        name: relative(getattr(value, name), u) if name.endswith("id") else getattr(value, name)
        for name in fields
        if not name.endswith("_at")
    }


def run_sync(client: SocialGraphClient, u: int) -> list[Any]:
    results: list[Any] = []
    for name, args, kwargs in scenario(u):
        try:
            value = getattr(client, name)(*args, **kwargs)
            results.append(list(value) if name.startswith("iter_") else value)
        except SocialGraphError as error:
            results.append(error)
    return [relative(value, u) for value in results]


async def run_async(client: AsyncSocialGraphClient, u: int) -> list[Any]:
    results: list[Any] = []
    for name, args, kwargs in scenario(u):
        try:
            if name.startswith("iter_"):
                results.append([item async for item in getattr(client, name)(*args, **kwargs)])
            else:
                results.append(await getattr(client, name)(*args, **kwargs))
        except SocialGraphError as error:
            results.append(error)
    return [relative(value, u) for value in results]


async def test_sync_and_async_clients_answer_alike_over_every_rpc(server: ServerRuntime) -> None:
    """The same steps through each client give the same values and the same typed errors."""
    async with await AsyncSocialGraphClient.connect(target(server)) as graph:
        answered = await run_async(graph, 1000)

    def blocking() -> list[Any]:
        with SocialGraphClient.connect(target(server)) as client:
            return run_sync(client, 2000)

    assert await asyncio.to_thread(blocking) == answered
    steps = dict(zip((f"{i}:{name}" for i, (name, _, _) in enumerate(scenario(0))), answered, strict=True))
    assert steps["1:follow"] == FollowState.REQUESTED
    assert steps["3:list_follow_requests"] == ("page", [{"user_id": 3}], True)
    assert steps["4:iter_follow_requests"] == [{"user_id": 3}, {"user_id": 2}]
    assert steps["7:accept_follow_request"] == ("NotFound", Reason.FOLLOW_REQUEST_NOT_FOUND)
    assert steps["13:iter_followers"] == [{"user_id": 2}]
    assert steps["19:list_mutual_follows"] == ("page", [2], False)
    assert steps["21:list_known_followers"] == ("page", [{"user_id": 2}], False)
    assert steps["23:suggest_follows"] == [{"user_id": 4, "score": 1.0, "mutual_count": 1}]
    assert steps["27:follow"] == ("FailedPrecondition", Reason.BLOCKED)
    assert steps["33:is_following"] is False
    assert steps["34:follow"] == ("InvalidArgument", Reason.SELF_FOLLOW)
    assert [(r["target_id"], r["muting"], r["muting_notifications"]) for r in steps["37:get_relationships"]] == [
        (2, True, True),
        (3, True, False),
        (4, False, False),
    ]
    assert steps["38:list_mutes"] == ("page", [{"user_id": 3, "notifications": False}], True)
    assert steps["39:iter_mutes"] == [{"user_id": 3, "notifications": False}, {"user_id": 2, "notifications": True}]
    assert steps["41:mute"] == ("InvalidArgument", Reason.INVALID_DURATION)
    assert steps["42:list_mutes"] == ("page", [{"user_id": 2, "notifications": True}], False)


async def test_pages_are_handed_between_clients_by_token(server: ServerRuntime) -> None:
    """A token from one client's page continues the walk in another client (and iterator); no entry
    repeats or goes missing; a changed token is ``InvalidArgument`` ``INVALID_PAGE_TOKEN``."""
    async with await AsyncSocialGraphClient.connect(target(server)) as graph:
        for follower in range(11, 18):
            await graph.follow(follower, 10)
        first = await graph.list_followers(10, page_size=3)
        assert [entry.user_id for entry in first] == [17, 16, 15]
        assert not first.last

        def second_client() -> tuple[list[int], str]:
            with SocialGraphClient.connect(target(server)) as other:
                page = other.list_followers(10, page_size=3, page_token=first.next_page_token)
                return [entry.user_id for entry in page], page.next_page_token

        second, token = await asyncio.to_thread(second_client)
        assert second == [14, 13, 12]
        rest = [entry.user_id async for entry in graph.iter_followers(10, page_size=3, page_token=token)]
        assert rest == [11]
        forged = first.next_page_token[:-2] + ("AA" if not first.next_page_token.endswith("AA") else "BB")
        with pytest.raises(InvalidArgument) as refused:
            await graph.list_followers(10, page_token=forged)
        assert refused.value.reason == Reason.INVALID_PAGE_TOKEN
        with pytest.raises(InvalidArgument) as foreign:
            await graph.list_following(10, page_token=first.next_page_token)  # another query's token
        assert foreign.value.reason == Reason.INVALID_PAGE_TOKEN


@pytest.mark.streams
async def test_calls_ride_out_a_server_restart_without_errors_or_repeats(
    settings: Settings, counters: asyncio.Task[None], caplog: pytest.LogCaptureFixture
) -> None:
    """With the server stopped, calls of both clients retry on ``UNAVAILABLE`` (with the default
    policy) until a new server on the same port answers: no error surfaces, every follow is in the
    graph once, and counted once."""
    caplog.set_level(logging.INFO, logger="socialgraph_client")
    here = replace(settings, grpc_address=f"127.0.0.1:{free_port()}")
    address = here.grpc_address
    async with running_server(here):
        graph = await AsyncSocialGraphClient.connect(address)
        blocking = SocialGraphClient.connect(address)
        assert not await asyncio.to_thread(blocking.is_following, 101, 100)  # both channels reach the server
        for follower in range(101, 104):
            assert await graph.follow(follower, 100) == FollowState.FOLLOWING
    try:
        # The server is gone: these calls fail to connect and are retried.
        during = asyncio.gather(graph.follow(104, 100), asyncio.to_thread(blocking.follow, 105, 100))

        async def retries() -> set[str]:
            return set(re.findall(r"retrying Follow .* after UNAVAILABLE .* request (\w+)", caplog.text))

        await eventually(retries, lambda ids: len(ids) >= 2, timeout=10)
        async with running_server(here):
            assert list(await during) == [FollowState.FOLLOWING, FollowState.FOLLOWING]
            assert await graph.follow(103, 100) == FollowState.FOLLOWING  # a repeat counts nothing twice
            followers = [entry.user_id async for entry in graph.iter_followers(100)]
            assert sorted(followers) == [101, 102, 103, 104, 105]  # each once (104 and 105 raced)
            assert await asyncio.to_thread(blocking.is_following, 105, 100)

            async def followers_count() -> int:
                return (await graph.get_counts(100)).followers

            await eventually(followers_count, lambda count: count == 5)
    finally:
        await graph.close()
        blocking.close()


async def test_deadlines_default_by_kind_and_are_overridden_per_call(server: ServerRuntime) -> None:
    """A read deadline too short for any answer is ``DeadlineExceeded`` (not retried); ``timeout=``
    on the call replaces it; the other kinds keep their own default."""
    tight = Deadlines(read=1e-6)
    # connect_timeout: the channel is ready before the first call (else that call's microsecond
    # would be spent waiting for a server, and it would raise ConnectError).
    async with await AsyncSocialGraphClient.connect(target(server), deadlines=tight, connect_timeout=5) as graph:
        with pytest.raises(DeadlineExceeded) as late:
            await graph.is_following(1, 2)
        assert late.value.attempts == 1
        assert await graph.is_following(1, 2, timeout=5) is False
        assert await graph.follow(1, 2) == FollowState.FOLLOWING  # a write: its own deadline
    with SocialGraphClient.connect(target(server), connect_timeout=5) as blocking, pytest.raises(DeadlineExceeded):
        await asyncio.to_thread(blocking.follow, 3, 4, timeout=1e-6)


async def test_a_rate_limit_that_lifts_within_the_deadline_is_waited_out(
    settings: Settings, caplog: pytest.LogCaptureFixture
) -> None:
    """``RESOURCE_EXHAUSTED`` with a ``RetryInfo`` of about a second is retried after that wait, and
    the follow succeeds; with retries off it is raised with ``retry_after``."""
    caplog.set_level(logging.INFO, logger="socialgraph_client")
    limited = replace(settings, follow_rate_limit=1, follow_rate_window_seconds=1)
    async with running_server(limited) as server:
        async with await AsyncSocialGraphClient.connect(target(server), retry=None) as bare:
            assert await bare.follow(1, 2) == FollowState.FOLLOWING
            with pytest.raises(ResourceExhausted) as refused:
                await bare.follow(1, 3)
            assert refused.value.retry_after is not None
            assert 0 < refused.value.retry_after <= 1
        async with await AsyncSocialGraphClient.connect(target(server)) as graph:
            assert await graph.follow(1, 4) == FollowState.FOLLOWING
            assert await graph.is_following(1, 4)
    assert re.search(r"retrying Follow in [\d.]+ s after RESOURCE_EXHAUSTED", caplog.text)


async def test_metadata_and_request_ids_reach_the_server(server: ServerRuntime) -> None:
    """The call's ``x-request-id`` is the one the server logs; one is made up when none is given and
    the error names the ID the server logged the failed call under."""
    with capture_every_level() as logs:
        async with await AsyncSocialGraphClient.connect(target(server)) as graph:
            await graph.is_following(1, 2, metadata={"x-request-id": "client-test-1"})
            with pytest.raises(InvalidArgument) as refused:
                await graph.follow(3, 3)
        made_up = refused.value.request_id

        def served() -> dict[str, dict[str, object]]:
            return {entry["request_id"]: entry for entry in logs if entry.get("event") == "rpc"}

        # The server logs a call once its answer is sent: the client may have it a moment before.
        await eventually(lambda: asyncio.sleep(0, served()), lambda found: {"client-test-1", made_up} <= found.keys())
    assert str(served()["client-test-1"]["method"]).endswith("/IsFollowing")
    assert re.fullmatch(r"[0-9a-f]{32}", made_up)
    assert served()[made_up]["outcome"] == Reason.SELF_FOLLOW


async def test_each_refusal_is_its_error_class(server: ServerRuntime) -> None:
    """Codes the server sends arrive as their class (a ``grpc.RpcError`` too) with reason and
    metadata; arguments the server would refuse are a ``ValueError`` before anything is sent; an
    unreachable server is ``ConnectError`` (at connect with ``connect_timeout``), and a server lost
    after it answered is ``Unavailable`` (after the retries) for a call."""
    async with await AsyncSocialGraphClient.connect(target(server)) as graph:
        with pytest.raises(InvalidArgument) as too_many:
            await graph.batch_get_counts(list(range(1, 102)))
        assert too_many.value.reason is Reason.TOO_MANY_IDS
        with pytest.raises(ValueError, match="user_id must be a positive integer, not 0"):
            await graph.get_counts(0)
        with pytest.raises(ValueError, match="follower_id must be a positive integer, not '5'"):
            await graph.follow("5", 6)  # type: ignore[arg-type]  # refused on purpose
        with pytest.raises(ValueError, match="page_size must be an integer from 0 up"):
            await graph.list_followers(1, page_size=-1)
        with pytest.raises(NotFound) as missing:
            await graph.accept_follow_request(1, 2)
        assert (missing.value.reason, missing.value.code) == (
            Reason.FOLLOW_REQUEST_NOT_FOUND,
            grpc.StatusCode.NOT_FOUND,
        )
        await graph.block(5, 6)
        with pytest.raises(grpc.RpcError) as blocked:
            await graph.follow(6, 5)
        assert isinstance(blocked.value, FailedPrecondition)
        assert blocked.value.code() is grpc.StatusCode.FAILED_PRECONDITION
        assert blocked.value.reason is Reason.BLOCKED
        assert blocked.value.metadata
    closed = f"127.0.0.1:{free_port()}"
    with pytest.raises(ConnectError) as unreachable:
        await AsyncSocialGraphClient.connect(closed, connect_timeout=0.3)
    assert isinstance(unreachable.value, Unavailable)
    assert closed in str(unreachable.value)
    with pytest.raises(ConnectError):
        await asyncio.to_thread(SocialGraphClient.connect, closed, connect_timeout=0.3)
    async with await AsyncSocialGraphClient.connect(target(server), retry=RetryPolicy(max_attempts=3)) as graph:
        assert not await graph.is_following(1, 2)  # the channel reached the server
        await server.grpc.stop()
        with pytest.raises(Unavailable) as gone:
            await graph.is_following(1, 2)
        assert gone.value.attempts == 3


async def test_client_walks_the_home_timeline(server: ServerRuntime, settings: Settings) -> None:
    """``iter_home_timeline`` yields every tweet newest first across pages; ``get_home_timeline`` one page."""
    fanout = await build_fanout(settings)
    try:
        async with await AsyncSocialGraphClient.connect(target(server)) as client, tweet_store(settings) as t:
            await client.follow(1, 2)
            tweet_ids = [await post(t, 2) for _ in range(5)]
            for tweet_id in tweet_ids:
                await fanout.fanout.tweet(TweetPosted(tweet_id, 2, created_at_us(tweet_id)))
            assert [i async for i in client.iter_home_timeline(1, page_size=2)] == tweet_ids[::-1]
            page = await client.get_home_timeline(1, page_size=3)
            assert page.items == tweet_ids[:-4:-1]
            assert page.next_page_token
            with pytest.raises(ValueError, match="user_id must be a positive integer, not 0"):
                await client.get_home_timeline(0)
    finally:
        await fanout.aclose()


# The package on its own, at the lowest versions its metadata allows and at the newest the project runs.


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel, built from the sdist as a release is (``tests/support/client_package.py``)."""
    return build_client(tmp_path_factory.mktemp("client")).wheel


def requirements(wheel: Path) -> list[Requirement]:
    """Every ``Requires-Dist`` of the wheel (its extras' too), each of which must give a floor and a ceiling."""
    found = [Requirement(text) for text in wheel_metadata(wheel).get_all("Requires-Dist") or []]
    for requirement in found:
        operators = {spec.operator for spec in requirement.specifier}
        assert operators == {">=", "<"}, f"{requirement}: needs a floor (>=) and a ceiling (<)"
    return found


PROTOBUF_6 = {"protobuf": "6.31.1", "googleapis-common-protos": "1.75.0"}
"""A protobuf 6 within the client's range: 6.31.1 is the last 6.x release that warns at the import of
the stubs' 5.x gencode (6.32 dropped the warning), a warning the client keeps from failing a program
run with ``-W error``; googleapis-common-protos 1.75.0 is the newest that allows it (1.76 needs
protobuf 6.33.5). The other dependencies are the newest."""


def floor(requirement: Requirement) -> str:
    (lowest,) = [spec.version for spec in requirement.specifier if spec.operator == ">="]
    return lowest


PROBE = """
import asyncio, json, sys
from importlib.metadata import version
from socialgraph_client import AsyncSocialGraphClient, FollowState, InvalidArgument, SocialGraphClient
from socialgraph.v1 import events_pb2_grpc, social_graph_pb2_grpc, timeline_pb2_grpc  # grpcio's floor

target, star = sys.argv[1], int(sys.argv[2])
with SocialGraphClient.connect(target) as graph:
    assert graph.follow(star + 1, star) == FollowState.FOLLOWING
    assert graph.is_following(star + 1, star)
    assert [e.user_id for e in graph.list_followers(star)] == [star + 1]
    try:
        graph.follow(star + 1, star + 1)
    except InvalidArgument as error:
        assert error.reason == "SELF_FOLLOW", error
    else:
        raise AssertionError("a self-follow was let through")

async def main():
    async with await AsyncSocialGraphClient.connect(target) as graph:
        assert await graph.follow(star + 2, star) == FollowState.FOLLOWING
        assert [e.user_id async for e in graph.iter_followers(star)] == [star + 2, star + 1]

asyncio.run(main())
print(json.dumps({name: version(name) for name in sys.argv[3:]}))
"""


async def test_wheel_at_its_lowest_and_newest_allowed_versions_calls_a_server(
    wheel: Path, server: ServerRuntime, tmp_path: Path
) -> None:
    """The built wheel, installed into fresh venvs with every dependency (an extra's too) at its floor,
    at the version this project runs (requirements/constraints.txt: the newest it has vetted), and at
    those with protobuf 6 (``PROTOBUF_6``), imports and calls the server with both clients under
    exactly those versions, with every warning an error (``-W error``)."""
    wanted = requirements(wheel)
    assert {r.name for r in wanted if r.marker is None} == {"protobuf", "grpcio", "googleapis-common-protos"}
    lowest = {r.name: floor(r) for r in wanted}
    newest = {r.name: version(r.name) for r in wanted}
    protobuf_6 = {**newest, **PROTOBUF_6}
    for requirement in wanted:
        assert requirement.specifier.contains(newest[requirement.name]), (requirement, newest[requirement.name])
        assert requirement.specifier.contains(protobuf_6[requirement.name]), (requirement, protobuf_6)
    extras = wheel_metadata(wheel).get_all("Provides-Extra") or []
    package = f"{wheel}[{','.join(extras)}]" if extras else str(wheel)

    async def install_and_call(name: str, pins: dict[str, str], star: int) -> dict[str, str]:
        venv = tmp_path / name
        await run(sys.executable, "-m", "venv", "--without-pip", str(venv))
        python = venv / "bin" / "python"
        # uv, with its cache: about a second for either set, where pip took about 6 s.
        uv = str(Path(sys.executable).parent / "uv")
        await run(
            uv, "pip", "install", "--quiet", "--python", str(python), package, *(f"{n}=={v}" for n, v in pins.items())
        )
        out = await run(str(python), "-I", "-W", "error", "-c", PROBE, target(server), str(star), *pins)
        return dict(json.loads(out))

    seen = await asyncio.gather(
        install_and_call("lowest", lowest, 7000),
        install_and_call("newest", newest, 7100),
        install_and_call("protobuf-6", protobuf_6, 7200),
    )
    assert list(seen) == [lowest, newest, protobuf_6]


async def run(*command: str) -> str:
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(process.communicate(), timeout=300)
    assert process.returncode == 0, f"{command[:4]}: {err.decode()[-3000:]}"
    return out.decode()
