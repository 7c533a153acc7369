"""Two serving processes on a Redis Cluster of three masters with a replica each, each process with
its near cache (a tracking link per master, ``cache/near_cache.py``): writes through one, reads
through the other, never an answer older than the last acknowledged write (SPEC §3). First as is,
then while the slots of the users read move from master to master, then while a master is killed
and its replica takes over. The near cache must answer (hits) before and after the changes, and be
bypassed, never trusted, while they happen."""

from __future__ import annotations

import asyncio
import contextlib
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster
from redis.crc import key_slot
from socialgraph_devstack.processes import ManagedProcess, free_port, start_redis_cluster

from graph_service.cache.keys import TRUST_GENERATION, TRUST_RUN
from graph_service.settings import Settings
from tests.e2e.test_near_cache import READS_AFTER, ROUNDS, interleave, near_hits, tracking
from tests.support.children import Child, serve_process
from tests.support.cluster_slots import move_slots, node
from tests.support.polling import eventually, wait_until
from tests.support.runtimes import make_settings
from tests.support.scrape import scrape
from tests.support.tables import create_tables, drop_tables

pytestmark = [pytest.mark.cluster, pytest.mark.timeout(300)]

PAIRS = 8
CHECKS = PAIRS * ROUNDS * (3 + 2 * (READS_AFTER + 2))
"""Reads checked by one ``interleave`` of ``PAIRS`` pairs (each after a write acknowledged by the other process)."""
MOVES = 6
"""Slot moves while the slots-moving phase reads (each slot of a pair's users, one at a time)."""


@dataclass
class Cluster:
    ports: list[int]
    nodes: dict[int, ManagedProcess]

    def client(self) -> RedisCluster:
        alive = [port for port in self.ports if self.nodes[port].process.poll() is None]
        return RedisCluster(host="127.0.0.1", port=alive[0], decode_responses=True)

    def masters(self) -> list[int]:
        with self.client() as client:
            return sorted(int(n.port) for n in client.get_primaries())

    def owner(self, slot: int) -> int:
        with self.client() as client:
            return int(client.nodes_manager.get_node_from_slot(slot).port)

    def healthy(self) -> bool:
        """Every slot served, by three masters each answering, and each with a replica in sync."""
        try:
            masters = self.masters()
            replicas, states = [], set()
            for port in masters:
                with node(port) as master:
                    replicas.append(int(master.info("replication").get("connected_slaves", 0)))
                    states.add(master.execute_command("CLUSTER INFO").get("cluster_state") == "ok")
        except (redis.RedisError, OSError):
            return False
        return len(masters) == 3 and states == {True} and min(replicas) >= 1


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    base = tmp_path_factory.mktemp("near-cluster")
    ports = [free_port() for _ in range(6)]
    first = start_redis_cluster(ports, base / "logs", base / "data", replicas=1)
    nodes = {first.port: first, **{child.port: child for child in first.children}}
    found = Cluster(ports, nodes)
    try:
        wait_until(found.healthy, timeout=60)
        yield found
    finally:
        first.stop()


def trusted(cluster: Cluster) -> None:
    """The cache's trust record as a serving process's reset leaves it (``cache/lease.py``)."""
    with cluster.client() as client:
        runs = client.info("server", target_nodes=RedisCluster.PRIMARIES)
        client.set(TRUST_RUN, ",".join(sorted(str(info["run_id"]) for info in runs.values())))
        client.set(TRUST_GENERATION, "tests")


async def dropped(child: Child, reason: str) -> float:
    samples = (await scrape(child.metrics_port)).samples.get("socialgraph_near_cache_dropped_total", [])
    return sum(value for labels, value in samples if labels.get("reason") == reason)


def user_slots(first_user: int) -> set[int]:
    """The slots of the keys ``interleave(first_user=...)`` reads and writes (a user's keys share one)."""
    users = [first_user + i for i in range(PAIRS)] + [first_user + 800 + i for i in range(PAIRS)]
    return {key_slot(f"{{{user}}}".encode()) for user in users}


async def test_reads_on_one_process_never_miss_a_write_acknowledged_by_another_on_a_cluster(
    dynamodb_local: str, cluster: Cluster, tmp_path: Path
) -> None:
    settings: Settings = make_settings(
        dynamodb_local, f"redis://127.0.0.1:{cluster.masters()[0]}/0", redis_cluster=True
    )
    await create_tables(settings, streams=False)
    trusted(cluster)
    try:
        async with (
            serve_process(settings, tmp_path / "a") as writer,
            serve_process(settings, tmp_path / "b") as reader,
        ):
            await eventually(lambda: tracking(reader), bool, timeout=30)

            # As is: the near cache answers most reads, after fences on the keys' masters.
            assert await interleave(writer, reader, pairs=PAIRS) >= CHECKS
            hits = await near_hits(reader)
            assert hits > CHECKS / 5, hits
            assert await near_hits(reader, "relationships") > 0

            # While slots move: each of the pairs' slots in turn goes to the next master and back.
            first_user = 10_000
            moved = 0
            done = asyncio.Event()

            def move_one(slot: int) -> None:
                masters = cluster.masters()
                source = cluster.owner(slot)
                target = masters[(masters.index(source) + 1) % len(masters)]
                move_slots({slot}, source, target, masters)

            async def keep_moving() -> None:
                nonlocal moved
                slots = sorted(user_slots(first_user))
                while not done.is_set() or moved < MOVES:
                    await asyncio.to_thread(move_one, slots[moved % len(slots)])
                    moved += 1

            mover = asyncio.create_task(keep_moving())
            checked = 0
            try:
                while moved < MOVES and not mover.done():  # a mover that failed says why below
                    checked += await interleave(
                        writer, reader, first_user=first_user, pairs=PAIRS
                    )  # each ends unfollowed
            finally:
                done.set()
                await mover
            assert checked >= CHECKS
            assert moved >= MOVES
            assert await dropped(reader, "moved") > 0  # a fence met a moved slot: bypassed, not trusted
            await eventually(lambda: tracking(reader), bool, timeout=30)  # the near cache tracks the new map
            before = await near_hits(reader)
            assert await interleave(writer, reader, first_user=20_000, pairs=PAIRS) >= CHECKS
            assert await near_hits(reader) > before  # and answers again

            # While a master is killed: reads and writes go on through the failover.
            victim = cluster.owner(min(user_slots(30_000)))
            cluster.nodes[victim].process.kill()  # no shutdown: its replica is promoted
            with contextlib.suppress(subprocess.TimeoutExpired):
                cluster.nodes[victim].process.wait(5)
            during = asyncio.create_task(interleave(writer, reader, first_user=30_000, pairs=PAIRS))

            def failed_over() -> bool:
                with contextlib.suppress(redis.RedisError, OSError):
                    return victim not in cluster.masters() and cluster.owner(min(user_slots(30_000))) != victim
                return False

            await asyncio.to_thread(wait_until, failed_over, timeout=60, what="the replica took over")
            assert await during >= CHECKS
            assert await dropped(reader, "lost") > 0  # the dead master's link: bypassed until the new map
            await eventually(lambda: tracking(reader), bool, timeout=30)
            before = await near_hits(reader)
            assert await interleave(writer, reader, first_user=40_000, pairs=PAIRS) >= CHECKS
            assert await near_hits(reader) > before
    finally:
        await drop_tables(settings)
