"""What every implementation of ``LeaseRegistry`` must do.

``LeaseRegistryContract`` runs against the in-memory fake and the DynamoDB registry; a subclass
provides ``registry``, which may be shared by the tests of a class: each leaves no live lease behind.
"""

from __future__ import annotations

import secrets

import pytest

from graph_service.domain.models import LeaseRecord
from graph_service.domain.ports import LeaseRegistry

__all__ = ["LeaseRegistryContract"]


def lease() -> str:
    return f"test:{secrets.token_hex(4)}"


class LeaseRegistryContract:
    async def test_a_registered_lease_is_live_and_listed_and_an_unknown_one_is_not(
        self, registry: LeaseRegistry
    ) -> None:
        mine = lease()
        assert not await registry.is_live(mine)
        await registry.register(mine)
        assert await registry.is_live(mine)
        assert (await registry.live_leases())[mine] == LeaseRecord(beat=0, unsettled=False)
        await registry.forget(mine)  # leaves no live lease behind for the next test
        assert mine not in await registry.live_leases()

    async def test_heartbeats_and_the_unsettled_mark_are_counted_on_a_live_lease_only(
        self, registry: LeaseRegistry
    ) -> None:
        mine, unknown = lease(), lease()
        await registry.register(mine)
        assert await registry.beat(mine)
        assert await registry.beat(mine)
        assert await registry.mark_unsettled(mine)
        assert (await registry.live_leases())[mine] == LeaseRecord(beat=3, unsettled=True)  # the mark beats too
        assert not await registry.beat(unknown)
        assert not await registry.mark_unsettled(unknown)
        await registry.forget(mine)

    async def test_a_revocation_needs_the_beat_it_saw_and_is_for_good(self, registry: LeaseRegistry) -> None:
        mine = lease()
        await registry.register(mine)
        await registry.beat(mine)
        assert not await registry.revoke(mine, 0)  # it beat since: alive
        assert await registry.is_live(mine)
        assert await registry.revoke(mine, 1)
        assert not await registry.is_live(mine)
        assert mine not in await registry.live_leases()
        assert not await registry.beat(mine)  # its holder learns it was revoked
        assert not await registry.mark_unsettled(mine)
        assert not await registry.revoke(mine, 1)
        with pytest.raises(ValueError, match="registered before"):
            await registry.register(mine)  # a revoked lease is never honoured again
        await registry.forget(mine)
