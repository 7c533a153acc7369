"""Committing one batch of an import, and sorting out a cancelled one.

A batch is one TransactWriteItems (``import_batches.transaction``). When DynamoDB cancels it, the
cancellation reasons (one per element) say which rows' own conditions failed: those rows are
settled at once (already present, blocked, request pending) and the rest is tried again as a
smaller batch. A follower whose outgoing count's cap condition failed has each of its rows tried
alone, in file order, so that exactly the rows past the cap are rejected (``FOLLOW_LIMIT``).
"""

from __future__ import annotations

from graph_service.domain.account_ports import AccountStates
from graph_service.domain.errors import Unavailable
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, backoff, transact_write
from graph_service.operations.import_batches import FAILED, Outcome, Settled, classify, transaction
from graph_service.operations.import_rows import Reason, Row

__all__ = ["WRITE_ATTEMPTS", "BatchWriter"]

WRITE_ATTEMPTS = 6
"""Throttling or an unreachable endpoint: tried again with backoff (about 10 s in all), then exit 3.
Conflicts with concurrent transactions are retried inside ``transact_write`` already."""


class BatchWriter:
    def __init__(
        self, dynamo: AsyncDynamo, followers_table: str, following_table: str, cap: int, states: AccountStates
    ) -> None:
        self._dynamo = dynamo
        self._states = states
        self._followers = followers_table
        self._following = following_table
        self._cap = cap

    def _transaction(self, rows: list[Row]) -> tuple[list[Item], dict[int, int]]:
        return transaction(rows, self._followers, self._following, self._cap)

    async def _commit(self, elements: list[Item]) -> list[str] | None:
        """None when committed, else one cancellation code per element."""
        for attempt in range(WRITE_ATTEMPTS):
            try:
                codes = await transact_write(self._dynamo, elements)
            except Unavailable:
                if attempt == WRITE_ATTEMPTS - 1:
                    raise
                await backoff(attempt, base=0.3, cap=5.0)
                continue
            return None if codes is None else codes + ["None"] * (len(elements) - len(codes))
        raise AssertionError("unreachable")

    async def settle(self, rows: list[Row]) -> dict[int, Outcome]:
        """Each row's outcome, by line. A row with an account out of the graph (read just before, one
        strongly consistent read for the batch) is ``ACCOUNT_AWAY``; an account that leaves while its
        batch commits is left to ``fsck`` (``live_edge_of_inactive``): imports run before a service
        takes traffic, or beside it at a pace where that is the rare case."""
        outcomes: dict[int, Outcome] = {}
        alone: list[Row] = []
        states = await self._states.states([u for row in rows for u in (row.follower_id, row.followee_id)])
        pending = []
        for row in rows:
            if states[row.follower_id].in_graph and states[row.followee_id].in_graph:
                pending.append(row)
            else:
                outcomes[row.line] = Reason.ACCOUNT_AWAY
        while pending:
            elements, where = self._transaction(pending)
            codes = await self._commit(elements)
            if codes is None:
                outcomes.update((row.line, Settled.WRITTEN) for row in pending)
                break
            capped = {follower for follower, index in where.items() if codes[index] == FAILED}
            retry = []
            for index, row in enumerate(pending):
                outcome = classify(codes, index)
                if outcome is not None:
                    outcomes[row.line] = outcome
                elif row.follower_id in capped:
                    alone.append(row)
                else:
                    retry.append(row)
            if len(retry) == len(pending):  # nothing told apart: never loop, go row by row
                alone += retry
                retry = []
            pending = retry
        for row in sorted(alone, key=lambda r: r.line):
            codes = await self._commit(self._transaction([row])[0])
            if codes is None:
                outcomes[row.line] = Settled.WRITTEN
                continue
            outcome = classify(codes, 0) or (Reason.FOLLOW_LIMIT if codes[-1] == FAILED else None)
            if outcome is None:
                raise RuntimeError(f"DynamoDB cancelled line {row.line} for no reason it gave: {codes}")
            outcomes[row.line] = outcome
        return outcomes
