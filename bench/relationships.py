"""GetRelationships of 100 targets vs single IsFollowing calls, both served warm from Redis.

Run: .venv/bin/python -m bench.relationships [--seconds 5] [--concurrency 32] [--cluster]
Same service, same client, one after the other; the figure is targets answered per second.
SPEC §8 asks the batch for at least 30x the targets/s of single IsFollowing calls. ``--cluster``:
on a 3-master Redis Cluster.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json

import grpc
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from bench.harness import closed_loop, private_stack

ACTOR = 1
TARGETS = list(range(100, 200))


async def measure(target: str, concurrency: int, seconds: float) -> dict[str, float]:
    async with grpc.aio.insecure_channel(target) as channel:
        stub = pb_grpc.SocialGraphServiceStub(channel)
        await asyncio.gather(*(stub.Follow(pb.FollowRequest(follower_id=ACTOR, followee_id=t)) for t in TARGETS[::2]))
        await asyncio.gather(*(stub.Follow(pb.FollowRequest(follower_id=t, followee_id=ACTOR)) for t in TARGETS[::3]))
        batch = pb.GetRelationshipsRequest(actor_id=ACTOR, target_ids=TARGETS)
        singles = itertools.cycle([pb.IsFollowingRequest(follower_id=ACTOR, followee_id=t) for t in TARGETS])
        for _ in range(20):  # warm: the first call fills the relationship cache
            await stub.GetRelationships(batch)
        for _ in range(2 * len(TARGETS)):
            await stub.IsFollowing(next(singles))
        batch_rps = await closed_loop(lambda: stub.GetRelationships(batch), concurrency=concurrency, seconds=seconds)
        single_rps = await closed_loop(
            lambda: stub.IsFollowing(next(singles)), concurrency=concurrency, seconds=seconds
        )
        return {"batch_targets_per_s": batch_rps * len(TARGETS), "single_targets_per_s": single_rps}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--cluster", action="store_true", help="on a 3-master Redis Cluster")
    args = parser.parse_args()
    with private_stack(cluster=args.cluster) as stack:
        result = asyncio.run(measure(stack.grpc_target, args.concurrency, args.seconds))
    report = {
        "benchmark": "relationships",
        "cluster": args.cluster,
        "targets_per_call": len(TARGETS),
        "get_relationships_targets_per_s": round(result["batch_targets_per_s"]),
        "is_following_targets_per_s": round(result["single_targets_per_s"]),
        "ratio": round(result["batch_targets_per_s"] / result["single_targets_per_s"], 2),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
