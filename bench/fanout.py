"""Fanout of one tweet to N followers' home timelines vs a raw pipelined Redis write of the same entries.

Run: .venv/bin/python -m bench.fanout [--followers 1000000] [--rounds 2]

Both sides write the same N timeline entries to a private redis-server, one after the other, with
the same batch size (SG_FANOUT_BATCH_SIZE, 1000), on the same client:

- service: ``Fanout.tweet`` as the worker runs it: record the tweet, check the author's follower
  count, page the followers, and push through the merge script (each timeline keeps a tweet once,
  newest first, capped at 800) in pipelined batches while the next page is read;
- baselines: pipelined ``LPUSH home_timeline:{u} <id>`` + ``LTRIM ... 0 799`` (the prepend and trim
  of the seed design), and a bare pipelined ``LPUSH`` per entry (no cap); neither is idempotent
  or ordered. The ratio is taken against the faster of the two.

The followers come from memory here (a ``FollowerSource`` answering from a list), so the
figure is the Redis side, which is what SPEC §8 compares; reading a million followers from
DynamoDB Local (SQLite underneath) would measure DynamoDB Local. SPEC §8 asks the service for at
least 50% of the baseline's rate.

The same fanout also runs on a private 3-master Redis Cluster (``SG_REDIS_CLUSTER=true``: each
batch packed per master, ``graph_service/redis_client/cluster_packed.py``), in the same rounds as
the single node; ``cluster.ratio_to_single_node`` is its best rate over the single node's best
(SPEC §8: at least 50%). On one machine the three masters share its cores with the client.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import re
import subprocess
import tempfile
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import redis.asyncio as aioredis
from redis.asyncio.cluster import RedisCluster
from socialgraph_devstack.processes import free_port, start_redis, start_redis_cluster

from fanout.applier import Fanout
from graph_service.domain.accounts import Lifecycle
from graph_service.domain.models import Cursor, Edge, EdgePage
from graph_service.domain.tweet_ids import TweetIdGenerator, created_at_us
from graph_service.entrypoints.components import build_timelines
from graph_service.entrypoints.fanout import fanout_config
from graph_service.events.kinds import TweetPosted
from graph_service.settings import Settings
from graph_service.timelines import keys, scripts

AUTHOR = 1
CLUSTER_MASTERS = 3


class MemoryFollowers:
    """The fanout's ``FollowerSource``, answered from memory."""

    def __init__(self, followers: Sequence[int]) -> None:
        self._followers = [Edge(user_id=f, at_us=len(followers) - i) for i, f in enumerate(followers)]
        self._index = {edge: i for i, edge in enumerate(self._followers)}

    async def follower_count(self, user_id: int) -> int:
        return len(self._followers)

    async def list_followers(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        start = 0 if after is None else self._index[after] + 1
        entries = self._followers[start : start + limit]
        return EdgePage(entries=entries, has_more=start + limit < len(self._followers))


class EveryonePresent:
    """No author of the benchmark is deactivated: the state read costs nothing here (the service's
    fanout reads each author's state once per tweet, one GetItem)."""

    async def states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]:
        return dict.fromkeys(user_ids, Lifecycle.ACTIVE)


EVERYONE_PRESENT = EveryonePresent()


async def service_rate(settings: Settings, followers: Sequence[int], tweet_id: int) -> float:
    timelines = build_timelines(settings)
    assert timelines is not None
    try:
        await timelines.load_scripts()
        config = fanout_config(settings)
        fanout = Fanout(MemoryFollowers(followers), timelines, config, states=EVERYONE_PRESENT)
        started = time.perf_counter()
        written = await fanout.tweet(TweetPosted(tweet_id, AUTHOR, created_at_us(tweet_id)))
        elapsed = time.perf_counter() - started
    finally:
        await timelines.aclose()
    assert written == len(followers)
    return written / elapsed


async def baseline_rate(
    redis: aioredis.Redis, followers: Sequence[int], tweet_id: int, batch: int, cap: int | None
) -> float:
    """Entries per second of plain pipelined prepends (and trims, when ``cap`` is given)."""
    started = time.perf_counter()
    for start in range(0, len(followers), batch):
        pipe = redis.pipeline(transaction=False)
        for follower in followers[start : start + batch]:
            key = keys.home(follower)
            pipe.lpush(key, tweet_id)
            if cap is not None:
                pipe.ltrim(key, 0, cap - 1)
        await pipe.execute()
    return len(followers) / (time.perf_counter() - started)


async def bytes_per_entry(redis: aioredis.Redis, settings: Settings, ids: TweetIdGenerator) -> float:
    """MEMORY USAGE of a full home timeline divided by its entries."""
    timelines = build_timelines(settings)
    assert timelines is not None
    try:
        tweet_ids = [ids.next_id() for _ in range(settings.timeline_cap)]
        await timelines.merge(10**12, tweet_ids)
    finally:
        await timelines.aclose()
    usage = await redis.memory_usage(keys.home(10**12), samples=0)
    return float(usage or 0) / settings.timeline_cap


