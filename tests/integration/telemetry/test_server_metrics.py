"""``serve``'s /metrics, /healthz and /readyz over HTTP on a real server: exact RPC counts by method,
status code and caller, latency histogram counts, cache hits and misses by kind, limit refusals, the
rate limit failing open, readiness around a stop, and a taken metrics port."""

from __future__ import annotations

import socket
from dataclasses import replace
from pathlib import Path

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.api.callers import caller_entry, mint_token
from graph_service.cache.lease import CacheLease
from graph_service.domain.listening import PortInUse
from graph_service.entrypoints.server import build_server
from graph_service.settings import Settings
from tests.support.graph_calls import follow, unfollow
from tests.support.polling import eventually
from tests.support.runtimes import running_server, stub_for
from tests.support.scrape import Answer, get, scrape
from tests.support.tcp_cut import tcp_cut

SERVICE = "socialgraph.v1.SocialGraphService"


async def code_of(call: object) -> str:
    try:
        await call  # type: ignore[misc]  # a grpc.aio call, typed by the stubs as the sync reply
    except grpc.aio.AioRpcError as error:
        return error.code().name
    return "OK"


async def test_rpc_counts_latency_and_cache_kinds_are_exact(settings: Settings) -> None:
    """3 IsFollowing + 1 bad Follow: handled and started counts per method and code name, a histogram
    count per method; then each cached read twice: one miss (which fills) and one hit per kind."""
    async with running_server(settings) as server, stub_for(server.port) as stub:
        for _ in range(3):
            await stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2))
        assert await code_of(stub.Follow(pb.FollowRequest(follower_id=0, followee_id=2))) == "INVALID_ARGUMENT"
        for _ in range(2):
            await stub.GetCounts(pb.GetCountsRequest(user_id=2))
            await stub.ListFollowers(pb.ListFollowersRequest(user_id=2))
            await stub.GetRelationships(pb.GetRelationshipsRequest(actor_id=1, target_ids=[2, 3]))
        metrics = await scrape(server.metrics_port)

    handled = metrics.values("grpc_server_handled_total", grpc_service=SERVICE)
    assert {labels: n for labels, n in handled.items() if n} == {
        (
            ("caller", ""),
            ("grpc_code", code),
            ("grpc_method", method),
            ("grpc_service", SERVICE),
            ("grpc_type", "unary"),
        ): n
        for method, code, n in [
            ("IsFollowing", "OK", 3.0),
            ("Follow", "InvalidArgument", 1.0),
            ("GetCounts", "OK", 2.0),
            ("ListFollowers", "OK", 2.0),
            ("GetRelationships", "OK", 2.0),
        ]
    }
    assert metrics.value("grpc_server_started_total", grpc_method="IsFollowing", caller="") == 3
    assert metrics.value("grpc_server_started_total", grpc_method="Follow", caller="") == 1
    assert metrics.value("grpc_server_handling_seconds_count", grpc_method="IsFollowing") == 3
    assert metrics.value("grpc_server_handling_seconds_count", grpc_method="Follow") == 1
    assert metrics.value("grpc_server_handling_seconds_bucket", grpc_method="IsFollowing", le="+Inf") == 3
    total = metrics.value("grpc_server_handling_seconds_sum", grpc_method="IsFollowing")
    assert total is not None
    assert 0 < total < 30
    hits = {kind: metrics.value("socialgraph_cache_hits_total", kind=kind) for kind in KINDS}
    misses = {kind: metrics.value("socialgraph_cache_misses_total", kind=kind) for kind in KINDS}
    # IsFollowing: miss then two hits; counts and lists: miss then hit; relationships: 2 targets each time.
    assert hits == {"follow_state": 2, "lists": 1, "counts": 1, "relationships": 2, "privacy": 0}
    assert misses == {"follow_state": 1, "lists": 1, "counts": 1, "relationships": 2, "privacy": 0}
    assert metrics.value("socialgraph_cache_owed_invalidations") == 0
    assert metrics.value("socialgraph_cache_breaker_open") == 0


KINDS = ("follow_state", "lists", "counts", "relationships", "privacy")


