"""The in-memory account states keep the account store contract that DynamoDB Local keeps."""

from __future__ import annotations

from dataclasses import replace

import pytest

from graph_service.domain.accounts import Lifecycle, Side
from graph_service.domain.models import Edge
from tests.support.contracts.accounts import AccountContract, AccountsUnderTest, Held
from tests.support.fakes.accounts import FakeAccounts
from tests.support.fakes.graph import FakeGraph


class TestFakeAccounts(AccountContract):
    @pytest.fixture
    def store(self) -> AccountsUnderTest:
        graph = FakeGraph()
        fake = FakeAccounts(graph)

        async def archived(user_id: int) -> Held:
            return set(fake.archived.get(user_id, set()))

        async def finish(user_id: int) -> None:
            status = await fake.status(user_id)
            fake.stored[user_id] = replace(status, state=status.state.settled)

        return AccountsUnderTest(fake, graph, archived, finish)


async def test_archive_all_moves_every_item_of_the_account_as_its_job_would() -> None:
    """``archive_all`` is the fake's job: every edge and request touching the account, both ways,
    archived in its partition; the others' items untouched; the state settled."""
    graph = FakeGraph()
    fake = FakeAccounts(graph)
    graph.edges.update({(1, 2): 10, (3, 1): 11, (2, 3): 12})
    graph.requests.update({(4, 1): 13, (1, 5): 14, (4, 5): 15})
    assert await fake.change(await fake.status(1), Lifecycle.DEACTIVATING, 100)
    fake.archive_all(1)
    assert graph.edges == {(2, 3): 12}
    assert graph.requests == {(4, 5): 15}
    assert fake.archived == {
        1: {(Side.FOLLOWING, 2, 10), (Side.FOLLOWER, 3, 11), (Side.REQUESTER, 4, 13), (Side.REQUESTED, 5, 14)}
    }
    assert (await fake.status(1)).state is Lifecycle.DEACTIVATED
    await fake.settle_late(1, Side.FOLLOWING, Edge(2, 10))  # the job got there first: nothing more
    assert len(fake.archived[1]) == 4
