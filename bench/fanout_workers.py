"""Fanout workers scale with partitions: home-timeline entries written per second by one fanout
worker process and by two in the same consumer group, on a tweets topic of several partitions.

Run: .venv/bin/python -m bench.fanout_workers [--authors 40] [--followers 2000] [--tweets 400] [--partitions 4]

A private stack on free ports in a temp folder: DynamoDB Local (tables from ``create-tables``),
redis-server and the Kafka-protocol broker (tansu), the topics made by ``create-topics`` with
SG_TOPIC_PARTITIONS partitions. No serve, counters or relay: the TweetCreated records are produced
here as the relay encodes them (``encode``: key = tweet ID, the two headers), and the workers
are ``python -m graph_service fanout`` processes, each with a metrics port of its own.

Followers (``--followers`` per author, distinct per author, below SG_CELEBRITY_THRESHOLD so every
tweet is pushed) are seeded into the Redis graph cache through ``GraphCache``'s own ``fill_list``
and ``set_counts``: what a read-through fill and the counters consumer leave behind. So the workers
read each author's count and follower pages from Redis, as they do for every author whose list is
cached (a warm cache); DynamoDB holds no edges. The workers' cache misses are reported (0 expected:
a miss would read an empty list from DynamoDB and the run would not complete).

Each configuration (1 worker, then 2) has a tweets topic and a consumer group of its own (the
graph-events topic is shared and stays empty), so it starts on an empty topic with no committed
offsets and no member of the other run in its group. One configuration:

1. its worker(s) start; polled (with a deadline) until each answers ``/readyz`` and the group's
   assignment, read from each worker's per-partition lag series, is settled: every partition of
   both topics owned by exactly one worker, and each worker owning some;
2. warm-up: one tweet of a small extra author on each tweets partition, waited for in the workers'
   ``socialgraph_fanout_events{kind="tweet"}`` (every consumer has fetched and opened its Redis
   connections before the clock starts);
3. the clock starts; T records are produced (tweet i by author i mod A on partition i mod P: every
   partition gets T/P tweets, each author's stay in order on one partition) and acknowledged; the
   workers' ``socialgraph_fanout_timeline_entries_written`` is polled every 50 ms, and the clock
   stops at the end of the first poll whose sum grew by T x F since the warm-up;
4. Redis is then checked: the sum of LLEN over every follower's home timeline must be exactly
   T x F (the merge keeps a tweet once, so a record delivered twice cannot inflate it); if it is
   short, Redis itself is polled and the clock stops at the end of the first exact poll instead.

entries/s = T x F / elapsed. Between the configurations the home timelines and recent-tweet lists
are deleted. The report gives both rates and their ratio, and per run and worker the tweets
partitions it owned, the tweets it handled, the entries it wrote, its graph cache hits and misses
and the CPU seconds it used while timed (with redis-server's, and the 1-minute load average at the
end), to tell a run that scaled from one that had no spare core. SPEC: fanout workers scale with
partitions. On a 2-core machine the two workers share the cores with Redis, the broker and this
process, so the ratio cannot get near 2 there.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import redis.asyncio as aioredis
from aiokafka import AIOKafkaProducer
from prometheus_client.parser import text_string_to_metric_families
from socialgraph_devstack.processes import free_port, start_dynamodb_local, start_kafka_broker, start_redis
from socialgraph_devstack.stack import local_environment

from bench.harness import http_get, start_process, stop_process
from graph_service.cache.keys import TRUST_GENERATION
from graph_service.domain.models import Counts, Direction, Edge
from graph_service.domain.times import now_us
from graph_service.domain.tweet_ids import TweetIdGenerator, created_at_us
from graph_service.entrypoints.components import build_graph_cache
from graph_service.events.kafka import client_options
from graph_service.events.kinds import TweetPosted, encode
from graph_service.settings import Settings
from graph_service.timelines import keys

FOLLOWER_BASE = 10_000_000
"""Follower ``j`` of author ``a`` (1-based) is ``FOLLOWER_BASE + (a - 1) * F + j``."""
WARM_AUTHOR = 9_000_000
WARM_FOLLOWERS = 20
POLL_SECONDS = 0.05
JOIN_TIMEOUT = 120.0
WARM_TIMEOUT = 60.0
REDIS_CHUNK = 10_000

T = TypeVar("T")
Samples = list[tuple[str, dict[str, str], float]]
"""(sample name, labels, value) of one scrape."""


def progress(message: str) -> None:
    print(f"[fanout_workers] {message}", file=sys.stderr, flush=True)


# -- the workload -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Workload:
    authors: int
    followers: int
    tweets: int
    partitions: int

    def followers_of(self, author: int) -> range:
        start = FOLLOWER_BASE + (author - 1) * self.followers
        return range(start, start + self.followers)

    def all_followers(self) -> range:
        return range(FOLLOWER_BASE, FOLLOWER_BASE + self.authors * self.followers)

    @property
    def expected_entries(self) -> int:
        return self.tweets * self.followers


async def seed_followers(settings: Settings, work: Workload) -> None:
    """Every author's followers and counts in the graph cache, as a read-through fill leaves them."""
    cache = build_graph_cache(settings)
    if cache is None:
        raise RuntimeError("the benchmark needs Redis: SG_REDIS_URL is empty")
    # No serving process runs here to keep the cache's trust record (cache/lease.py): write the
    # generation a reset would, so that the workers read the lists as they would beside `serve`.
    trust = aioredis.from_url(settings.redis_url)
    await trust.set(TRUST_GENERATION, "bench")
    await trust.aclose()
    try:
        authors = {a: work.followers_of(a) for a in range(1, work.authors + 1)}
        authors[WARM_AUTHOR] = range(WARM_AUTHOR + 1, WARM_AUTHOR + 1 + WARM_FOLLOWERS)
        base = now_us()
        for author, followers in authors.items():

            async def edges(followers: range = followers) -> AsyncIterator[Edge]:
                for j, follower in enumerate(followers):  # newest first, as the list is kept
                    yield Edge(user_id=follower, at_us=base - j)

            seen = await cache.epoch(author)
            if seen is None or not await cache.fill_list(Direction.FOLLOWERS, author, seen, edges()):
                raise RuntimeError(f"the follower list of {author} could not be cached")
            if not await cache.set_counts(author, Counts(followers=len(followers), following=0, version=1)):
                raise RuntimeError(f"the counts of {author} could not be cached")
    finally:
        await cache.aclose()


