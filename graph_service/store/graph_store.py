"""The graph on DynamoDB: conditional transactional writes, strongly consistent reads.

Item layout: ``store/items.py``. Each write is one TransactWriteItems whose conditions say what
must still hold (no follow across a block, no edge and request of one pair at once, a membership
item is deleted only if it is still the one that was read); a write whose conditions fail returns
False and writes nothing. What to do then is the service layer's decision, not this adapter's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from graph_service.domain.models import (
    AcceptOutcome,
    Counts,
    Cursor,
    Direction,
    Edge,
    EdgePage,
    Made,
    Mute,
    MutePage,
    PairState,
    Relationship,
)
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, batch_get_all, query_all, transact_get, transact_write
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS, TableNames
from graph_service.store import items as it

__all__ = ["DynamoGraphStore", "load_counts"]

AT = {"#at": "at"}
MUTES_READ_AT_MOST = 1000
"""The most ``MT#`` items one query of ``list_mutes`` asks for (ended mutes make it ask for more)."""


def parse_counts(item: Item | None) -> Counts:
    if not item:
        return Counts()
    return Counts(
        followers=max(0, int(item.get("followers_count", {}).get("N", "0"))),
        following=max(0, int(item.get("following_count", {}).get("N", "0"))),
        version=int(item.get("ver", {}).get("N", "0")),
    )


async def load_counts(dynamo: AsyncDynamo, users_table: str, user_ids: Sequence[int]) -> dict[int, Counts]:
    """Counters of each distinct user, strongly consistent (zeros, version 0, for users never counted)."""
    wanted = list(dict.fromkeys(user_ids))
    keys = [{"user_id": {"N": str(u)}} for u in wanted]
    items = await batch_get_all(dynamo, users_table, keys, consistent=True)
    found = {int(i["user_id"]["N"]): parse_counts(i) for i in items}
    return {u: found.get(u, Counts()) for u in wanted}


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


def _same_mute(mute: Mute, *, notifications: bool) -> Item:
    """The condition that the stored ``M#`` is ``mute``: its ``at`` and ``exp`` (and ``ntf``)."""
    condition = "#at = :at AND #exp = :exp"
    names = {"#at": "at", "#exp": "exp"}
    values: Item = {":at": {"N": str(mute.at_us)}, ":exp": {"N": str(mute.expires_us)}}
    if notifications:
        condition += " AND #ntf = :ntf"
        names["#ntf"] = "ntf"
        values[":ntf"] = {"BOOL": mute.notifications}
    return {"ConditionExpression": condition, "ExpressionAttributeNames": names, "ExpressionAttributeValues": values}


