"""The edge store on DynamoDB: transactional writes, strongly consistent reads.

Item layout: ``store/items.py``. Every write is one TransactWriteItems whose conditions carry
the rules (no follow across a block, no edge and request of one pair at once, a membership item
is deleted only if it is still the one that was read). A cancelled transaction is answered by
reading the pair again and deciding afresh, so concurrent writes serialise in DynamoDB.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from botocore.exceptions import ClientError

from graph_service.errors import Blocked, Unavailable
from graph_service.models import (
    BlockResult,
    Counts,
    Cursor,
    Direction,
    Edge,
    EdgePage,
    FollowResult,
    FollowState,
    Relationship,
    Removal,
    now_us,
)
from graph_service.settings import Settings
from graph_service.store import items as it
from graph_service.store.dynamo_client import AsyncDynamo, cancellation_codes, error_code
from graph_service.store.edge_store import AccountIsPrivate
from graph_service.store.tables import FOLLOWERS, FOLLOWING, USERS

__all__ = ["DynamoEdgeStore", "PairState", "parse_counts"]

MAX_TX_ATTEMPTS = 8
BATCH_GET_KEYS = 100

Item = dict[str, Any]


def parse_counts(item: Item | None) -> Counts:
    if not item:
        return Counts()
    return Counts(
        followers=max(0, int(item.get("followers_count", {}).get("N", "0"))),
        following=max(0, int(item.get("following_count", {}).get("N", "0"))),
        version=int(item.get("ver", {}).get("N", "0")),
    )


async def _backoff(attempt: int) -> None:
    await asyncio.sleep(min(0.5, 0.01 * 2**attempt) * random.random())  # noqa: S311 - jitter


def _pair_keys(actor: int, target: int) -> list[Item]:
    """The six items of a pair, in ``PairState`` field order."""
    return [
        it.key(it.EDGE, target, actor),
        it.key(it.EDGE, actor, target),
        it.key(it.REQUEST, target, actor),
        it.key(it.REQUEST, actor, target),
        it.key(it.BLOCK, actor, target),
        it.key(it.BLOCK, target, actor),
    ]


def _ident(item_key: Item) -> tuple[str, str]:
    return item_key["pk"]["N"], item_key["sk"]["S"]


@dataclass(frozen=True, slots=True)
class PairState:
    """Every item between an actor and a target, as the timestamp it holds (None: absent)."""

    following: int | None = None
    followed_by: int | None = None
    requested: int | None = None
    requested_by: int | None = None
    blocking: int | None = None
    blocked_by: int | None = None

    @property
    def blocked(self) -> bool:
        return self.blocking is not None or self.blocked_by is not None

    def relationship(self) -> Relationship:
        return Relationship(
            following=self.following is not None,
            followed_by=self.followed_by is not None,
            requested=self.requested is not None,
            requested_by=self.requested_by is not None,
            blocking=self.blocking is not None,
            blocked_by=self.blocked_by is not None,
        )


class DynamoEdgeStore:
    """Implements ``EdgeStore``. Counters are read here but written only by the counters consumer."""

    def __init__(self, dynamo: AsyncDynamo, settings: Settings) -> None:
        self._dynamo = dynamo
        self._followers = settings.table(FOLLOWERS)
        self._following = settings.table(FOLLOWING)
        self._users = settings.table(USERS)

    def _table(self, direction: Direction) -> str:
        return self._followers if direction is Direction.FOLLOWERS else self._following

    # -- building blocks ------------------------------------------------------------------

    async def _transact(self, elements: list[Item]) -> list[str] | None:
        """Run a transaction, retrying conflicts; the per-item codes if a condition failed, else None."""
        for attempt in range(MAX_TX_ATTEMPTS):
            try:
                await self._dynamo.call("transact_write_items", TransactItems=elements)
                return None
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise
                codes = cancellation_codes(exc)
                if "ConditionalCheckFailed" in codes:
                    return codes
                await _backoff(attempt)  # TransactionConflict and friends: try again
        raise Unavailable("DynamoDB transaction kept conflicting")

    async def _batch_get(self, table: str, keys: Sequence[Item], projection: str | None = None) -> list[Item]:
        """Strongly consistent BatchGetItem of any number of keys (chunks of 100, in parallel)."""

        async def chunk(part: Sequence[Item]) -> list[Item]:
            spec: Item = {"Keys": list(part), "ConsistentRead": True}
            if projection:
                spec["ProjectionExpression"] = projection
                names = {"#o": "other", "#at": "at"}
                spec["ExpressionAttributeNames"] = {k: v for k, v in names.items() if k in projection}
            request: Item = {table: spec}
            found: list[Item] = []
            for attempt in range(MAX_TX_ATTEMPTS):
                response = await self._dynamo.call("batch_get_item", RequestItems=request)
                found.extend(response["Responses"].get(table, []))
                request = response.get("UnprocessedKeys") or {}
                if not request:
                    return found
                await _backoff(attempt)
            raise Unavailable("DynamoDB kept leaving keys unprocessed")

        parts = [keys[i : i + BATCH_GET_KEYS] for i in range(0, len(keys), BATCH_GET_KEYS)]
        results = await asyncio.gather(*(chunk(p) for p in parts))
        return [found for result in results for found in result]

    async def _get_at(self, item_key: Item) -> int | None:
        """The ``at`` of one membership item of the followers table, read strongly consistently."""
        response = await self._dynamo.call(
            "get_item",
            TableName=self._followers,
            Key=item_key,
            ConsistentRead=True,
            ProjectionExpression="#at",
            ExpressionAttributeNames={"#at": "at"},
        )
        found = response.get("Item")
        return int(found["at"]["N"]) if found else None

    async def pair_states(self, actor: int, targets: Sequence[int]) -> dict[int, PairState]:
        """Every item between ``actor`` and each distinct target, in one consistent read."""
        wanted = list(dict.fromkeys(targets))
        keys = [k for target in wanted for k in _pair_keys(actor, target)]
        unique = list({_ident(k): k for k in keys}.values())  # a target equal to the actor repeats keys
        found = await self._batch_get(self._followers, unique, "pk, sk, #at")
        at = {_ident(i): int(i["at"]["N"]) for i in found} if found else {}
        return {target: PairState(*(at.get(_ident(k)) for k in _pair_keys(actor, target))) for target in wanted}

    async def _pair(self, actor: int, target: int) -> PairState:
        """The pair's items as one serializable snapshot (TransactGetItems), for the writes that
        decide from it: a BatchGetItem reads each item consistently but not all at one instant,
        so it could see a concurrent accept's request already gone and its edge not yet made."""
        gets = [
            {
                "Get": {
                    "TableName": self._followers,
                    "Key": k,
                    "ProjectionExpression": "#at",
                    "ExpressionAttributeNames": {"#at": "at"},
                }
            }
            for k in _pair_keys(actor, target)
        ]
        for attempt in range(MAX_TX_ATTEMPTS):
            try:
                response = await self._dynamo.call("transact_get_items", TransactItems=gets)
            except ClientError as exc:
                if error_code(exc) != "TransactionCanceledException":
                    raise
                await _backoff(attempt)  # a write of these items was in flight: read again
                continue
            found = [r.get("Item") for r in response["Responses"]]
            return PairState(*(int(i["at"]["N"]) if i else None for i in found))
        raise Unavailable("DynamoDB kept cancelling a relationship read")

    def _edge_puts(self, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
        created, reverse = Edge(follower_id, at_us), Edge(followee_id, at_us)
        return [
            it.put(self._followers, it.item(it.key(it.EDGE, followee_id, follower_id), created), only_new=True),
            it.put(self._followers, it.item(it.order_key(it.EDGE_ORDER, followee_id, created), created)),
            it.put(self._following, it.item(it.key(it.EDGE, follower_id, followee_id), reverse), only_new=True),
            it.put(self._following, it.item(it.order_key(it.EDGE_ORDER, follower_id, reverse), reverse)),
        ]

    def _edge_deletes(self, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
        return [
            it.delete_if_at(self._followers, it.key(it.EDGE, followee_id, follower_id), at_us),
            it.delete(self._followers, it.order_key(it.EDGE_ORDER, followee_id, Edge(follower_id, at_us))),
            it.delete(self._following, it.key(it.EDGE, follower_id, followee_id)),
            it.delete(self._following, it.order_key(it.EDGE_ORDER, follower_id, Edge(followee_id, at_us))),
        ]

    def _request_deletes(self, requester_id: int, user_id: int, at_us: int) -> list[Item]:
        return [
            it.delete_if_at(self._followers, it.key(it.REQUEST, user_id, requester_id), at_us),
            it.delete(self._followers, it.order_key(it.REQUEST_ORDER, user_id, Edge(requester_id, at_us))),
        ]

    def _not_blocked(self, a: int, b: int) -> list[Item]:
        return [
            it.check_absent(self._followers, it.key(it.BLOCK, a, b)),
            it.check_absent(self._followers, it.key(it.BLOCK, b, a)),
        ]

    # -- follows and requests -------------------------------------------------------------

    async def follow(self, follower_id: int, followee_id: int, *, private: bool = False) -> FollowResult:
        """Follow a public account, or ask to follow a private one. A pending request to a
        public account (left by an account turning public) is accepted instead."""
        for _ in range(MAX_TX_ATTEMPTS):
            at = now_us()
            absent = it.check_absent(
                self._followers, it.key(it.EDGE if private else it.REQUEST, followee_id, follower_id)
            )
            if private:
                request = Edge(follower_id, at)
                writes = [
                    it.put(
                        self._followers, it.item(it.key(it.REQUEST, followee_id, follower_id), request), only_new=True
                    ),
                    it.put(self._followers, it.item(it.order_key(it.REQUEST_ORDER, followee_id, request), request)),
                ]
            else:
                writes = self._edge_puts(follower_id, followee_id, at)
            if await self._transact([*writes, absent, *self._not_blocked(follower_id, followee_id)]) is None:
                return FollowResult(True, at, FollowState.REQUESTED if private else FollowState.FOLLOWING)
            pair = await self._pair(follower_id, followee_id)
            if pair.blocked:
                raise Blocked(follower_id, followee_id)
            if pair.following is not None:
                return FollowResult(False, pair.following)
            if pair.requested is not None:
                if private:
                    return FollowResult(False, pair.requested, FollowState.REQUESTED)
                accepted = await self.accept_request(followee_id, follower_id)
                if accepted is not None:
                    return accepted
            # What failed the transaction is gone again (a racing unfollow or reject): go again.
        raise Unavailable("follow kept racing concurrent writes")

    async def accept_request(
        self, user_id: int, requester_id: int, *, while_public: bool = False
    ) -> FollowResult | None:
        """Turn the pending request into an edge; the edge if there is one already, else None.

        ``while_public`` adds a condition on the settings item, so an accept made on behalf of a
        public account (the sweep of SetPrivacy, a follower's own re-check) cannot commit after
        the account turned private again."""
        for _ in range(MAX_TX_ATTEMPTS):
            requested_at = await self._get_at(it.key(it.REQUEST, user_id, requester_id))
            if requested_at is None:
                edge_at = await self._get_at(it.key(it.EDGE, user_id, requester_id))
                return None if edge_at is None else FollowResult(False, edge_at)
            at = now_us()
            elements = self._request_deletes(requester_id, user_id, requested_at) + self._edge_puts(
                requester_id, user_id, at
            )
            if while_public:
                elements.append(it.check_public(self._followers, user_id))
            codes = await self._transact(elements)
            if codes is None:
                return FollowResult(True, at)
            if while_public and codes[-1] == "ConditionalCheckFailed":
                raise AccountIsPrivate(user_id)
        raise Unavailable("accept kept racing concurrent writes")

    async def reject_request(self, user_id: int, requester_id: int) -> int | None:
        """Drop the pending request; its timestamp, or None if there was none."""
        for _ in range(MAX_TX_ATTEMPTS):
            requested_at = await self._get_at(it.key(it.REQUEST, user_id, requester_id))
            if requested_at is None:
                return None
            if await self._transact(self._request_deletes(requester_id, user_id, requested_at)) is None:
                return requested_at
        raise Unavailable("reject kept racing concurrent writes")

    async def unfollow(self, follower_id: int, followee_id: int) -> Removal:
        """Remove the edge and withdraw a pending request, whichever exist."""
        for _ in range(MAX_TX_ATTEMPTS):
            pair = await self._pair(follower_id, followee_id)
            elements: list[Item] = []
            if pair.following is not None:
                elements += self._edge_deletes(follower_id, followee_id, pair.following)
            if pair.requested is not None:
                elements += self._request_deletes(follower_id, followee_id, pair.requested)
            if not elements or await self._transact(elements) is None:
                return Removal(pair.following, pair.requested)
            # An item changed under us (removed, or re-made with a new timestamp): read again.
        raise Unavailable("unfollow kept racing concurrent writes")

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        return await self._get_at(it.key(it.EDGE, followee_id, follower_id)) is not None

    # -- blocks ---------------------------------------------------------------------------

    async def block(self, blocker_id: int, blocked_id: int) -> BlockResult:
        """Put the block and delete every edge and request between the two, in one transaction
        conditioned on what was read: a follow that commits in between cancels it, and the
        next attempt deletes that follow too."""
        for _ in range(MAX_TX_ATTEMPTS):
            pair = await self._pair(blocker_id, blocked_id)
            if pair.blocking is not None:
                return BlockResult(created=False)  # no edge or request can exist across a block
            at = now_us()
            block = it.item(it.key(it.BLOCK, blocker_id, blocked_id), Edge(blocked_id, at))
            elements = [it.put(self._followers, block, only_new=True)]
            removed: list[tuple[int, int, int]] = []
            for follower, followee, edge_at, request_at in (
                (blocker_id, blocked_id, pair.following, pair.requested),
                (blocked_id, blocker_id, pair.followed_by, pair.requested_by),
            ):
                if edge_at is None:
                    elements.append(it.check_absent(self._followers, it.key(it.EDGE, followee, follower)))
                else:
                    elements += self._edge_deletes(follower, followee, edge_at)
                    removed.append((follower, followee, edge_at))
                if request_at is None:
                    elements.append(it.check_absent(self._followers, it.key(it.REQUEST, followee, follower)))
                else:
                    elements += self._request_deletes(follower, followee, request_at)
            if await self._transact(elements) is None:
                return BlockResult(created=True, removed_edges=tuple(removed))
        raise Unavailable("block kept racing concurrent writes")

    async def unblock(self, blocker_id: int, blocked_id: int) -> bool:
        response = await self._dynamo.call(
            "delete_item",
            TableName=self._followers,
            Key=it.key(it.BLOCK, blocker_id, blocked_id),
            ReturnValues="ALL_OLD",
        )
        return bool(response.get("Attributes"))

    async def relationships(self, actor_id: int, target_ids: Sequence[int]) -> dict[int, Relationship]:
        states = await self.pair_states(actor_id, target_ids)
        return {t: (Relationship() if t == actor_id else s.relationship()) for t, s in states.items()}

    # -- privacy --------------------------------------------------------------------------

    async def is_private(self, user_id: int, *, consistent: bool = False) -> bool:
        response = await self._dynamo.call(
            "get_item", TableName=self._followers, Key=it.settings_key(user_id), ConsistentRead=True
        )
        return bool(response.get("Item", {}).get("private", {}).get("BOOL", False))

    async def set_private(self, user_id: int, private: bool) -> None:
        await self._dynamo.call(
            "put_item",
            TableName=self._followers,
            Item={**it.settings_key(user_id), "private": {"BOOL": private}, "at": {"N": str(now_us())}},
        )

    # -- lists ----------------------------------------------------------------------------

    async def _list_order(self, table: str, owner: int, prefix: str, limit: int, after: Cursor | None) -> EdgePage:
        # Keys are fixed-width, so "strictly before the cursor" is "at most the cursor's ID minus one".
        upper = f"{prefix}~" if after is None else f"{prefix}{Edge(after.user_id - 1, after.at_us).position}"
        query: Item = {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {":pk": {"N": str(owner)}, ":lo": {"S": prefix}, ":hi": {"S": upper}},
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "ProjectionExpression": "#o, #at",
            "ExpressionAttributeNames": {"#o": "other", "#at": "at"},
        }
        entries: list[Edge] = []
        while len(entries) <= limit:
            response = await self._dynamo.call("query", Limit=limit + 1 - len(entries), **query)
            entries.extend(Edge(int(i["other"]["N"]), int(i["at"]["N"])) for i in response["Items"])
            if "LastEvaluatedKey" not in response:
                break
            query["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return EdgePage(entries=entries[:limit], has_more=len(entries) > limit)

    async def list_edges(
        self, direction: Direction, user_id: int, limit: int, after: Cursor | None, *, warm: bool = True
    ) -> EdgePage:
        return await self._list_order(self._table(direction), user_id, it.EDGE_ORDER, limit, after)

    async def list_requests(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return await self._list_order(self._followers, user_id, it.REQUEST_ORDER, limit, after)

    async def find_edges(self, direction: Direction, user_id: int, others: Sequence[int]) -> dict[int, int]:
        """Which of ``others`` are in ``user_id``'s list, with the follow timestamps."""
        keys = [it.key(it.EDGE, user_id, other) for other in dict.fromkeys(others)]
        found = await self._batch_get(self._table(direction), keys, "#o, #at")
        return {int(i["other"]["N"]): int(i["at"]["N"]) for i in found}

    # -- counts ---------------------------------------------------------------------------

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        wanted = list(dict.fromkeys(user_ids))
        keys = [{"user_id": {"N": str(u)}} for u in wanted]
        found = {int(i["user_id"]["N"]): parse_counts(i) for i in await self._batch_get(self._users, keys)}
        return {u: found.get(u, Counts()) for u in wanted}

    async def close(self) -> None:
        self._dynamo.close()
