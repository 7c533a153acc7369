"""The Redis follow-rate ledger keeps the contract its in-memory fake keeps, on one node and on the
Redis Cluster; with Redis unreachable it lets follows through uncounted (fails open) and says so."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

import pytest
from redis.cluster import RedisCluster
from socialgraph_devstack.processes import free_port

from graph_service.limits.follow_budget import RedisFollowBudget, budget_key
from graph_service.redis_client.connect import build_redis
from graph_service.settings import Settings
from tests.support.contracts.follow_budget import FollowBudgetContract, LedgerUnderTest, ManualClock
from tests.support.logs import capture_every_level


@contextlib.asynccontextmanager
async def ledger_on(url: str, *, cluster: bool) -> AsyncIterator[LedgerUnderTest]:
    clock = ManualClock()
    budget = RedisFollowBudget(build_redis(url, cluster=cluster, settings=Settings()), clock=clock)
    try:
        yield LedgerUnderTest(budget, clock)
    finally:
        await budget.aclose()


class TestRedisFollowBudget(FollowBudgetContract):
    @pytest.fixture
    async def ledger(self, redis_url: str) -> AsyncIterator[LedgerUnderTest]:
        async with ledger_on(redis_url, cluster=False) as ledger:
            yield ledger


@pytest.mark.cluster
class TestRedisClusterFollowBudget(FollowBudgetContract):
    @pytest.fixture
    async def ledger(self, flushed_cluster: RedisCluster) -> AsyncIterator[LedgerUnderTest]:
        seed = f"redis://127.0.0.1:{flushed_cluster.get_default_node().port}/0"
        async with ledger_on(seed, cluster=True) as ledger:
            yield ledger


@pytest.mark.cluster
async def test_actors_spread_over_every_cluster_master(flushed_cluster: RedisCluster) -> None:
    """One key per actor: actors land on all three masters, each counted on its own."""
    seed = f"redis://127.0.0.1:{flushed_cluster.get_default_node().port}/0"
    budget = RedisFollowBudget(build_redis(seed, cluster=True, settings=Settings()))
    try:
        for actor in range(1, 31):
            assert (await budget.take(actor, 1, 60)).granted
            assert not (await budget.take(actor, 1, 60)).granted
    finally:
        await budget.aclose()
    nodes = {flushed_cluster.get_node_from_key(budget_key(actor)).name for actor in range(1, 31)}
    assert len(nodes) == 3


async def test_unreachable_redis_fails_open_logged_and_counted() -> None:
    """Follows go through uncounted, each counted in ``failed_open``; one warning names the failure,
    because after a failure Redis is not asked again for a second (an outage costs no timeouts)."""
    nowhere = f"redis://127.0.0.1:{free_port()}/0"
    budget = RedisFollowBudget(build_redis(nowhere, cluster=False, settings=Settings()))
    try:
        with capture_every_level() as logs:
            grants = [await budget.take(7, 1, 60) for _ in range(50)]
        assert all(g.granted and not g.counted for g in grants)
        assert budget.failed_open == 50
        warnings = [e for e in logs if e["event"] == "follow_rate_limit_failed_open"]
        assert len(warnings) == 1
        assert warnings[0]["log_level"] == "warning"
        await budget.give_back(7, "any-ticket")  # uncounted: nothing to give back, and no failure raised
    finally:
        await budget.aclose()


async def test_a_script_run_again_for_the_same_ticket_counts_it_once(redis_url: str) -> None:
    """A torn connection after the script ran makes the adapter run it again with the same ticket:
    that run answers "counted" (not a refusal at the limit it itself filled), and counts nothing more."""
    async with ledger_on(redis_url, cluster=False) as ledger:
        budget = ledger.budget
        assert isinstance(budget, RedisFollowBudget)
        script = budget._take  # the raw script, as the adapter's retry runs it
        key, now = budget_key(42), int(ledger.clock() * 1000)
        assert await script(keys=[key], args=[now, 60_000, 1, "t1"]) == -1
        assert await script(keys=[key], args=[now, 60_000, 1, "t1"]) == -1
        assert await script(keys=[key], args=[now, 60_000, 1, "t2"]) == 60_000
