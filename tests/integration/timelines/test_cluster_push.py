"""The fanout's push on a 3-master Redis Cluster, packed per node (``redis_client/cluster_packed.py``):
a batch lands on every master as one observed call; a script one master forgot is loaded again; an
error reply or a timeout on one master leaves every pooled connection in step; a connection a
master closed is replaced; and pushes during and after a slot migration (ASK, then MOVED, also to
a node that joined after the client read the slot map) land every entry once.

The migrations and the faults run on a cluster of this module's own: the session's keeps its layout."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass

import pytest
import redis
from prometheus_client import CollectorRegistry
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.exceptions import ResponseError
from socialgraph_devstack.processes import ManagedProcess, free_port, start_redis, start_redis_cluster

from graph_service.domain.errors import TimelineUnavailable
from graph_service.redis_client.connect import build_redis
from graph_service.settings import Settings
from graph_service.telemetry.backend_calls import RedisCallMetrics
from graph_service.timelines import keys, scripts
from graph_service.timelines.timeline_store import TimelineStore
from tests.support.cluster_slots import finish_migration, move_keys, start_migration
from tests.support.polling import wait_until

pytestmark = pytest.mark.cluster

CAP = 5

ONE_CONNECTION = Settings(redis_max_connections=1, redis_timeout_seconds=0.1)
"""A pool of one connection per master (a reply left unread would answer the next command) and a
batch timeout of 0.4 s."""


async def open_store(
    port: int, settings: Settings | None = None, registry: CollectorRegistry | None = None
) -> TimelineStore:
    client = build_redis(
        f"redis://127.0.0.1:{port}", cluster=True, settings=settings or Settings(), metrics=RedisCallMetrics(registry)
    )
    store = TimelineStore(
        client,
        timeline_cap=CAP,
        recent_cap=2,
        author_ttl_seconds=60,
    )
    await store.load_scripts()
    return store


def homes(client: RedisCluster, users: Sequence[int]) -> list[list[int]]:
    """Every user's home timeline, read with a client of its own (the cluster's slot map as it is now)."""
    pipe = client.pipeline()  # type: ignore[no-untyped-call]  # redis-py leaves it unannotated
    for user in users:
        pipe.lrange(keys.home(user), 0, -1)
    return [[int(v) for v in reply] for reply in pipe.execute()]


def owner(client: RedisCluster, user: int) -> int:
    """The port of the master that owns the user's home timeline."""
    return int(client.nodes_manager.get_node_from_slot(slot(user)).port)


def slot(user: int) -> int:
    return key_slot(keys.home(user).encode())


def counted(registry: CollectorRegistry, operation: str) -> float:
    return registry.get_sample_value("socialgraph_redis_call_seconds_count", {"operation": operation}) or 0.0


# -- on the session's cluster ---------------------------------------------------------------------


@pytest.fixture
async def store(redis_cluster: list[int], flushed_cluster: RedisCluster) -> AsyncIterator[TimelineStore]:
    value = await open_store(redis_cluster[0], ONE_CONNECTION)
    try:
        yield value
    finally:
        await value.aclose()


async def test_a_push_of_thousands_lands_once_in_every_timeline_on_all_three_masters_as_one_call(
    redis_cluster: list[int], flushed_cluster: RedisCluster
) -> None:
    users = list(range(1, 3001))
    assert len({owner(flushed_cluster, u) for u in users}) == 3
    registry = CollectorRegistry()
    store = await open_store(redis_cluster[0], registry=registry)
    try:
        await store.push(10**18 + 7, users)
        await store.push(10**18 + 7, users[:500])  # again: no duplicate
        await store.push(10**18 + 3, users[::2])  # older: behind it
    finally:
        await store.aclose()
    assert homes(flushed_cluster, users) == [
        [10**18 + 7, 10**18 + 3] if i % 2 == 0 else [10**18 + 7] for i in range(len(users))
    ]
    assert counted(registry, "PIPELINE") == 3  # a batch on three masters is one call to the metrics
    assert counted(registry, "EVALSHA") == 0


