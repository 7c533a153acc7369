"""Model-based test of the relationship rules: random write sequences against one cached server, every read
checked against a plain in-memory model.

Hypothesis drives a ``RuleBasedStateMachine`` over 5 users (so follows, requests, blocks and removals of the same
pairs collide often). The servers (gRPC service with Redis caching on, the counters consumer) start once per test
on one event loop the test owns; each hypothesis example works on a fresh range of user IDs, so examples never
see each other's data and no table reset is needed.

The model is five sets (edges, pending requests, blocks, mutes, private accounts) implementing the documented
policies (mutes without a duration: their end is tested in tests/integration/api/test_mutes.py), and the account
lifecycle of SPEC §3b: each account active, away (deactivated) or deleted, and each away account's archive of the
edges and requests its deactivation moved, which its reactivation restores with their times (or hands over to the
other account if that one is away itself, or drops: the other deleted, a block either way, the pair's newer
item). The lifecycle steps wait for the account's job (the server runs it) to end: jobs in flight are the
subject of tests/integration/api/test_accounts.py and tests/e2e/test_account_jobs.py. One step deactivates and at
once reactivates, interrupting the job: its end state is that of both calls each waited for.
After every step each read RPC is compared with it for every user / pair; at the end of each example GetCounts
must converge (the counters consumer runs) to the model's edge counts. An account out of the graph is answered
for as if no edge or request touched it (its counts (0, 0) at once), blocks and mutes aside.

SuggestFollows is served from a per-user cache (``suggest_cache_ttl_seconds``) that every write involving the user
drops, but writes among the user's followees do not (graph_service/rules/suggestions.py). So besides the exclusion rules
(never self, followed, requested or blocked either way), which must always hold, an answer must be the model's fresh
ranking (mutual_count = how many of the user's followees follow the account, score, order) or exactly the previous
answer when no write involving the user came between (see ``SUGGESTIONS_MAY_BE_CACHED``), less the accounts out of
the graph, which are dropped when a ranking is served (``check_suggestions``).

Users are shown as local indices 0..4 everywhere (steps, assertion messages); the RPCs use ``base + index``. A
failure prints the shrunk sequence of steps, each step's drawn arguments just above it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from functools import partial
from typing import TYPE_CHECKING, Any, ClassVar, TypeVar, cast

import grpc
import pytest
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from hypothesis import HealthCheck, assume
from hypothesis import settings as hsettings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from socialgraph.v1 import social_graph_pb2 as pb

from graph_service.entrypoints.server import ServerRuntime
from graph_service.settings import Settings
from tests.support.graph_calls import FLAGS
from tests.support.polling import eventually
from tests.support.runtimes import make_settings, running_counters, running_server, stub_for
from tests.support.tables import create_tables

if TYPE_CHECKING:
    from socialgraph.v1.social_graph_pb2_grpc import SocialGraphServiceAsyncStub as Stub

T = TypeVar("T")
Pair = tuple[int, int]
Outcome = tuple[str, str]  # ("OK", follow state or "") or (status code name, ErrorInfo reason)
Entry = tuple[int, int]  # (local user index, timestamp in microseconds)
Suggested = list[tuple[int, int, float]]  # (local user index, mutual_count, score), in answer order

N_USERS = 5
ID_STRIDE = 100  # user IDs of one example: base + 0..4, a fresh base per example
FIRST_BASE = 1_000
STEPS = 20
# One example of STEPS rule steps (each followed by every read for every user and pair): CI must stay under 12
# minutes. Hypothesis first runs its simplest example (every draw its first choice: Follow(0, 1) over and over),
# which cost as much as a random one and tested next to nothing; ``start`` rejects it (no follows to start from).
EXAMPLES = 1
COUNTS_DEADLINE = 20.0
JOB_DEADLINE = 20.0
READS_IN_FLIGHT = 8

# False demands the fresh ranking from every SuggestFollows call: that fails on the suggestion cache (module docstring),
# e.g. Follow(3, 0), Follow(0, 2), SuggestFollows(3) = [2], Unfollow(0, 2), SuggestFollows(3) still [2].
SUGGESTIONS_MAY_BE_CACHED = True

OK: Outcome = ("OK", "")
FOLLOWING: Outcome = ("OK", "FOLLOWING")
REQUESTED: Outcome = ("OK", "REQUESTED")
SELF_RELATION: Outcome = ("INVALID_ARGUMENT", "SELF_RELATION")
ACCOUNT_DEACTIVATED: Outcome = ("FAILED_PRECONDITION", "ACCOUNT_DEACTIVATED")
ACCOUNT_DELETED: Outcome = ("FAILED_PRECONDITION", "ACCOUNT_DELETED")

# How an archived item touches its account U: F the other follows U, G U follows the other, R the other asked U,
# Q U asked the other. A reactivation restores them in this order (account_jobs/job.py).
SIDES = ("F", "G", "R", "Q")
MIRROR = {"F": "G", "G": "F", "R": "Q", "Q": "R"}  # the same item in the other account's archive

HYPOTHESIS_SETTINGS = hsettings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    derandomize=True,  # a fixed seed derived from the test: CI runs are reproducible
    database=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)

USERS = st.integers(min_value=0, max_value=N_USERS - 1)


# -- the model ----------------------------------------------------------------------------------


@dataclass
class Model:
    """The graph as the policies say it must be; edges and requests remember the step that made them.

    Only the graph of the accounts in it is in ``edges`` and ``requests``: an account away (deactivated) has
    every edge and request that touched it in its archive, and a deleted one has none left."""

    edges: dict[Pair, int] = field(default_factory=dict)  # (follower, followee) -> step it was made
    requests: dict[Pair, int] = field(default_factory=dict)  # (requester, asked account) -> step it was made
    blocks: set[Pair] = field(default_factory=set)  # (blocker, blocked)
    mutes: dict[Pair, bool] = field(default_factory=dict)  # (muter, muted) -> notifications muted too
    private: set[int] = field(default_factory=set)
    away: set[int] = field(default_factory=set)  # deactivated
    deleted: set[int] = field(default_factory=set)
    # user -> its archive: (side, other) -> step the edge or request was made (see SIDES; F, G edges; R, Q requests)
    archives: dict[int, dict[tuple[str, int], int]] = field(default_factory=dict)
    # Requests put back by a reactivation, (pair, step made): one may be pending to an account public meanwhile.
    restored: set[tuple[Pair, int]] = field(default_factory=set)
    step: int = 0

    def blocked(self, a: int, b: int) -> bool:
        return (a, b) in self.blocks or (b, a) in self.blocks

    def in_graph(self, u: int) -> bool:
        return u not in self.away and u not in self.deleted

    def state(self, u: int) -> str:
        return "DELETED" if u in self.deleted else "DEACTIVATED" if u in self.away else "ACTIVE"

    def refusal(self, *users: int) -> Outcome | None:
        """What a follow, request or accept touching ``users`` gets for the first of them out of the graph."""
        for u in users:
            if u in self.deleted:
                return ACCOUNT_DELETED
            if u in self.away:
                return ACCOUNT_DEACTIVATED
        return None

    def follow(self, a: int, b: int) -> Outcome:
        if a == b:
            return ("INVALID_ARGUMENT", "SELF_FOLLOW")
        if refused := self.refusal(a, b):
            return refused
        if self.blocked(a, b):
            return ("FAILED_PRECONDITION", "BLOCKED")
        if (a, b) in self.edges:
            return FOLLOWING
        if b in self.private:
            self.requests.setdefault((a, b), self.step)
            return REQUESTED
        if (a, b) in self.requests:  # only a restored request stays pending to a public account: Follow accepts it
            made = self.requests.pop((a, b))
            assert ((a, b), made) in self.restored, "model: a public account never keeps a pending request"
        self.edges[(a, b)] = self.step
        return FOLLOWING

    def unfollow(self, a: int, b: int) -> Outcome:
        if a != b:  # Unfollow(u, u) is a no-op
            self.remove(a, b, edge=True)
        return OK

    def block(self, a: int, b: int) -> Outcome:
        if a == b:
            return SELF_RELATION
        self.blocks.add((a, b))
        for pair in ((a, b), (b, a)):
            self.remove(*pair, edge=True)  # archived ones too, while either is out of the graph
        return OK

    def unblock(self, a: int, b: int) -> Outcome:
        if a == b:
            return SELF_RELATION
        self.blocks.discard((a, b))
        return OK

    def set_privacy(self, u: int, private: bool) -> list[int]:
        """Returns the requesters whose pending requests turning public accepted."""
        if private:
            self.private.add(u)
            return []
        self.private.discard(u)
        accepted = sorted(r for r, t in self.requests if t == u)
        for r in accepted:
            del self.requests[(r, u)]
            self.edges[(r, u)] = self.step  # one sweep: their relative order is not defined
        return accepted

    def accept(self, u: int, r: int) -> Outcome:
        if u == r:
            return SELF_RELATION
        if refused := self.refusal(u, r):
            return refused
        if (r, u) in self.requests:
            del self.requests[(r, u)]
            self.edges[(r, u)] = self.step
            return OK
        if (r, u) in self.edges:
            return OK
        return ("NOT_FOUND", "FOLLOW_REQUEST_NOT_FOUND")

    def reject(self, u: int, r: int) -> Outcome:
        if u == r:
            return SELF_RELATION
        self.remove(r, u, edge=False)
        return OK

    def mute(self, a: int, b: int, notifications: bool = False) -> Outcome:
        """A mute changes no follow, request or block; a repeat replaces the flag."""
        if a == b:
            return SELF_RELATION
        self.mutes[(a, b)] = notifications
        return OK

    def mute_notifications(self, a: int, b: int) -> Outcome:
        return self.mute(a, b, notifications=True)

    def unmute(self, a: int, b: int) -> Outcome:
        if a == b:
            return SELF_RELATION
        self.mutes.pop((a, b), None)
        return OK

    def remove_follower(self, u: int, f: int) -> Outcome:
        if u == f:
            return SELF_RELATION
        self.remove(f, u, edge=True)
        return OK

    def remove(self, a: int, b: int, *, edge: bool) -> None:
        """Unfollow, RemoveFollower (``edge``: the follow and the request a -> b) or RejectFollowRequest (the request
        only). With either account out of the graph, the pair's archived items of those kinds are forgotten too (in
        whichever archive holds them): a reactivation never brings back what the call removed."""
        for kind, items in (("edge", self.edges), ("request", self.requests)):
            if kind == "edge" and not edge:
                continue
            items.pop((a, b), None)
            if self.in_graph(a) and self.in_graph(b):
                continue
            inward, outward = ("F", "G") if kind == "edge" else ("R", "Q")
            self.archives.get(b, {}).pop((inward, a), None)
            self.archives.get(a, {}).pop((outward, b), None)

    # -- the account lifecycle (jobs done: the steps wait for them) --

    def archived(self) -> dict[Pair, str]:
        """The (follower, followee) of every archived item -> "edge" or "request"."""
        return {
            ((other, u) if side in ("F", "R") else (u, other)): "edge" if side in ("F", "G") else "request"
            for u, archive in self.archives.items()
            for side, other in archive
        }

    def deactivate(self, u: int) -> Outcome:
        """Every edge and request touching u moves into its archive, keeping the step it was made."""
        if u in self.deleted:
            return ACCOUNT_DELETED
        if u in self.away:
            return OK
        self.away.add(u)
        archive = self.archives.setdefault(u, {})
        assert not archive, f"model: {u} comes with an archive {archive} into its deactivation"
        for items, outward, inward in ((self.edges, "G", "F"), (self.requests, "Q", "R")):
            for (a, b), made in list(items.items()):
                if u in (a, b):
                    archive[(outward, b) if a == u else (inward, a)] = made
                    del items[(a, b)]
        return OK

    def reactivate(self, u: int) -> Outcome:
        """Each archived item in turn (the job's order: by side, then by the other's ID): dropped if the other is
        deleted; handed over to the other's archive if the other is away (it comes back with the other); dropped if
        either blocks the other, or the pair has an edge or request in that direction; else restored as it was."""
        if u in self.deleted:
            return ACCOUNT_DELETED
        if u not in self.away:
            return OK
        self.away.discard(u)
        archive = self.archives.pop(u, {})
        for (side, other), made in sorted(archive.items(), key=lambda item: (SIDES.index(item[0][0]), item[0][1])):
            pair = (other, u) if side in ("F", "R") else (u, other)
            if other in self.deleted:
                continue
            if other in self.away:
                theirs = self.archives.setdefault(other, {})
                assert (MIRROR[side], u) not in theirs, f"model: {other}'s archive has {(MIRROR[side], u)} already"
                theirs[(MIRROR[side], u)] = made
            elif self.blocked(*pair) or pair in self.edges or pair in self.requests:
                continue
            elif side in ("F", "G"):
                self.edges[pair] = made
            else:
                self.requests[pair] = made
                self.restored.add((pair, made))
        return OK

    def delete(self, u: int) -> Outcome:
        """Everything about u goes: every edge and request touching it, its archive, blocks and mutes by and of it,
        its privacy. Items about it in others' archives are dropped when those come back. A repeat does nothing
        (not even to blocks or mutes made with the deleted account since: Block and Mute do not look at states)."""
        if u in self.deleted:
            return OK
        self.deleted.add(u)
        self.away.discard(u)
        self.archives.pop(u, None)
        for items in (self.edges, self.requests):
            for pair in [p for p in items if u in p]:
                del items[pair]
        self.blocks = {p for p in self.blocks if u not in p}
        self.mutes = {p: n for p, n in self.mutes.items() if u not in p}
        self.private.discard(u)
        return OK

    # -- what reads must answer --

    def followers(self, u: int) -> set[int]:
        return {a for a, b in self.edges if b == u}

    def following(self, u: int) -> set[int]:
        return {b for a, b in self.edges if a == u}

    def relationship(self, actor: int, target: int) -> tuple[bool, ...]:
        if actor == target:
            return (False,) * 8
        return (
            (actor, target) in self.edges,
            (target, actor) in self.edges,
            (actor, target) in self.requests,
            (target, actor) in self.requests,
            (actor, target) in self.blocks,
            (target, actor) in self.blocks,
            (actor, target) in self.mutes,
            self.mutes.get((actor, target), False),
        )

    def suggestions(self, u: int) -> Suggested:
        """Every second-degree account by how many of u's followees follow it, ties by ascending ID, minus the
        excluded ones (u, followed, requested, blocked either way)."""
        followees = self.following(u)
        tally = Counter(b for a, b in self.edges if a in followees and b != u)
        ranked = sorted(tally.items(), key=lambda item: (-item[1], item[0]))
        return [
            (c, n, n / len(followees))
            for c, n in ranked
            if (u, c) not in self.edges and (u, c) not in self.requests and not self.blocked(u, c)
        ]

    def counts(self) -> dict[int, tuple[int, int]]:
        return {u: (len(self.followers(u)), len(self.following(u))) for u in range(N_USERS)}


PAIRS = st.sampled_from([(a, b) for a in range(N_USERS) for b in range(N_USERS) if a != b])
# What one step does: a pair write (see PAIR_WRITES), 1-4 follows, SetPrivacy, or a pair write of a user with itself.
STEP_KINDS = [
    "Follow",
    "FollowSeveral",
    "Unfollow",
    "Block",
    "Unblock",
    "SetPrivacy",
    "AcceptFollowRequest",
    "RejectFollowRequest",
    "RemoveFollower",
    "Mute",
    "MuteNotifications",
    "Unmute",
    "SelfPair",
    # The account lifecycle: each step waits for the account's job (a poll of 0.2 s, then a few transactions), so
    # 3 kinds of 16 (CI time).
    "DeactivateAccount",
    "ReactivateAccount",
    "DeleteAccount",
]
# The lifecycle calls: (the model's rule, the call of a local user turned into an ID).
ACCOUNT_WRITES: dict[str, tuple[Callable[[Model, int], Outcome], Callable[[Stub, int], Awaitable[Any]]]] = {
    "DeactivateAccount": (
        Model.deactivate,
        lambda s, u: s.DeactivateAccount(pb.DeactivateAccountRequest(user_id=u)),
    ),
    "ReactivateAccount": (
        Model.reactivate,
        lambda s, u: s.ReactivateAccount(pb.ReactivateAccountRequest(user_id=u)),
    ),
    "DeleteAccount": (Model.delete, lambda s, u: s.DeleteAccount(pb.DeleteAccountRequest(user_id=u))),
}
JOB_RUNNING = (pb.ACCOUNT_STATE_DEACTIVATING, pb.ACCOUNT_STATE_REACTIVATING, pb.ACCOUNT_STATE_DELETING)

# The writes of a pair of users: (the model's rule, the call of local users turned into IDs).
PAIR_WRITES: dict[str, tuple[Callable[[Model, int, int], Outcome], Callable[[Stub, int, int], Awaitable[Any]]]] = {
    "Follow": (Model.follow, lambda s, a, b: s.Follow(pb.FollowRequest(follower_id=a, followee_id=b))),
    "Unfollow": (Model.unfollow, lambda s, a, b: s.Unfollow(pb.UnfollowRequest(follower_id=a, followee_id=b))),
    "Block": (Model.block, lambda s, a, b: s.Block(pb.BlockRequest(blocker_id=a, blocked_id=b))),
    "Unblock": (Model.unblock, lambda s, a, b: s.Unblock(pb.UnblockRequest(blocker_id=a, blocked_id=b))),
    "AcceptFollowRequest": (
        Model.accept,
        lambda s, u, r: s.AcceptFollowRequest(pb.AcceptFollowRequestRequest(user_id=u, requester_id=r)),
    ),
    "RejectFollowRequest": (
        Model.reject,
        lambda s, u, r: s.RejectFollowRequest(pb.RejectFollowRequestRequest(user_id=u, requester_id=r)),
    ),
    "RemoveFollower": (
        Model.remove_follower,
        lambda s, u, f: s.RemoveFollower(pb.RemoveFollowerRequest(user_id=u, follower_id=f)),
    ),
    "Mute": (Model.mute, lambda s, a, b: s.Mute(pb.MuteRequest(muter_id=a, muted_id=b))),
    "MuteNotifications": (
        Model.mute_notifications,
        lambda s, a, b: s.Mute(pb.MuteRequest(muter_id=a, muted_id=b, notifications=True)),
    ),
    "Unmute": (Model.unmute, lambda s, a, b: s.Unmute(pb.UnmuteRequest(muter_id=a, muted_id=b))),
}


# -- the servers, on a loop the test owns -------------------------------------------------------


@dataclass
class Env:
    loop: asyncio.AbstractEventLoop
    stub: Stub
    bases: itertools.count[int] = field(default_factory=lambda: itertools.count(FIRST_BASE, ID_STRIDE))
    # Reads in flight at once: the server shares this loop, and a burst of all ~80 check calls at once
    # stalls its Redis replies towards redis_timeout_seconds (past it the cache breaker sends reads to DynamoDB).
    slots: asyncio.Semaphore = field(default_factory=lambda: asyncio.Semaphore(READS_IN_FLIGHT))

    def run(self, coro: Awaitable[T]) -> T:
        return self.loop.run_until_complete(coro)

    async def read(self, call: Callable[[], Awaitable[T]]) -> T:
        async with self.slots:
            return await call()


@contextlib.asynccontextmanager
async def running_stack(settings: Settings) -> AsyncIterator[tuple[ServerRuntime, Stub]]:
    """The cached server and the counters consumer, both tasks of the current loop."""
    await create_tables(settings, streams=True)
    async with running_server(settings) as server, running_counters(settings), stub_for(server.port) as stub:
        yield server, cast("Stub", stub)


def outcome_of(error: grpc.aio.AioRpcError) -> Outcome:
    """(status code name, ErrorInfo reason) of a failed call."""
    status = rpc_status.from_call(cast("grpc.Call", error))
    reasons = []
    for detail in status.details if status is not None else []:
        if detail.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            detail.Unpack(info)
            reasons.append(info.reason)
    return error.code().name, ",".join(reasons) or f"<no ErrorInfo: {error.details()}>"


async def attempt(call: Callable[[], Awaitable[Any]]) -> tuple[Outcome, Any]:
    """The outcome of a call made on the running loop, and its reply if it succeeded."""
    try:
        return OK, await call()
    except grpc.aio.AioRpcError as error:
        return outcome_of(error), None


def descending(entries: Sequence[Entry]) -> bool:
    """Newest first: (timestamp, user) strictly decreasing, as the lists' sort keys are."""
    keys = [(at, u) for u, at in entries]
    return all(x > y for x, y in itertools.pairwise(keys))


