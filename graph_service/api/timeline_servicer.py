"""Thin gRPC handler of TimelineService."""

from __future__ import annotations

from typing import Any

from socialgraph.v1 import timeline_pb2 as pb
from socialgraph.v1 import timeline_pb2_grpc as pb_grpc

from graph_service.rules.home_timeline import HomeTimeline

__all__ = ["TimelineServicer"]


class TimelineServicer(pb_grpc.TimelineServiceServicer):
    def __init__(self, service: HomeTimeline) -> None:
        self._service = service

    async def GetHomeTimeline(self, request: pb.GetHomeTimelineRequest, context: Any) -> pb.GetHomeTimelineResponse:
        page = await self._service.home_timeline(request.user_id, request.page_size, request.page_token)
        return pb.GetHomeTimelineResponse(tweet_ids=page.tweet_ids, next_page_token=page.next_page_token)