async def test_a_script_one_master_forgot_is_loaded_again(store: TimelineStore, flushed_cluster: RedisCluster) -> None:
    users = list(range(1, 301))
    await store.push(40, users)
    with redis.Redis(port=owner(flushed_cluster, 1)) as node:
        node.script_flush()
        sha = hashlib.sha1(scripts.MERGE_IDS.encode(), usedforsecurity=False).hexdigest()  # Redis names scripts so
        assert node.script_exists(sha) == [False]
    await store.push(41, users)
    assert homes(flushed_cluster, users) == [[41, 40]] * len(users)


async def test_an_error_reply_on_one_master_is_raised_after_the_rest_land_and_every_connection_stays_in_step(
    store: TimelineStore, flushed_cluster: RedisCluster
) -> None:
    """One connection per master: a reply left unread would be the answer to the next command."""
    users = list(range(1, 301))
    flushed_cluster.set(keys.home(2), "not a list")
    with pytest.raises(ResponseError, match="WRONGTYPE"):
        await store.push(50, users)
    others = [u for u in users if u != 2]
    assert homes(flushed_cluster, others) == [[50]] * len(others)
    await store.merge(4, [60, 61])
    assert await store.home(4) == [61, 60, 50]
    await store.push(51, others)
    assert homes(flushed_cluster, others[::50]) == [[51, 50]] * len(others[::50])


# -- on a cluster of this module's own --------------------------------------------------------------


@dataclass
class OwnCluster:
    """Three masters, and a spare cluster node that joins them in one test."""

    ports: list[int]
    spare: int
    spare_bus: int

    @staticmethod
    def node(port: int) -> redis.Redis:
        return redis.Redis(port=port, decode_responses=True)

    def client(self) -> RedisCluster:
        """A client reading the slot map as it is now."""
        return RedisCluster(host="127.0.0.1", port=self.ports[0], decode_responses=True)

    def masters(self) -> list[int]:
        """The ports of the nodes that own slots."""
        with self.client() as client:
            return sorted(int(node.port) for node in client.get_primaries())


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[OwnCluster]:
    base = tmp_path_factory.mktemp("own-cluster")
    ports = [free_port() for _ in range(3)]
    cluster = start_redis_cluster(ports, base / "logs", base / "data")
    spare: ManagedProcess | None = None
    try:
        spare_port = free_port()
        spare_bus = free_port()
        while spare_bus in (*ports, spare_port):
            spare_bus = free_port()
        spare_dir = base / "data" / "spare"
        spare = start_redis(
            spare_port, base / "logs", spare_dir, "--cluster-enabled", "yes", "--cluster-config-file",
            str(spare_dir / "nodes.conf"), "--cluster-node-timeout", "2000", "--cluster-port", str(spare_bus),
            name="redis-cluster-spare",
        )  # fmt: skip
        yield OwnCluster(ports, spare_port, spare_bus)
    finally:
        if spare is not None:
            spare.stop()
        cluster.stop()


@pytest.fixture
def own(own_cluster: OwnCluster) -> OwnCluster:
    """The module's cluster, emptied for this test."""
    for port in own_cluster.masters():
        with own_cluster.node(port) as node:
            node.flushall()
    return own_cluster


def migrating_users(own: OwnCluster, users: Sequence[int], count: int) -> tuple[int, set[int], list[int]]:
    """A master, ``count`` of its slots that hold some of ``users``, and the users in those slots."""
    with own.client() as client:
        source = owner(client, users[0])
        slots: set[int] = set()
        for user in users:
            if len(slots) < count and owner(client, user) == source:
                slots.add(slot(user))
        return source, slots, [u for u in users if slot(u) in slots]


def keys_held(port: int, slots: set[int]) -> int:
    with OwnCluster.node(port) as node:
        return sum(int(node.execute_command("CLUSTER COUNTKEYSINSLOT", slot)) for slot in slots)