async def test_each_metric_of_a_call_names_its_caller(settings: Settings, tmp_path: Path) -> None:
    """With auth on, a caller's calls are counted under its name, refused scopes included; a call
    without a token is counted under caller "" as UNAUTHENTICATED."""
    tokens = {"reader": mint_token(), "writer": mint_token()}
    callers = tmp_path / "callers.toml"
    callers.write_text(
        caller_entry("reader", ["read"], tokens["reader"]) + "\n" + caller_entry("writer", ["write"], tokens["writer"]),
        encoding="utf-8",
    )
    secured = replace(settings, auth_tokens_file=str(callers))
    async with running_server(secured) as server, stub_for(server.port) as stub:

        def auth(name: str) -> tuple[tuple[str, str], ...]:
            return (("authorization", f"Bearer {tokens[name]}"),)

        request = pb.IsFollowingRequest(follower_id=1, followee_id=2)
        for _ in range(2):
            await stub.IsFollowing(request, metadata=auth("reader"))
        assert await code_of(stub.IsFollowing(request, metadata=auth("writer"))) == "PERMISSION_DENIED"
        assert await code_of(stub.IsFollowing(request)) == "UNAUTHENTICATED"
        metrics = await scrape(server.metrics_port)

    handled = metrics.values("grpc_server_handled_total", grpc_method="IsFollowing")
    assert {(dict(k)["caller"], dict(k)["grpc_code"]): v for k, v in handled.items()} == {
        ("reader", "OK"): 2,
        ("writer", "PermissionDenied"): 1,
        ("", "Unauthenticated"): 1,
        ("", "OK"): 0,  # made at the server's start
    }
    started = metrics.values("grpc_server_started_total", grpc_method="IsFollowing")
    assert {dict(k)["caller"]: v for k, v in started.items()} == {"reader": 2, "writer": 1, "": 1}
    assert metrics.value("grpc_server_handling_seconds_count", grpc_method="IsFollowing", caller="reader") == 2


async def test_limit_refusals_are_counted_by_reason(settings: Settings) -> None:
    """A follow past the following cap is FOLLOW_LIMIT, one past the rate limit RATE_LIMITED; each
    is counted once under its reason (an idempotent repeat and unfollows count nothing)."""
    limited = replace(settings, follow_rate_limit=2, max_following=1)
    async with running_server(limited) as server, stub_for(server.port) as stub:
        await follow(stub, 1, 2)
        assert await code_of(stub.Follow(pb.FollowRequest(follower_id=1, followee_id=3))) == "FAILED_PRECONDITION"
        await follow(stub, 1, 2)  # a repeat: no ticket
        await unfollow(stub, 1, 2)
        await follow(stub, 1, 2)  # the second ticket
        await unfollow(stub, 1, 2)
        assert await code_of(stub.Follow(pb.FollowRequest(follower_id=1, followee_id=2))) == "RESOURCE_EXHAUSTED"
        metrics = await scrape(server.metrics_port)

    refused = metrics.values("socialgraph_follows_refused_total")
    assert {dict(k)["reason"]: v for k, v in refused.items()} == {"FOLLOW_LIMIT": 1, "RATE_LIMITED": 1}
    assert metrics.value("grpc_server_handled_total", grpc_method="Follow", grpc_code="OK") == 3
    assert metrics.value("socialgraph_follow_rate_limit_failed_open_total") == 0


async def test_with_redis_unreachable_the_limit_fails_open_in_the_metrics(settings: Settings) -> None:
    """Redis stops answering after the server took its cache lease: each follow is let through
    uncounted and counted as such; both edges' cache invalidations are owed, and both writes wait
    out the lease before they are acknowledged (docs/architecture.md, "Trust across replicas")."""
    limited = replace(settings, follow_rate_limit=5, redis_timeout_seconds=0.25)
    async with tcp_cut(int(settings.redis_url.rsplit(":", 1)[1].split("/")[0])) as link:
        through = replace(limited, redis_url=f"redis://127.0.0.1:{link.port}/0")
        async with running_server(through) as server, stub_for(server.port) as stub:
            assert server.lease is not None
            await eventually(lambda: _holding(server.lease), bool, timeout=10)
            await link.cut()
            await follow(stub, 1, 2)
            await follow(stub, 1, 3)
            metrics = await scrape(server.metrics_port)
    assert metrics.value("socialgraph_follow_rate_limit_failed_open_total") == 2
    assert metrics.value("socialgraph_cache_owed_invalidations") == 2
    assert metrics.value("socialgraph_cache_unsettled_writes_total", outcome="acknowledged") == 2
    assert metrics.value("grpc_server_handled_total", grpc_method="Follow", grpc_code="OK") == 2


