"""fsck on the edge tables: each kind of violation, planted as raw items, is reported with its kind and user;
a graph with requests, an archive and jobs in flight, planted the same way, is clean."""

from __future__ import annotations

import io
import time
from collections import Counter
from dataclasses import dataclass, field

from graph_service.domain.accounts import Archived, Lifecycle, Side
from graph_service.domain.models import Edge
from graph_service.dynamodb.client import AsyncDynamo
from graph_service.dynamodb.operations import Item
from graph_service.dynamodb.tables import FOLLOWERS, FOLLOWING, USERS
from graph_service.entrypoints.fsck import run_fsck
from graph_service.operations.fsck import FsckPlan
from graph_service.operations.fsck_report import Report
from graph_service.settings import Settings
from graph_service.store import account_items as ai
from graph_service.store import items as it
from tests.support.seeding import seed_follows

T0 = 1_764_000_000_000_000
HOUR_MS = 3_600_000
Found = set[tuple[str, int, int | None]]


@dataclass
class Plant:
    """Raw items written straight into the tables, with users counters and following caps that agree
    with them (so that only the planted violations are violations)."""

    settings: Settings
    items: list[tuple[str, Item]] = field(default_factory=list)
    followers: Counter[int] = field(default_factory=Counter)
    following: Counter[int] = field(default_factory=Counter)
    made: Counter[int] = field(default_factory=Counter)

    def put(self, table: str, item: Item) -> None:
        self.items.append((self.settings.table(table), item))
        sk = item["sk"]["S"]
        owner = int(item["pk"]["N"])
        if sk.startswith(it.EDGE):
            (self.followers if table == FOLLOWERS else self.following)[owner] += 1
            if table == FOLLOWING:
                self.made[owner] += 1
        if table == FOLLOWERS and sk.startswith(it.REQUEST) and not sk.startswith(it.REQUEST_ORDER):
            self.made[int(item["other"]["N"])] += 1

    def edge_half(self, table: str, owner: int, other: int, at: int, *, order: bool = True) -> None:
        self.put(table, it.item(it.key(it.EDGE, owner, other), Edge(other, at)))
        if order:
            self.put(table, it.item(it.order_key(it.EDGE_ORDER, owner, Edge(other, at)), Edge(other, at)))

    def follow(self, follower: int, followee: int, at: int) -> None:
        self.edge_half(FOLLOWERS, followee, follower, at)
        self.edge_half(FOLLOWING, follower, followee, at)

    def request(self, requester: int, user: int, at: int, *, order: bool = True, mirror: bool = True) -> None:
        self.put(FOLLOWERS, it.item(it.key(it.REQUEST, user, requester), Edge(requester, at)))
        if order:
            self.put(FOLLOWERS, it.item(it.order_key(it.REQUEST_ORDER, user, Edge(requester, at)), Edge(requester, at)))
        if mirror:
            self.put(FOLLOWING, it.item(it.key(it.REQUEST, requester, user), Edge(user, at)))

    def block(self, blocker: int, blocked: int, at: int) -> None:
        self.put(FOLLOWERS, it.item(it.key(it.BLOCK, blocker, blocked), Edge(blocked, at)))

    def state(self, user: int, state: Lifecycle, gen: int = 1) -> None:
        """The account's state item, as ``DynamoAccounts.change`` writes it."""
        numbers = {"gen": gen, "done": 0, "total": 0, "at": T0}
        self.put(
            FOLLOWERS,
            {**ai.state_key(user), "st": {"S": state.value}, "prev": {"S": "a"}}
            | {name: {"N": str(n)} for name, n in numbers.items()},
        )

    def archive(self, owner: int, side: Side, other: int, gen: int = 1) -> None:
        self.put(FOLLOWERS, ai.archive_item(Archived(owner, side, other, T0), gen))

    def job(self, user: int, gen: int, until_ms: int) -> None:
        """A registered job, its lease held until ``until_ms`` (0: never taken)."""
        owner = {"S": "worker" if until_ms else ""}
        self.put(FOLLOWERS, {**ai.job_key(user), "gen": {"N": str(gen)}, "owner": owner, "until": {"N": str(until_ms)}})

    async def commit(
        self, *, counters: dict[int, tuple[int, int]] | None = None, made: dict[int, int] | None = None
    ) -> None:
        """Write the items, then counters and caps that agree with them (``counters``/``made``: planted drift)."""
        users = set(self.followers) | set(self.following)
        for user in users:
            fl, fg = (counters or {}).get(user, (self.followers[user], self.following[user]))
            self.items.append((self.settings.table(USERS), _counter(user, fl, fg)))
        for user in set(self.made) | set(made or {}):
            n = (made or {}).get(user, self.made[user])
            self.items.append((self.settings.table(FOLLOWING), {**it.outgoing_key(user), "n": {"N": str(n)}}))
        for user, (fl, fg) in (counters or {}).items():
            if user not in users:
                self.items.append((self.settings.table(USERS), _counter(user, fl, fg)))
        dynamo = AsyncDynamo.build(self.settings)
        try:
            for start in range(0, len(self.items), 25):  # BatchWriteItem's most
                request: dict[str, list[Item]] = {}
                for table, item in self.items[start : start + 25]:
                    request.setdefault(table, []).append({"PutRequest": {"Item": item}})
                while request:
                    request = (await dynamo.call("batch_write_item", RequestItems=request)).get("UnprocessedItems", {})
        finally:
            dynamo.close()


