"""Work that makes each component call every DynamoDB operation it has: every RPC of ``serve``,
a tweet and follows through the relay and the fanout, stream events through the two Lambda
handlers, and the operator commands. Used by ``tests/deploy/test_iam_roles.py``, which records the
calls on the wire and compares them with the IAM roles of the CloudFormation template.

A path is only seen when the component reaches DynamoDB, not its caches. So ``serve``'s reads come
after the users' cache entries are deleted (as eviction would take them), counts are read of users
no write touched (the counters consumer puts counts in the cache as it moves them), the tweet's
author leaves the cache before a home timeline is read (as its TTL would end it), and the fanout is
given a graph cache no serving process keeps trusted (``fanout_environment``), so it reads every
follower list and count from DynamoDB, as a fanout does whenever they are not cached whole.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import os
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph.v1 import timeline_pb2 as tpb
from socialgraph_devstack.processes import free_port

from graph_service.cache import keys
from graph_service.domain.models import Direction
from graph_service.dynamodb.tables import FOLLOWERS, TWEETS
from graph_service.entrypoints import lambda_handler, relay_lambda
from graph_service.settings import Settings
from graph_service.timelines import keys as timeline_keys
from tests.support.children import kafka_environment
from tests.support.commands import command_environment, socialgraph
from tests.support.graph_calls import (
    accept,
    block,
    counts,
    follow,
    reject,
    remove_follower,
    requests_of,
    set_private,
    unblock,
    unfollow,
)
from tests.support.polling import eventually
from tests.support.timeline_calls import TimelineStub, pushed

__all__ = [
    "AUTHOR",
    "drive_graph_api",
    "drive_home_timeline",
    "fanout_environment",
    "forget_cached",
    "invoke_counters_lambda",
    "invoke_relay_lambda",
    "operator_command",
]

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
AUTHOR, READER, PUSHED_TO = 8, 1, 9
"""The author of the tweet; the follower whose home timeline is read through ``serve``; a second
follower (the fanout pushes to both, walking the author's follower list)."""


def fanout_environment(settings: Settings) -> dict[str, str]:
    """The fanout's Kafka variables, its timelines in ``settings``' Redis and its graph cache in
    another database of that Redis, which no serving process keeps trusted (``cache/trust.py``):
    every follower list and count comes from DynamoDB."""
    url, _, _ = settings.redis_url.rpartition("/")
    return {**kafka_environment(settings), "SG_TIMELINE_REDIS_URL": settings.redis_url, "SG_REDIS_URL": f"{url}/1"}


USERS = range(1, 10)
UNTOUCHED = (70, 71)
"""Users no call writes: their counts are never cached before ``serve`` reads them (the counters
consumer puts the counts it moves into the cache as it goes, so a read of a followed user's counts
may be a hit whatever the test deletes)."""


def graph_entries(users: Sequence[int]) -> list[str]:
    """The graph cache's entries of ``users`` a read fills: follow states, relationships, lists,
    counts, privacy, suggestions (not the epochs that guard fills)."""
    pairs = [(a, b) for a in users for b in users if a != b]
    return [
        *(keys.follow_state(a, b) for a, b in pairs),
        *(keys.relationship(a, b) for a, b in pairs),
        *(keys.list_key(d, u) for d in Direction for u in users),
        *(keys.counts(u) for u in users),
        *(keys.privacy(u) for u in users),
        *(keys.suggestions(u) for u in users),
    ]


async def drive_graph_api(stub: pb_grpc.SocialGraphServiceStub, redis_url: str) -> None:
    """Every RPC of SocialGraphService at least once, on users 1..9: the writes first (a private
    account's requests accepted and rejected, a block over an edge, a removed follower, the follows
    of ``AUTHOR`` that ``drive_home_timeline`` needs), then, with those users' entries gone from the
    cache (as eviction would take them), every read, each of them a miss that reaches DynamoDB."""
    for follower, followee in ((1, 2), (3, 2), (4, 2), (1, 3), (2, 1), (3, 4), (READER, AUTHOR), (PUSHED_TO, AUTHOR)):
        assert await follow(stub, follower, followee) == pb.FOLLOW_STATE_FOLLOWING
    await set_private(stub, 5, True)
    for requester in (6, 7):
        assert await follow(stub, requester, 5) == pb.FOLLOW_STATE_REQUESTED
    assert sorted(await requests_of(stub, 5)) == [6, 7]
    await accept(stub, 5, 6)
    await reject(stub, 5, 7)
    await block(stub, 2, 4)  # 4 followed 2: the block ends it
    await unblock(stub, 2, 4)
    await remove_follower(stub, 2, 3)
    await unfollow(stub, 1, 3)
    # Left: 1->2, 2->1, 3->4, 6->5 and AUTHOR's two followers; once the counters consumer counted them:
    await eventually(lambda: counts(stub, AUTHOR), lambda found: found == (2, 0), timeout=30)

    await forget_cached(redis_url, *graph_entries(USERS))
    assert (await stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2))).following
    first = await stub.ListFollowers(pb.ListFollowersRequest(user_id=AUTHOR, page_size=1))
    second = await stub.ListFollowers(
        pb.ListFollowersRequest(user_id=AUTHOR, page_size=1, page_token=first.next_page_token)
    )
    assert [f.user_id for f in (*first.followers, *second.followers)] == [PUSHED_TO, READER]
    assert {f.user_id for f in (await stub.ListFollowing(pb.ListFollowingRequest(user_id=1))).following} == {2, AUTHOR}
    assert await counts(stub, UNTOUCHED[0]) == (0, 0)
    batch = await stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=[1, 2, UNTOUCHED[1]]))
    assert [c.user_id for c in batch.counts] == [1, 2, UNTOUCHED[1]]
    relationships = await stub.GetRelationships(pb.GetRelationshipsRequest(actor_id=1, target_ids=[2, 3, 4, 5]))
    assert [r.following for r in relationships.relationships] == [True, False, False, False]
    known = await stub.ListKnownFollowers(pb.ListKnownFollowersRequest(viewer_id=2, user_id=AUTHOR))
    assert [f.user_id for f in known.followers] == [READER]
    mutual = await stub.ListMutualFollows(pb.ListMutualFollowsRequest(user_id=1))
    assert [f.user_id for f in mutual.users] == [2]
    suggested = await stub.SuggestFollows(pb.SuggestFollowsRequest(user_id=2))  # 2 follows 1, who follows AUTHOR
    assert [s.user_id for s in suggested.suggestions] == [AUTHOR]
    assert await requests_of(stub, 5) == []
    await drive_account_jobs(stub)