async def produce(producer: Any, topic: str, records: Sequence[tuple[int, int, int]]) -> None:
    """(tweet_id, author_id, partition) all sent, then all acknowledged."""
    pending = []
    for tweet_id, author_id, partition in records:
        record = encode(TweetPosted(tweet_id, author_id, created_at_us(tweet_id)))
        pending.append(
            await producer.send(topic, record.value, key=record.key, headers=record.headers, partition=partition)
        )
    await asyncio.gather(*pending)


# -- Redis ------------------------------------------------------------------------------------


async def timeline_entries(client: aioredis.Redis, users: range) -> int:
    total = 0
    for start in range(0, len(users), REDIS_CHUNK):
        pipe = client.pipeline(transaction=False)
        for user in users[start : start + REDIS_CHUNK]:
            pipe.llen(keys.home(user))
        total += sum(int(n) for n in await pipe.execute())
    return total


async def delete_timelines(client: aioredis.Redis, work: Workload) -> None:
    users = [*work.all_followers(), *range(WARM_AUTHOR + 1, WARM_AUTHOR + 1 + WARM_FOLLOWERS)]
    doomed = [keys.home(u) for u in users] + [keys.recent(a) for a in [*range(1, work.authors + 1), WARM_AUTHOR]]
    for start in range(0, len(doomed), REDIS_CHUNK):
        await client.unlink(*doomed[start : start + REDIS_CHUNK])


# -- the workers ------------------------------------------------------------------------------