def _counter(user: int, followers: int, following: int) -> Item:
    return {
        "user_id": {"N": str(user)},
        "followers_count": {"N": str(followers)},
        "following_count": {"N": str(following)},
        "ver": {"N": "1"},
    }


async def fsck(settings: Settings, plan: FsckPlan) -> tuple[Report, str]:
    out = io.StringIO()
    report = await run_fsck(settings, plan, out=out)
    return report, out.getvalue()


def found(report: Report) -> Found:
    return {(v.kind, v.user, v.other) for v in report.violations}


async def plant_every_kind(settings: Settings) -> Found:
    """One violation of each store kind (some kinds twice, from either side), among users 100-121."""
    plant = Plant(settings)
    plant.edge_half(FOLLOWERS, 101, 100, T0)  # 100 -> 101 only in followers
    plant.edge_half(FOLLOWING, 102, 103, T0)  # 102 -> 103 only in following
    plant.edge_half(FOLLOWERS, 105, 104, T0)  # 104 -> 105 at two times
    plant.edge_half(FOLLOWING, 104, 105, T0 + 7)
    plant.edge_half(FOLLOWERS, 107, 106, T0, order=False)  # 106 -> 107 without its T# in followers
    plant.edge_half(FOLLOWING, 106, 107, T0)
    plant.put(FOLLOWING, it.item(it.order_key(it.EDGE_ORDER, 108, Edge(109, T0)), Edge(109, T0)))  # a lone T#
    plant.request(110, 111, T0, order=False)  # a request without its RT#
    plant.follow(112, 113, T0)  # an edge and a request in one direction
    plant.request(112, 113, T0 + 1)
    plant.block(115, 114, T0)  # 115 blocks 114, who follows 115
    plant.follow(114, 115, T0)
    plant.block(117, 116, T0)  # 117 blocks 116 and follows 116
    plant.follow(117, 116, T0)
    plant.follow(119, 120, T0)  # right counters, but 119's following cap count is 5
    plant.follow(121, 100, T0)  # 121's counters say 3 followers
    await plant.commit(counters={121: (3, 1), 118: (2, 0)}, made={119: 5})
    return {
        ("edge_one_sided", 101, 100),
        ("edge_one_sided", 102, 103),
        ("edge_time_mismatch", 105, 104),
        ("order_unpaired", 107, 106),
        ("order_unpaired", 108, 109),
        ("order_unpaired", 111, 110),
        ("edge_and_request", 113, 112),
        ("across_block", 115, 114),
        ("across_block", 117, 116),
        ("counter_drift", 121, None),
        ("counter_drift", 118, None),  # counters of a user without any partition
        ("outgoing_count", 119, None),
    }


