"""The account lifecycle's items checked against the store (the rules: ``fsck_accounts.py``).

A ``followers`` partition already holds an account's state item, its archived items and the live
items of its ``followers`` side, so the usual account (no state item, no archive) costs no read
at all. Only an account deactivated or deleted (its job done) has the ``E#``/``R#`` items of its
``following`` partition read (two queries, empty when all is well), and only an active account
holding archived items of the sides ``G``/``Q`` has their live keys read (those are violations
already). The jobs' partition (pk=0) reads the state of just the entries whose lease ended over
``STALE_AFTER_MS`` ago.

A suspicion is confirmed like a pair's, a moment later (``Confirmer``): one ``TransactGetItems`` of
the account's state item and the items of its violations (``suspect_keys``), ``SNAPSHOT_KEYS`` at
most at a time; a registered job by one of its entry and its account's state item. Malformed items
are reported at once: no write makes one.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Iterable

from graph_service.domain.accounts import Lifecycle
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item, batch_get_all, query_all, transact_get
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING
from graph_service.operations.fsck_accounts import (
    STALE_AFTER_MS,
    AccountView,
    evaluate_account,
    evaluate_job,
    is_live,
    job_user,
    live_key,
    read_archived,
    read_job,
    read_state,
    state_item_key,
    suspect_keys,
)
from graph_service.operations.fsck_confirm import Confirmer
from graph_service.operations.fsck_pairs import ItemKey, item_key
from graph_service.operations.fsck_report import Report, Violation
from graph_service.store import account_items as ai
from graph_service.store import items as it

__all__ = ["SNAPSHOT_KEYS", "LifecycleChecker"]

SNAPSHOT_KEYS = 100
"""Items of one ``TransactGetItems`` (DynamoDB's most)."""
AT = {"#at": "at"}


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


def _key(pk: int, sk: str) -> Item:
    return {"pk": {"N": str(pk)}, "sk": {"S": sk}}


def _at(found: Item) -> int:
    return int(found.get("at", {}).get("N", "0"))


class LifecycleChecker:
    def __init__(self, dynamo: AsyncDynamo, tables: dict[str, str], report: Report, later: Confirmer) -> None:
        """``tables``: the names of ``followers`` and ``following``."""
        self._dynamo = dynamo
        self._tables = tables
        self._report = report
        self._later = later

    # -- an account's followers partition -----------------------------------------------------------

    async def check_account(self, owner: int, items: list[Item]) -> None:
        """The lifecycle items of ``followers`` pk=``owner`` (handed over whole)."""
        state: Lifecycle | None = Lifecycle.ACTIVE
        archived = []
        live: dict[ItemKey, int] = {}
        for item in items:
            sk = str(item["sk"]["S"])
            try:
                if sk == ai.STATE:
                    state = None  # until it is read
                    state = read_state(item)
                elif sk.startswith(ai.ARCHIVE):
                    archived.append(read_archived(item))
                elif is_live(sk):
                    live[(FOLLOWERS, owner, sk)] = _at(item)
            except ValueError as exc:
                kind = "state_malformed" if sk == ai.STATE else "archived_malformed"
                self._report.add(Violation(kind, owner, None, f"followers pk={owner} {sk}: {exc}"))
        if state is None:
            return  # malformed: which rules hold depends on the state, so none is judged
        if state.job_running or (state is Lifecycle.ACTIVE and not archived):
            return  # a job on its way, or the usual account: nothing to judge, nothing read
        if state in (Lifecycle.DEACTIVATED, Lifecycle.DELETED):
            live |= await self._live_following(owner)
        else:
            live |= await self._read_at({live_key(a) for a in archived if live_key(a)[0] == FOLLOWING})
        units = suspect_keys(AccountView(owner, state, tuple(archived), live))
        if units:
            self._later.add(functools.partial(self._confirm_account, owner, units))

    async def _live_following(self, owner: int) -> dict[ItemKey, int]:
        """The ``E#`` and ``R#`` items of ``following`` pk=``owner``."""

        async def prefixed(prefix: str) -> list[Item]:
            query: Item = {
                "TableName": self._tables[FOLLOWING],
                "KeyConditionExpression": "pk = :pk AND begins_with(sk, :p)",
                "ExpressionAttributeValues": {":pk": {"N": str(owner)}, ":p": {"S": prefix}},
                "ProjectionExpression": "pk, sk, #at",
                "ExpressionAttributeNames": AT,
                "ConsistentRead": True,
            }
            return await query_all(self._dynamo, query)

        found: dict[ItemKey, int] = {}
        for prefix in (it.EDGE, it.REQUEST):
            found |= {item_key(FOLLOWING, i): _at(i) for i in await prefixed(prefix)}
        return found

    async def _read_at(self, keys: Iterable[ItemKey]) -> dict[ItemKey, int]:
        """The ``at`` of each of ``keys`` that is there (all in ``following``)."""
        wanted = [_key(pk, sk) for _, pk, sk in keys]
        if not wanted:
            return {}
        found = await batch_get_all(
            self._dynamo, self._tables[FOLLOWING], wanted, consistent=True, projection="pk, sk, #at", names=AT
        )
        return {item_key(FOLLOWING, i): _at(i) for i in found}

    async def _confirm_account(self, user: int, units: list[tuple[ItemKey, ...]]) -> None:
        """Each batch of suspects read again with the state item, in one snapshot, and judged."""
        batches: list[dict[ItemKey, None]] = [{}]
        for unit in units:
            if len(batches[-1]) + len(unit) >= SNAPSHOT_KEYS:  # the state item takes one place
                batches.append({})
            batches[-1].update(dict.fromkeys(unit))
        for batch in batches:
            if batch:
                await self._judge(user, [state_item_key(user), *batch])

    async def _judge(self, user: int, keys: list[ItemKey]) -> None:
        found = await self._snapshot(keys)
        try:
            state_item = found.get(state_item_key(user))
            state = Lifecycle.ACTIVE if state_item is None else read_state(state_item)
        except ValueError:
            return  # malformed since the first look: that look reported it
        archived = []
        live: dict[ItemKey, int] = {}
        for key, item in found.items():
            if key[2].startswith(ai.ARCHIVE):
                try:
                    archived.append(read_archived(item))
                except ValueError:
                    continue
            elif is_live(key[2]):
                live[key] = _at(item)
        for violation in evaluate_account(AccountView(user, state, tuple(archived), live)):
            self._report.add(violation)

    async def _snapshot(self, keys: list[ItemKey]) -> dict[ItemKey, Item]:
        gets = [{"Get": {"TableName": self._tables[table], "Key": _key(pk, sk)}} for table, pk, sk in keys]
        items = await transact_get(self._dynamo, gets)
        return {key: item for key, item in zip(keys, items, strict=True) if item is not None}

    # -- the jobs' registry -------------------------------------------------------------------------

    async def check_jobs(self, items: list[Item]) -> None:
        """The jobs' partition (``followers`` pk=0), handed over whole."""
        now = _now_ms()
        late = []
        for item in items:
            sk = str(item["sk"]["S"])
            try:
                job = read_job(item)
            except ValueError as exc:
                detail = f"followers pk={ai.JOBS_PK} {sk}: {exc}"
                self._report.add(Violation("job_malformed", job_user(sk), None, detail))
                continue
            if now - job.until_ms > STALE_AFTER_MS:
                late.append(job)
        if not late:
            return
        keys = [ai.state_key(job.user_id) for job in late]
        found = await batch_get_all(self._dynamo, self._tables[FOLLOWERS], keys, consistent=True)
        states = {int(i["pk"]["N"]): i for i in found}
        for job in late:
            if evaluate_job(job, states.get(job.user_id), now):
                self._later.add(functools.partial(self._confirm_job, job.user_id))

    async def _confirm_job(self, user: int) -> None:
        entry = (FOLLOWERS, ai.JOBS_PK, str(ai.job_key(user)["sk"]["S"]))
        found = await self._snapshot([entry, state_item_key(user)])
        if entry not in found:
            return  # dropped meanwhile
        try:
            job = read_job(found[entry])
        except ValueError:
            return  # malformed since the first look: that look reported it
        for violation in evaluate_job(job, found.get(state_item_key(user)), _now_ms()):
            self._report.add(violation)