# -- the state machine ----------------------------------------------------------------------------


class RelationshipMachine(RuleBasedStateMachine):
    env: ClassVar[Env]

    def __init__(self) -> None:
        super().__init__()
        self.base = next(self.env.bases)
        self.model = Model()
        self.seen_at: dict[tuple[str, Pair, int], int] = {}  # (kind, pair, step made) -> the server's timestamp
        # user -> the rankings its suggestion cache may hold (none: only a fresh one), see ``check_suggestions``
        self.cached_rankings: dict[int, list[Suggested]] = {}
        self.broken = False
        self.done: list[str] = []  # each write and its outcome, for a failure's note

    # -- plumbing --

    def uid(self, index: int) -> int:
        return self.base + index

    def local(self, user_id: int) -> int:
        index = user_id - self.base
        assert 0 <= index < N_USERS, f"user ID {user_id} is not one of this example's users"
        return index

    def run(self, coro: Awaitable[T]) -> T:
        try:
            return self.env.run(coro)
        except AssertionError as error:
            # Hypothesis prints the steps of a failure it can replay; one that depends on timing (a cache, a consumer)
            # may not fail again on replay (FlakyFailure): the note keeps what led to it.
            if not self.broken:
                error.add_note("this example's writes, in order: " + "; ".join(self.done))
            self.broken = True
            raise
        except BaseException:
            self.broken = True
            raise

    def write(self, name: str, call: Callable[[], Awaitable[Any]], expected: Outcome, touched: Sequence[int]) -> None:
        """Run one write, compare its outcome with the model's, and forget the suggestions it drops (``touched``)."""
        got, reply = self.run(attempt(call))
        if isinstance(reply, pb.FollowResponse):
            got = ("OK", pb.FollowState.Name(reply.state).removeprefix("FOLLOW_STATE_"))
        self.done.append(f"{name} {got[0]}{' ' + got[1] if got[1] else ''}")
        if got != expected:
            self.broken = True
            raise AssertionError(f"{name}: expected {expected}, got {got}")
        if got[0] == "OK":
            for user in touched:
                self.cached_rankings.pop(user, None)

    def pair_write(self, op: str, a: int, b: int) -> None:
        """One of the pair writes (see ``PAIR_WRITES``) of local users ``a`` and ``b``."""
        model_op, build = PAIR_WRITES[op]
        self.model.step += 1
        expected = model_op(self.model, a, b)
        stub, first, second = self.env.stub, self.uid(a), self.uid(b)
        touched = (a, b) if a != b else ()  # Unfollow(u, u) succeeds as a no-op: it writes nothing
        self.write(f"{op}({a}, {b})", lambda: build(stub, first, second), expected, touched)

    def pick(self, data: st.DataObject, groups: Sequence[set[Pair]]) -> Pair:
        """A pair of two different users: from each non-empty group (pairs with an edge, a request, a block or an
        archived item that the write acts on) as often as from all pairs, since a random pair of 5 users seldom hits
        one."""
        branches = [st.sampled_from(sorted(group)) for group in groups if group]
        return data.draw(st.one_of(*branches, PAIRS), label="pair")

    # -- rules (users are local indices; a pair is two different users) --

    @initialize(private=st.sets(USERS, max_size=2), pairs=st.lists(PAIRS, max_size=8))
    def start(self, private: set[int], pairs: list[Pair]) -> None:
        """SetPrivacy(u, True) for each of ``private``, then Follow(a, b) for each pair: every example starts from
        a graph with edges and requests to act on."""
        assume(pairs)  # an example starting from no follows (Hypothesis' simplest one) is not run: see EXAMPLES
        for u in sorted(private):
            self.set_privacy(u, True)
        for a, b in pairs:
            self.pair_write("Follow", a, b)

    @rule(kind=st.sampled_from(STEP_KINDS), data=st.data())
    def step(self, kind: str, data: st.DataObject) -> None:
        """One step of a kind drawn evenly from ``STEP_KINDS``; its arguments are drawn (and shown) after it. One rule
        for all kinds, as Hypothesis would otherwise leave some rules out of many examples (swarm testing)."""
        if kind == "FollowSeveral":  # dense enough graphs for the intersections and suggestions to find something
            for a, b in data.draw(st.lists(PAIRS, min_size=1, max_size=4), label="Follow pairs"):
                self.pair_write("Follow", a, b)
        elif kind == "SetPrivacy":  # an account asked by an archived request as often as any (it may turn public)
            asked = {b for (_, b), what in self.model.archived().items() if what == "request"}
            self.set_privacy(self.pick_user(data, asked), data.draw(st.booleans(), label="private"))
        elif kind == "SelfPair":  # INVALID_ARGUMENT (SELF_FOLLOW, SELF_RELATION); Unfollow: a no-op
            op = data.draw(st.sampled_from(list(PAIR_WRITES)), label="write")
            u = data.draw(USERS, label="user")
            self.pair_write(op, u, u)
        elif kind == "DeactivateAccount":  # an account with edges or requests (live or archived) as often as any
            pairs = set(self.model.edges) | set(self.model.requests) | set(self.model.archived())
            u = self.pick_user(data, {u for pair in pairs for u in pair})
            # At once: the reactivation interrupts the deactivation's job (or comes before it started); the end
            # state is the one of a deactivation and a reactivation each waited for.
            at_once = data.draw(st.booleans(), label="then ReactivateAccount at once")
            self.account_writes([kind, "ReactivateAccount"] if at_once else [kind], u)
        elif kind == "ReactivateAccount":  # an account away, if any
            away = sorted(self.model.away)
            self.account_writes([kind], data.draw(st.sampled_from(away) if away else USERS, label="user"))
        elif kind == "DeleteAccount":
            self.account_writes([kind], data.draw(USERS, label="user"))
        else:
            self.pair_write(kind, *self.pick(data, self.targets(kind)))

    def pick_user(self, data: st.DataObject, group: set[int]) -> int:
        """A user: from ``group`` (if any) as often as from all."""
        return data.draw(st.one_of(st.sampled_from(sorted(group)), USERS) if group else USERS, label="user")

    def targets(self, op: str) -> list[set[Pair]]:
        """Groups of (first, second) argument pairs on which ``op`` has something to act."""
        edges, requests, blocks = set(self.model.edges), set(self.model.requests), self.model.blocks
        archived = set(self.model.archived())  # acting on the pair of an archived item: no effect, or a refusal

        def flipped(pairs: set[Pair]) -> set[Pair]:
            return {(b, a) for a, b in pairs}

        if op in ("Follow", "Block"):  # repeats, follow backs, follows across a block (BLOCKED)
            return [
                edges | flipped(edges),
                requests | flipped(requests),
                blocks | flipped(blocks),
                archived | flipped(archived),
            ]
        if op == "Unfollow":
            return [edges, requests, archived]
        if op == "Unblock":
            return [set(blocks)]
        if op in ("Mute", "MuteNotifications", "Unmute"):  # repeats and unmutes act on a mute
            return [set(self.model.mutes)]
        if op == "RejectFollowRequest":
            return [flipped(requests), flipped(archived)]
        # AcceptFollowRequest (a pending request, or an accepted one: OK) and RemoveFollower (user, follower)
        return [flipped(requests), flipped(edges), flipped(archived)]

    def set_privacy(self, u: int, private: bool) -> None:
        """SetPrivacy(u, private). Turning public accepts every pending request: a write between u and each
        requester. The privacy flag itself plays no part in u's suggestions, so alone it drops none."""
        self.model.step += 1
        accepted = self.model.set_privacy(u, private)
        request = pb.SetPrivacyRequest(user_id=self.uid(u), private=private)
        touched = [u, *accepted] if accepted else []
        self.write(f"SetPrivacy({u}, {private})", lambda: self.env.stub.SetPrivacy(request), OK, touched)

    def account_writes(self, ops: Sequence[str], u: int) -> None:
        """The lifecycle calls ``ops`` of u, one right after the other, then wait for u's job to end in the state the
        model says. The job writes each edge and request it moves through the caches, as a follow or an unfollow
        would: a write involving both accounts (the suggestions it drops); what it leaves in an archive, hands over
        or drops there is not."""
        self.model.step += 1
        before = self.items()
        stub, user_id = self.env.stub, self.uid(u)
        for op in ops:
            model_op, build = ACCOUNT_WRITES[op]
            expected = model_op(self.model, u)
            self.write(f"{op}({u})", partial(build, stub, user_id), expected, ())
        want, got = self.model.state(u), self.run(self.job_done(u))
        if got != want:
            self.broken = True
            raise AssertionError(f"GetAccountState({u}) = {got} once its job ended, model says {want}")
        moved = before.items() ^ self.items().items()  # an interrupted job may move items out and back: not counted
        for user in {user for (_, pair), _ in moved for user in pair}:
            self.cached_rankings.pop(user, None)

    def items(self) -> dict[tuple[str, Pair], int]:
        """The model's live edges and requests: (kind, pair) -> step made."""
        model = self.model
        return {
            **{("edge", p): m for p, m in model.edges.items()},
            **{("request", p): m for p, m in model.requests.items()},
        }

    async def job_done(self, u: int) -> str:
        """u's state once no job of it runs (a job starts within the server's poll, 0.2 s here)."""
        running = {pb.AccountState.Name(s).removeprefix("ACCOUNT_STATE_") for s in JOB_RUNNING}
        return await eventually(lambda: self.account_state(u), lambda state: state not in running, timeout=JOB_DEADLINE)

    # -- every read, after every step --

    @precondition(lambda self: self.model.step > 0)
    @invariant()
    def every_read_agrees_with_the_model(self) -> None:
        self.run(self.check_reads())

    def teardown(self) -> None:
        """With the counters consumer running, GetCounts of every user converges to the model's edge counts."""
        if self.broken:
            return  # the example failed already: report that failure, not a consequence of it
        self.run(self.check_counts())

    async def check_counts(self) -> None:
        stub = self.env.stub

        async def probe() -> dict[int, tuple[int, int]]:
            replies = await asyncio.gather(
                *(stub.GetCounts(pb.GetCountsRequest(user_id=self.uid(u))) for u in range(N_USERS))
            )
            return {u: (r.followers_count, r.following_count) for u, r in enumerate(replies)}

        want = self.model.counts()
        await eventually(probe, lambda got: got == want, timeout=COUNTS_DEADLINE)

    async def check_reads(self) -> None:
        users = range(N_USERS)
        pairs = [(a, b) for a in users for b in users]
        (
            following,
            followers,
            relationships,
            requests,
            mutuals,
            known,
            suggestions,
            is_following,
            mutes,
            states,
            batch_counts,
            counts,
        ) = await asyncio.gather(
            asyncio.gather(*(self.list_following(u) for u in users)),
            asyncio.gather(*(self.list_followers(u) for u in users)),
            asyncio.gather(*(self.relationships(u) for u in users)),
            asyncio.gather(*(self.follow_requests(u) for u in users)),
            asyncio.gather(*(self.mutual_follows(u) for u in users)),
            asyncio.gather(*(self.known_followers(v, u) for v, u in pairs)),
            asyncio.gather(*(self.suggest_follows(u) for u in users)),
            asyncio.gather(*(self.is_following(a, b) for a, b in pairs)),
            asyncio.gather(*(self.list_mutes(u) for u in users)),
            asyncio.gather(*(self.account_state(u) for u in users)),
            self.batch_counts(),
            asyncio.gather(*(self.counts(u) for u in users if not self.model.in_graph(u))),
        )
        model = self.model

        # GetAccountState: the model's state; an account out of the graph counts (0, 0) at once (others' counts
        # converge: checked at the end).
        want_states = [model.state(u) for u in users]
        assert states == want_states, f"GetAccountState of each user: {states}, model says {want_states}"
        out = [u for u in users if not model.in_graph(u)]
        got_zero = {u: (batch_counts[u], got) for u, got in zip(out, counts, strict=True)}
        assert all(pair == ((0, 0), (0, 0)) for pair in got_zero.values()), (
            f"users out of the graph: (BatchGetCounts, GetCounts) {got_zero}, want (0, 0)"
        )

        # ListMutes: the model's mutes of each user with their notifications flag, newest first.
        for u in users:
            got_mutes = {(muted, notifications) for muted, notifications, _ in mutes[u]}
            want_mutes = {(b, n) for (a, b), n in model.mutes.items() if a == u}
            assert got_mutes == want_mutes, f"ListMutes({u}) = {mutes[u]}, model says {sorted(want_mutes)}"
            assert len(mutes[u]) == len(want_mutes), f"ListMutes({u}) = {mutes[u]} repeats an entry"
            made = [at for _, _, at in mutes[u]]
            assert made == sorted(made, reverse=True), f"ListMutes({u}) = {mutes[u]} is not newest first"

        # IsFollowing, every ordered pair (a user never follows itself).
        got_edges = {pair for pair, following in zip(pairs, is_following, strict=True) if following}
        assert got_edges == set(model.edges), diff("IsFollowing", got_edges, set(model.edges))

        # ListFollowers / ListFollowing: the model's sets, newest first, each edge's followed_at stable and
        # the same in both lists, and ordered as the edges were made.
        for u in users:
            for name, entries, want, edge_of in (
                ("ListFollowers", followers[u], model.followers(u), lambda o, u=u: (o, u)),
                ("ListFollowing", following[u], model.following(u), lambda o, u=u: (u, o)),
            ):
                where = f"{name}({u}) = {entries}"
                assert {o for o, _ in entries} == want, f"{where}, model says {sorted(want)}"
                assert len(entries) == len(want), f"{where} repeats an entry"
                assert descending(entries), f"{where} is not newest first"
                self.check_times(where, "edge", [(edge_of(o), at) for o, at in entries], model.edges)

        # GetRelationships(actor, every user): all six flags, in request order.
        for actor in users:
            got = relationships[actor]
            want_rel = [(t, model.relationship(actor, t)) for t in users]
            assert [t for t, _ in got] == list(users), f"GetRelationships({actor}) answered targets {got}"
            wrong = {t: (named(flags), named(want)) for (t, flags), (_, want) in zip(got, want_rel, strict=True)}
            wrong = {t: pair for t, pair in wrong.items() if pair[0] != pair[1]}
            assert not wrong, f"GetRelationships({actor}): target -> (flags set, model's flags): {wrong}"

        # ListFollowRequests: the pending requesters, newest first, requested_at stable.
        for u in users:
            entries = requests[u]
            where = f"ListFollowRequests({u}) = {entries}"
            want = {r for r, t in model.requests if t == u}
            assert {r for r, _ in entries} == want, f"{where}, model says {sorted(want)}"
            assert len(entries) == len(want), f"{where} repeats an entry"
            assert descending(entries), f"{where} is not newest first"
            self.check_times(where, "request", [((r, u), at) for r, at in entries], model.requests)

        # ListMutualFollows(u) and ListKnownFollowers(v, u): followers of u (in ListFollowers order, which is
        # checked above) whom u, resp. v, follows, with the followed_at of their follow of u.
        for u in users:
            want_ids = [f for f, _ in followers[u] if (u, f) in model.edges]
            assert mutuals[u] == want_ids, f"ListMutualFollows({u}) = {mutuals[u]}, model says {want_ids}"
        for (v, u), entries in zip(pairs, known, strict=True):
            want_known = [(f, at) for f, at in followers[u] if (v, f) in model.edges]
            assert entries == want_known, f"ListKnownFollowers(viewer={v}, user={u}) = {entries}, want {want_known}"

        for u in users:
            self.check_suggestions(u, suggestions[u])

    def check_suggestions(self, u: int, got: Suggested) -> None:
        """SuggestFollows(u): never self, followed, requested or blocked either way; and either the model's fresh
        ranking (mutual_count and score as the model computes them, highest first, ties by ascending ID) or a
        ranking u's cache may still hold, without the accounts now out of the graph (dropped when served).

        A ranking is cached until a write involving u drops it (``write``'s ``touched``; a lifecycle job's moves of
        u's edges and requests, ``account_writes``). The accounts out of the graph are dropped from a ranking when it
        is served, not when it is cached: a ranking made before an account left may still rank it, and shows it
        again once it is back. So the candidates are narrowed by each answer, not replaced: those that explain it,
        and the answer itself if it is the fresh ranking (a new fill: no account out of the graph is ever ranked,
        having no edges). An account out of the graph gets [] without its cache being read."""
        model = self.model
        where = f"SuggestFollows({u}) = {got}"
        for c, _, _ in got:
            assert c != u, f"{where} suggests the user itself"
            assert (u, c) not in model.edges, f"{where} suggests {c}, whom {u} follows"
            assert (u, c) not in model.requests, f"{where} suggests {c}, whom {u} asked to follow"
            assert not model.blocked(u, c), f"{where} suggests {c}, blocked either way with {u}"
            assert model.in_graph(c), f"{where} suggests {c}, out of the graph"
        fresh = model.suggestions(u)
        if not model.in_graph(u):
            assert got == [], f"{where}, but {u} is out of the graph"
            return
        cached = self.cached_rankings.get(u, []) if SUGGESTIONS_MAY_BE_CACHED else []
        served = [[s for s in ranking if model.in_graph(s[0])] for ranking in cached]
        assert got == fresh or got in served, f"{where}; model computes {fresh}" + (
            f" (as served from the rankings still cacheable: {served})" if served else ""
        )
        kept = [ranking for ranking, answer in zip(cached, served, strict=True) if answer == got]
        self.cached_rankings[u] = kept + ([got] if got == fresh and got not in kept else [])

    def check_times(self, where: str, kind: str, found: list[tuple[Pair, int]], made: dict[Pair, int]) -> None:
        """A timestamp never changes while its edge/request lives, and newer ones were made at later steps."""
        steps = []
        for pair, at in found:
            key = (kind, pair, made[pair])
            first = self.seen_at.setdefault(key, at)
            assert at == first, f"{where}: {kind} {pair} (made at step {made[pair]}) had time {first}, now {at}"
            steps.append(made[pair])
        assert steps == sorted(steps, reverse=True), f"{where}: not in the order made (steps {steps})"

    # -- reads returning local indices --

    async def is_following(self, a: int, b: int) -> bool:
        request = pb.IsFollowingRequest(follower_id=self.uid(a), followee_id=self.uid(b))
        return (await self.env.read(lambda: self.env.stub.IsFollowing(request))).following

    async def account_state(self, u: int) -> str:
        reply = await self.env.read(
            lambda: self.env.stub.GetAccountState(pb.GetAccountStateRequest(user_id=self.uid(u)))
        )
        return pb.AccountState.Name(reply.state).removeprefix("ACCOUNT_STATE_")

    async def counts(self, u: int) -> tuple[int, int]:
        reply = await self.env.read(lambda: self.env.stub.GetCounts(pb.GetCountsRequest(user_id=self.uid(u))))
        return reply.followers_count, reply.following_count

    async def batch_counts(self) -> list[tuple[int, int]]:
        """Every user's counts, in user order."""
        request = pb.BatchGetCountsRequest(user_ids=[self.uid(u) for u in range(N_USERS)])
        reply = await self.env.read(lambda: self.env.stub.BatchGetCounts(request))
        assert [self.local(c.user_id) for c in reply.counts] == list(range(N_USERS)), f"BatchGetCounts: {reply}"
        return [(c.followers_count, c.following_count) for c in reply.counts]

    async def suggest_follows(self, u: int) -> Suggested:
        request = pb.SuggestFollowsRequest(user_id=self.uid(u), limit=0)
        reply = await self.env.read(lambda: self.env.stub.SuggestFollows(request))
        return [(self.local(s.user_id), s.mutual_count, s.score) for s in reply.suggestions]

    async def list_followers(self, u: int) -> list[Entry]:
        request = pb.ListFollowersRequest(user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListFollowers(request))
        assert not reply.next_page_token, f"ListFollowers({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.followers]

    async def list_following(self, u: int) -> list[Entry]:
        request = pb.ListFollowingRequest(user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListFollowing(request))
        assert not reply.next_page_token, f"ListFollowing({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.following]

    async def relationships(self, actor: int) -> list[tuple[int, tuple[bool, ...]]]:
        request = pb.GetRelationshipsRequest(actor_id=self.uid(actor), target_ids=[self.uid(t) for t in range(N_USERS)])
        reply = await self.env.read(lambda: self.env.stub.GetRelationships(request))
        return [
            (
                self.local(r.target_id),
                (
                    r.following,
                    r.followed_by,
                    r.requested,
                    r.requested_by,
                    r.blocking,
                    r.blocked_by,
                    r.muting,
                    r.muting_notifications,
                ),
            )
            for r in reply.relationships
        ]

    async def follow_requests(self, u: int) -> list[Entry]:
        request = pb.ListFollowRequestsRequest(user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListFollowRequests(request))
        assert not reply.next_page_token, f"ListFollowRequests({u}): a next page after at most {N_USERS} entries"
        return [(self.local(e.user_id), e.requested_at.ToMicroseconds()) for e in reply.requests]

    async def mutual_follows(self, u: int) -> list[int]:
        request = pb.ListMutualFollowsRequest(user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListMutualFollows(request))
        assert not reply.next_page_token, f"ListMutualFollows({u}): a next page after at most {N_USERS} entries"
        return [self.local(e.user_id) for e in reply.users]

    async def list_mutes(self, u: int) -> list[tuple[int, bool, int]]:
        """(muted, notifications, muted_at) of each mute, in answer order."""
        reply = await self.env.read(lambda: self.env.stub.ListMutes(pb.ListMutesRequest(user_id=self.uid(u))))
        assert not reply.next_page_token, f"ListMutes({u}): a next page after at most {N_USERS} entries"
        return [(self.local(m.user_id), m.notifications, m.muted_at.ToMicroseconds()) for m in reply.mutes]

    async def known_followers(self, v: int, u: int) -> list[Entry]:
        request = pb.ListKnownFollowersRequest(viewer_id=self.uid(v), user_id=self.uid(u))
        reply = await self.env.read(lambda: self.env.stub.ListKnownFollowers(request))
        assert not reply.next_page_token, f"ListKnownFollowers({v}, {u}): a next page after at most {N_USERS}"
        return [(self.local(e.user_id), e.followed_at.ToMicroseconds()) for e in reply.followers]


