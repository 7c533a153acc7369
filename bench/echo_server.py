"""The baseline: a bare grpc.aio server answering the same RPCs with constant replies.

No interceptors, no logging, no cache, no store: what the service's RPCs would cost if the
service did nothing.

Run: python -m bench.echo_server PORT [REDIS_URL [cluster]]. Given a Redis URL (a seed node of a
Redis Cluster with ``cluster``), the three cached reads first wait for the near cache's read fence
(``graph_service/cache/near_cache.py``) for the key the service would read, and does nothing else:
the least a read answered from a process's memory costs while SPEC §3 holds across
replicas (no replica answers the old state after a write returned anywhere).
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph.v1 import timeline_pb2 as tpb
from socialgraph.v1 import timeline_pb2_grpc as tpb_grpc

from graph_service.cache import keys
from graph_service.cache.near_cache import NearCache
from graph_service.domain.models import Direction


class EchoServicer(pb_grpc.SocialGraphServiceServicer):
    def __init__(self, page: list[pb.FollowEntry], near: NearCache | None = None) -> None:
        self._page = pb.ListFollowersResponse(followers=page, next_page_token="x" * 80)
        self._near = near

    async def _fenced(self, key: str) -> None:
        if self._near is not None and not await self._near.fence((key,)):
            raise RuntimeError("the near cache's connection is not tracking")

    async def IsFollowing(self, request: pb.IsFollowingRequest, context: Any) -> pb.IsFollowingResponse:
        await self._fenced(keys.follow_state(request.follower_id, request.followee_id))
        return pb.IsFollowingResponse(following=True)

    async def GetCounts(self, request: pb.GetCountsRequest, context: Any) -> pb.GetCountsResponse:
        await self._fenced(keys.counts(request.user_id))
        return pb.GetCountsResponse(followers_count=1000, following_count=10)

    async def ListFollowers(self, request: pb.ListFollowersRequest, context: Any) -> pb.ListFollowersResponse:
        await self._fenced(keys.list_key(Direction.FOLLOWERS, request.user_id))
        return self._page


class TimelineEcho(tpb_grpc.TimelineServiceServicer):
    """The first page of a home timeline: 20 tweet IDs and a token, as the service answers it."""

    def __init__(self) -> None:
        ids = [1_900_000_000_000_000_000 - i for i in range(20)]
        self._page = tpb.GetHomeTimelineResponse(tweet_ids=ids, next_page_token="x" * 80)

    async def GetHomeTimeline(self, request: tpb.GetHomeTimelineRequest, context: Any) -> tpb.GetHomeTimelineResponse:
        return self._page


async def main(port: int, redis_url: str | None = None, *, cluster: bool = False) -> None:
    entries = [pb.FollowEntry(user_id=1000 + i) for i in range(50)]
    for entry in entries:
        entry.followed_at.FromMicroseconds(1_760_000_000_000_000 + entry.user_id)
    near = None
    if redis_url:
        near = NearCache(redis_url, cluster=cluster, max_entries=0)
        near.start()
        deadline = asyncio.get_running_loop().time() + 30
        while not near.usable:  # polled with a deadline: tracking before the port opens
            if asyncio.get_running_loop().time() > deadline:
                raise SystemExit(f"the near cache did not start tracking on {redis_url}")
            await asyncio.sleep(0.01)
    server = grpc.aio.server()
    servicer = EchoServicer(entries, near)  # type: ignore[abstract]  # only the RPCs the benchmark calls
    pb_grpc.add_SocialGraphServiceServicer_to_server(servicer, server)
    tpb_grpc.add_TimelineServiceServicer_to_server(TimelineEcho(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(
        main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None, cluster=sys.argv[3:4] == ["cluster"])
    )
