"""Cached IsFollowing, GetCounts and first-page ListFollowers throughput vs a bare grpc.aio echo server.

Run: .venv/bin/python -m bench.cached_reads [--seconds 5] [--concurrency 32]
Both servers run as separate processes on this machine and are driven by the same closed-loop
client, one after the other; the figure that matters is the ratio (SPEC §8 asks >= 0.8).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from bench.harness import closed_loop, echo_server, private_stack

FOLLOWEE = 7


def calls(stub: pb_grpc.SocialGraphServiceAsyncStub) -> dict[str, Callable[[], Awaitable[object]]]:
    return {
        "IsFollowing": lambda: stub.IsFollowing(pb.IsFollowingRequest(follower_id=1000, followee_id=FOLLOWEE)),
        "GetCounts": lambda: stub.GetCounts(pb.GetCountsRequest(user_id=FOLLOWEE)),
        "ListFollowers(first page)": lambda: stub.ListFollowers(pb.ListFollowersRequest(user_id=FOLLOWEE)),
    }


async def measure(target: str, concurrency: int, seconds: float) -> dict[str, float]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        results = {}
        for name, call in calls(stub).items():
            for _ in range(200):  # warm: connections, caches, JIT-free but allocator-warm
                await call()
            results[name] = await closed_loop(call, concurrency=concurrency, seconds=seconds)
        return results


async def seed(target: str, followers: int) -> None:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        for start in range(0, followers, 50):
            await asyncio.gather(
                *(
                    stub.Follow(pb.FollowRequest(follower_id=1000 + i, followee_id=FOLLOWEE))
                    for i in range(start, min(followers, start + 50))
                )
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--followers", type=int, default=200)
    args = parser.parse_args()
    # The service's /metrics on a free port (not 9464, which a running `socialgraph up` may hold).
    os.environ.setdefault("SG_METRICS_ADDRESS", "127.0.0.1:0")
    with private_stack() as stack, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(seed(stack.grpc_target, args.followers))
        with echo_server(stack.env, Path(tmp)) as echo_port:
            service = asyncio.run(measure(stack.grpc_target, args.concurrency, args.seconds))
            baseline = asyncio.run(measure(f"127.0.0.1:{echo_port}", args.concurrency, args.seconds))
    report = {
        name: {
            "service_rps": round(service[name]),
            "echo_rps": round(baseline[name]),
            "ratio": round(service[name] / baseline[name], 3),
        }
        for name in service
    }
    print(json.dumps({"benchmark": "cached_reads", "concurrency": args.concurrency, "results": report}, indent=2))


if __name__ == "__main__":
    main()