@dataclass
class Worker:
    process: subprocess.Popen[bytes]
    metrics_port: int
    log: Path
    baseline: dict[str, float] = field(default_factory=dict)
    cpu_at_start: float = 0.0

    def check_alive(self) -> None:
        code = self.process.poll()
        if code is not None:
            lines = self.log.read_text(errors="replace").strip().splitlines()[-5:]
            raise RuntimeError(f"fanout worker (metrics :{self.metrics_port}) exited {code}: " + "\n".join(lines))


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a running process so far (``/proc/<pid>/stat``, fields 14 and 15)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _scrape(port: int) -> Samples:
    text = http_get(port, "/metrics")[1]
    return [
        (sample.name, dict(sample.labels), sample.value)
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    ]


async def scrape(workers: Sequence[Worker]) -> list[Samples]:
    for worker in workers:
        worker.check_alive()
    return list(await asyncio.gather(*(asyncio.to_thread(_scrape, w.metrics_port) for w in workers)))


async def all_ready(workers: Sequence[Worker]) -> bool:
    for worker in workers:
        worker.check_alive()
    codes = await asyncio.gather(*(asyncio.to_thread(_ready_code, w.metrics_port) for w in workers))
    return all(code == 200 for code in codes)


def _ready_code(port: int) -> int:
    try:
        return http_get(port, "/readyz")[0]
    except OSError:
        return 0


def value(samples: Samples, name: str, **labels: str) -> float:
    return sum(v for n, lb, v in samples if n == name and all(lb.get(k) == x for k, x in labels.items()))


def owned(samples: Samples) -> set[tuple[str, int]]:
    """The (topic, partition)s a worker owns, from its lag series (present once it has fetched them)."""
    return {(lb["topic"], int(lb["partition"])) for n, lb, _ in samples if n == "socialgraph_fanout_kafka_lag"}


ENTRIES = "socialgraph_fanout_timeline_entries_written_total"
EVENTS = "socialgraph_fanout_events_total"
KINDS = ("lists", "counts")
"""The graph cache reads of the fanout: an author's count and follower pages."""


def counters(samples: Samples) -> dict[str, float]:
    return {"entries": value(samples, ENTRIES), "tweets": value(samples, EVENTS, kind="tweet")}


async def poll_until(
    probe: Callable[[], Awaitable[T]], done: Callable[[T], bool], what: str, limit: float
) -> tuple[T, float]:
    """``await probe()`` every POLL_SECONDS until ``done`` says so: its answer, and the
    ``perf_counter`` time the poll ended."""
    deadline = time.monotonic() + limit
    while True:
        got = await probe()
        ended = time.perf_counter()
        if done(got):
            return got, ended
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not done after {limit:.0f}s (last seen: {got!r})")
        await asyncio.sleep(POLL_SECONDS)


# -- one configuration ------------------------------------------------------------------------