async def test_every_planted_violation_is_reported_once_with_its_kind_and_user(settings: Settings) -> None:
    expected = await plant_every_kind(settings)

    report, out = await fsck(settings, FsckPlan(everything=True, segments=3, settle_seconds=0))

    assert found(report) == expected
    assert len(report.violations) == len(expected)
    lines = out.splitlines()
    one_sided = "followers pk=101 E#100 (at 1764000000000000) has no following pk=100 E#101"
    assert f"edge_one_sided user=101 other=100: {one_sided}" in lines
    assert "order_unpaired user=108 other=109: following pk=108 T#1764000000000000#109 has no E#109" in lines
    assert "outgoing_count user=119: following pk=119 O n=5; 1 follows + 0 pending requests" in lines
    assert lines[-1].startswith("fsck: 12 violations (across_block 2, counter_drift 2, edge_and_request 1,")

    report, _ = await fsck(settings, FsckPlan(users=(100, 104, 114, 116, 118, 119), settle_seconds=0))

    # Chosen users: 100's following partition is empty and names nothing of 101's one-sided item;
    # the others are seen from their own partitions or from the other side of a pair theirs names;
    # the following cap's count needs --all.
    assert found(report) == {
        ("edge_time_mismatch", 105, 104),
        ("across_block", 115, 114),
        ("across_block", 117, 116),
        ("counter_drift", 118, None),
    }


async def test_a_clean_seeded_pair_of_partitions_reports_nothing(settings: Settings) -> None:
    plant = Plant(settings)
    plant.follow(1, 2, T0)
    plant.follow(2, 1, T0 + 1)
    plant.request(3, 1, T0 + 2)
    plant.block(1, 4, T0 + 3)
    await plant.commit()

    report, out = await fsck(settings, FsckPlan(everything=True, settle_seconds=0))

    assert report.violations == []
    assert out.splitlines()[-1] == "fsck: no violation (5 partitions, 0 cache entries)"


async def test_a_sample_checks_that_many_distinct_users(settings: Settings) -> None:
    # A ring of 20 seeded follows: every user has one follower and one followee and, as seeded
    # items go uncounted, counters that drift; so each checked user is one counter_drift line.
    await seed_follows(settings, [(u, u % 20 + 1) for u in range(1, 21)])

    report, out = await fsck(settings, FsckPlan(sample=5, settle_seconds=0))

    assert {v.kind for v in report.violations} == {"counter_drift"}
    users = {v.user for v in report.violations}
    assert len(users) == 5
    assert users <= set(range(1, 21))
    assert out.splitlines()[-1] == "fsck: 5 violations (counter_drift 5) (5 users, 10 partitions, 0 cache entries)"


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def test_requests_archives_and_jobs_in_their_rightful_states_are_clean(settings: Settings) -> None:
    plant = Plant(settings)
    plant.follow(1, 2, T0)
    plant.request(3, 1, T0 + 1)  # with its mirror in following pk=3
    plant.state(5, Lifecycle.DEACTIVATED)  # 5's job done: its archive, no live item
    for side, other in ((Side.FOLLOWER, 6), (Side.FOLLOWING, 7), (Side.REQUESTER, 8), (Side.REQUESTED, 9)):
        plant.archive(5, side, other)
    plant.state(10, Lifecycle.DEACTIVATING)  # 10's job running: half archived, half live
    plant.archive(10, Side.FOLLOWER, 11)
    plant.follow(12, 10, T0 + 2)
    plant.job(10, 1, _now_ms() + 30_000)
    plant.state(14, Lifecycle.DELETED, gen=2)
    plant.state(15, Lifecycle.REACTIVATING, gen=3)  # registered, waiting for a worker
    plant.archive(15, Side.FOLLOWING, 1)
    plant.job(15, 3, 0)
    plant.state(16, Lifecycle.DEACTIVATED)  # an entry left behind a moment ago: a worker drops it
    plant.job(16, 1, _now_ms() - 60_000)
    await plant.commit()

    report, out = await fsck(settings, FsckPlan(everything=True, segments=2, settle_seconds=0))
    assert report.violations == []
    assert out.splitlines()[-1].startswith("fsck: no violation (")

    report, _ = await fsck(settings, FsckPlan(users=(1, 3, 5, 10, 14, 15), settle_seconds=0))
    assert report.violations == []


