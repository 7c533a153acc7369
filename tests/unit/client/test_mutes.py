"""Both clients' mute methods: the request each sends, and the values read back from the replies."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from google.protobuf import duration_pb2, timestamp_pb2
from google.protobuf.message import Message
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph_client import AsyncSocialGraphClient, MuteEntry, Relationship, SocialGraphClient, rpcs
from socialgraph_client.rpcs import Kind, Rpc

MUTED_AT = datetime(2026, 11, 26, 1, 29, 35, 869749, tzinfo=UTC)
EXPIRES_AT = MUTED_AT + timedelta(hours=1)


class Recorder:
    """Stands for a transport: records each call and answers from a queue of replies."""

    def __init__(self, *replies: Message) -> None:
        self.replies = list(replies)
        self.calls: list[tuple[Rpc[Any, Any], Any, float | None, Any]] = []

    def call(
        self, rpc: Rpc[Any, Any], request: Message, timeout: float | None, metadata: Any, retry: Any = None
    ) -> Message:
        self.calls.append((rpc, request, timeout, metadata))
        return self.replies.pop(0) if self.replies else rpc.response()


class AsyncRecorder:
    """The same, for the asyncio client: its transport's ``call`` is a coroutine."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder

    async def call(
        self,
        rpc: Rpc[Any, Any],
        request: Message,
        timeout: float | None,  # noqa: ASYNC109 - AsyncTransport.call's signature
        metadata: Any,
        retry: Any = None,
    ) -> Message:
        return self.recorder.call(rpc, request, timeout, metadata, retry)


def sync_client(*replies: Message) -> tuple[SocialGraphClient, Recorder]:
    recorder = Recorder(*replies)
    return SocialGraphClient(cast(Any, recorder)), recorder


def async_client(*replies: Message) -> tuple[AsyncSocialGraphClient, Recorder]:
    recorder = Recorder(*replies)
    return AsyncSocialGraphClient(cast(Any, AsyncRecorder(recorder))), recorder


def timestamp(moment: datetime) -> timestamp_pb2.Timestamp:
    stamp = timestamp_pb2.Timestamp()
    stamp.FromDatetime(moment)
    return stamp


def entry(user_id: int, *, expires: datetime | None = None, notifications: bool = False) -> pb.MuteEntry:
    return pb.MuteEntry(
        user_id=user_id,
        muted_at=timestamp(MUTED_AT),
        expires_at=None if expires is None else timestamp(expires),
        notifications=notifications,
    )


def test_mute_sends_the_duration_and_the_notifications_flag() -> None:
    graph, recorder = sync_client()
    graph.mute(1, 2, duration=timedelta(hours=1, microseconds=5), notifications=True)
    rpc, request, timeout, metadata = recorder.calls[0]
    assert (rpc, rpc.kind, timeout, metadata) == (rpcs.MUTE, Kind.WRITE, None, None)
    assert request == pb.MuteRequest(
        muter_id=1, muted_id=2, duration=duration_pb2.Duration(seconds=3600, nanos=5000), notifications=True
    )


def test_mute_without_a_duration_sends_none_until_unmuted() -> None:
    graph, recorder = sync_client()
    graph.mute(1, 2, timeout=3.0, metadata={"x-tenant": "feed"})
    _, request, timeout, metadata = recorder.calls[0]
    assert not request.HasField("duration")
    assert not request.notifications
    assert (timeout, metadata) == (3.0, {"x-tenant": "feed"})


@pytest.mark.parametrize(
    ("duration", "seconds", "nanos"),
    [(timedelta(0), 0, 0), (timedelta(seconds=-1.5), -1, -500_000_000), (timedelta(days=365 * 101), 3185136000, 0)],
    ids=["zero", "negative", "over-100-years"],
)
def test_a_duration_is_sent_as_given_for_the_server_to_judge(duration: timedelta, seconds: int, nanos: int) -> None:
    """Zero means until unmuted; negative or too long is the server's ``INVALID_DURATION``, one rule in one place."""
    graph, recorder = sync_client()
    graph.mute(1, 2, duration=duration)
    request = recorder.calls[0][1]
    assert request.HasField("duration")
    assert (request.duration.seconds, request.duration.nanos) == (seconds, nanos)