class DynamoGraphStore:
    """``GraphWrites``, ``GraphReads``, ``RelationshipReads``, ``FollowerSource``, ``MuteWrites`` and
    ``MuteReads`` on DynamoDB. Counters are read here; only the counters consumer writes them."""

    def __init__(self, dynamo: AsyncDynamo, tables: TableNames) -> None:
        self._dynamo = dynamo
        self._followers = tables.table(FOLLOWERS)
        self._following = tables.table(FOLLOWING)
        self._users = tables.table(USERS)

    def _table(self, direction: Direction) -> str:
        return self._followers if direction is Direction.FOLLOWERS else self._following

    # -- transaction elements -------------------------------------------------------------

    def _edge_puts(self, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
        return it.edge_puts(self._followers, self._following, follower_id, followee_id, at_us)

    def _edge_deletes(self, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
        return it.edge_deletes(self._followers, self._following, follower_id, followee_id, at_us)

    def _request_puts(self, follower_id: int, followee_id: int, at_us: int) -> list[Item]:
        return it.request_puts(self._followers, self._following, follower_id, followee_id, at_us)

    def _request_deletes(self, requester_id: int, user_id: int, at_us: int) -> list[Item]:
        return it.request_deletes(self._followers, self._following, requester_id, user_id, at_us)

    def _absent(self, prefix: str, owner: int, other: int) -> Item:
        return it.check_absent(self._followers, it.key(prefix, owner, other))

    def _not_blocked(self, a: int, b: int) -> list[Item]:
        return [self._absent(it.BLOCK, a, b), self._absent(it.BLOCK, b, a)]

    def _outgoing(self, user_id: int, delta: int, *, cap: int = 0) -> Item:
        return it.count_outgoing(self._following, user_id, delta, cap=cap)

    async def _commit(self, elements: list[Item]) -> bool:
        return await transact_write(self._dynamo, elements) is None

    async def _make(self, elements: list[Item], follower_id: int, cap: int) -> Made:
        """Commit a new follow or request, counted in the follower's outgoing count (last element)."""
        codes = await transact_write(self._dynamo, [*elements, self._outgoing(follower_id, 1, cap=cap)])
        if codes is None:
            return Made.CREATED
        return Made.AT_CAP if codes[-1] == "ConditionalCheckFailed" else Made.REFUSED

    # -- GraphWrites ----------------------------------------------------------------------

    async def pair(self, actor_id: int, target_id: int) -> PairState:
        """One TransactGetItems: a BatchGetItem reads each item consistently but not all at one
        instant, so it could see a concurrent accept's request already gone and its edge not yet made."""
        gets = [
            {
                "Get": {
                    "TableName": self._followers,
                    "Key": k,
                    "ProjectionExpression": "#at",
                    "ExpressionAttributeNames": AT,
                }
            }
            for k in _pair_keys(actor_id, target_id)
        ]
        found = await transact_get(self._dynamo, gets)
        return PairState(*(int(i["at"]["N"]) if i else None for i in found))

    async def _get_at(self, item_key: Item) -> int | None:
        """The ``at`` of one membership item of the followers table, read strongly consistently."""
        response = await self._dynamo.call(
            "get_item",
            TableName=self._followers,
            Key=item_key,
            ConsistentRead=True,
            ProjectionExpression="#at",
            ExpressionAttributeNames=AT,
        )
        found = response.get("Item")
        return int(found["at"]["N"]) if found else None

    async def request_at(self, user_id: int, requester_id: int) -> int | None:
        return await self._get_at(it.key(it.REQUEST, user_id, requester_id))

    async def edge_at(self, follower_id: int, followee_id: int) -> int | None:
        return await self._get_at(it.key(it.EDGE, followee_id, follower_id))

    async def add_edge(self, follower_id: int, followee_id: int, at_us: int, *, cap: int = 0) -> Made:
        return await self._make(
            it.follow_elements(self._followers, self._following, follower_id, followee_id, at_us), follower_id, cap
        )

    async def add_request(self, follower_id: int, followee_id: int, at_us: int, *, cap: int = 0) -> Made:
        return await self._make(
            [
                *self._request_puts(follower_id, followee_id, at_us),
                self._absent(it.EDGE, followee_id, follower_id),
                *self._not_blocked(follower_id, followee_id),
            ],
            follower_id,
            cap,
        )

    async def accept(
        self, user_id: int, requester_id: int, requested_at: int, at_us: int, *, while_public: bool
    ) -> AcceptOutcome:
        elements = self._request_deletes(requester_id, user_id, requested_at) + self._edge_puts(
            requester_id, user_id, at_us
        )
        if while_public:
            elements.append(it.check_public(self._followers, user_id))
        codes = await transact_write(self._dynamo, elements)
        if codes is None:
            return AcceptOutcome.ACCEPTED
        if while_public and codes[-1] == "ConditionalCheckFailed":
            return AcceptOutcome.PRIVATE
        return AcceptOutcome.CHANGED

    async def remove(self, follower_id: int, followee_id: int, *, edge_at: int | None, request_at: int | None) -> bool:
        elements: list[Item] = []
        if edge_at is not None:
            elements += self._edge_deletes(follower_id, followee_id, edge_at)
        if request_at is not None:
            elements += self._request_deletes(follower_id, followee_id, request_at)
        if not elements:
            return True
        removed = (edge_at is not None) + (request_at is not None)
        return await self._commit([*elements, self._outgoing(follower_id, -removed)])

    async def add_block(self, blocker_id: int, blocked_id: int, at_us: int, pair: PairState) -> bool:
        """Up to 18 elements: the block and its reverse, and for each direction the edge's deletes (or a check that
        there is none) and the request's deletes (or a check that there is none), and the follower's
        outgoing count made smaller by what was removed."""
        block = it.item(it.key(it.BLOCK, blocker_id, blocked_id), Edge(blocked_id, at_us))
        elements = [
            it.put(self._followers, block, only_new=True),
            it.put(self._followers, it.reverse_item(it.BLOCKED_BY, blocked_id, blocker_id)),
        ]
        for follower, followee, edge_at, request_at in (
            (blocker_id, blocked_id, pair.following, pair.requested),
            (blocked_id, blocker_id, pair.followed_by, pair.requested_by),
        ):
            if edge_at is None:
                elements.append(self._absent(it.EDGE, followee, follower))
            else:
                elements += self._edge_deletes(follower, followee, edge_at)
            if request_at is None:
                elements.append(self._absent(it.REQUEST, followee, follower))
            else:
                elements += self._request_deletes(follower, followee, request_at)
            removed = (edge_at is not None) + (request_at is not None)
            if removed:
                elements.append(self._outgoing(follower, -removed))
        return await self._commit(elements)

    async def remove_block(self, blocker_id: int, blocked_id: int) -> bool:
        response = await self._dynamo.call(
            "delete_item",
            TableName=self._followers,
            Key=it.key(it.BLOCK, blocker_id, blocked_id),
            ReturnValues="ALL_OLD",
        )
        # Then its reverse (a crash in between leaves a reverse without its block: harmless, the
        # deletion of the blocked account deletes both, whichever is there).
        await self._dynamo.call(
            "delete_item", TableName=self._followers, Key=it.key(it.BLOCKED_BY, blocked_id, blocker_id)
        )
        return bool(response.get("Attributes"))

    async def set_private(self, user_id: int, private: bool) -> None:
        await self._dynamo.call(
            "put_item",
            TableName=self._followers,
            Item={**it.settings_key(user_id), "private": {"BOOL": private}, "at": {"N": str(now_us())}},
        )

    async def is_private_now(self, user_id: int) -> bool:
        response = await self._dynamo.call(
            "get_item", TableName=self._followers, Key=it.settings_key(user_id), ConsistentRead=True
        )
        return bool(response.get("Item", {}).get("private", {}).get("BOOL", False))

    async def is_private(self, user_id: int) -> bool:
        """``GraphReads``' privacy read: the strongly consistent one (the cache wraps it)."""
        return await self.is_private_now(user_id)

    # -- GraphReads -----------------------------------------------------------------------

    async def is_following(self, follower_id: int, followee_id: int) -> bool:
        return await self.edge_at(follower_id, followee_id) is not None

    @staticmethod
    def _order_query(table: str, owner: int, prefix: str, after: Cursor | None, names: dict[str, str]) -> Item:
        """The newest-first query of the ``prefix`` order items strictly after ``after``, strongly
        consistent, projecting ``names``."""
        # Keys are fixed-width, so "strictly before the cursor" is "at most the cursor's ID minus one".
        upper = f"{prefix}~" if after is None else f"{prefix}{Edge(after.user_id - 1, after.at_us).position}"
        return {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND sk BETWEEN :lo AND :hi",
            "ExpressionAttributeValues": {":pk": {"N": str(owner)}, ":lo": {"S": prefix}, ":hi": {"S": upper}},
            "ScanIndexForward": False,
            "ConsistentRead": True,
            "ProjectionExpression": ", ".join(names),
            "ExpressionAttributeNames": names,
        }

    async def _list_order(self, table: str, owner: int, prefix: str, limit: int, after: Cursor | None) -> EdgePage:
        query = self._order_query(table, owner, prefix, after, {"#o": "other", "#at": "at"})
        found = await query_all(self._dynamo, query, limit=limit + 1)
        entries = [Edge(int(i["other"]["N"]), int(i["at"]["N"])) for i in found]
        return EdgePage(entries=entries[:limit], has_more=len(entries) > limit)

    async def list_edges(self, direction: Direction, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return await self._list_order(self._table(direction), user_id, it.EDGE_ORDER, limit, after)

    async def list_requests(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return await self._list_order(self._followers, user_id, it.REQUEST_ORDER, limit, after)

    async def find_edges(self, direction: Direction, user_id: int, others: Sequence[int]) -> dict[int, int]:
        keys = [it.key(it.EDGE, user_id, other) for other in dict.fromkeys(others)]
        found = await batch_get_all(
            self._dynamo,
            self._table(direction),
            keys,
            consistent=True,
            projection="#o, #at",
            names={"#o": "other", **AT},
        )
        return {int(i["other"]["N"]): int(i["at"]["N"]) for i in found}

    async def get_counts(self, user_ids: Sequence[int]) -> dict[int, Counts]:
        return await load_counts(self._dynamo, self._users, user_ids)

    # -- RelationshipReads ----------------------------------------------------------------

    async def relationships(self, actor_id: int, target_ids: Sequence[int]) -> dict[int, Relationship]:
        """One strongly consistent BatchGetItem of seven keys per target (the pair's six, and the
        actor's ``M#`` of the target: the stored mute, ended or not): every flag is exact, but
        during a concurrent write one target's flags may come from either side of it."""
        wanted = list(dict.fromkeys(target_ids))
        keys = [k for target in wanted for k in [*_pair_keys(actor_id, target), it.key(it.MUTE, actor_id, target)]]
        unique = list({_ident(k): k for k in keys}.values())  # a target equal to the actor repeats keys
        found = await batch_get_all(
            self._dynamo,
            self._followers,
            unique,
            consistent=True,
            projection="pk, sk, #o, #at, #exp, #ntf",
            names=it.MUTE_ATTRIBUTES,
        )
        by_key = {_ident(i): i for i in found}
        at = {ident: int(i["at"]["N"]) for ident, i in by_key.items()}
        answers: dict[int, Relationship] = {}
        for target in wanted:
            if target == actor_id:
                answers[target] = Relationship()
                continue
            relationship = PairState(*(at.get(_ident(k)) for k in _pair_keys(actor_id, target))).relationship()
            muted = by_key.get(_ident(it.key(it.MUTE, actor_id, target)))
            if muted is not None:
                mute = it.parse_mute(muted)
                relationship = replace(
                    relationship, mute_expires_us=mute.expires_us, muting_notifications=mute.notifications
                )
            answers[target] = relationship
        return answers

    # -- FollowerSource -------------------------------------------------------------------

    async def follower_count(self, user_id: int) -> int:
        return (await self.get_counts([user_id]))[user_id].followers

    async def list_followers(self, user_id: int, limit: int, after: Cursor | None) -> EdgePage:
        return await self.list_edges(Direction.FOLLOWERS, user_id, limit, after)

    # -- MuteWrites -----------------------------------------------------------------------

    async def mute_of(self, muter_id: int, muted_id: int) -> Mute | None:
        response = await self._dynamo.call(
            "get_item",
            TableName=self._followers,
            Key=it.key(it.MUTE, muter_id, muted_id),
            ConsistentRead=True,
            ProjectionExpression="#o, #at, #exp, #ntf",
            ExpressionAttributeNames=it.MUTE_ATTRIBUTES,
        )
        found = response.get("Item")
        return it.parse_mute(found) if found else None

    async def put_mute(self, muter_id: int, mute: Mute, *, replacing: Mute | None) -> bool:
        """One transaction: ``M#`` put (only new, or only if it is still ``replacing``: its ``at``,
        ``exp`` and ``ntf``), the new ``MT#`` put, its reverse ``m#`` in the muted account's
        partition, and ``replacing``'s ``MT#`` deleted if it was made at another time (the same
        time: the put replaces it)."""
        member = it.put(self._followers, it.mute_item(it.key(it.MUTE, muter_id, mute.user_id), mute))
        if replacing is None:
            member["Put"]["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            member["Put"].update(_same_mute(replacing, notifications=True))
        elements = [
            member,
            it.put(self._followers, it.mute_item(it.order_key(it.MUTE_ORDER, muter_id, mute), mute)),
            it.put(
                self._followers,
                it.reverse_item(it.MUTED_BY, mute.user_id, muter_id, expires_us=mute.expires_us),
            ),
        ]
        if replacing is not None and replacing.at_us != mute.at_us:
            elements.append(it.delete(self._followers, it.order_key(it.MUTE_ORDER, muter_id, replacing)))
        return await self._commit(elements)

    async def remove_mute(self, muter_id: int, mute: Mute) -> bool:
        """One transaction: ``M#`` deleted if its ``at`` and ``exp`` are still ``mute``'s, its ``MT#`` and
        its reverse ``m#``."""
        member = it.delete(self._followers, it.key(it.MUTE, muter_id, mute.user_id))
        member["Delete"].update(_same_mute(mute, notifications=False))
        return await self._commit(
            [
                member,
                it.delete(self._followers, it.order_key(it.MUTE_ORDER, muter_id, mute)),
                it.delete(self._followers, it.key(it.MUTED_BY, mute.user_id, muter_id)),
            ]
        )

    # -- MuteReads ------------------------------------------------------------------------

    async def list_mutes(self, user_id: int, limit: int, after: Cursor | None, *, now_us: int) -> MutePage:
        """``MT#`` items newest first, skipping those that have ended (TTL reclaims them within days,
        not at once), until ``limit + 1`` in force are found or the list ends: a page with more after
        it is never empty, however many ended mutes lie between. Each query asks for what is still
        wanted plus as many as were skipped so far (at most ``MUTES_READ_AT_MOST``)."""
        request = self._order_query(self._followers, user_id, it.MUTE_ORDER, after, it.MUTE_ATTRIBUTES)
        wanted = limit + 1
        found: list[Mute] = []
        skipped = 0
        while True:
            request["Limit"] = min(MUTES_READ_AT_MOST, wanted - len(found) + skipped)
            response = await self._dynamo.call("query", **request)
            for mute in map(it.parse_mute, response["Items"]):
                if mute.in_force(now_us):
                    found.append(mute)
                else:
                    skipped += 1
            if len(found) >= wanted or "LastEvaluatedKey" not in response:
                break
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]
        return MutePage(entries=found[:limit], has_more=len(found) > limit)
