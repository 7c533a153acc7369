"""A soak: mixed load at about 70 % of the measured capacity for a given time, with faults injected
on a schedule, then ``socialgraph fsck --all`` and every home timeline checked.

Run: .venv/bin/python -m bench.soak [--minutes 10] [--users 1000] [--load 0.7] [--json FILE] [--keep]

1. Its own stack on free ports in a temp folder (``bench/soak_stack.py``): DynamoDB Local in
   memory, redis-server, the broker, ``python -m graph_service serve|counters|relay|fanout`` each
   with its own SG_METRICS_ADDRESS. A running ``socialgraph up`` is never touched.
2. The graph (``bench/soak_load.py``): each user follows 5 accounts for the whole run (made before
   the load) and the load toggles 3 more per user.
3. Capacity: the mix by 32 unpaced callers for --capacity-seconds; then the run: the same mix by 64
   callers paced to --load times that rate, for --minutes, while ``bench/soak_faults.py`` injects
   each fault once per 5 minutes (at least once), spread evenly: Redis restarted empty, counters
   and fanout ``kill -9``, the broker ``kill -9`` and started again, then ``create-topics``.
4. After the load: wait until the counters, relay and fanout report no lag, run ``fsck --all``,
   read every home timeline (``bench/soak_checks.py``).

Violations: fsck's, missing timeline entries (a tweet posted after the last Redis start by an
account the user followed all along), stale reads (IsFollowing older than the same caller's
acknowledged write), unexpected errors (any outside a fault window, anything but UNAVAILABLE in
one) and crashes (a process that exited without the soak stopping it; the soak starts the
service's processes again with backoff, as a process manager would). The report
(``bench/soak_report.py``) ends with ``violations: N``; the exit code is 1 when N > 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import time
from pathlib import Path
from typing import Any

import grpc

from bench.soak_checks import check_timelines, run_fsck, settle
from bench.soak_faults import Crash, inject, plan, supervise, windows
from bench.soak_load import MIX, STABLE, TOGGLED, Record, drive, follow_stable, plan_graph
from bench.soak_report import call_table, error_examples, error_split, render
from bench.soak_stack import SoakStack, soak_stack
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.tables import TableNames
from graph_service.tweets.tweet_store import DynamoTweetStore

__all__ = ["main", "soak"]

CAPACITY_CALLERS = 32
RUN_CALLERS = 64
SETTLE_TIMEOUT = 180.0
TIMELINE_TIMEOUT = 60.0


def say(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] soak: {message}", file=sys.stderr, flush=True)


def per_10s(record: Record) -> list[float]:
    seconds = max(1, int(record.ended - record.started))
    return [sum(record.per_second[s] for s in range(i, min(i + 10, seconds))) / 10 for i in range(0, seconds, 10)]


async def soak(stack: SoakStack, args: argparse.Namespace) -> dict[str, Any]:
    graph = plan_graph(args.users, random.Random(args.seed))
    dynamo = AsyncDynamo.build(stack.settings)
    tweets = DynamoTweetStore(dynamo, TableNames(stack.settings.table_prefix))
    run_seconds = args.minutes * 60
    try:
        async with grpc.aio.insecure_channel(stack.grpc_target) as channel:
            say(f"following the stable graph ({args.users * STABLE} follows)")
            await follow_stable(channel, graph)
            graph_ready = time.monotonic()
            say(f"measuring capacity ({args.capacity_seconds:.0f} s, {CAPACITY_CALLERS} callers)")
            warm = Record()
            await drive(
                channel,
                tweets,
                graph,
                warm,
                callers=CAPACITY_CALLERS,
                seconds=args.capacity_seconds,
                rate=None,
                seed=args.seed,
            )
            capacity = sum(warm.calls.values()) / (warm.ended - warm.started)
            target = capacity * args.load
            rss_start = await asyncio.to_thread(stack.rss_mb)
            faults = [] if args.no_faults else plan(run_seconds, max(1, round(args.minutes / 5)))
            say(f"capacity {capacity:.0f} calls/s; running at {target:.0f} calls/s for {run_seconds:.0f} s")
            run = Record()
            crashes: list[Crash] = []
            stop_watching = asyncio.Event()
            watcher = asyncio.create_task(supervise(stack, run.started, stop_watching, say, crashes))
            await asyncio.gather(
                drive(
                    channel,
                    tweets,
                    graph,
                    run,
                    callers=RUN_CALLERS,
                    seconds=run_seconds,
                    rate=target,
                    seed=args.seed + 1,
                ),
                inject(stack, faults, run.started, say),
            )
            rss_end = await asyncio.to_thread(stack.rss_mb)
            say("load stopped; waiting for the consumers to catch up")
            settled = await settle(stack, SETTLE_TIMEOUT)
            say("fsck --all")
            fsck = await asyncio.to_thread(run_fsck, stack)
            say("reading every home timeline")
            since = max(graph_ready, stack.redis_started_at)
            timelines = await check_timelines(
                channel,
                graph,
                warm.tweets + run.tweets,
                since=since,
                cap=stack.settings.timeline_cap,
                timeout=TIMELINE_TIMEOUT,
            )
            stop_watching.set()
            await watcher
    finally:
        dynamo.close()
    inside, outside, unexpected = error_split(run.failures, windows(faults), run.started)
    stale = [
        f"{s.follower} -> {s.followee}: answered {s.answered}, last acknowledged write left {s.expected}, "
        f"at {s.at - run.started:.1f} s"
        for s in warm.stale + run.stale
    ]
    posted = {t.tweet_id: t.posted_at - run.started for t in warm.tweets + run.tweets}
    missing = sorted({posted[tweet_id] for _, tweet_id in timelines.missing})
    unexpected_count = len(warm.failures) + sum(n for by_rpc in outside.values() for n in by_rpc.values())
    unexpected_count += sum(n for code, by_rpc in inside.items() if code != "UNAVAILABLE" for n in by_rpc.values())
    return {
        "minutes": args.minutes,
        "load": args.load,
        "users": args.users,
        "stable": STABLE,
        "toggled": TOGGLED,
        "seed": args.seed,
        "folder": str(stack.base) if args.keep else "(removed; --keep keeps it)",
        "mix_percent": MIX,
        "capacity": {
            "calls_per_s": round(capacity, 1),
            "callers": CAPACITY_CALLERS,
            "seconds": args.capacity_seconds,
            "errors": len(warm.failures),
        },
        "run": {
            "target_per_s": round(target, 1),
            "achieved_per_s": round(sum(run.calls.values()) / (run.ended - run.started), 1),
            "seconds": round(run.ended - run.started, 1),
            "callers": RUN_CALLERS,
            "tweets": len(run.tweets),
            "per_10s": per_10s(run),
        },
        "calls": call_table(run),
        "errors_in_fault_windows": inside,
        "errors_outside_fault_windows": outside,
        "unexpected_errors": unexpected,
        "error_examples": error_examples(warm.failures + run.failures),
        "faults": [vars(f) for f in faults],
        "crashes": [vars(c) for c in crashes],
        "rss_mb": {"start": rss_start, "end": rss_end},
        "restarts": stack.restarts,
        "settle": {"seconds": settled[0], "state": settled[1]},
        "fsck": vars(fsck),
        "timelines": vars(timelines),
        "missing_tweets": {
            "count": len({tweet_id for _, tweet_id in timelines.missing}),
            "posted_s": [round(missing[0], 1), round(missing[-1], 1)] if missing else [],
        },
        "stale_reads": stale,
        "violations": {
            "fsck": fsck.violations,
            "timelines": len(timelines.missing),
            "stale_reads": len(stale),
            "unexpected_errors": unexpected_count,
            "crashes": len(crashes),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the run (default 10)")
    parser.add_argument("--users", type=int, default=1000, help="accounts in the graph (default 1000)")
    parser.add_argument("--load", type=float, default=0.7, help="share of the measured capacity (default 0.7)")
    parser.add_argument("--capacity-seconds", type=float, default=15.0, help="closed-loop capacity run (default 15)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-faults", action="store_true", help="the same load without faults (a baseline)")
    parser.add_argument("--json", type=Path, help="also write the report's figures to this file")
    parser.add_argument("--keep", action="store_true", help="keep the temp folder (servers' and children's logs)")
    args = parser.parse_args()
    with soak_stack(keep=args.keep) as stack:
        say(f"stack up in {stack.base}")
        report = asyncio.run(soak(stack, args))
    if args.json is not None:
        args.json.write_text(json.dumps(report, indent=2, default=str))
    print(render(report))
    sys.exit(1 if sum(report["violations"].values()) else 0)


if __name__ == "__main__":
    main()