async def test_a_push_during_a_slot_migration_and_after_it_lands_every_entry_once(own: OwnCluster) -> None:
    """The store read the slot map before the migration began. During it, the old owner answers the
    keys it still holds and ASKs for the others (moved already, or new); after it, it answers
    MOVED for them all."""
    users = list(range(1, 1001))
    source, slots, moving = migrating_users(own, users, 30)
    target = next(p for p in own.masters() if p != source)
    stays, moved_before, new = moving[0::3], moving[1::3], set(moving[2::3])
    store = await open_store(own.ports[0])
    try:
        await store.push(100, [u for u in users if u not in new])
        start_migration(slots, source, target)
        move_keys(slots, source, target, only=[keys.home(u) for u in moved_before])
        await store.push(200, users)
        assert keys_held(source, slots) == len(stays)  # answered where they were
        assert keys_held(target, slots) == len(moved_before) + len(new)  # asked for on the target
        move_keys(slots, source, target)
        finish_migration(slots, target, own.masters())
        await store.push(300, users)  # the store's slot map still has the old owner: MOVED
        await store.push(300, users[:100])  # and now the new one: again, no duplicate
    finally:
        await store.aclose()
    assert keys_held(source, slots) == 0
    with own.client() as client:
        assert homes(client, users) == [[300, 200] if u in new else [300, 200, 100] for u in users]


async def test_a_slot_moving_to_a_node_that_joined_after_the_slot_map_was_read_gets_its_entries(
    own: OwnCluster,
) -> None:
    """The spare node joins and imports slots; holding none when the store read the slot map, it is
    not in it: asked for by address during the migration, then named by MOVED."""
    users = list(range(5001, 6001))
    masters = own.masters()
    with own.node(masters[0]) as first:
        first.execute_command("CLUSTER MEET", "127.0.0.1", own.spare, own.spare_bus)

    def joined() -> bool:
        for port in [*masters, own.spare]:
            with own.node(port) as node:
                nodes = node.cluster("NODES")
                if len(nodes) != 4 or any("handshake" in n["flags"] or "noaddr" in n["flags"] for n in nodes.values()):
                    return False
                if node.cluster("INFO")["cluster_state"] != "ok":  # the spare has learnt the slot map
                    return False
        return True

    wait_until(joined, what="the spare node known to every master, they to it, and the cluster ok on each")
    source, slots, moving = migrating_users(own, users, 20)
    new = set(moving[1::2])
    store = await open_store(own.ports[0])
    try:
        await store.push(100, [u for u in users if u not in new])
        start_migration(slots, source, own.spare)
        move_keys(slots, source, own.spare, only=[keys.home(u) for u in moving[0::2]])
        await store.push(200, users)
        assert keys_held(own.spare, slots) == len(moving)  # all asked for on the spare node
        finish_migration(slots, own.spare, [*masters, own.spare])
        await store.push(300, users)
    finally:
        await store.aclose()
    assert own.spare in own.masters()
    with own.client() as client:
        assert homes(client, users) == [[300, 200] if u in new else [300, 200, 100] for u in users]


async def test_a_master_not_answering_in_time_is_unavailable_and_every_connection_stays_in_step(
    own: OwnCluster,
) -> None:
    """One master holds every write (``CLIENT PAUSE ... WRITE``) past the batch's timeout: the push
    is ``TimelineUnavailable``; once it answers again, each master's one pooled connection is in step."""
    users = list(range(1, 301))
    store = await open_store(own.ports[0], ONE_CONNECTION)
    try:
        await store.push(70, users)
        with own.client() as client:
            paused = owner(client, 1)
        with own.node(paused) as node:
            node.client_pause(5000, all=False)
            try:
                with pytest.raises(TimelineUnavailable):
                    await store.push(71, users)
            finally:
                node.client_unpause()
        await store.push(72, users)
        await store.merge(1, [73])
        first = await store.home(1)
    finally:
        await store.aclose()
    assert first[:2] == [73, 72]  # each reply read by the call it answers
    assert first[-1] == 70
    with own.client() as client:
        timelines = homes(client, users[1:])
    assert all(t[0] == 72 and t[-1] == 70 for t in timelines)  # 71 where a master applied it


async def test_connections_a_master_closed_are_replaced_and_the_push_lands(own: OwnCluster) -> None:
    users = list(range(1, 301))
    store = await open_store(own.ports[0])
    try:
        await store.push(80, users)
        for port in own.masters():
            with own.node(port) as node:
                assert node.client_kill_filter(_type="normal", skipme=True) >= 1
        await store.push(81, users)
    finally:
        await store.aclose()
    with own.client() as client:
        assert homes(client, users) == [[81, 80]] * len(users)
