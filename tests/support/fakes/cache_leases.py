"""Cache leases in memory: ``LeaseRegistry`` as ``DynamoLeaseRegistry`` keeps it, for unit tests
only (held to it by ``tests/support/contracts/cache_leases.py``)."""

from __future__ import annotations

from dataclasses import dataclass

from graph_service.domain.models import LeaseRecord

__all__ = ["FakeLeaseRegistry"]


@dataclass
class _Item:
    live: bool = True
    beat: int = 0
    unsettled: bool = False


class FakeLeaseRegistry:
    def __init__(self) -> None:
        self.items: dict[str, _Item] = {}

    async def register(self, lease_id: str) -> None:
        if lease_id in self.items:
            raise ValueError(f"cache lease {lease_id} was registered before")
        self.items[lease_id] = _Item()

    async def beat(self, lease_id: str) -> bool:
        item = self._live(lease_id)
        if item is not None:
            item.beat += 1
        return item is not None

    async def mark_unsettled(self, lease_id: str) -> bool:
        item = self._live(lease_id)
        if item is not None:
            item.unsettled = True
            item.beat += 1
        return item is not None

    async def live_leases(self) -> dict[str, LeaseRecord]:
        return {i: LeaseRecord(item.beat, item.unsettled) for i, item in self.items.items() if item.live}

    async def revoke(self, lease_id: str, beat: int) -> bool:
        item = self._live(lease_id)
        if item is None or item.beat != beat:
            return False
        item.live = False
        return True

    async def is_live(self, lease_id: str) -> bool:
        return self._live(lease_id) is not None

    async def forget(self, lease_id: str) -> None:
        self.items.pop(lease_id, None)

    def _live(self, lease_id: str) -> _Item | None:
        item = self.items.get(lease_id)
        return item if item is not None and item.live else None