async def test_the_async_client_sends_the_same_requests() -> None:
    graph, recorder = async_client()
    await graph.mute(1, 2, duration=timedelta(minutes=5))
    await graph.unmute(1, 2)
    assert [(rpc, request) for rpc, request, _, _ in recorder.calls] == [
        (rpcs.MUTE, pb.MuteRequest(muter_id=1, muted_id=2, duration=duration_pb2.Duration(seconds=300))),
        (rpcs.UNMUTE, pb.UnmuteRequest(muter_id=1, muted_id=2)),
    ]


def test_unmute_is_a_write() -> None:
    graph, recorder = sync_client()
    graph.unmute(1, 2)
    rpc, request, _, _ = recorder.calls[0]
    assert (rpc, rpc.kind, request) == (rpcs.UNMUTE, Kind.WRITE, pb.UnmuteRequest(muter_id=1, muted_id=2))


def test_list_mutes_returns_one_page_of_typed_entries() -> None:
    """``muted_at`` is a UTC datetime like every other time the client returns; no ``expires_at`` is None."""
    reply = pb.ListMutesResponse(
        mutes=[entry(7, expires=EXPIRES_AT, notifications=True), entry(5)], next_page_token="next"
    )
    graph, recorder = sync_client(reply)
    page = graph.list_mutes(1, page_size=2, page_token="start")
    rpc, request, _, _ = recorder.calls[0]
    assert (rpc, rpc.kind) == (rpcs.LIST_MUTES, Kind.READ)
    assert request == pb.ListMutesRequest(user_id=1, page_size=2, page_token="start")
    assert page.items == [MuteEntry(7, MUTED_AT, EXPIRES_AT, True), MuteEntry(5, MUTED_AT, None, False)]
    assert page.next_page_token == "next"
    assert not page.last
    assert page.items[0].muted_at.tzinfo is UTC


def test_iter_mutes_walks_every_page_with_the_token_handed_back() -> None:
    pages = (
        pb.ListMutesResponse(mutes=[entry(9), entry(8)], next_page_token="t1"),
        pb.ListMutesResponse(mutes=[entry(7)]),
    )
    graph, recorder = sync_client(*pages)
    walk: Iterator[MuteEntry] = graph.iter_mutes(1, page_size=2, timeout=1.5)
    assert [mute.user_id for mute in walk] == [9, 8, 7]
    assert [(request.page_token, request.page_size, timeout) for _, request, timeout, _ in recorder.calls] == [
        ("", 2, 1.5),
        ("t1", 2, 1.5),
    ]


async def test_the_async_iterator_walks_the_same_pages() -> None:
    pages = (pb.ListMutesResponse(mutes=[entry(9)], next_page_token="t1"), pb.ListMutesResponse(mutes=[entry(7)]))
    graph, recorder = async_client(*pages)
    assert [mute.user_id async for mute in graph.iter_mutes(1, page_token="t0")] == [9, 7]
    assert [request.page_token for _, request, _, _ in recorder.calls] == ["t0", "t1"]


def test_relationships_carry_muting_and_its_notifications_flag() -> None:
    reply = pb.GetRelationshipsResponse(
        relationships=[
            pb.Relationship(target_id=2, following=True, muting=True, muting_notifications=True),
            pb.Relationship(target_id=3, muting=True),
            pb.Relationship(target_id=4),
        ]
    )
    graph, _ = sync_client(reply)
    two, three, four = graph.get_relationships(1, [2, 3, 4])
    assert two == Relationship(2, True, False, False, False, False, False, muting=True, muting_notifications=True)
    assert (three.muting, three.muting_notifications) == (True, False)
    assert (four.muting, four.muting_notifications) == (False, False)


def test_a_relationship_made_without_the_mute_flags_is_not_muting() -> None:
    """Code that builds a ``Relationship`` itself (a fake in a caller's tests) keeps working."""
    relationship = Relationship(2, True, False, False, False, False, False)
    assert (relationship.muting, relationship.muting_notifications) == (False, False)
