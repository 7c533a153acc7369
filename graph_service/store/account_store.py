"""The account lifecycle on DynamoDB: states, the jobs' registry and leases, and the batches a job
commits (layout: ``store/account_items.py``).

Every batch is one TransactWriteItems fenced by the account's state item (its generation and
state), which it also moves the progress of: a job whose account changed state again commits
nothing more, and a batch is never half done. A batch removes what it moves, so a job always works
on the first items left: resuming after a crash is running again.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from graph_service.domain.accounts import AccountStatus, Archived, JobEntry, Lifecycle, Moved, Restored, Side
from graph_service.domain.errors import Unavailable
from graph_service.domain.models import Counts, Edge
from graph_service.domain.times import now_us
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, batch_get_all, conditional, query_all, transact_write
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS, TableNames
from graph_service.store import account_items as ai
from graph_service.store import items as it
from graph_service.store.graph_store import load_counts

__all__ = ["BATCH_ITEMS", "DynamoAccounts"]


CONDITION_FAILED = "ConditionalCheckFailed"
LATE_ATTEMPTS = 8
BATCH_ITEMS = 99
"""Elements of one batch's transaction, leaving room under DynamoDB's 100 for the fence."""

_SOURCE = {
    Side.FOLLOWER: (FOLLOWERS, it.EDGE),
    Side.FOLLOWING: (FOLLOWING, it.EDGE),
    Side.REQUESTER: (FOLLOWERS, it.REQUEST),
    Side.REQUESTED: (FOLLOWING, it.REQUEST),
}
"""Where a side's live items are listed in U's own partition: (table, membership prefix)."""


def _moved(codes: list[str] | None, *, first_is_membership: bool = True) -> Moved:
    """A fenced batch's outcome from its cancellation codes (the fence is the last element; the
    first is the first item's membership)."""
    if codes is None:
        return Moved.DONE
    if codes[-1] == CONDITION_FAILED:
        return Moved.SUPERSEDED
    if first_is_membership and len(codes) > 1 and codes[0] == CONDITION_FAILED:
        return Moved.GONE
    return Moved.REFUSED


