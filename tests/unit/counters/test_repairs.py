"""The note a committed chunk leaves for the cache repair, and the debts a failed repair leaves."""

from __future__ import annotations

import asyncio

from prometheus_client import CollectorRegistry

from counters.repairs import CacheRepairer, decode_note, encode_note
from graph_service.store.changes import EdgeChange
from graph_service.telemetry.counters import CountersMetrics
from tests.support.fakes.graph_cache import FakeGraphCache
from tests.support.polling import eventually


def test_note_round_trips_the_changes() -> None:
    """encode_note/decode_note keep who, whom, when and which way (sequence and event ID are not kept)."""
    changes = [
        EdgeChange(1, 2, 10, True, "1", "a"),
        EdgeChange(2**64 - 1, 3, 11, False, "2", "b"),
    ]
    decoded = decode_note(encode_note(changes))
    assert [(c.follower_id, c.followee_id, c.at_us, c.added) for c in decoded] == [
        (1, 2, 10, True),
        (2**64 - 1, 3, 11, False),
    ]
    assert decode_note("") == []
    assert decode_note(encode_note([])) == []


class FlakyCache(FakeGraphCache):
    """The graph cache, noting each edge it repaired; the next ``failing`` repairs fail (Redis unreachable)."""

    def __init__(self, *, down: bool = False) -> None:
        super().__init__(down=down)
        self.failing = 0
        self.repaired: list[tuple[int, int]] = []

    async def repair_edge(self, follower_id: int, followee_id: int, at_us: int, following: bool) -> bool:
        if self.failing:
            self.failing -= 1
            return False
        repaired = await super().repair_edge(follower_id, followee_id, at_us, following)
        if repaired:
            self.repaired.append((follower_id, followee_id))
        return repaired


class Counts:
    async def read_counts(self, users: list[int]) -> dict[int, object]:
        return {}


class Debts:
    """Debts kept like the checkpoint table keeps them; the first look can be held open."""

    def __init__(self) -> None:
        self.owed: dict[str, str] = {}
        self.looking = asyncio.Event()
        self.go_on = asyncio.Event()
        self._held = False

    async def add_debt(self, note: str) -> None:
        self.owed[f"debt#{len(self.owed)}#{note}"] = note

    async def debts(self) -> dict[str, str]:
        seen = dict(self.owed)
        if not self._held:
            self._held = True
            self.looking.set()
            await self.go_on.wait()
        return seen

    async def settle_debt(self, key: str) -> None:
        self.owed.pop(key, None)


async def test_a_debt_added_while_debts_are_being_settled_is_settled_too() -> None:
    """A repair that fails just as Redis comes back adds its debt while the settling task is already
    going through the debts it read: that debt is settled as well, not left until a restart."""
    cache, debts = FlakyCache(), Debts()
    repairer = CacheRepairer(cache, Counts(), debts)  # type: ignore[arg-type]  # fakes of the cache calls a repair makes
    await debts.add_debt(encode_note([EdgeChange(1, 2, 10, True, "1", "a")]))
    repairer.start()
    await asyncio.wait_for(debts.looking.wait(), 5)
    cache.failing = 1
    # fails: a new debt (stored once the look is counted, so the gauge counts it once), start() again
    adding = asyncio.create_task(repairer.repair([EdgeChange(3, 4, 11, True, "2", "b")], {}))
    debts.go_on.set()
    await asyncio.wait_for(adding, 5)
    await eventually(lambda: asyncio.sleep(0.01, dict(debts.owed)), lambda owed: owed == {}, timeout=5)
    assert sorted(cache.repaired) == [(1, 2), (3, 4)]
    await repairer.aclose()


class SlowAckDebts(Debts):
    """Debts whose ``add_debt`` stores at once but answers only when released (a slow put's reply)."""

    def __init__(self) -> None:
        super().__init__()
        self._held = True  # looks are never held here
        self.stored = asyncio.Event()
        self.ack = asyncio.Event()

    async def add_debt(self, note: str) -> None:
        await super().add_debt(note)
        self.stored.set()
        await self.ack.wait()


async def test_the_debt_gauge_counts_a_debt_stored_during_a_look_once() -> None:
    """A repair's debt is already stored (its put not yet answered) when a settling look reads the
    debts: the gauge must count it once, not once from the look and once more from the repair;
    and it is 0 once Redis is back and every debt is settled."""
    cache, debts, metrics = FlakyCache(down=True), SlowAckDebts(), CountersMetrics(CollectorRegistry())
    repairer = CacheRepairer(cache, Counts(), debts, metrics=metrics)  # type: ignore[arg-type]  # fakes of the cache calls a repair makes
    adding = asyncio.create_task(repairer.repair([EdgeChange(1, 2, 10, True, "1", "a")], {}))
    await asyncio.wait_for(debts.stored.wait(), 5)
    settling = asyncio.create_task(repairer.settle())
    for _ in range(10):  # a few turns of the loop: a look that is not held back reads and counts now
        await asyncio.sleep(0)
    debts.ack.set()
    await adding
    assert not await settling  # Redis is still down: nothing settled
    assert len(debts.owed) == 1
    assert metrics.debts._value.get() == 1
    cache.down = False
    await eventually(lambda: asyncio.sleep(0.01, dict(debts.owed)), lambda owed: owed == {}, timeout=5)
    await repairer.aclose()
    assert metrics.debts._value.get() == 0


async def test_without_a_debt_store_the_gauge_counts_the_repairs_kept_in_memory() -> None:
    cache, metrics = FlakyCache(down=True), CountersMetrics(CollectorRegistry())
    repairer = CacheRepairer(cache, Counts(), metrics=metrics)  # type: ignore[arg-type]  # fakes of the cache calls a repair makes
    for n in range(3):
        await repairer.repair([EdgeChange(n, 9, 10, True, str(n), "a")], {})
    assert metrics.debts._value.get() == 3
    await repairer.owe([])  # nothing to redo: not a debt
    assert metrics.debts._value.get() == 3
    cache.down = False
    assert await repairer.settle()
    assert metrics.debts._value.get() == 0
    assert sorted(cache.repaired) == [(0, 9), (1, 9), (2, 9)]
    await repairer.aclose()