async def run_configuration(
    env: dict[str, str], logs: Path, work: Workload, n_workers: int, limit: float, redis_pid: int
) -> dict[str, Any]:
    settings = Settings.from_env(env)
    every_partition = {
        (topic, p) for topic in (settings.tweets_topic, settings.graph_events_topic) for p in range(work.partitions)
    }
    ids = TweetIdGenerator(worker=n_workers)
    with contextlib.ExitStack() as cleanup:
        client = aioredis.Redis.from_url(settings.redis_url)
        producer = AIOKafkaProducer(**client_options(settings), acks="all")
        try:
            await producer.start()
            workers: list[Worker] = []
            started = time.perf_counter()
            for i in range(n_workers):
                port = free_port()
                log = logs / f"fanout-{n_workers}w-{i}.log"
                process = start_process(
                    ["-m", "graph_service", "fanout"], {**env, "SG_METRICS_ADDRESS": f"127.0.0.1:{port}"}, log
                )
                cleanup.callback(stop_process, process)
                workers.append(Worker(process, port, log))

            # 1. ready, and the group's assignment settled
            await poll_until(lambda: all_ready(workers), bool, f"{n_workers} worker(s) ready", JOIN_TIMEOUT)

            def settled(all_samples: list[Samples]) -> bool:
                sets = [owned(s) for s in all_samples]
                union: set[tuple[str, int]] = set().union(*sets)
                return all(sets) and sum(map(len, sets)) == len(union) and union == every_partition

            assigned, _ = await poll_until(
                lambda: scrape(workers), settled, f"{n_workers} worker(s) sharing the partitions", JOIN_TIMEOUT
            )
            join_seconds = time.perf_counter() - started
            progress(f"{n_workers} worker(s) joined in {join_seconds:.1f}s")

            # 2. warm-up: one small tweet per partition
            warm = [(ids.next_id(), WARM_AUTHOR, p) for p in range(work.partitions)]
            await produce(producer, settings.tweets_topic, warm)
            warmed, _ = await poll_until(
                lambda: scrape(workers),
                lambda s: sum(counters(x)["tweets"] for x in s) >= len(warm),
                "warm-up tweets",
                WARM_TIMEOUT,
            )
            for worker, samples in zip(workers, warmed, strict=True):
                worker.baseline = counters(samples)
            base_entries = sum(w.baseline["entries"] for w in workers)

            # 3. the timed run
            records = [(ids.next_id(), i % work.authors + 1, i % work.partitions) for i in range(work.tweets)]
            progress(f"{n_workers} worker(s): producing {work.tweets} tweets -> {work.expected_entries} entries")
            for worker in workers:
                worker.cpu_at_start = cpu_seconds(worker.process.pid)
            redis_cpu = cpu_seconds(redis_pid)
            clock = time.perf_counter()
            await produce(producer, settings.tweets_topic, records)
            produced = time.perf_counter() - clock
            _, ended = await poll_until(
                lambda: scrape(workers),
                lambda s: sum(counters(x)["entries"] for x in s) - base_entries >= work.expected_entries,
                "timeline entries written",
                limit,
            )

            # 4. checked in Redis
            users = work.all_followers()
            found = await timeline_entries(client, users)
            if found != work.expected_entries:
                progress(f"metrics said done but Redis holds {found} of {work.expected_entries}; polling Redis")
                found, ended = await poll_until(
                    lambda: timeline_entries(client, users),
                    lambda n: n >= work.expected_entries,
                    "timeline entries in Redis",
                    limit,
                )
            if found != work.expected_entries:
                raise RuntimeError(f"Redis holds {found} timeline entries, {work.expected_entries} expected")
            elapsed = ended - clock
            redis_cpu = cpu_seconds(redis_pid) - redis_cpu
            worker_cpu = [cpu_seconds(w.process.pid) - w.cpu_at_start for w in workers]
            load = os.getloadavg()[0]
            after = await scrape(workers)
        finally:
            # Best effort, so a failure above is the one reported; timelines left behind by a failed
            # delete would make the next run's Redis check fail loudly (more entries than expected).
            with contextlib.suppress(Exception):
                await producer.stop()
            with contextlib.suppress(Exception):
                await delete_timelines(client, work)
            await client.aclose()

    per_worker = []
    for worker, owned_at_start, samples, cpu in zip(workers, assigned, after, worker_cpu, strict=True):
        now = counters(samples)
        per_worker.append(
            {
                "tweet_partitions": sorted(p for t, p in owned(owned_at_start) if t == settings.tweets_topic),
                "tweet_partitions_at_end": sorted(p for t, p in owned(samples) if t == settings.tweets_topic),
                "tweets_handled": round(now["tweets"] - worker.baseline["tweets"]),
                "entries_written": round(now["entries"] - worker.baseline["entries"]),
                "cpu_seconds": round(cpu, 2),
                "cache_hits": {k: round(value(samples, "socialgraph_cache_hits_total", kind=k)) for k in KINDS},
                "cache_misses": {k: round(value(samples, "socialgraph_cache_misses_total", kind=k)) for k in KINDS},
            }
        )
    rate = work.expected_entries / elapsed
    progress(f"{n_workers} worker(s): {work.expected_entries} entries in {elapsed:.2f}s = {rate:,.0f}/s")
    return {
        "workers": n_workers,
        "entries": work.expected_entries,
        "seconds": round(elapsed, 3),
        "entries_per_s": round(rate),
        "produce_seconds": round(produced, 3),
        "join_seconds": round(join_seconds, 1),
        "redis_cpu_seconds": round(redis_cpu, 2),
        "load_average_1m_at_end": round(load, 2),
        "per_worker": per_worker,
    }