async def drive_account_jobs(stub: pb_grpc.SocialGraphServiceStub) -> None:
    """One account deactivated, reactivated and deleted, each job run to its end by ``serve``: every
    call an archive, a restore and a deletion make (the leases, the fenced batches, the marks). The
    two accounts are new at each run (a workload may run twice on one set of tables, and a deleted
    account stays deleted)."""
    leaving = random.randrange(10**12, 2 * 10**12)
    staying = leaving + 1  # with an edge to and a request from the leaving account
    assert await follow(stub, staying, leaving) == pb.FOLLOW_STATE_FOLLOWING
    await set_private(stub, staying, True)
    assert await follow(stub, leaving, staying) == pb.FOLLOW_STATE_REQUESTED
    await stub.Mute(pb.MuteRequest(muter_id=leaving, muted_id=staying))
    await stub.DeactivateAccount(pb.DeactivateAccountRequest(user_id=leaving))
    await _settled(stub, leaving, pb.ACCOUNT_STATE_DEACTIVATED)
    await stub.ReactivateAccount(pb.ReactivateAccountRequest(user_id=leaving))
    await _settled(stub, leaving, pb.ACCOUNT_STATE_ACTIVE)
    await stub.DeleteAccount(pb.DeleteAccountRequest(user_id=leaving))
    await _settled(stub, leaving, pb.ACCOUNT_STATE_DELETED)
    assert await requests_of(stub, staying) == []


async def _settled(stub: pb_grpc.SocialGraphServiceStub, user_id: int, state: int) -> None:
    request = pb.GetAccountStateRequest(user_id=user_id)
    await eventually(lambda: stub.GetAccountState(request), lambda reply: reply.state == state, timeout=30)


async def forget_cached(redis_url: str, *names: str) -> None:
    """Delete cache entries, as their TTL or Redis's eviction would end them."""
    client = aioredis.Redis.from_url(redis_url)
    try:
        await client.delete(*names)
    finally:
        await client.aclose()


async def drive_home_timeline(
    timelines: TimelineStub, settings: Settings, post: Callable[[int, str], Awaitable[int]]
) -> int:
    """``AUTHOR`` (followed by ``READER`` and ``PUSHED_TO`` in ``drive_graph_api``) posts a tweet
    (``post(author_id, text)`` writes it, as the tweet service would); relay and fanout bring it to
    the followers, and ``READER`` reads the home timeline through ``serve``. Before the read, the
    tweet's author leaves the cache, as its TTL would end it (``serve`` reads it from the tweets
    table). Returns the tweet ID."""
    tweet_id = await post(AUTHOR, "hello")
    client = aioredis.Redis.from_url(settings.redis_url, decode_responses=True)
    try:
        await eventually(lambda: pushed(client, READER), lambda ids: tweet_id in ids, timeout=30)
    finally:
        await client.aclose()
    await forget_cached(settings.redis_url, timeline_keys.tweet_author(tweet_id))
    page = await timelines.GetHomeTimeline(tpb.GetHomeTimelineRequest(user_id=READER))
    assert list(page.tweet_ids) == [tweet_id]
    return tweet_id


