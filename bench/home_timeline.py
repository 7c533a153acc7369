"""The home timeline read: the first page of 20 for a user following 200 accounts with a full
timeline (800 entries), warm, against a bare grpc.aio echo answering the same page.

Run: .venv/bin/python -m bench.home_timeline [--seconds 4] [--concurrency 32] [--cluster]

Seeded without the pipeline: 200 follows through the service; 5 of the followed accounts are
celebrities (in the celebrity set, 20 recent tweets each, pulled when the page is read, as SPEC §4
has it); 800 tweet IDs of the other accounts merged into the user's timeline and their authors
recorded, as the fanout would leave them.
Measured twice, like the cached reads: h2load (4 connections x 16 streams) and the Python client
(closed loop), each against the service and against ``bench.echo_server``; SPEC §8 asks at least
0.6 of the echo. ``--cluster``: on a 3-master Redis Cluster (the timelines and the graph cache).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import tempfile
from pathlib import Path

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc
from socialgraph.v1 import timeline_pb2 as tpb
from socialgraph.v1 import timeline_pb2_grpc as tpb_grpc

from bench.cached_reads_h2load import grpc_frame, h2load
from bench.harness import closed_loop, echo_server, private_stack
from graph_service.domain.tweet_ids import TweetIdGenerator
from graph_service.entrypoints.components import build_timelines
from graph_service.settings import Settings

READER = 1
FOLLOWED = range(1001, 1201)
ENTRIES = 800
CELEBRITIES = FOLLOWED[:5]
"""Followed accounts whose tweets are pulled at read time (SPEC §8: "some of them celebrities")."""
CELEBRITY_TWEETS = 20
SERVICE = "/socialgraph.v1.TimelineService"


async def seed(target: str, settings: Settings) -> set[int]:
    """Seed the reader's graph and timelines; the celebrities' (pulled) tweet IDs."""
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        followed = list(FOLLOWED)
        for start in range(0, len(followed), 50):
            await asyncio.gather(
                *(
                    stub.Follow(pb.FollowRequest(follower_id=READER, followee_id=a))
                    for a in followed[start : start + 50]
                )
            )
    timelines = build_timelines(settings)
    assert timelines is not None
    ids = TweetIdGenerator(worker=3)
    rng = random.Random(7)
    pushed = [a for a in followed if a not in CELEBRITIES]
    tweets = [ids.next_id() for _ in range(ENTRIES + CELEBRITY_TWEETS * len(CELEBRITIES))]
    pulled = set(rng.sample(tweets, CELEBRITY_TWEETS * len(CELEBRITIES)))  # spread in time among the pushed
    authored = {t: rng.choice(pushed) for t in tweets if t not in pulled}
    try:
        for star in CELEBRITIES:
            await timelines.mark_celebrity(star, 1_000_000)
        for i, tweet in enumerate(sorted(pulled)):
            await timelines.record_tweet(CELEBRITIES[i % len(CELEBRITIES)], tweet)
        await timelines.merge(READER, list(authored))
        await timelines.fill_authors(authored)
    finally:
        await timelines.aclose()
    return pulled


async def first_page(target: str) -> list[int]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = tpb_grpc.TimelineServiceStub(channel)
        reply = await stub.GetHomeTimeline(tpb.GetHomeTimelineRequest(user_id=READER, page_size=20))
        return list(reply.tweet_ids)


async def python_rate(target: str, concurrency: int, seconds: float) -> float:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = tpb_grpc.TimelineServiceStub(channel)
        request = tpb.GetHomeTimelineRequest(user_id=READER, page_size=20)
        for _ in range(200):
            reply = await stub.GetHomeTimeline(request)
        assert len(reply.tweet_ids) == 20, reply
        return await closed_loop(lambda: stub.GetHomeTimeline(request), concurrency=concurrency, seconds=seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=int, default=4)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--cluster", action="store_true", help="on a 3-master Redis Cluster")
    args = parser.parse_args()
    with private_stack(cluster=args.cluster) as stack, tempfile.TemporaryDirectory() as tmp:
        pulled = asyncio.run(seed(stack.grpc_target, stack.settings))
        page = asyncio.run(first_page(stack.grpc_target))
        if not pulled & set(page):  # the page must merge pulled tweets, or it measures less than SPEC asks
            raise SystemExit(f"the first page holds no celebrity's tweet: {page}")
        body = Path(tmp) / "home.bin"
        body.write_bytes(grpc_frame(tpb.GetHomeTimelineRequest(user_id=READER, page_size=20)))
        port = stack.ports.grpc
        with echo_server(stack, Path(tmp)) as echo_port:
            service_py = asyncio.run(python_rate(stack.grpc_target, args.concurrency, args.seconds))
            echo_py = asyncio.run(python_rate(f"127.0.0.1:{echo_port}", args.concurrency, args.seconds))
            results: dict[str, dict[str, float]] = {
                "python_client": {"service_rps": round(service_py), "echo_rps": round(echo_py)},
            }
            if shutil.which("h2load") is not None:
                service_h2 = h2load(port, "GetHomeTimeline", body, args.seconds, service=SERVICE)
                echo_h2 = h2load(echo_port, "GetHomeTimeline", body, args.seconds, service=SERVICE)
                results["h2load"] = {"service_rps": round(service_h2), "echo_rps": round(echo_h2)}
    for figures in results.values():
        figures["ratio"] = round(figures["service_rps"] / figures["echo_rps"], 3)
    report = {
        "benchmark": "home_timeline",
        "cluster": args.cluster,
        "following": len(FOLLOWED),
        "celebrities": len(CELEBRITIES),
        "entries": ENTRIES,
        "results": results,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