class DynamoAccounts:
    """``AccountStore`` (states and their changes) and ``AccountJobStore`` (the registry, leases
    and the jobs' batches) on DynamoDB."""

    def __init__(self, dynamo: AsyncDynamo, tables: TableNames) -> None:
        self._dynamo = dynamo
        self._followers = tables.table(FOLLOWERS)
        self._following = tables.table(FOLLOWING)
        self._users = tables.table(USERS)
        self._tables = {FOLLOWERS: self._followers, FOLLOWING: self._following}

    # -- states ----------------------------------------------------------------------------

    async def status(self, user_id: int) -> AccountStatus:
        response = await self._dynamo.call(
            "get_item", TableName=self._followers, Key=ai.state_key(user_id), ConsistentRead=True
        )
        return ai.parse_status(user_id, response.get("Item"))

    async def states(self, user_ids: Sequence[int]) -> dict[int, Lifecycle]:
        """Each account's state, strongly consistent (``ACTIVE`` for one with no state item)."""
        wanted = list(dict.fromkeys(user_ids))
        found = await batch_get_all(
            self._dynamo,
            self._followers,
            [ai.state_key(u) for u in wanted],
            consistent=True,
            projection="pk, #st",
            names={"#st": "st"},
        )
        by_user = {int(i["pk"]["N"]): Lifecycle(i["st"]["S"]) for i in found}
        return {u: by_user.get(u, Lifecycle.ACTIVE) for u in wanted}

    async def change(self, current: AccountStatus, to: Lifecycle, at_us: int, *, total: int = 0) -> bool:
        """Move the account from ``current`` (only if it is still that generation) to ``to`` at the
        next generation, its progress zeroed, and register its job, in one transaction."""
        gen = current.gen + 1
        state = {
            **ai.state_key(current.user_id),
            "st": {"S": to.value},
            "gen": {"N": str(gen)},
            "done": {"N": "0"},
            "total": {"N": str(total)},
            "at": {"N": str(at_us)},
            "prev": {"S": current.state.value},
        }
        put_state: Item = {"TableName": self._followers, "Item": state}
        if current.gen == 0:
            put_state["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            put_state["ConditionExpression"] = "#gen = :gen"
            put_state["ExpressionAttributeNames"] = {"#gen": "gen"}
            put_state["ExpressionAttributeValues"] = {":gen": {"N": str(current.gen)}}
        job = {**ai.job_key(current.user_id), "gen": {"N": str(gen)}, "owner": {"S": ""}, "until": {"N": "0"}}
        elements = [{"Put": put_state}, it.put(self._followers, job)]
        return await transact_write(self._dynamo, elements) is None

    async def set_total(self, user_id: int, gen: int, state: Lifecycle, total: int) -> bool:
        """Record how many items the job found (only while the account is still at ``gen``)."""
        element = ai.check_state(self._followers, user_id, gen, state)["ConditionCheck"]
        element["UpdateExpression"] = "SET #total = :total"
        element["ExpressionAttributeNames"]["#total"] = "total"
        element["ExpressionAttributeValues"][":total"] = {"N": str(total)}
        return await transact_write(self._dynamo, [{"Update": element}]) is None

    async def finish(self, user_id: int, gen: int, state: Lifecycle) -> bool:
        """The job of ``gen`` is done: the state becomes its settled one and the job leaves the registry."""
        element = ai.check_state(self._followers, user_id, gen, state)["ConditionCheck"]
        element["UpdateExpression"] = "SET #st = :to"
        element["ExpressionAttributeValues"][":to"] = {"S": state.settled.value}
        elements = [{"Update": element}, self._job_delete(user_id, gen)]
        return await transact_write(self._dynamo, elements) is None

    # -- the jobs' registry -----------------------------------------------------------------

    async def jobs(self) -> list[JobEntry]:
        query = {
            "TableName": self._followers,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :j)",
            "ExpressionAttributeValues": {":pk": {"N": str(ai.JOBS_PK)}, ":j": {"S": ai.JOB}},
            "ConsistentRead": True,
        }
        return [
            JobEntry(
                user_id=int(i["sk"]["S"][len(ai.JOB) :]),
                gen=int(i["gen"]["N"]),
                owner=i.get("owner", {}).get("S", ""),
                until_ms=int(i.get("until", {}).get("N", "0")),
                tries=int(i.get("tries", {}).get("N", "0")),
            )
            for i in await query_all(self._dynamo, query)
        ]

    async def _update_job(self, user_id: int, gen: int, update: str, condition: str, values: Item) -> bool:
        """One conditional update of the job's registry item, only while it is still ``gen``'s."""
        names = {"#owner": "owner", "#until": "until", "#gen": "gen", "#tries": "tries"}
        return await conditional(
            self._dynamo,
            "update_item",
            TableName=self._followers,
            Key=ai.job_key(user_id),
            UpdateExpression=update,
            ConditionExpression=f"#gen = :gen AND ({condition})",
            ExpressionAttributeNames={n: v for n, v in names.items() if n in update or n in condition or n == "#gen"},
            ExpressionAttributeValues={**values, ":gen": {"N": str(gen)}},
        )

    async def lease(self, user_id: int, gen: int, owner: str, now_ms: int, until_ms: int) -> bool:
        """Take (or renew) the job's lease: only if it is still ``gen``'s and free, expired or ``owner``'s."""
        values = {":me": {"S": owner}, ":until": {"N": str(until_ms)}, ":now": {"N": str(now_ms)}}
        return await self._update_job(
            user_id, gen, "SET #owner = :me, #until = :until", "#owner = :me OR #until < :now", values
        )

    async def release(self, user_id: int, gen: int, owner: str) -> None:
        """Give the lease back early (a worker stopping), if it still holds it."""
        values = {":me": {"S": owner}, ":zero": {"N": "0"}}
        await self._update_job(user_id, gen, "SET #until = :zero", "#owner = :me", values)

    async def defer(self, user_id: int, gen: int, owner: str, delay_ms: int) -> None:
        """A failed job (``owner`` held it) waits ``delay_ms`` before any process takes it again;
        its ``tries`` count one more."""
        until = now_us() // 1000 + delay_ms
        values = {":me": {"S": owner}, ":none": {"S": ""}, ":until": {"N": str(until)}, ":one": {"N": "1"}}
        await self._update_job(
            user_id, gen, "SET #owner = :none, #until = :until ADD #tries :one", "#owner = :me", values
        )

    async def drop_job(self, user_id: int, gen: int) -> None:
        """Forget a registered job whose account moved past it (its state is not that job's any more)."""
        await transact_write(self._dynamo, [self._job_delete(user_id, gen)])

    def _job_delete(self, user_id: int, gen: int) -> Item:
        return {
            "Delete": {
                "TableName": self._followers,
                "Key": ai.job_key(user_id),
                "ConditionExpression": "#gen = :gen",
                "ExpressionAttributeNames": {"#gen": "gen"},
                "ExpressionAttributeValues": {":gen": {"N": str(gen)}},
            }
        }

    # -- what a job reads --------------------------------------------------------------------

    async def count(self, user_id: int, side: Side | None) -> int:
        """How many live items of the side the account has (None: archived items in its partition)."""
        table, prefix = _SOURCE[side] if side is not None else (FOLLOWERS, ai.ARCHIVE)
        request = self._prefix_query(self._tables[table], user_id, prefix)
        request["Select"] = "COUNT"
        total = 0
        while True:
            response = await self._dynamo.call("query", **request)
            total += int(response["Count"])
            if "LastEvaluatedKey" not in response:
                return total
            request["ExclusiveStartKey"] = response["LastEvaluatedKey"]

    async def live(self, user_id: int, side: Side, limit: int) -> list[Edge]:
        """The first ``limit`` live edges or requests of the side (membership order: by other ID)."""
        table, prefix = _SOURCE[side]
        request = self._prefix_query(self._tables[table], user_id, prefix)
        request["ProjectionExpression"] = "#o, #at"
        request["ExpressionAttributeNames"] = {"#o": "other", "#at": "at"}
        return [
            Edge(int(i["other"]["N"]), int(i["at"]["N"])) for i in await query_all(self._dynamo, request, limit=limit)
        ]

    async def archived(self, user_id: int, side: Side | None, limit: int) -> list[Archived]:
        """The first ``limit`` archived items in the account's partition (of one side, or any)."""
        prefix = ai.ARCHIVE if side is None else f"{ai.ARCHIVE}{side.value}#"
        request = self._prefix_query(self._followers, user_id, prefix)
        return [ai.parse_archived(i) for i in await query_all(self._dynamo, request, limit=limit)]

    async def owned(self, user_id: int, prefix: str, limit: int) -> list[str]:
        """Sort keys of the first ``limit`` of U's own items under ``prefix`` in ``followers``."""
        request = self._prefix_query(self._followers, user_id, prefix)
        request["ProjectionExpression"] = "sk"
        return [str(i["sk"]["S"]) for i in await query_all(self._dynamo, request, limit=limit)]

    @staticmethod
    def _prefix_query(table: str, owner: int, prefix: str) -> Item:
        return {
            "TableName": table,
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
            "ExpressionAttributeValues": {":pk": {"N": str(owner)}, ":p": {"S": prefix}},
            "ConsistentRead": True,
        }

    # -- what a job writes -------------------------------------------------------------------

    def per_batch(self, side: Side, *, archive: bool) -> int:
        """How many of a side's items fit one batch (the fence and a shared count move on top)."""
        per_item = (
            (4 if side.is_edge else 3) + (1 if archive else 0) + (1 if side in (Side.FOLLOWER, Side.REQUESTER) else 0)
        )
        return (BATCH_ITEMS - 2) // per_item

    async def mark(self, user_id: int, gen: int, side: Side, edges: Sequence[Edge], *states: Lifecycle) -> bool:
        """Mark each edge's ``followers`` ``E#`` as leaving with the account (see ``ARCHIVE_MARK``),
        fenced like a batch: only while the account is still at ``gen`` in one of ``states`` (False:
        it moved on, nothing was marked), so no mark lands after a reactivation, whose restore
        clears the marks left before it (``clear_marks``). All in one transaction; if an edge is
        gone or was made again meanwhile (its ``at`` is the condition), one at a time, leaving it."""

        def marking(edge: Edge) -> Item:
            follower, followee = side.follower_followee(user_id, edge.user_id)
            return {
                "Update": {
                    "TableName": self._followers,
                    "Key": it.key(it.EDGE, followee, follower),
                    "UpdateExpression": "SET #mark = :gen",
                    "ConditionExpression": "#at = :at",
                    "ExpressionAttributeNames": {"#mark": ai.ARCHIVE_MARK, "#at": "at"},
                    "ExpressionAttributeValues": {":gen": {"N": str(gen)}, ":at": {"N": str(edge.at_us)}},
                }
            }

        fence = ai.check_state(self._followers, user_id, gen, *states)
        updates = [marking(e) for e in edges]
        codes = await transact_write(self._dynamo, [*updates, fence])
        if codes is None or len(updates) == 1:
            return codes is None or codes[-1] != CONDITION_FAILED
        if codes[-1] == CONDITION_FAILED:
            return False
        for update in updates:
            codes = await transact_write(self._dynamo, [update, fence])
            if codes is not None and codes[-1] == CONDITION_FAILED:
                return False
        return True

    async def clear_marks(self, user_id: int) -> int:
        """Take the archive mark off every live edge of the account that still has one: an
        archive that a reactivation interrupted may have marked a batch it never removed, and an
        unfollow of a marked edge would be taken for an archive (no ``FollowEvent``). Returns how
        many it cleared. Reads every follower item (filtered) and every following item."""
        request = self._prefix_query(self._followers, user_id, it.EDGE)
        request["FilterExpression"] = "attribute_exists(#mark)"
        request["ProjectionExpression"] = "pk, sk"
        request["ExpressionAttributeNames"] = {"#mark": ai.ARCHIVE_MARK}
        marked = [{"pk": i["pk"], "sk": i["sk"]} for i in await query_all(self._dynamo, request)]
        followees = await query_all(
            self._dynamo, {**self._prefix_query(self._following, user_id, it.EDGE), "ProjectionExpression": "sk"}
        )
        keys = [it.key(it.EDGE, int(i["sk"]["S"][len(it.EDGE) :]), user_id) for i in followees]
        found = await batch_get_all(
            self._dynamo,
            self._followers,
            keys,
            consistent=True,
            projection="pk, sk, #mark",
            names={"#mark": ai.ARCHIVE_MARK},
        )
        marked += [{"pk": i["pk"], "sk": i["sk"]} for i in found if ai.ARCHIVE_MARK in i]

        async def clear(key: Item) -> bool:
            return await conditional(
                self._dynamo,
                "update_item",
                TableName=self._followers,
                Key=key,
                UpdateExpression="REMOVE #mark",
                ConditionExpression="attribute_exists(#mark)",
                ExpressionAttributeNames={"#mark": ai.ARCHIVE_MARK},
            )

        return sum(await asyncio.gather(*(clear(k) for k in marked)))

    def _removals(self, user_id: int, side: Side, edges: Sequence[Edge], *, own_count: bool = True) -> list[Item]:
        """The live items of each edge or request deleted, and the follower's outgoing count moved
        (not the account's own when ``own_count`` is False: a deleted account's goes whole)."""
        elements: list[Item] = []
        for edge in edges:
            follower, followee = side.follower_followee(user_id, edge.user_id)
            remove = it.edge_deletes if side.is_edge else it.request_deletes
            elements += remove(self._followers, self._following, follower, followee, edge.at_us)
            if follower != user_id:
                elements.append(it.count_outgoing(self._following, follower, -1))
        if own_count and side in (Side.FOLLOWING, Side.REQUESTED) and edges:
            elements.append(it.count_outgoing(self._following, user_id, -len(edges)))
        return elements

    async def archive(self, user_id: int, gen: int, side: Side, edges: Sequence[Edge], *, late: bool = False) -> Moved:
        """Archive the edges or requests of one side (at most ``per_batch``), fenced by the state;
        ``late``: after the job (see ``settle_late``)."""
        elements = self._removals(user_id, side, edges)
        elements += [
            it.put(self._followers, ai.archive_item(Archived(user_id, side, e.user_id, e.at_us), gen)) for e in edges
        ]
        elements.append(self._fence(user_id, gen, Lifecycle.DEACTIVATING, len(edges), late=late))
        return _moved(await transact_write(self._dynamo, elements))

    async def purge(self, user_id: int, gen: int, side: Side, edges: Sequence[Edge], *, late: bool = False) -> Moved:
        """Delete the edges or requests of one side for good (an account being deleted; its own
        outgoing count is not moved: ``drop_counters`` deletes it, and a late one must not make it again)."""
        elements = self._removals(user_id, side, edges, own_count=False)
        elements.append(self._fence(user_id, gen, Lifecycle.DELETING, len(edges), late=late))
        return _moved(await transact_write(self._dynamo, elements))

    def _fence(self, user_id: int, gen: int, state: Lifecycle, done: int, *, late: bool) -> Item:
        if late:  # no progress: the job may be over (its counts are final)
            return ai.check_state(self._followers, user_id, gen, state, state.settled)
        return ai.check_state(self._followers, user_id, gen, state, done=done)

    async def settle_late(self, user_id: int, side: Side, edge: Edge) -> bool:
        """An edge or request made with the account just as it left the graph (its job may already
        have passed): archived (or deleted) like the job would, unless the account is back or the
        item is gone. ``side`` is how it touches the account. True: this call moved it."""
        for _ in range(LATE_ATTEMPTS):
            status = await self.status(user_id)
            if status.state.in_graph:
                return False
            state = Lifecycle.DELETING if status.state.deleted else Lifecycle.DEACTIVATING
            if side.is_edge and not await self.mark(user_id, status.gen, side, [edge], state, state.settled):
                continue  # the account moved on meanwhile: look again
            settle = self.purge if status.state.deleted else self.archive
            moved = await settle(user_id, status.gen, side, [edge], late=True)
            if moved is Moved.DONE:
                return True
            if moved is Moved.GONE:
                return False  # the job (or an unfollow) got there first
        raise Unavailable(f"account {user_id} kept changing state while an edge made with it was settled")

    def per_restore(self, side: Side) -> int:
        """How many archived items of a side one restore batch puts back."""
        per_item = (9 if side.is_edge else 8) + (1 if side in (Side.FOLLOWER, Side.REQUESTER) else 0)
        return (BATCH_ITEMS - 2) // per_item

    async def restore(self, user_id: int, gen: int, side: Side, found: Sequence[Archived]) -> Restored:
        """Put archived edges or requests of one side back as they were (the same ``at``), each only
        if neither account blocks the other, the other is in the graph, and nothing of the pair was
        made meanwhile; all or none, fenced by the state."""
        elements: list[Item] = []
        away: list[int] = []  # the index of each item's check of the other's state
        taken: list[int] = []  # the index of each item's conditional delete of its archived item
        for a in found:
            follower, followee = side.follower_followee(user_id, a.other)
            if side.is_edge:
                puts = it.edge_puts(self._followers, self._following, follower, followee, a.at_us)
                puts[0]["Put"]["Item"][ai.RESTORED_MARK] = {"N": str(gen)}
                puts.append(it.check_absent(self._followers, it.key(it.REQUEST, followee, follower)))
            else:
                puts = it.request_puts(self._followers, self._following, follower, followee, a.at_us)
                puts.append(it.check_absent(self._followers, it.key(it.EDGE, followee, follower)))
            elements += puts
            elements += [
                it.check_absent(self._followers, it.key(it.BLOCK, follower, followee)),
                it.check_absent(self._followers, it.key(it.BLOCK, followee, follower)),
            ]
            away.append(len(elements))
            elements.append(ai.check_in_graph(self._followers, a.other))
            if follower != user_id:
                elements.append(it.count_outgoing(self._following, follower, 1))
            taken.append(len(elements))
            elements.append(ai.delete_archived(self._followers, a))
        if side in (Side.FOLLOWING, Side.REQUESTED):
            elements.append(it.count_outgoing(self._following, user_id, len(found)))
        elements.append(ai.check_state(self._followers, user_id, gen, Lifecycle.REACTIVATING, done=len(found)))
        codes = await transact_write(self._dynamo, elements)
        if codes is None:
            return Restored.DONE
        if codes[-1] == CONDITION_FAILED:
            return Restored.SUPERSEDED
        if len(found) == 1 and codes[taken[0]] == CONDITION_FAILED:
            return Restored.GONE
        if len(found) == 1 and codes[away[0]] == CONDITION_FAILED:
            return Restored.OTHER_AWAY
        return Restored.REFUSED

    async def forget_archived(self, follower_id: int, followee_id: int, *, edge: bool = True) -> None:
        """The pair's archived request (and ``edge``: its archived edge) in that direction forgotten,
        in both accounts' partitions, so that it does not come back with a reactivation."""
        sides = [(Side.REQUESTER, Side.REQUESTED)] + ([(Side.FOLLOWER, Side.FOLLOWING)] if edge else [])
        elements = [
            element
            for inward, outward in sides
            for element in (
                it.delete(self._followers, ai.archive_key(followee_id, inward, follower_id)),
                it.delete(self._followers, ai.archive_key(follower_id, outward, followee_id)),
            )
        ]
        await transact_write(self._dynamo, elements)

    async def hand_over(self, user_id: int, gen: int, found: Archived) -> bool:
        """Move an archived item to the other account, which is away itself: it comes back with the
        other's reactivation (only while the other is still deactivated)."""
        mirrored = Archived(found.other, found.side.mirror, user_id, found.at_us)
        elements = [
            ai.delete_archived(self._followers, found),
            it.put(self._followers, ai.archive_item(mirrored, gen)),
            ai.check_away(self._followers, found.other),
            ai.check_state(self._followers, user_id, gen, Lifecycle.REACTIVATING, done=1),
        ]
        return await transact_write(self._dynamo, elements) is None

    async def drop_archived(self, user_id: int, gen: int, state: Lifecycle, found: Sequence[Archived]) -> bool:
        """Forget archived items that cannot come back (or of an account being deleted)."""
        elements = [it.delete(self._followers, ai.archive_key(user_id, a.side, a.other)) for a in found]
        elements.append(ai.check_state(self._followers, user_id, gen, state, done=len(found)))
        return await transact_write(self._dynamo, elements) is None

    async def drop_owned(self, user_id: int, gen: int, sort_keys: Sequence[str]) -> bool:
        """Delete some of a deleted account's own items (blocks, mutes, settings) by sort key, a
        block's or mute's reverse item in the other account's partition with it (at most 49)."""
        elements = [it.delete(self._followers, {"pk": {"N": str(user_id)}, "sk": {"S": sk}}) for sk in sort_keys]
        for sk in sort_keys:
            for member, reverse in ((it.BLOCK, it.BLOCKED_BY), (it.MUTE, it.MUTED_BY)):
                if sk.startswith(member):
                    other = int(sk[len(member) :])
                    elements.append(it.delete(self._followers, it.key(reverse, other, user_id)))
        elements.append(ai.check_state(self._followers, user_id, gen, Lifecycle.DELETING))
        return await transact_write(self._dynamo, elements) is None

    async def drop_blocks_and_mutes_of(self, user_id: int, gen: int, sort_keys: Sequence[str]) -> bool:
        """Delete others' blocks and mutes of a deleted account, found by their reverse items
        (``b#<other>``, ``m#<other>`` in its partition: at most 32, three elements each), with those."""
        elements: list[Item] = []
        mutes = [int(sk[len(it.MUTED_BY) :]) for sk in sort_keys if sk.startswith(it.MUTED_BY)]
        found = await batch_get_all(
            self._dynamo,
            self._followers,
            [it.key(it.MUTE, muter, user_id) for muter in mutes],
            consistent=True,
            projection="pk, #at",
            names={"#at": "at"},
        )
        made_at = {int(i["pk"]["N"]): int(i["at"]["N"]) for i in found}
        for sk in sort_keys:
            reverse = {"pk": {"N": str(user_id)}, "sk": {"S": sk}}
            if sk.startswith(it.BLOCKED_BY):
                blocker = int(sk[len(it.BLOCKED_BY) :])
                elements += [it.delete(self._followers, it.key(it.BLOCK, blocker, user_id))]
            else:
                muter = int(sk[len(it.MUTED_BY) :])
                elements.append(it.delete(self._followers, it.key(it.MUTE, muter, user_id)))
                if muter in made_at:
                    order = it.order_key(it.MUTE_ORDER, muter, Edge(user_id, made_at[muter]))
                    elements.append(it.delete(self._followers, order))
            elements.append(it.delete(self._followers, reverse))
        elements.append(ai.check_state(self._followers, user_id, gen, Lifecycle.DELETING))
        return await transact_write(self._dynamo, elements) is None

    async def counters(self, user_id: int) -> Counts:
        """The account's counters as the counters consumer keeps them (strongly consistent)."""
        return (await load_counts(self._dynamo, self._users, [user_id]))[user_id]

    async def drop_counters(self, user_id: int, gen: int, version: int) -> Moved:
        """The deleted account's counters (only if still at ``version``: the counters consumer did
        not move them since they were read: else ``REFUSED``) and its outgoing count."""
        counters: Item = {"TableName": self._users, "Key": {"user_id": {"N": str(user_id)}}}
        if version:
            counters["ConditionExpression"] = "#ver = :ver"
            counters["ExpressionAttributeNames"] = {"#ver": "ver"}
            counters["ExpressionAttributeValues"] = {":ver": {"N": str(version)}}
        elements = [
            {"Delete": counters},
            it.delete(self._following, it.outgoing_key(user_id)),
            ai.check_state(self._followers, user_id, gen, Lifecycle.DELETING),
        ]
        return _moved(await transact_write(self._dynamo, elements), first_is_membership=False)