async def test_each_planted_lifecycle_violation_is_reported_with_its_kind_and_user(settings: Settings) -> None:
    plant = Plant(settings)
    plant.request(200, 201, T0, mirror=False)  # a request without its mirror
    plant.put(FOLLOWING, it.item(it.key(it.REQUEST, 202, 203), Edge(203, T0)))  # a mirror without its request
    plant.put(FOLLOWERS, {**ai.state_key(204), "st": {"S": "Q"}, "gen": {"N": "1"}})
    plant.put(FOLLOWERS, {**ai.archive_item(Archived(204, Side.FOLLOWING, 92, T0), 1), "at": {"S": "x"}})
    plant.state(205, Lifecycle.DEACTIVATED)
    plant.put(FOLLOWERS, {**ai.archive_item(Archived(205, Side.FOLLOWER, 90, T0), 1), "other": {"N": "91"}})
    plant.archive(206, Side.FOLLOWING, 207)  # 206 is active (no state item)
    plant.state(208, Lifecycle.DELETED, gen=2)
    plant.archive(208, Side.REQUESTER, 209)
    plant.state(210, Lifecycle.DEACTIVATED)  # 210 -> 211 archived and live
    plant.archive(210, Side.FOLLOWING, 211)
    plant.follow(210, 211, T0)
    plant.state(212, Lifecycle.DELETED, gen=2)  # 212's request to 213 left
    plant.request(212, 213, T0)
    plant.state(214, Lifecycle.DEACTIVATED)  # 215 still follows 214
    plant.follow(215, 214, T0)
    plant.put(FOLLOWERS, {**ai.job_key(216), "owner": {"S": ""}})  # no gen
    plant.state(217, Lifecycle.DEACTIVATED)  # its job's entry left behind long ago
    plant.job(217, 1, _now_ms() - 2 * HOUR_MS)
    plant.job(218, 1, 0)  # no such job: 218 was never deactivated
    await plant.commit()

    report, out = await fsck(settings, FsckPlan(everything=True, segments=2, settle_seconds=0))

    expected = {
        ("request_mirror_unpaired", 201, 200),
        ("request_mirror_unpaired", 202, 203),
        ("state_malformed", 204, None),
        ("archived_malformed", 204, None),  # judged even though its account's state is not
        ("archived_malformed", 205, None),
        ("archived_in_active", 206, 207),
        ("archived_of_deleted", 208, 209),
        ("archived_and_live", 210, 211),
        ("live_edge_of_inactive", 210, 211),
        ("live_edge_of_inactive", 212, 213),
        ("live_edge_of_inactive", 214, 215),
        ("job_malformed", 216, None),
        ("job_stale", 217, None),
        ("job_stale", 218, None),
    }
    assert found(report) == expected
    assert len(report.violations) == len(expected)
    lines = out.splitlines()
    assert f"archived_malformed user=205: followers pk=205 X#F#{90:020d}: `other` is 91, the key says 90" in lines
    assert (
        "live_edge_of_inactive user=212 other=213: following pk=212 R#213 (at 1764000000000000) while deleted" in lines
    )
    assert f"job_malformed user=216: followers pk=0 J#{216:020d}: no `gen`" in lines

    report, _ = await fsck(settings, FsckPlan(users=(201, 206, 210, 212), settle_seconds=0))

    # Chosen users: a request's mirror is read beside the request; an account's own partitions are
    # judged whole; the jobs' registry (nobody's) needs --all.
    assert found(report) == {
        ("request_mirror_unpaired", 201, 200),
        ("archived_in_active", 206, 207),
        ("archived_and_live", 210, 211),
        ("live_edge_of_inactive", 210, 211),
        ("live_edge_of_inactive", 212, 213),
    }
