"""What every implementation of ``LeaseRegistry`` must do.

``LeaseRegistryContract`` runs against the in-memory fake and the DynamoDB registry; a subclass
provides ``registry``, which may be shared by the tests of a class: each leaves no live lease behind.
"""

from __future__ import annotations

import secrets

import pytest

from graph_service.domain.ports import LeaseRegistry

__all__ = ["LeaseRegistryContract"]


def lease() -> str:
    return f"test:{secrets.token_hex(4)}"


class LeaseRegistryContract:
    async def test_a_registered_lease_is_live_and_an_unknown_one_is_not(self, registry: LeaseRegistry) -> None:
        mine = lease()
        assert not await registry.is_live(mine)
        await registry.register(mine)
        assert await registry.is_live(mine)
        await registry.forget(mine)  # leaves no live lease behind for the next test

    async def test_a_revocation_spares_the_kept_and_is_for_good(self, registry: LeaseRegistry) -> None:
        kept, gone, also_gone = lease(), lease(), lease()
        for one in (kept, gone, also_gone):
            await registry.register(one)
        assert sorted(await registry.revoke_all_except([kept])) == sorted([gone, also_gone])
        assert [await registry.is_live(one) for one in (kept, gone, also_gone)] == [True, False, False]
        assert await registry.revoke_all_except([kept]) == []  # already revoked: not again
        with pytest.raises(ValueError, match="registered before"):
            await registry.register(gone)  # a revoked lease is never honoured again
        assert not await registry.is_live(gone)
        assert await registry.revoke_all_except([]) == [kept]

    async def test_a_lease_given_back_is_no_longer_live(self, registry: LeaseRegistry) -> None:
        mine = lease()
        await registry.register(mine)
        await registry.forget(mine)
        assert not await registry.is_live(mine)
        assert await registry.revoke_all_except([]) == []
        await registry.forget(mine)  # twice: nothing
