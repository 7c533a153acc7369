"""Two serving processes, each with its near cache: writes through one, reads through the other,
never an answer older than the last acknowledged write (SPEC §3), also while the near caches'
invalidation connections are killed again and again."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import pytest
import redis.asyncio as aioredis
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.cache.near_cache import CONNECTION_NAME
from graph_service.settings import Settings
from tests.support.children import Child, serve_process
from tests.support.polling import eventually
from tests.support.scrape import scrape

PAIRS = 4
ROUNDS = 4
"""Each pair followed and unfollowed twice, four pairs at once: every round checks every read after
the writes, so more pairs or rounds only repeat the same checks (and the second pass still lasts
long enough for dozens of connection kills: 37 in a run, where 5 are required)."""
READS_AFTER = 4


async def near_hits(child: Child, kind: str | None = None) -> float:
    samples = (await scrape(child.metrics_port)).samples.get("socialgraph_near_cache_hits_total", [])
    return sum(value for labels, value in samples if kind is None or labels.get("kind") == kind)


async def tracking(child: Child) -> bool:
    samples = (await scrape(child.metrics_port)).samples.get("socialgraph_near_cache_usable", [])
    return bool(samples) and samples[0][1] == 1.0


@contextlib.asynccontextmanager
async def two_servers(settings: Settings, tmp_path: Path) -> AsyncIterator[tuple[Child, Child]]:
    async with (
        serve_process(settings, tmp_path / "a") as writer,
        serve_process(settings, tmp_path / "b") as reader,
    ):
        await eventually(lambda: tracking(reader), bool, timeout=30)
        yield writer, reader


async def interleave(writer: Child, reader: Child, first_user: int = 100, pairs: int = PAIRS) -> int:
    """Per pair: read through ``reader`` (its near cache fills), write through ``writer`` (a follow and
    the followee's mute of the follower, or their undoing), then read again through ``reader`` at
    once, several times; every read after the writes must see them."""
    checked = 0
    async with (
        grpc.aio.insecure_channel(writer.address) as write_channel,
        grpc.aio.insecure_channel(reader.address) as read_channel,
    ):
        writes = pb_grpc.SocialGraphServiceStub(write_channel)
        reads = pb_grpc.SocialGraphServiceStub(read_channel)

        async def state(follower: int, followee: int) -> bool:
            reply = await reads.IsFollowing(pb.IsFollowingRequest(follower_id=follower, followee_id=followee))
            return bool(reply.following)

        async def listed(follower: int, followee: int) -> bool:
            reply = await reads.ListFollowers(pb.ListFollowersRequest(user_id=followee))
            return follower in {entry.user_id for entry in reply.followers}

        async def related(follower: int, followee: int) -> tuple[bool, bool]:
            """The followee's side, among other targets: whether the follower follows it, and whether it
            mutes the follower."""
            others = [followee + 1000, follower]
            reply = await reads.GetRelationships(pb.GetRelationshipsRequest(actor_id=followee, target_ids=others))
            (entry,) = [r for r in reply.relationships if r.target_id == follower]
            return bool(entry.followed_by), bool(entry.muting)

        async def pair(index: int) -> int:
            follower, followee = first_user + index, first_user + 800 + index
            seen = 0
            for round_ in range(ROUNDS):
                following = round_ % 2 == 0
                before = list(
                    await asyncio.gather(
                        state(follower, followee), listed(follower, followee), related(follower, followee)
                    )
                )
                assert before == [not following] * 2 + [(not following,) * 2], (index, round_, "before")
                if following:
                    await asyncio.gather(
                        writes.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee)),
                        writes.Mute(pb.MuteRequest(muter_id=followee, muted_id=follower)),
                    )
                else:
                    await asyncio.gather(
                        writes.Unfollow(pb.UnfollowRequest(follower_id=follower, followee_id=followee)),
                        writes.Unmute(pb.UnmuteRequest(muter_id=followee, muted_id=follower)),
                    )
                for batch in range(2):  # the first fills the near cache, the second reads it
                    after = await asyncio.gather(
                        *(state(follower, followee) for _ in range(READS_AFTER)),
                        listed(follower, followee),
                        related(follower, followee),
                    )
                    assert after == [following] * (READS_AFTER + 1) + [(following,) * 2], (index, round_, batch, after)
                    seen += len(after)
                seen += 3
            return seen

        for count in await asyncio.gather(*(pair(i) for i in range(pairs))):
            checked += count
    return checked


async def test_reads_on_one_process_never_miss_a_write_acknowledged_by_another(
    settings: Settings, tmp_path: Path, redis_url: str
) -> None:
    """First as is, then while the near caches' invalidation connections are killed every 50 ms."""
    async with two_servers(settings, tmp_path) as (writer, reader):
        checked = await interleave(writer, reader)
        assert checked >= PAIRS * ROUNDS * (3 + 2 * (READS_AFTER + 2))
        assert await near_hits(reader) > checked / 5  # the near cache answered, it was not bypassed
        assert await near_hits(reader, "relationships") > 0  # GetRelationships too

        client = aioredis.from_url(redis_url, decode_responses=True)
        killed = 0

        async def kill_tracking() -> None:
            nonlocal killed
            while True:
                for entry in await client.client_list():
                    if entry.get("name") == CONNECTION_NAME:
                        with contextlib.suppress(aioredis.ResponseError):
                            await client.client_kill_filter(_id=entry["id"])
                            killed += 1
                await asyncio.sleep(0.05)  # a fault injected every 50 ms, not a synchronisation

        killer = asyncio.create_task(kill_tracking())
        try:
            checked = await interleave(writer, reader, first_user=10_000)
        finally:
            killer.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await killer
            await client.aclose()
        assert checked >= PAIRS * ROUNDS * (3 + 2 * (READS_AFTER + 2))
        assert killed >= 5, killed
        await eventually(lambda: tracking(reader), bool, timeout=30)  # and it comes back


pytestmark = pytest.mark.timeout(240)