async def _holding(lease: CacheLease) -> bool:
    return lease.holding is not None


async def test_a_server_that_never_reached_redis_acknowledges_a_write_it_cannot_settle(settings: Settings) -> None:
    """Nothing listens at the Redis URL from the start: the write is committed, its cache lease is
    registered in the store only and marked unsettled (the other replicas' keepers then let the
    cache's generation expire), and the write is acknowledged a lease later, counted as such
    (docs/architecture.md, "Trust across replicas")."""
    unreachable = replace(settings, redis_url="redis://127.0.0.1:1/0", redis_timeout_seconds=0.25)
    async with running_server(unreachable) as server, stub_for(server.port) as stub:
        assert await follow(stub, 1, 2) == pb.FOLLOW_STATE_FOLLOWING
        assert await stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2)) == pb.IsFollowingResponse(
            following=True
        )
        metrics = await scrape(server.metrics_port)
        assert server.lease is not None
        assert len(server.lease.lapsed) == 1  # in the store only, until Redis answers
    assert metrics.value("socialgraph_cache_unsettled_writes_total", outcome="acknowledged") == 1
    assert metrics.value("socialgraph_cache_unsettled_writes_total", outcome="refused") == 0


async def test_with_redis_unreachable_every_cached_read_is_a_miss(settings: Settings) -> None:
    """Nothing listens at the Redis URL: the first read fails (a miss), and the next ones skip Redis
    while the breaker is open (misses too). Each read went to DynamoDB, so misses rise by exactly
    the number of reads, by kind, in the metrics and in the cache's own ``misses``."""
    unreachable = replace(settings, redis_url="redis://127.0.0.1:1/0", redis_timeout_seconds=0.25)
    async with running_server(unreachable) as server, stub_for(server.port) as stub:
        for _ in range(3):
            await stub.IsFollowing(pb.IsFollowingRequest(follower_id=1, followee_id=2))
        for _ in range(2):
            await stub.GetCounts(pb.GetCountsRequest(user_id=2))
            await stub.ListFollowers(pb.ListFollowersRequest(user_id=2))
            await stub.GetRelationships(pb.GetRelationshipsRequest(actor_id=1, target_ids=[2, 3, 4]))
        metrics = await scrape(server.metrics_port)
        assert server.cache is not None
        assert (server.cache.hits, server.cache.misses) == (0, 3 + 2 + 2 + 6)
    hits = {kind: metrics.value("socialgraph_cache_hits_total", kind=kind) for kind in KINDS}
    misses = {kind: metrics.value("socialgraph_cache_misses_total", kind=kind) for kind in KINDS}
    assert hits == dict.fromkeys(KINDS, 0)
    assert misses == {"follow_state": 3, "lists": 2, "counts": 2, "relationships": 6, "privacy": 0}


async def test_healthz_and_readyz_follow_the_grpc_server(settings: Settings) -> None:
    """Ready while gRPC health says SERVING; 503 naming why from the start of the stop; healthz
    answers throughout; anything else is 404, a POST 405."""
    server = await build_server(settings)
    try:
        port = server.metrics_port
        assert await get(port, "/healthz") == Answer(200, "ok\n")
        assert (await get(port, "/readyz")).status == 200
        assert (await get(port, "/nope")).status == 404
        assert (await get(port, "/metrics", method="POST")).status == 405
        head = await get(port, "/metrics", method="HEAD")
        assert (head.status, head.body) == (200, "")
        await server.grpc.stop()
        assert await get(port, "/readyz") == Answer(503, "not serving: stopping\n")
        assert (await get(port, "/healthz")).status == 200
    finally:
        await server.aclose()
    with pytest.raises(ConnectionRefusedError):
        await get(port, "/healthz")


async def test_a_taken_metrics_port_is_port_in_use_and_nothing_is_left_listening(settings: Settings) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(PortInUse, match=f"127.0.0.1:{port}"):
            await build_server(replace(settings, metrics_address=f"127.0.0.1:{port}", grpc_address="127.0.0.1:0"))
