"""The note a committed chunk leaves for the cache repair, and the debts a failed repair leaves."""

from __future__ import annotations

import asyncio

from counters.repairs import CacheRepairer, decode_note, encode_note
from graph_service.store.changes import EdgeChange
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


class FlakyCache:
    """The two cache calls a repair makes; ``failing`` of them fail (Redis unreachable)."""

    def __init__(self) -> None:
        self.failing = 0
        self.repaired: list[tuple[int, int]] = []

    async def repair_edge(self, follower_id: int, followee_id: int, at_us: int, added: bool) -> bool:
        if self.failing:
            self.failing -= 1
            return False
        self.repaired.append((follower_id, followee_id))
        return True

    async def set_counts(self, user_id: int, counts: object) -> bool:
        return True


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
    repairer = CacheRepairer(cache, Counts(), debts)  # type: ignore[arg-type]
    await debts.add_debt(encode_note([EdgeChange(1, 2, 10, True, "1", "a")]))
    repairer.start()
    await asyncio.wait_for(debts.looking.wait(), 5)
    cache.failing = 1
    await repairer.repair([EdgeChange(3, 4, 11, True, "2", "b")], {})  # fails: a new debt, start() again
    debts.go_on.set()
    await eventually(lambda: asyncio.sleep(0.01, dict(debts.owed)), lambda owed: owed == {}, timeout=5)
    assert sorted(cache.repaired) == [(1, 2), (3, 4)]
    await repairer.aclose()
