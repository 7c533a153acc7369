"""Cached IsFollowing, GetCounts and first-page ListFollowers throughput vs their floor and a bare
grpc.aio echo server, through the Python client.

Run: .venv/bin/python -m bench.cached_reads [--seconds 5] [--concurrency 32] [--cluster]

The service, the echo server and the echo server waiting for a near-cache read fence before it
answers (the floor of a strongly consistent read from memory) run as separate processes on this
machine and are driven by the same closed-loop client, one after the other. SPEC §8 asks the floor
for at least 0.9 of the echo and each read for at least 0.9 of the floor. ``--cluster``: the same on
a 3-master Redis Cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--followers", type=int, default=200)
    parser.add_argument("--cluster", action="store_true", help="on a 3-master Redis Cluster")
    args = parser.parse_args()
    with private_stack(cluster=args.cluster) as stack, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(seed(stack.grpc_target, args.followers))
        with echo_server(stack, Path(tmp)) as echo_port, echo_server(stack, Path(tmp), fenced=True) as fenced_port:
            service = asyncio.run(measure(stack.grpc_target, args.concurrency, args.seconds))
            baseline = asyncio.run(measure(f"127.0.0.1:{echo_port}", args.concurrency, args.seconds))
            floor = asyncio.run(measure(f"127.0.0.1:{fenced_port}", args.concurrency, args.seconds))
    report = {
        "benchmark": "cached_reads",
        "cluster": args.cluster,
        "concurrency": args.concurrency,
        "results": {name: against_floor(service[name], floor[name], baseline[name]) for name in service},
        "echo_with_fence": fence_floor(floor["IsFollowing"], baseline["IsFollowing"]),
    }
    print(json.dumps(report, indent=2))


def against_floor(service: float, floor: float, echo: float) -> dict[str, float]:
    """One read's rates: ``ratio`` to its floor (the fenced echo's same RPC), and to the plain echo."""
    return {
        "service_rps": round(service),
        "floor_rps": round(floor),
        "echo_rps": round(echo),
        "ratio": round(service / floor, 3),
        "ratio_to_echo": round(service / echo, 3),
    }


def fence_floor(fenced: float, echo: float) -> dict[str, float]:
    """The floor itself: the echo's ``IsFollowing`` after a read fence against the plain echo's."""
    return {"fenced_echo_rps": round(fenced), "echo_rps": round(echo), "ratio": round(fenced / echo, 3)}


if __name__ == "__main__":
    main()
