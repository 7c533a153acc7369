"""Cache leases in memory: ``LeaseRegistry`` as ``DynamoLeaseRegistry`` keeps it, for unit tests
only (held to it by ``tests/support/contracts/cache_leases.py``)."""

from __future__ import annotations

from collections.abc import Collection

__all__ = ["FakeLeaseRegistry"]


class FakeLeaseRegistry:
    def __init__(self) -> None:
        self.states: dict[str, str] = {}
        """Lease ID -> ``live`` or ``revoked``."""

    async def register(self, lease_id: str) -> None:
        if lease_id in self.states:
            raise ValueError(f"cache lease {lease_id} was registered before")
        self.states[lease_id] = "live"

    async def is_live(self, lease_id: str) -> bool:
        return self.states.get(lease_id) == "live"

    async def revoke_all_except(self, keep: Collection[str]) -> list[str]:
        revoked = [i for i, state in self.states.items() if state == "live" and i not in set(keep)]
        for lease_id in revoked:
            self.states[lease_id] = "revoked"
        return revoked

    async def forget(self, lease_id: str) -> None:
        self.states.pop(lease_id, None)