async def redis_benchmark_rate(
    redis: aioredis.Redis, redis_url: str, count: int, tweet_id: int, batch: int, settings: Settings
) -> float:
    """The physical baseline: ``redis-benchmark`` (C, pipelined ``batch`` deep) running the service's
    own merge script, one call per entry, on keys spread over ``count`` timelines."""
    sha = await redis.script_load(scripts.MERGE_IDS)
    port = redis_url.rsplit(":", 1)[1].split("/")[0]
    command = [
        "redis-benchmark", "-h", "127.0.0.1", "-p", port, "-n", str(count), "-r", str(count), "-P", str(batch),
        "-c", "2", "-q", "EVALSHA", sha, "1", keys.home(0).replace("{0}", "{__rand_int__}"),
        str(settings.timeline_cap), str(tweet_id),
    ]  # fmt: skip
    done = await asyncio.to_thread(subprocess.run, command, capture_output=True, text=True, check=True)
    match = re.search(r"([\d.]+) requests per second", done.stdout)
    if match is None:
        raise RuntimeError(f"redis-benchmark said: {done.stdout[-300:]} {done.stderr[-300:]}")
    return float(match[1])


async def measure(redis_url: str, cluster_url: str, followers_count: int, rounds: int) -> dict[str, Any]:
    settings = replace(Settings(), redis_url=redis_url, celebrity_threshold=followers_count + 1)
    on_cluster = replace(settings, redis_url=cluster_url, redis_cluster=True)
    followers = list(range(1_000_000, 1_000_000 + followers_count))
    ids = TweetIdGenerator(worker=1)
    redis = aioredis.Redis.from_url(redis_url, decode_responses=True)
    cluster = RedisCluster.from_url(cluster_url, decode_responses=True)
    service: list[float] = []
    clustered: list[float] = []
    trimmed: list[float] = []
    bare: list[float] = []
    batch = settings.fanout_batch_size
    try:
        for _ in range(rounds):
            await redis.flushall()
            trimmed.append(await baseline_rate(redis, followers, ids.next_id(), batch, settings.timeline_cap))
            await redis.flushall()
            bare.append(await baseline_rate(redis, followers, ids.next_id(), batch, None))
            await redis.flushall()
            service.append(await service_rate(settings, followers, ids.next_id()))
            await redis.flushall()  # the single node's timelines take no memory from the cluster's round
            await cluster.flushall(target_nodes=RedisCluster.PRIMARIES)
            clustered.append(await service_rate(on_cluster, followers, ids.next_id()))
            await cluster.flushall(target_nodes=RedisCluster.PRIMARIES)
        await redis.flushall()
        c_rate = await redis_benchmark_rate(redis, redis_url, followers_count, ids.next_id(), batch, settings)
        await redis.flushall()
        per_entry = await bytes_per_entry(redis, settings, ids)
    finally:
        await redis.aclose()
        await cluster.aclose()
    return {
        "followers": followers_count,
        "service_entries_per_s": round(max(service)),
        "baseline_lpush_ltrim_entries_per_s": round(max(trimmed)),
        "baseline_bare_lpush_entries_per_s": round(max(bare)),
        "ratio": round(max(service) / max(*trimmed, *bare), 3),
        "baseline_redis_benchmark_entries_per_s": round(c_rate),
        "ratio_vs_redis_benchmark": round(max(service) / c_rate, 3),
        "bytes_per_timeline_entry_at_cap": round(per_entry, 2),
        "cluster": {
            "masters": CLUSTER_MASTERS,
            "entries_per_s": round(max(clustered)),
            "ratio_to_single_node": round(max(clustered) / max(service), 3),
            "target": ">= 0.5 (SPEC §8)",
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--followers", type=int, default=1_000_000)
    parser.add_argument("--rounds", type=int, default=2, help="alternating runs of each side; the best of each counts")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sg-bench-") as tmp, contextlib.ExitStack() as cleanup:
        base = Path(tmp)
        server = start_redis(free_port(), base / "logs", base / "redis", "--maxmemory-policy", "noeviction")
        cleanup.callback(server.stop)
        ports = [free_port() for _ in range(CLUSTER_MASTERS)]
        cluster = start_redis_cluster(ports, base / "logs", base / "cluster")
        cleanup.callback(cluster.stop)
        result = asyncio.run(
            measure(f"redis://127.0.0.1:{server.port}/0", f"redis://127.0.0.1:{ports[0]}", args.followers, args.rounds)
        )
    result["target"] = ">= 0.5 (SPEC §8)"
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
