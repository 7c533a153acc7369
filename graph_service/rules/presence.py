"""Which accounts are in the graph (SPEC §3b): the rules of every RPC that names an account ask here.

An account deactivated or deleted is out of the graph from the moment the call returns: reads
answer as if no edge or request touched it, and a follow or request to or from it is refused. A
follow that read the states just before a deactivation and committed just after it is settled
after its commit (``after_made``): the account's job may have passed already, so the new edge or
request is archived (or deleted) here, as the job would have. The follow still happened before the
deactivation, as far as anyone can tell.
"""

from __future__ import annotations

from collections.abc import Sequence

from graph_service.domain.account_ports import AccountStates, AccountStore
from graph_service.domain.accounts import Lifecycle, Side, refusal
from graph_service.domain.models import Edge
from graph_service.domain.ports import GraphChanges

__all__ = ["Presence"]


class Presence:
    def __init__(self, states: AccountStates, store: AccountStore, changes: GraphChanges) -> None:
        """``states`` may be served through the cache; ``store`` is read strongly consistently;
        ``changes`` is told what a late settling removed."""
        self._states = states
        self._store = store
        self._changes = changes

    async def states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]:
        return await self._states.states(user_ids)

    async def absent(self, user_ids: Sequence[int]) -> set[int]:
        """Those of the accounts that are out of the graph."""
        return {u for u, state in (await self._states.states(user_ids)).items() if not state.in_graph}

    async def in_graph(self, user_id: int) -> bool:
        return not await self.absent([user_id])

    async def require(self, *user_ids: int) -> None:
        """Refuse (``ACCOUNT_DEACTIVATED``, ``ACCOUNT_DELETED``) if any of the accounts is out of the graph."""
        found = await self._states.states(user_ids)
        for user_id in user_ids:
            error = refusal(user_id, found[user_id])
            if error is not None:
                raise error

    async def forget_archived(self, follower_id: int, followee_id: int, *, edge: bool = True) -> None:
        """Before an unfollow, a removed follower, a rejected request or a block: if either account
        is not plainly active (away, or coming back while its restore runs: strongly consistent),
        the pair's archived request (and ``edge``: its archived edge) in that direction goes, or a
        reactivation would bring back what the call removes. Before, not after: a restore that
        committed meanwhile is then removed by the call itself."""
        found = await self._store.states([follower_id, followee_id])
        if any(state is not Lifecycle.ACTIVE for state in found.values()):
            await self._store.forget_archived(follower_id, followee_id, edge=edge)

    async def after_made(self, follower_id: int, followee_id: int, at_us: int, *, request: bool) -> None:
        """A follow (or, ``request``, a pending request) was just committed: if either account has
        left the graph since its state was read, settle the new item as that account's job would."""
        found = await self._store.states([follower_id, followee_id])
        if found[followee_id].in_graph and found[follower_id].in_graph:
            return
        moved = False
        if not found[followee_id].in_graph:
            side = Side.REQUESTER if request else Side.FOLLOWER
            moved = await self._store.settle_late(followee_id, side, Edge(follower_id, at_us))
        if not moved and not found[follower_id].in_graph:
            side = Side.REQUESTED if request else Side.FOLLOWING
            moved = await self._store.settle_late(follower_id, side, Edge(followee_id, at_us))
        if moved and request:
            await self._changes.pair_settled(follower_id, followee_id)
        elif moved:
            await self._changes.follow_settled(follower_id, followee_id, at_us, following=False)
