"""Rotating the page-token key on running replicas never breaks a walk in progress (SPEC §7.1)."""

from __future__ import annotations

from dataclasses import replace

import grpc
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.settings import Settings
from tests.support.graph_calls import rejected
from tests.support.runtimes import running_server, stub_for
from tests.support.seeding import seed_follows


async def test_a_walk_started_under_the_old_key_finishes_under_new_comma_old(settings: Settings) -> None:
    """Page 1 from a replica signing with ``old``; page 2 from one with ``new,old``; its token (signed
    with ``new``) on a replica with ``new`` alone; the old token there is INVALID_PAGE_TOKEN."""
    await seed_follows(settings, [(follower, 1) for follower in range(10, 16)])
    request = pb.ListFollowersRequest(user_id=1, page_size=2)
    async with running_server(replace(settings, page_token_secret="old")) as server, stub_for(server.port) as stub:
        first = await stub.ListFollowers(request)
    async with running_server(replace(settings, page_token_secret="new,old")) as server, stub_for(server.port) as stub:
        request.page_token = first.next_page_token
        second = await stub.ListFollowers(request)
    async with running_server(replace(settings, page_token_secret="new")) as server, stub_for(server.port) as stub:
        request.page_token = second.next_page_token
        third = await stub.ListFollowers(request)
        request.page_token = first.next_page_token
        await rejected(stub.ListFollowers(request), grpc.StatusCode.INVALID_ARGUMENT, "INVALID_PAGE_TOKEN")
    walked = [e.user_id for page in (first, second, third) for e in page.followers]
    assert sorted(walked) == list(range(10, 16))
    assert third.next_page_token == ""