@contextlib.contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in this process's environment (where a Lambda handler reads its ``SG_*``
    configuration) until the block ends, then the environment as it was."""
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _stream_arn(table: str) -> str:
    return f"arn:aws:dynamodb:us-east-1:123456789012:table/{table}/stream/2024-06-10T09:12:41.137"


def _followers_event(settings: Settings) -> dict[str, Any]:
    """The recorded followers stream event of the Lambda tests (follows and an unfollow of users
    1001..2002), from this test's table."""
    event: dict[str, Any] = json.loads((FIXTURES / "followers_stream_event.json").read_text())
    for record in event["Records"]:
        record["eventSourceARN"] = _stream_arn(settings.table(FOLLOWERS))
    return event


def _run_container(handler: Any, invocations: list[tuple[dict[str, str], dict[str, Any]]], close: Any) -> list[Any]:
    """One Lambda container: each (configuration, event) in turn on one thread, then the container's end."""

    def invoke(values: dict[str, str], event: dict[str, Any]) -> Any:
        with _environment(values):
            return handler(event, None)

    with ThreadPoolExecutor(max_workers=1) as container:
        try:
            return [container.submit(invoke, values, event).result() for values, event in invocations]
        finally:
            container.submit(close).result()


async def invoke_counters_lambda(settings: Settings) -> None:
    """The counters Lambda handler, configured by ``settings`` as a function would be, on the
    recorded followers event while Redis cannot be reached (the counts are written, the cache
    repairs stored as debts), then on the same event again with Redis back (a Lambda retry: the
    markers skip every event, and the debts are settled and deleted)."""
    values = {
        "SG_DYNAMODB_ENDPOINT": settings.dynamodb_endpoint,
        "SG_TABLE_PREFIX": settings.table_prefix,
        "SG_REDIS_URL": settings.redis_url,
        "SG_LOG_LEVEL": "warning",
    }
    unreachable = {**values, "SG_REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}
    event = _followers_event(settings)

    def close() -> None:
        runtime, lambda_handler._container.runtime = lambda_handler._container.runtime, None
        if runtime is not None:
            runtime.close()

    with _no_logging_setup(lambda_handler):
        answers = await asyncio.to_thread(
            _run_container, lambda_handler.handler, [(unreachable, copy.deepcopy(event)), (values, event)], close
        )
    assert answers == [{"batchItemFailures": []}] * 2


async def invoke_relay_lambda(settings: Settings) -> None:
    """The relay Lambda handler on a followers event and a new tweet, configured by ``settings``
    (the topics of the test; ``SG_DYNAMODB_ENDPOINT`` too, so a DynamoDB call would be seen)."""
    values = {
        "SG_DYNAMODB_ENDPOINT": settings.dynamodb_endpoint,
        "SG_TABLE_PREFIX": settings.table_prefix,
        "SG_LOG_LEVEL": "warning",
        **kafka_environment(settings),
    }
    event = _followers_event(settings)
    image = {"tweet_id": {"N": "913645115185491968"}, "author_id": {"N": "1001"}, "text": {"S": "hello"}}
    event["Records"].append(
        {
            "eventID": "tweet-1",
            "eventName": "INSERT",
            "eventSourceARN": _stream_arn(settings.table(TWEETS)),
            "dynamodb": {
                "ApproximateCreationDateTime": 1718010001,
                "Keys": {"tweet_id": image["tweet_id"]},
                "NewImage": image,
                "SequenceNumber": "1405400000000002063282999",
                "StreamViewType": "NEW_AND_OLD_IMAGES",
            },
        }
    )

    def close() -> None:
        runtime, relay_lambda._container.runtime = relay_lambda._container.runtime, None
        if runtime is not None:
            runtime.close()

    with _no_logging_setup(relay_lambda):
        answers = await asyncio.to_thread(_run_container, relay_lambda.handler, [(values, event)], close)
    assert answers == [{"batchItemFailures": []}]


@contextlib.contextmanager
def _no_logging_setup(module: Any) -> Iterator[None]:
    """The handler's module without its logging setup: the session's logging stays as it is."""
    saved = module.configure_logging
    module.configure_logging = lambda *args, **kwargs: None
    try:
        yield
    finally:
        module.configure_logging = saved


async def operator_command(settings: Settings, *args: str, expect: int = 0) -> str:
    """``socialgraph ARGS`` as an operator runs it, against ``settings``' tables and Redis; its output."""
    done = await asyncio.to_thread(socialgraph, command_environment(settings), *args)
    assert done.returncode == expect, f"socialgraph {' '.join(args)}: exit {done.returncode}\n{done.stderr[-3000:]}"
    return done.stdout