# -- the stack --------------------------------------------------------------------------------


def command(env: dict[str, str], *args: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "graph_service", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} exited {done.returncode}: {done.stderr.strip()[-500:]}")


def configuration_env(env: dict[str, str], n_workers: int) -> dict[str, str]:
    return {**env, "SG_TWEETS_TOPIC": f"bench-tweets-{n_workers}w", "SG_FANOUT_GROUP": f"bench-fanout-{n_workers}w"}


def measure(work: Workload, timeout: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="sg-bench-") as tmp, contextlib.ExitStack() as cleanup:
        base = Path(tmp)
        logs = base / "logs"
        progress("starting DynamoDB Local, Redis and the broker")
        dynamo = start_dynamodb_local(free_port(), logs)
        cleanup.callback(dynamo.stop)
        redis = start_redis(free_port(), logs, base / "redis", "--maxmemory-policy", "noeviction")
        cleanup.callback(redis.stop)
        broker = start_kafka_broker(free_port(), logs)
        cleanup.callback(broker.stop)
        env = local_environment(dynamo.port, redis.port, broker.port)
        env.update(SG_LOG_LEVEL="warning", SG_TABLE_PREFIX="bench_", SG_TOPIC_PARTITIONS=str(work.partitions))
        for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
            os.environ.setdefault(name, env[name])
        settings = Settings.from_env(env)
        if work.followers >= settings.celebrity_threshold:
            raise SystemExit(f"--followers must stay below SG_CELEBRITY_THRESHOLD ({settings.celebrity_threshold})")
        if work.followers > settings.adjacency_cache_limit:
            raise SystemExit(
                f"--followers above SG_ADJACENCY_CACHE_LIMIT ({settings.adjacency_cache_limit}) cannot be cached"
            )
        if -(-work.tweets // work.authors) > settings.timeline_cap:
            raise SystemExit(f"more than SG_TIMELINE_CAP ({settings.timeline_cap}) tweets per author")
        command(env, "create-tables")
        for n in (1, 2):
            command(configuration_env(env, n), "create-topics")
        progress(f"seeding {work.authors} x {work.followers} followers into the graph cache")
        asyncio.run(seed_followers(settings, work))
        runs = [
            asyncio.run(run_configuration(configuration_env(env, n), logs, work, n, timeout, redis.process.pid))
            for n in (1, 2)
        ]
    one, two = runs
    return {
        "benchmark": "fanout_workers",
        "partitions": work.partitions,
        "authors": work.authors,
        "followers_per_author": work.followers,
        "tweets": work.tweets,
        "one_worker_entries_per_s": one["entries_per_s"],
        "two_workers_entries_per_s": two["entries_per_s"],
        "ratio": round(two["entries_per_s"] / one["entries_per_s"], 3),
        "runs": runs,
        "cores": os.cpu_count(),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--authors", type=int, default=40)
    parser.add_argument("--followers", type=int, default=2_000, help="per author (distinct followers)")
    parser.add_argument("--tweets", type=int, default=400, help="per configuration")
    parser.add_argument("--partitions", type=int, default=4, help="SG_TOPIC_PARTITIONS of the topics")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds one configuration may take")
    args = parser.parse_args()
    if min(args.authors, args.followers, args.tweets, args.partitions) < 1:
        parser.error("--authors, --followers, --tweets and --partitions must be at least 1")
    work = Workload(args.authors, args.followers, args.tweets, args.partitions)
    started = time.monotonic()
    report = measure(work, args.timeout)
    progress(f"done in {time.monotonic() - started:.0f}s")
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
