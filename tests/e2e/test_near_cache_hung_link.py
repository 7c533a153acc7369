"""Issue 22, point 3: a `serve` process whose link to Redis hangs (through a frozen TCP proxy,
``tests/support/tcp_freeze.py``: Redis → it only, then both ways) while another path keeps writing.
Its near cache held the old answers; the fence must neither wait on the dead link nor let them out:
every read during the freeze answers within a few Redis timeouts (SPEC §6), none older than the
last write acknowledged before it started."""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path

import grpc
import pytest
from socialgraph.v1 import social_graph_pb2 as pb
from socialgraph.v1 import social_graph_pb2_grpc as pb_grpc

from graph_service.settings import Settings
from tests.e2e.test_near_cache import near_hits, tracking
from tests.support.children import Child, serve_process
from tests.support.polling import eventually
from tests.support.runtimes import running_server, stub_for
from tests.support.tcp_freeze import Direction, tcp_freeze

TIMEOUT = 0.25  # the reader's SG_REDIS_TIMEOUT_SECONDS (the default)
BOUND = 4 * TIMEOUT + 0.5  # SPEC §6's "a few Redis timeouts", plus a loaded machine's margin
PAIRS = 2  # pairs written and read side by side through each freeze; more only repeat the same checks
FREEZE_SECONDS = 3.0  # longer than the bound after the first reads: a read that waits for the thaw fails it
DEADLINE = 10.0  # each read's own gRPC deadline, far past the freeze


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def logged(child: Child, name: str) -> int:
    count = 0
    for line in child.log_path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            count += isinstance(entry, dict) and entry.get("event") == name
    return count


async def test_reads_on_a_replica_whose_redis_link_hangs_answer_in_time_and_never_stale(
    settings: Settings, tmp_path: Path, redis_url: str
) -> None:
    redis_port = int(redis_url.rsplit(":", 1)[1].split("/")[0])
    async with (
        tcp_freeze(redis_port) as link,
        serve_process(
            settings,
            tmp_path / "b",
            SG_REDIS_URL=f"redis://127.0.0.1:{link.port}/0",
            SG_REDIS_TIMEOUT_SECONDS=str(TIMEOUT),
        ) as reader,
        running_server(settings) as writer,  # straight to Redis, no near cache: "another path"
        stub_for(writer.port) as writes,
        grpc.aio.insecure_channel(reader.address) as channel,
    ):
        reads = pb_grpc.SocialGraphServiceStub(channel)
        state = dict.fromkeys(range(PAIRS), False)  # the last acknowledged state of each pair

        def users(index: int) -> tuple[int, int]:
            return 1000 + index, 2000 + index

        async def read(index: int, kind: str) -> tuple[float, bool]:
            follower, followee = users(index)
            started = time.monotonic()
            if kind == "state":
                reply = await reads.IsFollowing(
                    pb.IsFollowingRequest(follower_id=follower, followee_id=followee), timeout=DEADLINE
                )
                answer = bool(reply.following)
            else:  # the followee's side, among other targets: a relationship entry
                request = pb.GetRelationshipsRequest(actor_id=followee, target_ids=[follower, followee + 500])
                relationships = (await reads.GetRelationships(request, timeout=DEADLINE)).relationships
                (entry,) = [r for r in relationships if r.target_id == follower]
                answer = bool(entry.followed_by)
            return time.monotonic() - started, answer

        async def checked_reads(index: int) -> list[float]:
            expected = state[index]  # no write of this pair is in flight: nothing newer may show
            done = await asyncio.gather(*(read(index, kind) for kind in ("state", "state", "state", "relationships")))
            assert [answer for _, answer in done] == [expected] * len(done), (index, expected, done)
            return [latency for latency, _ in done]

        async def write(index: int) -> None:
            follower, followee = users(index)
            if state[index]:
                await writes.Unfollow(pb.UnfollowRequest(follower_id=follower, followee_id=followee))
            else:
                await writes.Follow(pb.FollowRequest(follower_id=follower, followee_id=followee))
            state[index] = not state[index]  # acknowledged

        async def frozen(direction: Direction) -> list[float]:
            """Warm the reader's near cache, freeze its link, then write and read every pair over and
            over until the freeze ends; the reads' latencies."""

            async def warm() -> float:
                """Reads of every pair, and how many the near cache answered: all of them once Redis
                was filled, then the near cache from Redis, and the reader trusts Redis again (its
                breaker closes a second after its last Redis failure)."""
                before = await near_hits(reader)
                await asyncio.gather(*(checked_reads(i) for i in range(PAIRS)))
                return await near_hits(reader) - before

            await eventually(warm, lambda answered: answered >= PAIRS * 4, timeout=15)
            link.freeze(direction)
            thaw = asyncio.get_running_loop().call_later(FREEZE_SECONDS, link.thaw)  # whatever the reads do
            latencies: list[float] = []

            async def pair(index: int) -> None:
                while link.frozen:
                    await write(index)  # its invalidation cannot reach the reader now
                    latencies.extend(await checked_reads(index))

            try:
                await asyncio.gather(*(pair(i) for i in range(PAIRS)))
            finally:
                thaw.cancel()
                link.thaw()
            return latencies

        for direction in (Direction.TO_CLIENT, Direction.BOTH):
            latencies = await frozen(direction)
            p99 = percentile(latencies, 0.99)
            assert p99 < BOUND, (direction, f"p99 {p99:.3f}s, max {max(latencies):.3f}s of {len(latencies)} reads")
            assert len(latencies) >= PAIRS * 4 * 2, len(latencies)  # reads went on through the freeze
        assert logged(reader, "near_cache_fence_timed_out") >= 2, reader.log()
        await eventually(lambda: tracking(reader), bool, timeout=15)  # and it tracks again


pytestmark = pytest.mark.timeout(120)
