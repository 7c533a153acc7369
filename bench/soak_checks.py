"""What the soak checks once the load has stopped: the consumers caught up (from their /metrics),
``socialgraph fsck --all``, and every home timeline against the tweets the load posted."""

from __future__ import annotations

import asyncio
import re
import time
from dataclasses import dataclass, field

import grpc
from socialgraph.v1 import timeline_pb2 as tl
from socialgraph.v1 import timeline_pb2_grpc as tl_grpc

from bench.soak_load import Graph, Tweet
from bench.soak_stack import SoakStack

__all__ = ["FsckResult", "TimelineResult", "check_timelines", "run_fsck", "settle"]

STREAMS = {"counters": ("counters",), "relay": ("relay:tweets", "relay:followers")}


def _behind(stack: SoakStack) -> str | None:
    """Who has not caught up yet (None: nobody): a stream consumer whose shards' lag is above 0, or a
    fanout with records not committed."""
    for component, consumers in STREAMS.items():
        samples = stack.metric(component, "socialgraph_stream_lag_seconds")
        if samples is None:
            return f"{component}: /metrics does not answer"
        for consumer in consumers:
            lags = [value for labels, value in samples if labels.get("consumer") == consumer]
            if not lags:
                return f"{consumer}: no shard read yet"
            if any(lags):
                return f"{consumer}: lag {max(lags):.1f} s"
    samples = stack.metric("fanout", "socialgraph_fanout_kafka_lag")
    if not samples:
        return "fanout: no partition lag reported (none assigned, or no high-water mark seen)"
    behind = sum(value for _, value in samples)
    return f"fanout: {behind:.0f} records not committed" if behind else None


async def settle(stack: SoakStack, timeout: float) -> tuple[float | None, str]:  # noqa: ASYNC109 - a polling deadline
    """Seconds until counters, relay and fanout report no lag (None, and who is behind, at the deadline)."""
    started = time.monotonic()
    while True:
        behind = await asyncio.to_thread(_behind, stack)
        if behind is None:
            return round(time.monotonic() - started, 1), "caught up"
        if time.monotonic() - started > timeout:
            return None, behind
        await asyncio.sleep(0.5)


@dataclass(frozen=True)
class FsckResult:
    exit_code: int
    summary: str
    lines: list[str]
    """The first violation lines."""
    violations: int
    seconds: float


def run_fsck(stack: SoakStack) -> FsckResult:
    """``socialgraph fsck --all``; a run that did not finish (exit other than 0 or 1) counts as one violation."""
    started = time.monotonic()
    done = stack.command("fsck", "--all", timeout=1800)
    seconds = round(time.monotonic() - started, 1)
    out = done.stdout.strip().splitlines()
    summary = next((line for line in reversed(out) if line.startswith("fsck:")), "")
    if done.returncode not in (0, 1) or not summary:
        tail = " | ".join(done.stderr.strip().splitlines()[-3:])
        return FsckResult(done.returncode, f"fsck did not finish: {tail}", [], 1, seconds)
    found = re.match(r"fsck: (\d+) violations?", summary)
    violations = int(found[1]) if found else 0
    if done.returncode == 1:
        violations = max(violations, 1)
    return FsckResult(done.returncode, summary, [line for line in out if line != summary][:10], violations, seconds)


@dataclass
class TimelineResult:
    users: int
    tweets_checked: int
    """Tweets posted after the last Redis start (the ones a timeline must hold)."""
    tweets_before: int
    """Tweets posted before it: Redis restarted empty, so their pushed entries are gone by design."""
    expected: int
    """(user, tweet) entries that must be present: a checked tweet of an account the user followed all along."""
    beyond_cap: int
    """Expected entries left unchecked: at least ``cap`` newer tweets could have reached that timeline."""
    missing: list[tuple[int, int]] = field(default_factory=list)
    seconds: float = 0.0
    """How long the check polled until nothing was missing (or until its deadline)."""


async def _read_timeline(stub: tl_grpc.TimelineServiceAsyncStub, user: int) -> set[int] | None:
    """Every tweet ID of the user's home timeline, all pages (None if it could not be read)."""
    found: set[int] = set()
    token = ""
    while True:
        for attempt in range(3):
            try:
                page = await stub.GetHomeTimeline(
                    tl.GetHomeTimelineRequest(user_id=user, page_size=100, page_token=token), timeout=10
                )
                break
            except grpc.aio.AioRpcError:
                if attempt == 2:
                    return None
                await asyncio.sleep(0.5)
        found.update(page.tweet_ids)
        token = page.next_page_token
        if not token:
            return found


def _expected(graph: Graph, tweets: list[Tweet], since: float, cap: int) -> tuple[dict[int, set[int]], int]:
    by_author: dict[int, list[int]] = {}
    for tweet in tweets:
        by_author.setdefault(tweet.author_id, []).append(tweet.tweet_id)
    checked = {t.tweet_id for t in tweets if t.posted_at > since}
    expected: dict[int, set[int]] = {}
    beyond = 0
    for user in graph.users:
        reaching = sorted((t for author in graph.sources(user) for t in by_author.get(author, [])), reverse=True)
        rank = {tweet_id: i for i, tweet_id in enumerate(reaching)}  # newest first, as the timeline keeps them
        wanted = {t for author in graph.stable[user] for t in by_author.get(author, []) if t in checked}
        expected[user] = {t for t in wanted if rank[t] < cap}
        beyond += len(wanted) - len(expected[user])
    return expected, beyond


async def check_timelines(
    channel: grpc.aio.Channel,
    graph: Graph,
    tweets: list[Tweet],
    *,
    since: float,
    cap: int,
    timeout: float,  # noqa: ASYNC109 - a polling deadline
) -> TimelineResult:
    """Every user's home timeline (GetHomeTimeline, all pages) holds every tweet posted after
    ``since`` by an account it followed for the whole run; read again until so or ``timeout``."""
    expected, beyond = _expected(graph, tweets, since, cap)
    checked = sum(1 for t in tweets if t.posted_at > since)
    result = TimelineResult(len(graph.users), checked, len(tweets) - checked, sum(map(len, expected.values())), beyond)
    stub = tl_grpc.TimelineServiceStub(channel)
    limit = asyncio.Semaphore(16)
    pending = {user: wanted for user, wanted in expected.items() if wanted}
    started = time.monotonic()

    async def still_missing(user: int, wanted: set[int]) -> set[int]:
        async with limit:
            found = await _read_timeline(stub, user)
        return wanted if found is None else wanted - found

    while True:
        left = await asyncio.gather(*(still_missing(user, wanted) for user, wanted in pending.items()))
        pending = {user: missing for user, missing in zip(pending, left, strict=True) if missing}
        if not pending or time.monotonic() - started > timeout:
            break
        await asyncio.sleep(1.0)
    result.seconds = round(time.monotonic() - started, 1)
    result.missing = sorted((user, t) for user, missing in pending.items() for t in missing)
    return result
