"""The Python client package: installable on its own, and a typed client over a real server."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from pathlib import Path

import grpc
import pytest
from socialgraph_client import SocialGraphClient, SocialGraphError

from graph_service.domain.tweet_ids import created_at_us
from graph_service.entrypoints.fanout import build_fanout
from graph_service.entrypoints.server import ServerRuntime
from graph_service.events.records import TweetPosted
from graph_service.settings import Settings
from tests.support.timeline_calls import post, tweet_store

REPO = Path(__file__).resolve().parents[2]


def test_client_package_builds_and_imports_on_its_own(tmp_path: Path) -> None:
    """`pip` builds a wheel of clients/python that carries the stubs, their type stubs and the client."""
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(tmp_path),
            str(REPO / "clients" / "python"),
        ],
        check=True,
        timeout=300,
    )
    (wheel,) = tmp_path.glob("socialgraph_client-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for wanted in (
        "socialgraph/v1/social_graph_pb2.py",
        "socialgraph/v1/social_graph_pb2.pyi",
        "socialgraph/v1/social_graph_pb2_grpc.py",
        "socialgraph/v1/timeline_pb2_grpc.py",
        "socialgraph/v1/events_pb2.py",
        "socialgraph_client/client.py",
        "socialgraph_client/py.typed",
    ):
        assert wanted in names, wanted
    target = tmp_path / "site"
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target", str(target), str(wheel)],
        check=True,
        timeout=300,
    )
    probe = "import socialgraph_client, socialgraph.v1.social_graph_pb2 as pb; print(socialgraph_client.__file__)"
    out = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(target)!r}); {probe}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.startswith(str(target))


async def test_client_follows_pages_and_raises_typed_errors(server: ServerRuntime) -> None:
    """The client hides page tokens, returns plain values, and raises SocialGraphError with the reason."""
    async with await SocialGraphClient.connect(f"127.0.0.1:{server.port}") as graph:
        for follower in range(10, 15):
            assert await graph.follow(follower, 1)
        assert await graph.is_following(10, 1)
        walked = [entry.user_id async for entry in graph.iter_followers(1, page_size=2)]
        assert walked == [14, 13, 12, 11, 10]
        assert [entry.user_id async for entry in graph.iter_following(10)] == [1]
        counts = await graph.batch_get_counts([1, 10])
        assert [c.user_id for c in counts] == [1, 10]
        with pytest.raises(SocialGraphError) as raised:
            await graph.follow(3, 3)
        assert raised.value.code is grpc.StatusCode.INVALID_ARGUMENT
        assert raised.value.reason == "SELF_FOLLOW"
        assert raised.value.metadata == {"user_id": "3"}


async def test_client_covers_requests_blocks_and_relationship_reads(server: ServerRuntime) -> None:
    """Every relationship RPC through the client: plain values out, typed errors with reasons."""
    async with await SocialGraphClient.connect(f"127.0.0.1:{server.port}") as graph:
        await graph.set_privacy(1, True)
        assert not await graph.follow(2, 1)  # a request, not a follow
        assert not await graph.follow(3, 1)
        assert [r.user_id async for r in graph.iter_follow_requests(1, page_size=1)] == [3, 2]
        await graph.accept_follow_request(1, 2)
        await graph.reject_follow_request(1, 3)
        assert [r.user_id async for r in graph.iter_follow_requests(1)] == []
        with pytest.raises(SocialGraphError) as missing:
            await graph.accept_follow_request(1, 3)
        assert (missing.value.code, missing.value.reason) == (grpc.StatusCode.NOT_FOUND, "FOLLOW_REQUEST_NOT_FOUND")

        assert await graph.follow(1, 2)  # 2 is public: 1 and 2 now follow each other
        assert await graph.follow(2, 4)
        assert await graph.follow(4, 5)
        assert [u async for u in graph.iter_mutual_follows(1)] == [2]
        assert [e.user_id async for e in graph.iter_known_followers(1, 1)] == [2]
        assert [(s.user_id, s.mutual_count) for s in await graph.suggest_follows(1)] == [(4, 1)]

        await graph.block(1, 2)
        (rel,) = await graph.get_relationships(1, [2])
        assert (rel.target_id, rel.blocking, rel.following, rel.followed_by) == (2, True, False, False)
        with pytest.raises(SocialGraphError) as blocked:
            await graph.follow(2, 1)
        assert (blocked.value.code, blocked.value.reason) == (grpc.StatusCode.FAILED_PRECONDITION, "BLOCKED")
        await graph.unblock(1, 2)
        assert await graph.follow(1, 2)
        await graph.remove_follower(2, 1)
        assert not await graph.is_following(1, 2)


async def test_client_walks_the_home_timeline(server: ServerRuntime, settings: Settings) -> None:
    """iter_home_timeline yields every tweet newest first across pages; a bad ID is a typed error."""
    fanout = await build_fanout(settings)
    try:
        async with await SocialGraphClient.connect(f"127.0.0.1:{server.port}") as client, tweet_store(settings) as t:
            await client.follow(1, 2)
            tweet_ids = [await post(t, 2) for _ in range(5)]
            for tweet_id in tweet_ids:
                await fanout.fanout.tweet(TweetPosted(tweet_id, 2, created_at_us(tweet_id)))
            assert [i async for i in client.iter_home_timeline(1, page_size=2)] == tweet_ids[::-1]
            page, token = await client.home_timeline_page(1, page_size=3)
            assert page == tweet_ids[:-4:-1]
            assert token
            with pytest.raises(SocialGraphError) as caught:
                await client.home_timeline_page(0)
            assert caught.value.reason == "INVALID_USER_ID"
    finally:
        await fanout.aclose()
