"""Counts after a burst of follows: how long after the burst's last acknowledged ``Follow`` every
affected user's counts are exact, over several bursts.

Run: .venv/bin/python -m bench.counts_convergence [--followers 100] [--followees 100] [--bursts 3]

A private stack (DynamoDB Local with streams, Redis, ``serve``) and the ``counters`` consumer as a
process of its own, as deployed. Each burst is ``followers x followees`` follows (10,000 by
default) made through ``serve`` by 64 concurrent callers, by followers new to that burst (so no
one passes the follow rate limit) onto the same followees (whose follower counts grow burst after
burst, the hot rows). From the moment the last ``Follow`` of the burst returns, ``BatchGetCounts``
over every affected user is polled back to back; the burst's convergence time is from that moment
to the start of the first poll that found every count exact. SPEC §8: within 1 s. The report gives
each burst's time and their median and maximum; the baseline is the 1 s of the target.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from bench.harness import private_stack, start_process, stop_process

CONCURRENCY = 64
BATCH = 100
"""Users per ``BatchGetCounts`` (its maximum)."""
TARGET_SECONDS = 1.0
GIVE_UP_SECONDS = 120.0
FOLLOWEE_BASE = 1_000_000


async def burst(stub: pb_grpc.SocialGraphServiceAsyncStub, followers: list[int], followees: list[int]) -> float:
    """Every follower follows every followee; the monotonic time the last call returned."""
    pairs = [(a, b) for a in followers for b in followees]
    queue = iter(pairs)
    last = 0.0

    async def caller() -> None:
        nonlocal last
        for a, b in queue:
            await stub.Follow(pb.FollowRequest(follower_id=a, followee_id=b), timeout=60)
            last = max(last, time.monotonic())

    await asyncio.gather(*(caller() for _ in range(CONCURRENCY)))
    return last


async def exact(stub: pb_grpc.SocialGraphServiceAsyncStub, expected: dict[int, tuple[int, int]]) -> bool:
    users = list(expected)
    replies = await asyncio.gather(
        *(
            stub.BatchGetCounts(pb.BatchGetCountsRequest(user_ids=users[i : i + BATCH]), timeout=10)
            for i in range(0, len(users), BATCH)
        )
    )
    return all((c.followers_count, c.following_count) == expected[c.user_id] for reply in replies for c in reply.counts)


async def run(target: str, followers: int, followees: int, bursts: int) -> list[float]:
    stars = [FOLLOWEE_BASE + i for i in range(followees)]
    times: list[float] = []
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        for n in range(bursts):
            fans = [n * followers + i + 1 for i in range(followers)]
            expected = {u: (0, followees) for u in fans} | {s: (followers * (n + 1), 0) for s in stars}
            last_ack = await burst(stub, fans, stars)
            while True:
                polled_at = time.monotonic()
                if await exact(stub, expected):
                    break
                if polled_at - last_ack > GIVE_UP_SECONDS:
                    raise TimeoutError(f"burst {n}: counts not exact {GIVE_UP_SECONDS} s after the last follow")
            times.append(max(0.0, polled_at - last_ack))
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, default=100, help="new followers per burst")
    parser.add_argument("--followees", type=int, default=100, help="accounts every follower follows")
    parser.add_argument("--bursts", type=int, default=3)
    args = parser.parse_args()
    with private_stack() as stack, tempfile.TemporaryDirectory() as tmp:
        counters = start_process(["-m", "graph_service", "counters"], stack.env, Path(tmp) / "counters.log")
        try:
            started = time.monotonic()
            times = asyncio.run(run(stack.grpc_target, args.followers, args.followees, args.bursts))
            elapsed = time.monotonic() - started
        finally:
            stop_process(counters)
    follows = args.followers * args.followees
    report = {
        "benchmark": "counts_convergence",
        "follows_per_burst": follows,
        "bursts": args.bursts,
        "follows_per_second": round(follows * args.bursts / elapsed),
        "convergence_s": [round(t, 3) for t in times],
        "median_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "target_s": TARGET_SECONDS,
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