def named(flags: tuple[bool, ...]) -> str:
    return "{" + ", ".join(name for name, on in zip(FLAGS, flags, strict=True) if on) + "}"


def diff(name: str, got: set[Pair], want: set[Pair]) -> str:
    return f"{name}: extra {sorted(got - want)}, missing {sorted(want - got)}"


def run_machine(settings: Settings, check: Callable[[Env], None]) -> None:
    """Start the stack on a fresh event loop, hand it to ``check``, and stop it on the same loop."""
    loop = asyncio.new_event_loop()
    stack = contextlib.AsyncExitStack()
    try:
        server, stub = loop.run_until_complete(stack.enter_async_context(running_stack(settings)))
        check(Env(loop=loop, stub=stub))
        cache = server.cache
        assert cache is not None
        assert cache.hits > 0, "the checks never read from the cache"
    finally:
        loop.run_until_complete(stack.aclose())
        loop.close()


# A normal run takes about a minute; a failure adds up to 5 minutes of shrinking (Hypothesis' own limit).
@pytest.mark.timeout(600)
def test_relationship_rules_match_a_model_under_random_sequences(dynamodb_local: str, redis_url: str) -> None:
    """Random Follow/Unfollow/Block/Unblock/SetPrivacy/Accept/Reject/RemoveFollower/Mute/Unmute and
    Deactivate/Reactivate/DeleteAccount sequences over 5 users: every write's outcome and, after each step (a
    lifecycle step once its job has ended), every read RPC for every user and pair agree with the model; counts
    converge to it at the end of each sequence."""

    def check(env: Env) -> None:
        class Machine(RelationshipMachine):
            pass

        Machine.env = env
        run_state_machine_as_test(Machine, settings=HYPOTHESIS_SETTINGS)

    # Caching on, with a Redis timeout above the stalls of one loop shared by server, consumer and checks, so that
    # the circuit breaker does not send the checks to DynamoDB for a second at a time.
    run_machine(make_settings(dynamodb_local, redis_url), check)
