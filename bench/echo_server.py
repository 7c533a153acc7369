"""The baseline: a bare grpc.aio server answering the same RPCs with constant replies.

No interceptors, no logging, no cache, no store: what the service's RPCs would cost if the
service did nothing.
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


class EchoServicer(pb_grpc.SocialGraphServiceServicer):
    def __init__(self, page: list[pb.FollowEntry]) -> None:
        self._page = pb.ListFollowersResponse(followers=page, next_page_token="x" * 80)

    async def IsFollowing(self, request: pb.IsFollowingRequest, context: Any) -> pb.IsFollowingResponse:
        return pb.IsFollowingResponse(following=True)

    async def GetCounts(self, request: pb.GetCountsRequest, context: Any) -> pb.GetCountsResponse:
        return pb.GetCountsResponse(followers_count=1000, following_count=10)

    async def ListFollowers(self, request: pb.ListFollowersRequest, context: Any) -> pb.ListFollowersResponse:
        return self._page


class TimelineEcho(tpb_grpc.TimelineServiceServicer):
    """The first page of a home timeline: 20 tweet IDs and a token, as the service answers it."""

    def __init__(self) -> None:
        ids = [1_900_000_000_000_000_000 - i for i in range(20)]
        self._page = tpb.GetHomeTimelineResponse(tweet_ids=ids, next_page_token="x" * 80)

    async def GetHomeTimeline(self, request: tpb.GetHomeTimelineRequest, context: Any) -> tpb.GetHomeTimelineResponse:
        return self._page


async def main(port: int) -> None:
    entries = [pb.FollowEntry(user_id=1000 + i) for i in range(50)]
    for entry in entries:
        entry.followed_at.FromMicroseconds(1_760_000_000_000_000 + entry.user_id)
    server = grpc.aio.server()
    servicer = EchoServicer(entries)  # type: ignore[abstract]  # only the RPCs the benchmark calls
    pb_grpc.add_SocialGraphServiceServicer_to_server(servicer, server)
    tpb_grpc.add_TimelineServiceServicer_to_server(TimelineEcho(), server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    await server.wait_for_termination()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1])))
