"""``AccountStore`` in memory, over a ``FakeGraph``: for unit tests of the rules only (held to the
contract of ``tests/support/contracts/accounts.py``, with ``DynamoAccounts``). It has no job: a
test moves an account's items as a job would with ``archive_all``."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from graph_service.domain.accounts import AccountStatus, Lifecycle, Side
from graph_service.domain.models import Edge
from tests.support.fakes.graph import FakeGraph

__all__ = ["ALL_ACTIVE", "FakeAccounts"]


class FakeAccounts:
    def __init__(self, graph: FakeGraph) -> None:
        self.graph = graph
        self.stored: dict[int, AccountStatus] = {}
        self.archived: dict[int, set[tuple[Side, int, int]]] = {}
        """user -> (side, other, at) of each edge or request archived in its partition."""

    async def status(self, user_id: int) -> AccountStatus:
        return self.stored.get(user_id, AccountStatus(user_id))

    async def states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]:
        return {u: (await self.status(u)).state for u in user_ids}

    async def change(self, current: AccountStatus, to: Lifecycle, at_us: int, *, total: int = 0) -> bool:
        if (await self.status(current.user_id)).gen != current.gen:
            return False
        self.stored[current.user_id] = AccountStatus(
            current.user_id, to, current.gen + 1, 0, total, at_us, previous=current.state
        )
        return True

    async def forget_archived(self, follower_id: int, followee_id: int, *, edge: bool = True) -> None:
        sides = [(Side.REQUESTER, Side.REQUESTED)] + ([(Side.FOLLOWER, Side.FOLLOWING)] if edge else [])
        for inward, outward in sides:
            for owner, side, other in ((followee_id, inward, follower_id), (follower_id, outward, followee_id)):
                held = self.archived.get(owner, set())
                self.archived[owner] = {a for a in held if (a[0], a[1]) != (side, other)}

    async def settle_late(self, user_id: int, side: Side, edge: Edge) -> bool:
        status = await self.status(user_id)
        if status.state.in_graph:
            return False
        pair = side.follower_followee(user_id, edge.user_id)
        held = self.graph.edges if side.is_edge else self.graph.requests
        if held.get(pair) != edge.at_us:
            return False  # gone already (archived, or unfollowed)
        del held[pair]
        if not status.state.deleted:
            self.archived.setdefault(user_id, set()).add((side, edge.user_id, edge.at_us))
        return True

    def archive_all(self, user_id: int) -> None:
        """What a deactivation's job does to the graph, at once: every edge and request touching the
        account archived, and its state settled."""
        for (follower, followee), at in list(self.graph.edges.items()):
            if user_id in (follower, followee):
                side = Side.FOLLOWER if followee == user_id else Side.FOLLOWING
                other = follower if followee == user_id else followee
                del self.graph.edges[(follower, followee)]
                self.archived.setdefault(user_id, set()).add((side, other, at))
        for (requester, asked), at in list(self.graph.requests.items()):
            if user_id in (requester, asked):
                side = Side.REQUESTER if asked == user_id else Side.REQUESTED
                del self.graph.requests[(requester, asked)]
                self.archived.setdefault(user_id, set()).add((side, asked if requester == user_id else requester, at))
        status = self.stored[user_id]
        self.stored[user_id] = replace(status, state=status.state.settled)


ALL_ACTIVE = FakeAccounts(FakeGraph())
"""States for a test where no account ever leaves the graph (nothing may change it)."""
